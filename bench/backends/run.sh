#!/usr/bin/env bash
# bench/backends/run.sh — the measurement behind the native tier's choice of backend
# (docs/native-tier.md): compile latency and code speed of asmjit and of LLVM 15's ORC JIT on the
# code shape the tier emits. Needs libasmjit-dev and llvm-15-dev (not project dependencies:
#   sudo apt-get install libasmjit-dev llvm-15-dev).
set -eu
HERE=$(cd "$(dirname "$0")" && pwd)
TMP=$(mktemp -d "${TMPDIR:-/tmp}/vlad-backends.XXXXXX")
trap 'rm -rf "$TMP"' EXIT
if [ -f /usr/include/asmjit/x86.h ]; then
  g++ -O2 -std=c++17 "$HERE/asmjit_study.cpp" -o "$TMP/asmjit_study" -lasmjit
  "$TMP/asmjit_study"
else
  echo "asmjit: not installed (apt-get install libasmjit-dev)"
fi
LC=/usr/lib/llvm-15/bin/llvm-config
if [ -x "$LC" ]; then
  g++ -O2 -std=c++17 $($LC --cxxflags) "$HERE/llvm_study.cpp" -o "$TMP/llvm_study" \
    $($LC --ldflags --libs core orcjit native passes)
  "$TMP/llvm_study"
else
  echo "llvm: not installed (apt-get install llvm-15-dev)"
fi
