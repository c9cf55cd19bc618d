#!/usr/bin/env bash
# bench/run.sh [BUILD] — the benchmarks of `make bench`, printed as tables:
#   (a) primal programs: fib 25, a 10^7-iteration tail loop, building and summing a 10^6 list;
#   (b) the shared workloads of ../shared/bench (W3 primal and gradient for n = 1e3..1e6, W4,
#       W5, W6), values checked against ../shared/bench/README.md (the shared w6_mlp.vlad does not
#       read — one ')' too many — so bench/w6_mlp.vlad, a corrected copy, runs as well);
#   (c) a forward-mode family: ops(one JVP by j*) / ops(primal);
#   (d) six reverse-mode families: ops(forward phase + one backpropagator call) / ops(primal).
# Times are wall-clock times of whole `vlad --meter` processes (the meter is always on), measured
# with `date +%s.%N`; the start-up time of an empty program, or the time of the same program in
# its "mode 0" (input built, nothing else), is subtracted where said. Every run is time-limited
# (BENCH_TIMEOUT, default 30 s; BENCH_W3_TIMEOUT, default 90 s, for W3) and shows `timeout` or
# `error` instead of hanging. Short runs (< 0.5 s) in the families are the best of three.
set -u
B=${1:-build}
V=$B/vlad
HERE=$(cd "$(dirname "$0")" && pwd)
SHARED=${BENCH_SHARED:-$HERE/../../shared/bench}
TL=${BENCH_TIMEOUT:-30}
TL_W3=${BENCH_W3_TIMEOUT:-90}   # one evaluation of the W3 gradient at n = 1e6
TMP=$(mktemp -d "${TMPDIR:-/tmp}/vlad-bench.XXXXXX")
trap 'rm -rf "$TMP"' EXIT
[ -x "$V" ] || { echo "bench: no $V (run make first)" >&2; exit 1; }

calc() { awk "BEGIN { print ($*) }"; }
fmt() { awk -v x="$2" "BEGIN { if (x == \"\" || x == \"-\") print \"-\"; else printf \"$1\", x }"; }

# measure FILE INPUT [TIMEOUT]: runs `vlad --meter FILE` with INPUT on stdin.
# Sets T (seconds), OPS (total primitive operations), VAL (stdout, one line), ST (ok|timeout|error),
# MSG (first line of stderr on error).
measure() {
  local f=$1 input=$2 tl=${3:-$TL} s e rc
  s=$(date +%s.%N)
  printf '%s\n' "$input" | timeout "$tl" "$V" --meter "$f" >"$TMP/out" 2>"$TMP/err"
  rc=$?
  e=$(date +%s.%N)
  T=$(calc "$e - $s")
  VAL=$(tr '\n' ' ' <"$TMP/out" | sed 's/ *$//')
  OPS=$(sed -n 's/^total primitive operations: //p' "$TMP/err" | tail -1)
  MSG=$(grep -v -E '^[^ ]+ [0-9]+$|^total primitive operations' "$TMP/err" | head -1)
  if [ $rc -eq 124 ] || [ $rc -eq 137 ]; then ST=timeout
  elif [ $rc -gt 128 ]; then ST=error; MSG="killed by signal $((rc - 128)) ${MSG}"
  elif [ $rc -ne 0 ]; then ST=error
  else ST=ok; fi
  [ -z "$OPS" ] && OPS=0
  return 0
}
# quick FILE INPUT: one run; if it took under 0.5 s, the best of three.
quick() {
  measure "$@"
  if [ "$ST" = ok ] && awk "BEGIN { exit !($T < 0.5) }"; then best_of 3 "$@"; fi
}
# best_of K FILE INPUT: the minimum time of K runs (T, OPS, VAL, ST of the fastest).
best_of() {
  local k=$1 best="" bo bv bs
  shift
  for _ in $(seq "$k"); do
    measure "$@"
    if [ "$ST" != ok ]; then return 0; fi
    if [ -z "$best" ] || awk "BEGIN { exit !($T < $best) }"; then best=$T; bo=$OPS; bv=$VAL; bs=$ST; fi
  done
  T=$best; OPS=$bo; VAL=$bv; ST=$bs
}
# close A B TOL: |A - B| <= TOL * max(1, |B|)
close() { awk -v a="$1" -v b="$2" -v t="$3" 'BEGIN { d = a - b; if (d < 0) d = -d; m = b < 0 ? -b : b; if (m < 1) m = 1; exit !(d <= t * m) }'; }

BENCH_START=$(date +%s)
echo "vlad benchmarks — $(date -u '+%Y-%m-%d %H:%M UTC'), $("$V" --version)"
echo "machine: $(nproc) cores, $(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1), $(free -g 2>/dev/null | awk '/^Mem:/ {print $2 " GiB RAM"}')"
echo "load average at start: $(cut -d' ' -f1-3 /proc/loadavg)   (other processes on this machine add noise; the peers' figures are medians, ±20%)"
printf '' >"$TMP/empty.vlad"
best_of 5 "$TMP/empty.vlad" ""
T0=$T
echo "start-up time of an empty program (best of 5): $(fmt %.3f "$T0") s"
echo

# ---------------------------------------------------------------- (a) primal programs
echo "(a) primal programs (time minus start-up; ns per op = that time / total primitive operations)"
printf '%-34s %9s %14s %9s  %s\n' program "time (s)" "total ops" "ns/op" value
primal() {  # LABEL FILE INPUT
  best_of 2 "$HERE/$2" "$3"
  if [ "$ST" != ok ]; then printf '%-34s %9s\n' "$1" "$ST"; return; fi
  local t ns
  t=$(calc "$T - $T0")
  ns=$(calc "$OPS > 0 ? $t * 1e9 / $OPS : 0")
  printf '%-34s %9.3f %14d %9.1f  %s\n' "$1" "$t" "$OPS" "$ns" "$VAL"
}
primal "fib 25 (naive)" fib.vlad 25
primal "tail loop, 10^7 iterations" tail_loop.vlad 10000000
primal "build + sum a 10^6-element list" list_sum.vlad 1000000
echo

# ---------------------------------------------------------------- (b) shared workloads
echo "(b) shared workloads ($SHARED)"
W3=$SHARED/w3_grad.vlad
echo "W3: f(x) = sum sin(x_i) x_(i+1) + x_i^2, 5(n-1) primitive ops per evaluation; ns per op ="
echo "    (t(mode) - t(mode 0)) / (reps * 5(n-1)); reps chosen so that a run takes about 1 s."
echo "    metered = primitive operations counted by --meter per evaluation of f or of its gradient."
echo "    peers, ns/op: primal C++ 2-3, ADOL-C 2-3, R6RS-AD/Chez 16-31; gradient C++ 4-5, ADOL-C 51-82, R6RS-AD/Chez 311-2082"
printf '%-9s %8s | %8s %8s %9s %9s | %6s %8s %9s %9s | %s\n' n "mode0 s" "p reps" "p s" "p ns/op" "p metered" "g reps" "g s" "g ns/op" "g metered" "g/p metered ops"
w3_mode() {  # n mode -> sets W_REPS W_T W_NS W_OPS W_ST
  local n=$1 mode=$2 reps ops_per target=1.0 d tries=0
  ops_per=$(calc "5 * ($n - 1)")
  if [ "$mode" = 1 ]; then reps=$(calc "int(2e6 / $ops_per) + 1"); else reps=$(calc "int(1e5 / $ops_per) + 1"); fi
  while :; do
    measure "$W3" "$n $mode $reps" "$TL_W3"
    W_ST=$ST
    [ "$ST" != ok ] && { W_REPS=$reps; return; }
    d=$(calc "$T - $W_T0")
    tries=$((tries + 1))
    if awk "BEGIN { exit !($d >= 0.4 || $tries >= 3) }"; then break; fi
    reps=$(awk -v r="$reps" -v d="$d" -v t="$target" 'BEGIN { if (d < 0.02) d = 0.02; k = t / d; if (k > 100) k = 100; printf "%d", r * k + 1 }')
  done
  W_REPS=$reps
  W_T=$T
  W_NS=$(calc "$d * 1e9 / ($reps * $ops_per)")
  W_OPS=$(calc "($OPS - $W_OPS0) / $reps")
}
for n in 1000 10000 100000 1000000; do
  best_of 3 "$W3" "$n 0 1"
  if [ "$ST" != ok ]; then printf '%-9s %8s  %s\n' "$n" "$ST" "$MSG"; continue; fi
  W_T0=$T
  W_OPS0=$OPS
  w3_mode "$n" 1
  if [ "$W_ST" = ok ]; then P="$(printf '%8d %8.2f %9.1f %9.0f' "$W_REPS" "$W_T" "$W_NS" "$W_OPS")"; PO=$W_OPS
  else P="$(printf '%8d %8s %9s %9s' "$W_REPS" "$W_ST" - -)"; PO=""; [ "$W_ST" = error ] && echo "  n = $n primal: $MSG"; fi
  w3_mode "$n" 2
  if [ "$W_ST" = ok ]; then G="$(printf '%6d %8.2f %9.1f %9.0f' "$W_REPS" "$W_T" "$W_NS" "$W_OPS")"; R=$( [ -n "$PO" ] && calc "$W_OPS / $PO" || echo -)
  else G="$(printf '%6d %8s %9s %9s' "$W_REPS" "$W_ST" - -)"; R=-; [ "$W_ST" = error ] && echo "  n = $n gradient: $MSG"; fi
  printf '%-9s %8.3f | %s | %s | %s\n' "$n" "$W_T0" "$P" "$G" "$R"
done
echo

# W4, W5, W6: one run each, values checked.
echo "W4-W6: one run each; time minus start-up"
printf '%-42s %9s %12s  %-6s %s\n' workload "time (s)" "total ops" check "peers (R6RS-AD/Chez; C++ by hand)"
nums() { tr '()' '  ' | tr -s ' ' '\n' | grep -v '^$'; }
check_values() {  # GOT_NUMBERS WANT_NUMBERS TOL  (newline-separated)
  local got=$1 want=$2 tol=$3 a b
  [ "$(printf '%s\n' "$got" | wc -l)" -eq "$(printf '%s\n' "$want" | wc -l)" ] || return 1
  while read -r a && read -r b <&3; do close "$a" "$b" "$tol" || return 1; done < <(printf '%s\n' "$got") 3< <(printf '%s\n' "$want")
  return 0
}
W4_WANT=$(printf '%s\n' 1.417424224659391 0.4695643992657342 -2.364441440855201 -5.707734036177335 1.188419130193491 43.17143217743607)
measure "$SHARED/w4_nested.vlad" "" 120
if [ "$ST" = ok ]; then
  got=$(printf '%s' "$VAL" | nums)
  c=FAIL; check_values "$got" "$(printf '%s\n%s\n' "$W4_WANT" "$W4_WANT")" 1e-9 && c=ok
  printf '%-42s %9.3f %12d  %-6s %s\n' "W4 6th derivative by nesting, F and R" "$(calc "$T - $T0")" "$OPS" "$c" "88 us (F), 215 us (R); 0.71 us"
else printf '%-42s %9s  %s\n' "W4 6th derivative by nesting, F and R" "$ST" "$MSG"; fi
measure "$SHARED/w5_saddle.vlad" "" 120
if [ "$ST" = ok ]; then
  got=$(printf '%s' "$VAL" | nums)
  c=FAIL; check_values "$got" "$(printf '1.4272e-05\n%.0s' 1 2 3 4)" 1e-4 && c=ok
  printf '%-42s %9.3f %12d  %-6s %s\n' "W5 saddle point, reverse over reverse" "$(calc "$T - $T0")" "$OPS" "$c" "4.9 ms; 17 us"
else printf '%-42s %9s  %s\n' "W5 saddle point, reverse over reverse" "$ST" "$MSG"; fi
w6() {  # LABEL FILE
  measure "$2" "" 120
  if [ "$ST" = ok ]; then
    local first last c=FAIL
    first=$(head -1 "$TMP/out"); last=$(sed -n 2p "$TMP/out")
    close "$first" 0.214135194754302 1e-9 && c=ok
    printf '%-42s %9.3f %12d  %-6s %s\n' "$1" "$(calc "$T - $T0")" "$OPS" "$c" "78 ms; 0.62 ms   (loss after 200 steps $first, after 1000 $last)"
  else printf '%-42s %9s  %s\n' "$1" "$ST" "$MSG"; fi
}
w6 "W6 MLP on XOR, 1000 steps (shared file)" "$SHARED/w6_mlp.vlad"
w6 "W6 MLP on XOR (bench/w6_mlp.vlad, fixed)" "$HERE/w6_mlp.vlad"
echo

# ---------------------------------------------------------------- families
# family FILE N... : for each n, modes 0, 1, 2; ops ratio (ops2 - ops0) / (ops1 - ops0), times
# minus mode 0. After a timeout the larger n are skipped.
family() {
  local f=$1 n skip="" t0 o0 t1 o1 p r
  shift
  for n in "$@"; do
    if [ -n "$skip" ]; then printf '  %-9s %s\n' "$n" "skipped (smaller n $skip)"; continue; fi
    quick "$HERE/$f" "$n 0"
    if [ "$ST" != ok ]; then printf '  %-9s mode 0 %s %s\n' "$n" "$ST" "$MSG"; [ "$ST" = timeout ] && skip=$ST; continue; fi
    t0=$T; o0=$OPS
    quick "$HERE/$f" "$n 1"
    if [ "$ST" != ok ]; then printf '  %-9s primal %s %s\n' "$n" "$ST" "$MSG"; [ "$ST" = timeout ] && skip=$ST; continue; fi
    t1=$(calc "$T - $t0"); o1=$((OPS - o0)); p=$VAL
    quick "$HERE/$f" "$n 2"
    if [ "$ST" != ok ]; then
      printf '  %-9s %12d %12s %7s %9.3f %9s  %s\n' "$n" "$o1" - - "$t1" "$ST" "$(printf '%s' "$MSG" | cut -c1-60)"
      [ "$ST" = timeout ] && skip=$ST
      continue
    fi
    r=$( [ "$o1" -gt 0 ] && calc "($OPS - $o0) / $o1" || echo -)
    printf '  %-9s %12d %12d %7.2f %9.3f %9.3f  %s\n' "$n" "$o1" "$((OPS - o0))" "$r" "$t1" "$(calc "$T - $t0")" "$VAL"
  done
}
fam_header() { printf '  %-9s %12s %12s %7s %9s %9s  %s\n' n "primal ops" "$1 ops" ratio "primal s" "$1 s" "value ($2)"; }

echo "(c) forward mode: f(x) = sum_{i<n-1} sin(x_i) x_(i+1) + x_i^2 (bench/fwd_f.vlad); one directional derivative by j*"
echo "    ratio = ops(JVP) / ops(primal); times minus the time to build the input (mode 0)"
fam_header JVP "the JVP along (1 ... 1)"
family fwd_f.vlad 1000 10000 100000
echo

echo "(d) reverse mode: ratio = ops(forward phase + one backpropagator call) / ops(primal); times minus mode 0"
echo "    (timeout ${TL} s per run)"
rev_family() {  # title column value-label file
  echo "$1"
  fam_header "$2" "$3"
  family "$4" 100 1000 10000 100000
}
rev_family "1. the same f (bench/rev1_f.vlad)" grad "every component real?, first component" rev1_f.vlad
rev_family "2. chain x_(k+1) = 0.5 (x_k + x_k), k < n (bench/rev2_chain.vlad)" grad "derivative, 1" rev2_chain.vlad
rev_family "3. 1000 projections (car p) out of p = (small . huge), huge n reals (bench/rev3_proj.vlad); should not grow with n" \
  grad "d/d small, 3000" rev3_proj.vlad
rev_family "4. the sum of n inputs held in a list (bench/rev4_sum.vlad)" grad "every component real?, first component" rev4_sum.vlad
rev_family "5. sharing: x_k = (cons x_(k-1) x_(k-1)), then zero, *j and plus of x_n, walked (bench/rev5_sharing.vlad); time should be O(n)" \
  "zero/*j/plus" "(0 1 2 1)" rev5_sharing.vlad
rev_family "6. n steps calling a closure that captures the input (bench/rev6_closure.vlad)" grad "derivative, n/2" rev6_closure.vlad
echo
echo "(e) the example programs"
"$(dirname "$0")/examples.sh" "$V"
echo
echo "load average at end: $(cut -d' ' -f1-3 /proc/loadavg); total bench time $(( $(date +%s) - BENCH_START )) s"
