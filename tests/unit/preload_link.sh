# Sourced by the tests that preload the shim. ld.so splits LD_PRELOAD at
# spaces and colons (glibc's rtld.c), so a shim built in a folder with a
# space cannot be named there: preload_link PATH sets $preload to a link to
# PATH in a folder of its own under /tmp, and $preload_dir to that folder,
# for the caller to remove.
preload_link() {
  preload_dir=$(mktemp -d /tmp/gdunlock-preload-XXXXXX) || return 1
  preload="$preload_dir/$(basename "$1")"
  ln -s "$(realpath "$1")" "$preload"
}
