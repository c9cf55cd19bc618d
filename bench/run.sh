#!/usr/bin/env bash
# bench/run.sh [BUILD] — the benchmarks of `make bench`, printed as tables:
#   (a) primal programs: fib 25, a 10^7-iteration tail loop, building and summing a 10^6 list;
#   (b) W3 (../shared/bench) for n = 1e3 .. 1e6: ns per operation of the primal and of the reverse
#       gradient, their time ratio (same run conditions), and the meter's ratios: primitive
#       operations, interpreted steps, applications, bytes allocated and retained per operation;
#   (c) W7 (symbolic work, few active reals): the same ratios;
#   (d) the reverse-mode families (bench/rev*.vlad) and the forward family (bench/fwd_f.vlad);
#   (e) W4 (k-th derivative by k-fold nesting): first call and later calls, per k, forward and
#       reverse, and the growth per level; the shared W4, W5, W6 files with their values checked;
#   (f) the example programs;
#   (g) the native tier: programs timed with it off (VLAD_JIT=off) and on;
#   (h) the open issues' aims, each against the figures of this run that it covers.
# Times are wall-clock times of whole processes run without --meter, the best of several runs,
# minus the time of the same program doing everything but the measured work (its "mode 0", or
# one call fewer). Counts come from separate `vlad --meter` runs (deterministic). Every run is
# time-limited (BENCH_TIMEOUT, default 120 s) and shows `timeout` or `error` instead of hanging.
set -u
B=${1:-build}
V=$B/vlad
HERE=$(cd "$(dirname "$0")" && pwd)
SHARED=${BENCH_SHARED:-$HERE/../../shared/bench}
TL=${BENCH_TIMEOUT:-120}
TMP=$(mktemp -d "${TMPDIR:-/tmp}/vlad-bench.XXXXXX")
trap 'rm -rf "$TMP"' EXIT
[ -x "$V" ] || { echo "bench: no $V (run make first)" >&2; exit 1; }

calc() { awk "BEGIN { print ($*) }"; }
. "$HERE/workloads.sh"

# tbest K FILE INPUT: the best wall time (s) of K runs of `vlad FILE` with INPUT on stdin.
# Sets T, VAL (stdout on one line), ST (ok | timeout | error), MSG (first line of stderr).
tbest() {
  local k=$1 f=$2 input=$3 best="" s e rc t
  ST=ok
  for _ in $(seq "$k"); do
    s=$(date +%s%N)
    printf '%s\n' "$input" | timeout "$TL" "$V" "$f" >"$TMP/out" 2>"$TMP/err"
    rc=$?
    e=$(date +%s%N)
    if [ $rc -eq 124 ] || [ $rc -eq 137 ]; then ST=timeout; break; fi
    if [ $rc -ne 0 ]; then ST=error; MSG=$(head -1 "$TMP/err"); break; fi
    t=$(calc "($e - $s) / 1e9")
    if [ -z "$best" ] || awk "BEGIN { exit !($t < $best) }"; then best=$t; fi
  done
  T=${best:-0}
  VAL=$(tr '\n' ' ' <"$TMP/out" | sed 's/ *$//')
}

# tlast K FILE INPUT: the best over K runs of the time VLAD_TIME_FORMS gives the file's last
# top-level form (s): the measured work without the process's start-up, the input's construction
# or its noise. Sets T and ST as tbest does.
tlast() {
  local k=$1 f=$2 input=$3 best="" t rc
  ST=ok
  for _ in $(seq "$k"); do
    printf '%s\n' "$input" | VLAD_TIME_FORMS=1 timeout "$TL" "$V" "$f" >/dev/null 2>"$TMP/err"
    rc=$?
    if [ $rc -eq 124 ] || [ $rc -eq 137 ]; then ST=timeout; break; fi
    if [ $rc -ne 0 ]; then ST=error; MSG=$(grep -v '^# time' "$TMP/err" | head -1); break; fi
    t=$(sed -n 's/^# time .*: \([0-9.]*\) ms$/\1/p' "$TMP/err" | tail -1)
    t=$(calc "$t / 1000")
    if [ -z "$best" ] || awk "BEGIN { exit !($t < $best) }"; then best=$t; fi
  done
  T=${best:-0}
}

# meter FILE INPUT: one `vlad --meter` run. Sets OPS STEPS APPS OBJS BYTES RET RSS (MiB).
meter() {
  printf '%s\n' "$2" | timeout "$TL" "$V" --meter "$1" >/dev/null 2>"$TMP/merr"
  OPS=$(sed -n 's/^total primitive operations: //p' "$TMP/merr")
  STEPS=$(sed -n 's/^# interpreted steps: //p' "$TMP/merr")
  APPS=$(sed -n 's/^# applications: //p' "$TMP/merr")
  OBJS=$(sed -n 's/^# heap objects allocated: //p' "$TMP/merr")
  BYTES=$(sed -n 's/^# heap bytes allocated: //p' "$TMP/merr")
  RET=$(sed -n 's/^# backpropagator bytes retained (peak): //p' "$TMP/merr")
  RSS=$(sed -n 's/.*peak resident \([0-9]*\) MiB.*/\1/p' "$TMP/merr")
  for x in OPS STEPS APPS OBJS BYTES RET RSS; do [ -z "${!x}" ] && eval "$x=0"; done
  return 0
}
# ratio A0 A1 A2: (A2 - A0) / (A1 - A0), "-" when undefined
ratio() { awk -v a="$1" -v b="$2" -v c="$3" 'BEGIN { if (b - a > 0) printf "%.2f", (c - a) / (b - a); else printf "-" }'; }
close_to() { awk -v a="$1" -v b="$2" -v t="$3" 'BEGIN { d = a - b; if (d < 0) d = -d; m = b < 0 ? -b : b; if (m < 1) m = 1; exit !(d <= t * m) }'; }

BENCH_START=$(date +%s)
echo "vlad benchmarks — $(date -u '+%Y-%m-%d %H:%M UTC'), $("$V" --version)"
echo "machine: $(nproc) cores, $(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1), $(free -g 2>/dev/null | awk '/^Mem:/ {print $2 " GiB RAM"}')"
echo "load average at start: $(cut -d' ' -f1-3 /proc/loadavg)   (other processes add noise; the peers' figures are medians, ±20%)"
printf '' >"$TMP/empty.vlad"
tbest 5 "$TMP/empty.vlad" ""
T0=$T
echo "start-up time of an empty program: $(printf '%.3f' "$T0") s"
echo

# ---------------------------------------------------------------- (a) primal programs
echo "(a) primal programs (time minus start-up; ns per op = that time / primitive operations)"
printf '  %-34s %9s %12s %8s  %s\n' program "time (s)" "ops" "ns/op" value
primal() {  # LABEL FILE INPUT
  tbest 3 "$HERE/$2" "$3"
  if [ "$ST" != ok ]; then printf '  %-34s %9s %s\n' "$1" "$ST" "${MSG:-}"; return; fi
  local t=$T v=$VAL
  meter "$HERE/$2" "$3"
  printf '  %-34s %9.3f %12d %8.1f  %s\n' "$1" "$(calc "$t - $T0")" "$OPS" "$(calc "$OPS > 0 ? ($t - $T0) * 1e9 / $OPS : 0")" "$v"
}
primal "fib 25 (naive)" fib.vlad 25
primal "tail loop, 10^7 iterations" tail_loop.vlad 10000000
primal "build + sum a 10^6-element list" list_sum.vlad 1000000
# The embedding API: each call is a whole evaluation (handed to the kept evaluation thread).
mkdir -p "$TMP/inc/vlad" && cp "$HERE/../src/vlad.hpp" "$TMP/inc/vlad/"
if ${CXX:-c++} -O2 -std=c++17 -I"$TMP/inc" "$HERE/api_call.cpp" "$B/libvlad.a" -lgc -ledit -lasmjit -pthread \
     -o "$TMP/api_call" 2>/dev/null || ${CXX:-c++} -O2 -std=c++17 -I"$TMP/inc" "$HERE/api_call.cpp" "$B/libvlad.a" \
     -lgc -ledit -pthread -o "$TMP/api_call" 2>/dev/null; then
  read -r api_call api_grad _ < <(timeout "$TL" "$TMP/api_call")
  printf '  %-34s %9s us a call (Interpreter::call), %s us a gradient (Interpreter::gradient)\n' \
    "embedding API, a one-op function" "${api_call:-?}" "${api_grad:-?}"
else
  printf '  %-34s %s\n' "embedding API, a one-op function" "not built (bench/api_call.cpp)"
fi
echo

# ---------------------------------------------------------------- (b) W3
W3=$SHARED/w3_grad.vlad
echo "(b) W3: f(x) = sum sin(x_i) x_(i+1) + x_i^2, 5(n-1) operations; gradient by reverse mode (*j)"
echo "    ns/op = t / (reps * 5(n-1)), t the time of the program's last form (VLAD_TIME_FORMS: the primal or gradient"
echo "    runs, not the input's construction; best of 3); time ratio = gradient ns/op / primal ns/op."
echo "    Counts per evaluation (meter, mode 0 subtracted): ratios gradient/primal of operations, steps and"
echo "    applications; bytes allocated and retained (the tape) per recorded operation; peak resident memory."
echo "    interp: the same two runs interpreted only (VLAD_JIT=off), ns/op and time ratio: the ratio of the interpreter's"
echo "    reverse pass to the interpreter's primal (the native tier runs the primal ~8x faster, the gradient ~2-3x)."
echo "    peers, ns/op: primal C++ 2-3, ADOL-C 2-3, R6RS-AD/Chez 16-31; gradient C++ 4-5, ADOL-C 51-82, R6RS-AD/Chez 311-2082"
printf '  %-8s | %8s %8s | %8s %8s | %6s | %-19s | %5s %5s %5s | %7s %7s | %s\n' n "p ns/op" "p reps" "g ns/op" "g reps" "time" "interp p / g, time" "ops" steps apps "B/op" "kept/op" "peak RSS"
AIM_W3=()  # n, primal and gradient ns/op, time ratio, interpreted time ratio, kept/op, peak RSS (the aims, (h))
for n in 1000 10000 100000 1000000; do
  ops=$((5 * (n - 1)))
  reps_p=$(( 4000000 / ops + 1 )); reps_g=$(( 1000000 / ops + 1 ))
  k=3
  tlast $k "$W3" "$n 1 $reps_p"; tp=$T; sp=$ST
  tlast $k "$W3" "$n 2 $reps_g"; tg=$T; sg=$ST
  if [ "$sp" != ok ] || [ "$sg" != ok ]; then printf '  %-8s primal %s gradient %s %s\n' "$n" "$sp" "$sg" "${MSG:-}"; continue; fi
  pns=$(calc "$tp * 1e9 / ($reps_p * $ops)"); gns=$(calc "$tg * 1e9 / ($reps_g * $ops)")
  VLAD_JIT=off tlast $k "$W3" "$n 1 $reps_p"; ip=$(calc "$T * 1e9 / ($reps_p * $ops)")
  VLAD_JIT=off tlast $k "$W3" "$n 2 $reps_g"; ig=$(calc "$T * 1e9 / ($reps_g * $ops)")
  interp=$(printf '%5.1f %5.1f, %5.2f' "$ip" "$ig" "$(calc "$ig / $ip")")
  meter "$W3" "$n 0 1"; o0=$OPS s0=$STEPS a0=$APPS b0=$BYTES
  meter "$W3" "$n 1 1"; o1=$OPS s1=$STEPS a1=$APPS
  meter "$W3" "$n 2 1"; o2=$OPS s2=$STEPS a2=$APPS b2=$BYTES ret=$RET rss=$RSS
  po=$((o1 - o0))
  printf '  %-8s | %8.1f %8d | %8.1f %8d | %6.2f | %-19s | %5s %5s %5s | %7.1f %7.1f | %s MiB\n' "$n" "$pns" "$reps_p" "$gns" "$reps_g" \
    "$(calc "$gns / $pns")" "$interp" "$(ratio $o0 $o1 $o2)" "$(ratio $s0 $s1 $s2)" "$(ratio $a0 $a1 $a2)" \
    "$(calc "($b2 - $b0) / $po")" "$(calc "$ret / $po")" "$rss"
  AIM_W3+=("$n $pns $gns $(calc "$gns / $pns") $(calc "$ig / $ip") $(calc "$ret / $po") $rss")
done
echo

# ---------------------------------------------------------------- (c) W7
W7=$SHARED/w7_symbolic.vlad
echo "(c) W7: an evaluator walks a depth-10 expression tree, four active reals; 300 evaluations"
tbest 5 "$W7" "10 0 300"; t0=$T
tbest 5 "$W7" "10 1 300"; tp=$T
tbest 5 "$W7" "10 2 300"; tg=$T; val=$VAL
meter "$W7" "10 0 30"; o0=$OPS s0=$STEPS a0=$APPS j0=$OBJS b0=$BYTES
meter "$W7" "10 1 30"; o1=$OPS s1=$STEPS a1=$APPS j1=$OBJS b1=$BYTES
meter "$W7" "10 2 30"; o2=$OPS s2=$STEPS a2=$APPS j2=$OBJS b2=$BYTES
AIM_W7=$(calc "($tg - $t0) / ($tp - $t0)")
printf '  primal %.3f s, gradient %.3f s: time ratio %.2f (aim <= 3)\n' "$(calc "$tp - $t0")" "$(calc "$tg - $t0")" "$AIM_W7"
# (objects and bytes per primitive operation of the primal, not a ratio: since the fifteenth
# session the compiled primal allocates almost nothing, 3,700 objects for 30 evaluations)
printf '  ratios gradient/primal: operations %s, steps %s, applications %s; gradient objects %s, bytes %s a primal operation\n' \
  "$(ratio $o0 $o1 $o2)" "$(ratio $s0 $s1 $s2)" "$(ratio $a0 $a1 $a2)" "$(printf %.2f "$(calc "($j2 - $j0) / ($o1 - $o0)")")" "$(printf %.1f "$(calc "($b2 - $b0) / ($o1 - $o0)")")"
echo "  gradient (last): ${val:0:80}"
echo

# ---------------------------------------------------------------- (d) families
echo "(d) families at n = 1e5 (bench/*.vlad; modes 0 input only, 1 primal, 2 forward phase + one backpropagator"
echo "    call, or one JVP by j* for the forward family): time ratio and the meter's ratios (mode 0 subtracted);"
echo "    obj/op: heap objects of the derivative run per primitive operation of the primal (not a ratio: a"
echo "    native primal loop allocates nothing); interp: the time ratio with both runs interpreted only (VLAD_JIT=off)"
printf '  %-58s %7s %7s | %5s %6s | %5s %6s %7s | %s\n' family "p s" "d s" time interp ops steps obj/op "value"
family() {  # LABEL FILE N
  local n=$3 t0 tp td o0 s0 j0 o1 s1 j1 i0 ip id
  tbest 3 "$HERE/$2" "$n 0"; t0=$T
  tbest 3 "$HERE/$2" "$n 1"; tp=$T
  tbest 3 "$HERE/$2" "$n 2"; td=$T
  if [ "$ST" != ok ]; then printf '  %-58s %s %s\n' "$1" "$ST" "${MSG:-}"; return; fi
  local val=$VAL
  VLAD_JIT=off tbest 3 "$HERE/$2" "$n 0"; i0=$T
  VLAD_JIT=off tbest 3 "$HERE/$2" "$n 1"; ip=$T
  VLAD_JIT=off tbest 3 "$HERE/$2" "$n 2"; id=$T
  meter "$HERE/$2" "$n 0"; o0=$OPS s0=$STEPS j0=$OBJS
  meter "$HERE/$2" "$n 1"; o1=$OPS s1=$STEPS j1=$OBJS
  meter "$HERE/$2" "$n 2"
  local on off
  on=$(calc "($tp - $t0) > 0 ? ($td - $t0) / ($tp - $t0) : 0"); off=$(calc "($ip - $i0) > 0 ? ($id - $i0) / ($ip - $i0) : 0")
  AIM_FAM+=("$([ "$on" = 0 ] && echo - || echo "$on") $([ "$off" = 0 ] && echo - || echo "$off")")  # (0: no primal time to divide by)
  printf '  %-58s %7.3f %7.3f | %5.2f %6.2f | %5s %6s %7s | %s\n' "$1" "$(calc "$tp - $t0")" "$(calc "$td - $t0")" \
    "$on" "$off" "$(ratio $o0 $o1 $OPS)" "$(ratio $s0 $s1 $STEPS)" "$(awk -v a="$j0" -v b="$OBJS" -v o0="$o0" -v o1="$o1" 'BEGIN { if (o1 - o0 >= 1000) printf "%.2f", (b - a) / (o1 - o0); else printf "-" }')" "${val:0:30}"
}
AIM_FAM=()  # time ratio, with the tier and interpreted, of each family
family "reverse 1: f of W3 (rev1_f)" rev1_f.vlad 100000
family "reverse 2: chain x_(k+1) = 0.5 (x_k + x_k) (rev2_chain)" rev2_chain.vlad 100000
family "reverse 3: 1000 (car p), p = (small . huge) (rev3_proj)" rev3_proj.vlad 100000
family "reverse 4: the sum of a list (rev4_sum)" rev4_sum.vlad 100000
family "reverse 5: x_k = (cons x_(k-1) x_(k-1)): zero, *j, plus (rev5)" rev5_sharing.vlad 100000
family "reverse 6: a loop calling a closure over the input (rev6)" rev6_closure.vlad 100000
family "forward: one JVP of f of W3 (fwd_f)" fwd_f.vlad 100000
echo

# ---------------------------------------------------------------- (e) nesting: W4, W5, W6
echo "(e) W4: the k-th derivative of exp(sin x) at 0.5 by k-fold nesting of a derivative operator: the first"
echo "    call (transforms, compilation and one run) and each later call, timed inside the process (VLAD_TIME_FORMS:"
echo "    the first call's form, then R later calls' after R more; best of 3 processes); growth = later-call time / that"
echo "    of k-1.  peers (all six k, one mode): R6RS-AD/Chez 88 us (F), 215 us (R)"
printf '  %-4s | %10s %10s %7s | %10s %10s %7s\n' k "F first ms" "F later ms" growth "R first ms" "R later ms" growth
# formtimes FILE N: the best over N processes of the times VLAD_TIME_FORMS gives the file's last
# three forms (the first call, R calls more that finish its compilation, then R later calls timed),
# in ms: sets FIRST and LATER_ALL
formtimes() {
  local f=$1 n=$2 out a b
  FIRST=""; LATER_ALL=""
  for _ in $(seq "$n"); do
    out=$(VLAD_TIME_FORMS=1 timeout "$TL" "$V" "$f" 2>&1 >/dev/null | sed -n 's/^# time .*: \([0-9.]*\) ms$/\1/p' | tail -3)
    a=$(printf '%s\n' "$out" | sed -n 1p); b=$(printf '%s\n' "$out" | sed -n 3p)
    { [ -z "$a" ] || [ -z "$b" ]; } && continue
    if [ -z "$FIRST" ] || awk "BEGIN { exit !($a < $FIRST) }"; then FIRST=$a; fi
    if [ -z "$LATER_ALL" ] || awk "BEGIN { exit !($b < $LATER_ALL) }"; then LATER_ALL=$b; fi
  done
  FIRST=${FIRST:-0}; LATER_ALL=${LATER_ALL:-0}
}
declare -A prev
AIM_W4_GROWTH=(); AIM_W4_FIRST=-; AIM_W4_LATER=-
for k in 1 2 3 4 5 6; do
  row="  $(printf '%-4s' "$k") |"
  for m in F R; do
    reps=$(( k <= 3 ? 2000 : k == 4 ? 300 : k == 5 ? 60 : 12 ))
    w4file $m $k $reps >"$TMP/w4-n.vlad"
    formtimes "$TMP/w4-n.vlad" 3
    first=$FIRST; later=$(calc "$LATER_ALL / $reps")
    growth=-; [ -n "${prev[$m]:-}" ] && growth=$(calc "${prev[$m]} > 0 ? $later / ${prev[$m]} : 0")
    prev[$m]=$later
    if [ $m = R ] && [ $k -ge 4 ]; then AIM_W4_GROWTH+=("$growth"); fi
    if [ $m = R ] && [ $k -eq 6 ] && [ "$LATER_ALL" != 0 ]; then AIM_W4_FIRST=$first; AIM_W4_LATER=$later; fi
    row="$row $(printf '%10.3f %10.4f %7s' "$first" "$later" "$(printf '%.2f' "$growth" 2>/dev/null || echo -)") |"
  done
  echo "$row"
done
nums() { tr '()' '  ' | tr -s ' ' '\n' | grep -v '^$'; }
check_values() {  # GOT WANT TOL (newline-separated numbers)
  local got=$1 want=$2 tol=$3 a b
  [ "$(printf '%s\n' "$got" | wc -l)" -eq "$(printf '%s\n' "$want" | wc -l)" ] || return 1
  while read -r a && read -r b <&3; do close_to "$a" "$b" "$tol" || return 1; done < <(printf '%s\n' "$got") 3< <(printf '%s\n' "$want")
}
printf '  %-44s %9s  %-6s %s\n' "shared workload (whole process minus start-up)" "time (s)" check "peers (R6RS-AD/Chez; C++ by hand)"
W4_WANT=$(printf '%s\n' 1.417424224659391 0.4695643992657342 -2.364441440855201 -5.707734036177335 1.188419130193491 43.17143217743607)
tbest 3 "$SHARED/w4_nested.vlad" ""
c=FAIL; [ "$ST" = ok ] && check_values "$(printf '%s' "$VAL" | nums)" "$(printf '%s\n%s\n' "$W4_WANT" "$W4_WANT")" 1e-9 && c=ok
printf '  %-44s %9.4f  %-6s %s\n' "W4 6th derivative by nesting, F and R" "$(calc "$T - $T0")" "$c" "88 us (F) + 215 us (R); 0.71 us"
tbest 3 "$SHARED/w5_saddle.vlad" ""
AIM_W5=-; [ "$ST" = ok ] && AIM_W5=$(calc "($T - $T0) * 1000")
c=FAIL; [ "$ST" = ok ] && check_values "$(printf '%s' "$VAL" | nums)" "$(printf '1.4272e-05\n%.0s' 1 2 3 4)" 1e-4 && c=ok
printf '  %-44s %9.4f  %-6s %s\n' "W5 saddle point, reverse over reverse" "$(calc "$T - $T0")" "$c" "4.9 ms; 17 us"
tbest 3 "$SHARED/w6_mlp.vlad" ""
AIM_W6=-; [ "$ST" = ok ] && AIM_W6=$(calc "($T - $T0) * 1000")
first=$(printf '%s' "$VAL" | cut -d' ' -f1)
c=FAIL; [ "$ST" = ok ] && close_to "$first" 0.214135194754302 1e-9 && c=ok
printf '  %-44s %9.4f  %-6s %s\n' "W6 MLP on XOR, 1000 steps (+200)" "$(calc "$T - $T0")" "$c" "78 ms; 0.62 ms  (loss after 200 steps $first)"
echo

# ---------------------------------------------------------------- (f) examples
echo "(f) the example programs: one run each under --meter (its counts), start-up included; section (g) times"
echo "    them without the meter, minus start-up, and is the one the aims (h) use"
"$HERE/examples.sh" "$V"
echo

# ---------------------------------------------------------------- (g) the native tier
echo "(g) the native tier: the same programs interpreted only (VLAD_JIT=off) and with the tier (the default:"
echo "    a body is compiled after 30 runs within 65,536 steps); whole processes minus start-up, best of 3; speed-up = off / on"
printf '  %-44s %10s %10s %8s\n' program "off (s)" "on (s)" speed-up
tier_row() {  # label file input
  local off
  VLAD_JIT=off tbest 3 "$2" "$3"; off=$T; local st_off=$ST
  tbest 3 "$2" "$3"
  if [ "$st_off" != ok ] || [ "$ST" != ok ]; then printf '  %-44s %s\n' "$1" "off $st_off, on $ST"; return; fi
  printf '  %-44s %10.4f %10.4f %8.2f\n' "$1" "$(calc "$off - $T0")" "$(calc "$T - $T0")" "$(calc "($off - $T0) / ($T - $T0)")"
  ON_MS=$(calc "($T - $T0) * 1000")
}

tier_row "tail loop, 10^7 iterations" "$HERE/tail_loop.vlad" 10000000
tier_row "fib 25" "$HERE/fib.vlad" 25
tier_row "W3 primal, n = 1e5, 20 reps" "$W3" "100000 1 20"
tier_row "W3 gradient, n = 1e4, 20 reps" "$W3" "10000 2 20"
tier_row "W5 saddle point, reverse over reverse" "$SHARED/w5_saddle.vlad" ""
tier_row "W6 MLP on XOR" "$SHARED/w6_mlp.vlad" ""
AIM_PARTICLE=()
for n in ff fr rf rr; do
  particle_file $n scheme-examples >"$TMP/particle-$n.vlad"
  ON_MS=-
  tier_row "particle.vlad $(echo $n | tr a-z A-Z)" "$TMP/particle-$n.vlad" ""
  AIM_PARTICLE+=("$ON_MS")
done
# A REPL session that redefines a hot function: the machine code of the dead definitions is released.
{
  echo "(define (rep f n acc) (if (= n 0) acc (rep f (- n 1) (+ acc (f 0.5)))))"
  for k in $(seq 1000); do
    echo "(define (f x) (let loop ((i 0) (a x)) (if (= i 5) a (loop (+ i 1) (+ (* a (sin a)) $k.0)))))"
    echo "(rep (gradient f) 100 0)"
  done
  echo ",meter 0"
} >"$TMP/redefine.in"
t1=$(date +%s%N)
"$V" <"$TMP/redefine.in" >"$TMP/redefine.out" 2>&1
t2=$(date +%s%N)
held=$(sed -n 's/.*machine code held \([0-9]*\) KiB, \([0-9]*\) dead.*/\1 KiB held, \2 bodies released/p' "$TMP/redefine.out")
printf '  %-44s %10.3f s  %s\n' "REPL: 1,000 redefinitions, 100 gradients each" "$(calc "($t2 - $t1) / 1e9")" "${held:-?}"
# Reverse over reverse through a 10^5-deep recursion: a long chain of wide objects for the
# collector to mark (parallel marking overflowed its local mark stacks again and again: one marker).
echo "(define (sum2 x n) (if (= n 0) 0 (+ (* x x) (sum2 x (- n 1)))))" >"$TMP/deep-rr.vlad"
echo "((gradient (gradient (lambda (x) (sum2 x 100000)))) 1)" >>"$TMP/deep-rr.vlad"
t1=$(date +%s%N)
gcline=$("$V" --meter "$TMP/deep-rr.vlad" 2>&1 >/dev/null | sed -n 's/^# collections: \(.*\), heap.*/\1/p')
t2=$(date +%s%N)
printf '  %-44s %10.3f s  collections %s\n' "gradient of gradient through 10^5 nested calls" "$(calc "($t2 - $t1) / 1e9")" "${gcline:-?}"
echo

# ---------------------------------------------------------------- (h) the aims
# The open issues' aims (9: reverse and nested AD at the primal's speed; 10: the native tier),
# each against what this run measured above: the range over the rows it covers, and whether
# every one of them is within it.
echo "(h) the issues' aims, against this run's figures (issue 9: reverse and nested AD; 10: the native tier)"
printf '  %-62s %-6s %-22s %s\n' aim issue measured met
aim() {  # LABEL ISSUE LIMIT VALUES...: the range of the values, and whether each is <= LIMIT
  local label=$1 issue=$2 limit=$3; shift 3
  printf '%s\n' "$@" | awk -v l="$label" -v i="$issue" -v lim="$limit" '
    $1 !~ /^[0-9.]+$/ { next }  # (a figure this run did not get)
    { c++; if (c == 1 || $1 + 0 < lo) lo = $1 + 0; if (c == 1 || $1 + 0 > hi) hi = $1 + 0; if ($1 + 0 > lim) bad = 1 }
    END { a = sprintf("%.3g", lo); b = sprintf("%.3g", hi); r = c == 0 ? "-" : a == b ? a : a "-" b
          printf "  %-62s %-6s %-22s %s\n", l, i, r, (c == 0 ? "?" : bad ? "no" : "yes") }'
}
col() { local k=$1; shift; for r in "$@"; do echo "$r" | cut -d' ' -f"$k"; done; }
aim "W3 gradient/primal time, interpreted, n = 1e3..1e6 (<= 5)" 9 5 $(col 5 "${AIM_W3[@]}")
aim "W3 gradient/primal time, with the tier (<= 5)" 9 5 $(col 4 "${AIM_W3[@]}")
aim "W3 bytes kept per recorded operation (<= 150)" 9 150 $(col 6 "${AIM_W3[@]}")
aim "W3 n = 1e6 gradient, peak resident MiB (<= 1024)" 9 1024 $(for r in "${AIM_W3[@]}"; do [ "${r%% *}" = 1000000 ] && col 7 "$r"; done)
aim "W7 gradient/primal time (<= 3)" 9 3 "$AIM_W7"
aim "families 1, 2, 4, 6: time ratio, interpreted (<= 5)" 9 5 $(for i in 0 1 3 5; do col 2 "${AIM_FAM[$i]}"; done)
aim "families 1, 2, 4, 6: time ratio, with the tier (<= 5)" 9 5 $(for i in 0 1 3 5; do col 1 "${AIM_FAM[$i]}"; done)
aim "W4 R k = 6: first call, ms (<= 2)" 9 2 "$AIM_W4_FIRST"
aim "W4 R k = 6: a later call, ms (<= 0.3)" "9, 10" 0.3 "$AIM_W4_LATER"
aim "W4 R: growth of a later call a level, k = 4..6 (<= 4)" 9 4 "${AIM_W4_GROWTH[@]}"
aim "W5, ms (<= 5)" 9 5 "$AIM_W5"
aim "W5, ms (<= 2)" 10 2 "$AIM_W5"
aim "W6, ms (<= 80; 40)" "9, 10" 40 "$AIM_W6"
aim "W3 primal ns/op, n = 1e3..1e6 (<= 8)" 10 8 $(col 2 "${AIM_W3[@]}")
aim "W3 gradient ns/op, n = 1e3..1e6 (<= 60)" 10 60 $(col 3 "${AIM_W3[@]}")
nest=(FF FR RF RR); lim=(95 66 115 82)
for i in 0 1 2 3; do
  aim "particle ${nest[$i]} with the tier, ms (<= ${lim[$i]})" 10 "${lim[$i]}" "${AIM_PARTICLE[$i]:-}"
done
echo
echo "load average at end: $(cut -d' ' -f1-3 /proc/loadavg); total bench time $(( $(date +%s) - BENCH_START )) s"
