#!/usr/bin/env bash
# tests/embed.sh — checks of the embedding API's packaging (SPEC §7): the public header compiles
# alone, warning-free and pedantic; `make install` lays out bin/, include/vlad/, lib/ and vlad.pc;
# and scheme-examples/embed builds against the installed copy only (through pkg-config) and prints
# its expected output.
# Usage: tests/embed.sh [BUILD_DIR | BUILD_DIR/vlad] (default build), as tests/run.sh calls it.
# Prints `ok - NAME` / `not ok - NAME: detail` lines; always exits 0 (tests/run.sh counts them).
set -u
ROOT=$(cd "$(dirname "$0")/.." && pwd)
B=${1:-build}
[ -f "$B" ] && B=$(dirname "$B")
B=$(cd "$B" 2>/dev/null && pwd) || { echo "not ok - embed: no build directory ${1:-build}"; exit 0; }
CXX=${CXX:-c++}
TMP=$(mktemp -d "${TMPDIR:-/tmp}/vlad-embed.XXXXXX")
trap 'rm -rf "$TMP"' EXIT
cd "$ROOT" || exit 0
# A library built with UndefinedBehaviorSanitizer (make ubsan) needs its runtime at link time.
if nm "$B/libvlad.a" 2>/dev/null | grep -q __ubsan_handle; then CXX="$CXX -fsanitize=undefined"; fi

ok() { echo "ok - $1"; }
notok() { echo "not ok - $1: $(printf '%s' "$2" | tr '\n' '|' | cut -c1-400)"; }

# 1. The header stands alone: no other project header, no warnings under -pedantic, C++17 and later.
if grep -qE '^[[:space:]]*#[[:space:]]*include[[:space:]]*"' src/vlad.hpp; then
  notok "vlad.hpp includes no project header" "$(grep -E '#[[:space:]]*include[[:space:]]*"' src/vlad.hpp)"
else ok "vlad.hpp includes no project header"; fi
for std in c++17 c++20; do
  printf '#include "vlad.hpp"\n' >"$TMP/header.cpp"
  if out=$($CXX -std=$std -Wall -Wextra -pedantic -Werror -fsyntax-only -Isrc "$TMP/header.cpp" 2>&1); then
    ok "vlad.hpp compiles alone with -std=$std -Wall -Wextra -pedantic -Werror"
  else notok "vlad.hpp compiles alone with -std=$std -Wall -Wextra -pedantic -Werror" "$out"; fi
done

# 2. make install, of the build under test as it is: rebuilding here would use other flags.
P=$TMP/prefix
if ! make -q --no-print-directory BUILD="$B" all 2>/dev/null; then
  notok "make install" "$B is out of date; build it first (make all)"
elif out=$(make --no-print-directory BUILD="$B" install PREFIX="$P" 2>&1) &&
   [ -x "$P/bin/vlad" ] && [ -f "$P/include/vlad/vlad.hpp" ] && [ -f "$P/lib/libvlad.a" ] &&
   [ -f "$P/lib/pkgconfig/vlad.pc" ]; then
  ok "make install PREFIX=... installs bin/vlad, include/vlad/vlad.hpp, lib/libvlad.a, lib/pkgconfig/vlad.pc"
else notok "make install" "$out"; fi

# 3. The example, copied out of the tree so that only the installed files can be found.
cp -r scheme-examples/embed "$TMP/embed"
rm -f "$TMP/embed/host"
if out=$(PKG_CONFIG_PATH="$P/lib/pkgconfig" pkg-config --cflags --libs vlad 2>&1); then
  ok "pkg-config finds vlad ($out)"
else notok "pkg-config finds vlad" "$out"; fi
if out=$(make --no-print-directory -C "$TMP/embed" PREFIX="$P" CXX="$CXX" host 2>&1); then
  if printf '%s' "$out" | grep -qi 'warning'; then notok "embed example builds warning-free" "$out"
  else ok "embed example builds against the installed library"; fi
  got=$(cd "$TMP/embed" && timeout 120 ./host 2>&1); rc=$?
  printf '%s\n' "$got" >"$TMP/got.out"
  if [ -x "$B/compare-output" ]; then "$B/compare-output" scheme-examples/embed/expected.out "$TMP/got.out" >/dev/null
  else diff -q scheme-examples/embed/expected.out "$TMP/got.out" >/dev/null; fi
  same=$?
  if [ $rc -eq 0 ] && [ $same -eq 0 ]; then ok "embed example"
  else notok "embed example" "exit $rc; diff: $(diff scheme-examples/embed/expected.out "$TMP/got.out" | head -10)"; fi
else
  notok "embed example builds against the installed library" "$out"
fi
exit 0
