# Sourced by run_preload.sh and verify_preload.sh (with bin and shim set): a
# scratch folder removed at exit, the pass/fail counters, and gdunlock
# installed under a prefix of one's choosing.
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
pass=0
fail=0
ok() { pass=$((pass + 1)); echo "ok   $*"; }
bad() { fail=$((fail + 1)); echo "FAIL $*"; }
# install_prefix DIR SHIM: DIR/bin/gdunlock and SHIM as DIR/lib/libgdunlock.so.
install_prefix() {
  mkdir -p "$1/bin" "$1/lib"
  cp "$bin" "$1/bin/gdunlock"
  cp "$2" "$1/lib/libgdunlock.so"
}
