#!/usr/bin/env bash
# bench/libgc-symbols.sh [DIR] — a copy of the collector with its symbols, for profiling only.
#
# Debian's libgc1 has no symbols (and no -dbgsym package reachable here), so `perf report` shows
# the collector's time as bare addresses. This builds the same version from Debian's own source
# package (apt-get source, with patches), configured as Debian configures it, with -g, into DIR
# (default /tmp/libgc-symbols). Nothing of the project uses it; a profile uses it by
#
#   LD_LIBRARY_PATH=DIR perf record -g -- build/vlad FILE
#   LD_LIBRARY_PATH=DIR perf report --comm vlad-eval --no-children --sort sym
#
# (ldd build/vlad with that LD_LIBRARY_PATH shows which libgc is loaded). The timings with it
# match the packaged library's within noise (W5 ×40 in one process: 327 against 327-342 ms).
# Needs network access to Debian's source archive, a C compiler and make.
set -eu
DIR=${1:-/tmp/libgc-symbols}
VERSION=$(dpkg-query -W -f '${source:Version}' libgc1 2>/dev/null) || { echo "libgc-symbols: libgc1 is not installed" >&2; exit 1; }
UPSTREAM=${VERSION#*:}
UPSTREAM=${UPSTREAM%-*}
WORK=$(mktemp -d "${TMPDIR:-/tmp}/libgc-src.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
cd "$WORK"
# (a sources list of our own with the deb-src line: the machine's may have none)
echo "deb-src http://deb.debian.org/debian $(. /etc/os-release && echo "$VERSION_CODENAME") main" > sources.list
APT="-o Dir::Etc::sourcelist=$WORK/sources.list -o Dir::Etc::sourceparts=- -o Dir::State::Lists=$WORK/lists -o APT::Sandbox::User=root"
mkdir -p lists/partial
apt-get $APT update >/dev/null
apt-get $APT source "libgc=$VERSION" >/dev/null 2>&1 || apt-get $APT source --download-only "libgc=$VERSION" >/dev/null
SRC=$WORK/gc-$UPSTREAM
if [ ! -d "$SRC" ]; then  # (no dpkg-source: unpack and patch by hand)
  tar xzf libgc_"$UPSTREAM".orig.tar.gz
  tar xJf libgc_"${VERSION#*:}".debian.tar.xz -C "$SRC"
  grep -v '^#' "$SRC/debian/patches/series" | while read -r p; do [ -n "$p" ] && patch -d "$SRC" -p1 < "$SRC/debian/patches/$p" >/dev/null; done
fi
mkdir -p "$SRC/build" && cd "$SRC/build"
# (debian/rules: --enable-cplusplus --with-libatomic-ops=none, shared only; -O2 as dpkg-buildflags)
CFLAGS="-g -O2" ../configure --enable-cplusplus --disable-dependency-tracking --with-libatomic-ops=none \
  --enable-shared --disable-static >/dev/null 2>&1
make -j"$(nproc)" >make.log 2>&1 || { tail -20 make.log >&2; exit 1; }
mkdir -p "$DIR"
cp -a .libs/libgc.so* "$DIR"/
echo "libgc $VERSION with symbols: $DIR (LD_LIBRARY_PATH=$DIR)"
