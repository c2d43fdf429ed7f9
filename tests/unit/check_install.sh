#!/usr/bin/env bash
# check_install.sh BUILD [SOURCE]: `cmake --install BUILD` into a fresh prefix
# gives a working tree, used as a user would: gdunlock --version and doctor
# run from there, `gdunlock run` preloads the installed shim (also after the
# tree is moved), `man gdunlock` and each command's page are found, and a C
# program built with `pkg-config gdunlock` calls the installed loader library
# (libgdunlock-load.so.MAJOR, its links and symbol versions). With SOURCE, the
# library of the next minor release, built from a copy of SOURCE, replaces the
# installed one and that program runs on it without relinking.
# Exit 0 pass, 1 fail, 77 skip (no man or help2man here).
set -euo pipefail
build=$(realpath "$1")
src=${2:+$(realpath "$2")}
top=$(mktemp -d "${TMPDIR:-/tmp}/gdunlock-install-XXXXXX")
trap 'rm -rf "$top"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

cmake --install "$build" --prefix "$top/prefix" >"$top/install.log" || fail "cmake --install: $(tail -3 "$top/install.log")"
prefix=$top/prefix
libdir=$(dirname "$(find "$prefix" -name libgdunlock.so -print -quit)")
[ -n "$libdir" ] && [ -f "$libdir/libgdunlock-load.so" ] || fail "libgdunlock.so and libgdunlock-load.so not in one library folder"
[ -f "$prefix/include/gdunlock/safetensors.h" ] && [ -f "$prefix/include/gdunlock/io.h" ] || fail "public headers missing"

version=$("$prefix/bin/gdunlock" --version)
[[ $version =~ ^gdunlock\ [0-9]+\.[0-9]+\.[0-9]+$ ]] || fail "--version printed '$version'"

# doctor answers with one of its documented verdict statuses (no GPU in CI:
# 69 no NVIDIA driver).
set +e
"$prefix/bin/gdunlock" doctor >"$top/doctor.out" 2>&1
rc=$?
set -e
case $rc in 0|10|11|12|13|69) ;; *) fail "doctor exited $rc: $(tail -3 "$top/doctor.out")" ;; esac

# run preloads the installed shim; a moved tree still finds its own.
check_run() {
  local p=$1 out
  out=$("$p/bin/gdunlock" run -- sh -c 'echo "$LD_PRELOAD"' 2>"$top/run.err") || fail "gdunlock run from $p exited $?"
  [ "$(realpath "$out")" = "$(realpath "$p/${libdir#"$prefix"/}/libgdunlock.so")" ] || fail "run from $p preloaded '$out'"
  ! grep -q "cannot be preloaded" "$top/run.err" || fail "the shim could not be preloaded: $(cat "$top/run.err")"
  "$p/bin/gdunlock" run -- /bin/true 2>/dev/null || fail "gdunlock run -- /bin/true exited $?"
}
check_run "$prefix"
mv "$prefix" "$top/moved"
check_run "$top/moved"
mv "$top/moved" "$prefix"

# pkg-config: the flags it gives build a program against the installed library.
export PKG_CONFIG_PATH="$libdir/pkgconfig"
[ "$(pkg-config --modversion gdunlock)" = "${version#gdunlock }" ] || fail "pkg-config --modversion gdunlock"
cat >"$top/use.c" <<'C'
#include <gdunlock/safetensors.h>
#include <stdio.h>
int main(void) { return puts(gdu_st_version()) < 0; }
C
# shellcheck disable=SC2046
cc -o "$top/use" "$top/use.c" $(pkg-config --cflags --libs gdunlock) -Wl,-rpath,"$libdir" || fail "building against pkg-config gdunlock"
v=${version#gdunlock }
[ "$("$top/use")" = "$v" ] || fail "the installed library's version is not the command's"

# Each library: the file of this release, the SONAME link a program needs at
# run time and the link a linker takes; the program records the SONAME and
# the version node of each call it makes.
major=${v%%.*}
for name in libgdunlock-load libgdunlock; do
  [ "$(readlink "$libdir/$name.so")" = "$name.so.$major" ] || fail "$name.so does not link to $name.so.$major"
  [ "$(readlink "$libdir/$name.so.$major")" = "$name.so.$v" ] || fail "$name.so.$major does not link to $name.so.$v"
  readelf -d "$libdir/$name.so.$v" | grep -q "Library soname: \[$name.so.$major\]" || fail "$name.so.$v has no SONAME $name.so.$major"
done
readelf -d "$top/use" | grep -q "Shared library: \[libgdunlock-load.so.$major\]" || fail "the program does not need libgdunlock-load.so.$major"
readelf -V "$top/use" | grep -q "Name: GDUNLOCK_LOAD_" || fail "the program records no GDUNLOCK_LOAD_ version of gdu_st_version"

if [ -n "$src" ]; then
  # The next minor release (the map and the SONAME as this tree has them),
  # put in place as an upgrade would: its file, and the SONAME link moved to it.
  IFS=. read -r _ minor _ <<<"$v"
  next=$major.$((minor + 1)).0
  mkdir "$top/next"
  cp -r "$src/CMakeLists.txt" "$src/src" "$src/include" "$src/scripts" "$top/next/"
  sed -i -E "s/^project\(gdunlock VERSION $v /project(gdunlock VERSION $next /" "$top/next/CMakeLists.txt"
  grep -q "VERSION $next " "$top/next/CMakeLists.txt" || fail "no 'project(gdunlock VERSION $v ' in CMakeLists.txt to raise"
  { cmake -S "$top/next" -B "$top/next/build" -DCMAKE_BUILD_TYPE=None -DGDUNLOCK_BUILD_TESTS=OFF &&
    cmake --build "$top/next/build" -j2 --target gdu_safetensors_shared; } >"$top/next.log" 2>&1 ||
    fail "building the $next library: $(tail -5 "$top/next.log")"
  cp -Pf "$top/next/build/lib/libgdunlock-load.so.$major" "$top/next/build/lib/libgdunlock-load.so.$next" "$libdir/"
  out=$("$top/use" 2>&1) || fail "the program linked against $v does not run on $next: $out"
  [ "$out" = "$next" ] || fail "the program linked against $v printed '$out' on the $next library"
fi

if ! command -v man >/dev/null || [ ! -d "$prefix/share/man/man1" ]; then
  echo "SKIP: man pages not checked (man or help2man missing); everything else passed"
  exit 77
fi
for page in gdunlock $("$prefix/bin/gdunlock" --help | awk '/^commands:/ {on = 1; next} on && /^  [a-z]/ {print "gdunlock-" $1}'); do
  where=$(MANPATH="$prefix/share/man" man -w "$page" 2>/dev/null) || fail "man -w $page found nothing"
  [[ $where == "$prefix"/* ]] || fail "man $page is $where, not the installed page"
done
MANPATH="$prefix/share/man" MANWIDTH=100 man -P cat gdunlock-run 2>/dev/null | grep -q -- "--test-drop-native" || fail "man gdunlock-run lacks the command's options"
echo "PASS: installed into a fresh prefix: $version, doctor exit $rc, run preloads $libdir/libgdunlock.so (moved too), pkg-config, SONAMEs${src:+, a program linked against $v runs on $next}, man pages"
