#!/usr/bin/env bash
# check_commit_msg.sh ROOT: scripts/commit-msg accepts a message that keeps
# CONTRIBUTING.md's rules and refuses each way of breaking one. Exit 0 pass.
set -euo pipefail
hook=$1/scripts/commit-msg
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
status=0
expect() { # expect pass|fail NAME MESSAGE
  printf '%b' "$3" >"$tmp/msg"
  if (cd "$tmp" && "$hook" "$tmp/msg" >"$tmp/out" 2>&1); then got=pass; else got=fail; fi
  if [ "$got" = "$1" ]; then echo "ok: $2"; else echo "FAIL: $2: expected $1, got $got: $(cat "$tmp/out")"; status=1; fi
}
expect pass "a kept rule" 'io: keep one staging slot per worker\n\nWhy it is so.\n'
expect pass "git's comment lines" 'docs: say where the wheel comes from\n\nBecause.\n# Please enter the commit message\n'
expect pass "60 characters" "tests: $(printf 'x%.0s' $(seq 53))\n\nWhy.\n"
expect fail "61 characters" "tests: $(printf 'x%.0s' $(seq 54))\n\nWhy.\n"
expect fail "no prefix" 'keep one staging slot per worker\n\nWhy.\n'
expect fail "a prefix not in the list" 'safe_open: keep fewer reads\n\nWhy.\n'
expect fail "a full stop" 'io: keep one staging slot.\n\nWhy.\n'
expect fail "no body" 'io: keep one staging slot per worker\n'
expect fail "no blank second line" 'io: keep one staging slot\nwhy\n'
exit $status
