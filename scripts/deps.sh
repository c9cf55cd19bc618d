#!/usr/bin/env bash
# Installs what vlad needs from Debian's packages, when missing: a C++17 compiler, make,
# Boehm GC, doctest, libedit, asmjit (the native tier) and pkg-config; tmux for the REPL checks in tests/cli.sh. Uses sudo when not root.
set -e
need=()
dpkg -s libgc-dev >/dev/null 2>&1 || need+=(libgc-dev)
dpkg -s doctest-dev >/dev/null 2>&1 || need+=(doctest-dev)
dpkg -s libedit-dev >/dev/null 2>&1 || need+=(libedit-dev)
dpkg -s libasmjit-dev >/dev/null 2>&1 || need+=(libasmjit-dev)
dpkg -s pkg-config >/dev/null 2>&1 || need+=(pkg-config)
command -v tmux >/dev/null 2>&1 || need+=(tmux)
command -v g++ >/dev/null 2>&1 || need+=(g++)
command -v make >/dev/null 2>&1 || need+=(make)
[ ${#need[@]} -eq 0 ] && exit 0
SUDO=""
[ "$(id -u)" -ne 0 ] && SUDO="sudo"
echo "installing: ${need[*]}"
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need[@]}"
