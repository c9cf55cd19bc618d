#!/usr/bin/env bash
# The cost of AD measured in primitive operations (vlad --meter, deterministic): for each family
# in tests/cost/, ops(forward phase + one backpropagator call) / ops(primal) must be at most 4
# and must not drift by more than 10% from n = 10^2 to 10^5 (issue: reverse mode); one
# directional derivative of family 1 must cost at most 4x the primal, the same within 10% for
# n = 10^3..10^5 (issue: forward mode). Prints `ok - ...` / `not ok - ...` lines and a table.
V=${1:-build/vlad}
ops() {  # family n mode
  echo "$2 $3" | timeout 300 "$V" --meter "tests/cost/$1.vlad" 2>&1 >/dev/null |
    sed -n 's/^total primitive operations: //p'
}
ratio() {  # family n mode -> ratio of mode's ops to the primal's, setup subtracted
  local base p m
  base=$(ops "$1" "$2" -1); p=$(ops "$1" "$2" 0); m=$(ops "$1" "$2" "$3")
  if [ -z "$base" ] || [ -z "$p" ] || [ -z "$m" ]; then echo "error"; return; fi
  awk -v b="$base" -v p="$p" -v m="$m" 'BEGIN { printf "%.4f", (m - b) / (p - b) }'
}
check_family() {  # family mode label ns...
  local fam=$1 mode=$2 label=$3; shift 3
  local rs=() ok=1 r
  for n in "$@"; do
    r=$(ratio "$fam" "$n" "$mode"); rs+=("$r")
    [ "$r" = error ] && ok=0
  done
  printf '# %-12s %-8s' "$fam" "$label"
  for i in "${!rs[@]}"; do printf ' n=%s:%s' "${@:$((i+1)):1}" "${rs[$i]}"; done; echo
  if [ $ok = 0 ]; then echo "not ok - $fam $label: a run failed"; return; fi
  verdict=$(printf '%s\n' "${rs[@]}" | awk '{ if ($1 > 4) bad = 1; if (NR == 1 || $1 < lo) lo = $1; if (NR == 1 || $1 > hi) hi = $1 }
    END { if (bad) print "ratio above 4"; else if ((hi - lo) / lo > 0.10) print "drift above 10%"; else print "" }')
  if [ -z "$verdict" ]; then echo "ok - $fam $label ratio <= 4, flat in n"
  else echo "not ok - $fam $label: $verdict (${rs[*]})"; fi
}
for fam in f1-sum f2-chain f3-project f4-sumlist f5-sharing f6-closure; do
  check_family "$fam" 1 reverse 100 1000 10000 100000
done
check_family f1-sum 2 forward 1000 10000 100000
