#!/usr/bin/env bash
# bench/instructions.sh [BUILD [BASE_BUILD]] — `make instructions`: the instructions each workload
# executes (callgrind), outside the collector and in it, start-up subtracted. Unlike times on a
# shared VM these repeat from run to run (the collector with one marker thread, GC_MARKERS=1, and
# no prefaulter, VLAD_PREFAULT=0, so that it does the same work each time), which makes them the
# measure to compare two builds of a change by: with BASE_BUILD, both and the change in percent.
# INSTRUCTIONS_ONLY=REGEX runs only the workloads whose names match it (e.g. 'W5|particle RR').
# (Instructions are not time: `rep stosb` counts once per byte, a cache miss counts once. They
# show what a change did to the work; `make bench` shows what it did to the time.)
set -u
B=${1:-build}
BASE=${2:-}
HERE=$(cd "$(dirname "$0")" && pwd)
SHARED=${BENCH_SHARED:-$HERE/../../shared/bench}
TMP=$(mktemp -d "${TMPDIR:-/tmp}/vlad-instructions.XXXXXX")
trap 'rm -rf "$TMP"' EXIT
command -v valgrind >/dev/null && command -v callgrind_annotate >/dev/null ||
  { echo "instructions: needs valgrind (apt-get install valgrind)" >&2; exit 1; }
for b in "$B" $BASE; do [ -x "$b/vlad" ] || { echo "instructions: no $b/vlad (run make first)" >&2; exit 1; }; done
. "$HERE/workloads.sh"

# count VLAD FILE INPUT: sets OUT and GC, the instructions (millions) outside libgc and in it.
count() {
  printf '%s\n' "$3" | GC_MARKERS=1 VLAD_PREFAULT=0 valgrind --tool=callgrind --smc-check=all-non-file \
    --callgrind-out-file="$TMP/cg" "$1" "$2" >/dev/null 2>&1
  read -r OUT GC < <(callgrind_annotate --threshold=100 "$TMP/cg" 2>/dev/null | awk '
    { gsub(",", "", $1) }
    /PROGRAM TOTALS/ { total = $1 }
    $1 ~ /^[0-9]+$/ && /libgc/ { gc += $1 }
    END { printf "%.1f %.1f\n", (total - gc) / 1e6, gc / 1e6 }')
}

echo 1 >"$TMP/empty.vlad"
w4file R 6 0 >"$TMP/w4-first.vlad"
w4file R 6 10 >"$TMP/w4-21.vlad"
for n in ff fr rf rr; do particle_file $n "$HERE/../scheme-examples" >"$TMP/particle-$n.vlad"; done
W3=$SHARED/w3_grad.vlad W7=$SHARED/w7_symbolic.vlad
rows=(
  "W3 primal, n = 1e5, 20 reps|$W3|100000 1 20"
  "W3 gradient, n = 1e4, 20 reps|$W3|10000 2 20"
  "W4 6th derivative by reverse, first call|$TMP/w4-first.vlad|"
  "W4 6th derivative by reverse, 21 calls|$TMP/w4-21.vlad|"
  "W5 saddle point, reverse over reverse|$SHARED/w5_saddle.vlad|"
  "W6 MLP on XOR|$SHARED/w6_mlp.vlad|"
  "W7 primal, 300 evaluations|$W7|10 1 300"
  "W7 gradient, 300 evaluations|$W7|10 2 300"
  "particle FF|$TMP/particle-ff.vlad|"
  "particle FR|$TMP/particle-fr.vlad|"
  "particle RF|$TMP/particle-rf.vlad|"
  "particle RR|$TMP/particle-rr.vlad|"
)
echo "instructions (millions; callgrind, one marker thread, no prefaulter; start-up subtracted)"
if [ -z "$BASE" ]; then
  printf '  %-44s %10s %10s\n' workload outside collector
else
  printf '  %-44s %-27s %s\n' workload "  outside: base / this" "collector: base / this"
fi
declare -A start_out start_gc  # each build's start-up, subtracted from every row
for b in "$B" $BASE; do count "$b/vlad" "$TMP/empty.vlad" ""; start_out[$b]=$OUT; start_gc[$b]=$GC; done
sub() { awk "BEGIN { printf \"%.1f\", $1 - $2 }"; }
pct() { awk "BEGIN { d = $1; printf \"%+.1f%%\", (d > 0 ? 100 * ($2 - d) / d : 0) }"; }
for row in "${rows[@]}"; do
  IFS='|' read -r name file input <<<"$row"
  [[ -n "${INSTRUCTIONS_ONLY:-}" && ! "$name" =~ $INSTRUCTIONS_ONLY ]] && continue
  declare -A o=() g=()
  for b in "$B" $BASE; do
    count "$b/vlad" "$file" "$input"
    o[$b]=$(sub "$OUT" "${start_out[$b]}"); g[$b]=$(sub "$GC" "${start_gc[$b]}")
  done
  if [ -z "$BASE" ]; then
    printf '  %-44s %10s %10s\n' "$name" "${o[$B]}" "${g[$B]}"
  else
    printf '  %-44s %8s / %8s %-7s %6s / %6s %-7s\n' "$name" "${o[$BASE]}" "${o[$B]}" "$(pct "${o[$BASE]}" "${o[$B]}")" \
      "${g[$BASE]}" "${g[$B]}" "$(pct "${g[$BASE]}" "${g[$B]}")"
  fi
done
