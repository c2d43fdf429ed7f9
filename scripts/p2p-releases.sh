#!/usr/bin/env bash
# Regenerate src/unlock/edits/nvidia-releases.tsv from a git clone of NVIDIA's
# open-gpu-kernel-modules: one line per release tag with its commit and tree
# ids. p2p-build checks a downloaded release tarball against the tree id (the
# git hash of its content), which stays the same whatever compression GitHub
# gives the archive, so no checksum of the archive itself is needed.
# Usage: scripts/p2p-releases.sh CLONE > src/unlock/edits/nvidia-releases.tsv
set -euo pipefail
clone=${1:?usage: scripts/p2p-releases.sh CLONE}
echo "# NVIDIA open-gpu-kernel-modules release tags: version, commit, tree (scripts/p2p-releases.sh)"
git -C "$clone" for-each-ref --format='%(refname:short)' refs/tags | sort -V | while read -r tag; do
  [[ $tag =~ ^[0-9]+\.[0-9]+(\.[0-9]+)?$ ]] || continue
  printf '%s\t%s\t%s\n' "$tag" "$(git -C "$clone" rev-parse "$tag^{commit}")" "$(git -C "$clone" rev-parse "$tag^{tree}")"
done
