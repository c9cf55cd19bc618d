#!/usr/bin/env bash
# Run time and primitive-operation count of each scheme-examples program, and of saddle.vlad
# and particle.vlad in each of the four nestings separately (FF, FR, RF, RR: outer mode, inner
# mode). Usage: bench/examples.sh [build/vlad]
V=${1:-build/vlad}
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
now() { date +%s.%N; }
run() {  # label file
  local t0 t1 ops
  t0=$(now); ops=$("$V" --meter "$2" 2>&1 >/dev/null | sed -n 's/^total primitive operations: //p'); t1=$(now)
  printf '  %-34s %8.3f s %14s ops\n' "$1" "$(awk -v a="$t0" -v b="$t1" 'BEGIN { print b - a }')" "${ops:-error}"
}
echo "scheme-examples (whole programs):"
for f in scheme-examples/*.vlad; do run "$(basename "$f")" "$f"; done
# One nesting at a time: the example's definitions, then one nesting's run.
defs() {  # file: its lines before the first nesting's run, without the dE/dw block of particle
  awk '/^\(define ff / { exit } /^;; dE\/dw at w = 0/ { skip = 1 } /^;; Minimise E/ { skip = 0 } !skip { print }' "$1"
}
echo "four nestings, separately (outer mode, inner mode):"
for n in ff fr rf rr; do
  { defs scheme-examples/saddle.vlad; grep "^(define $n " scheme-examples/saddle.vlad; } > "$tmp/saddle-$n.vlad"
  run "saddle.vlad $(echo $n | tr a-z A-Z)" "$tmp/saddle-$n.vlad"
done
for n in ff fr rf rr; do
  { defs scheme-examples/particle.vlad; grep "^(define $n " scheme-examples/particle.vlad; } > "$tmp/particle-$n.vlad"
  run "particle.vlad $(echo $n | tr a-z A-Z) (aim w)" "$tmp/particle-$n.vlad"
done
