#!/usr/bin/env bash
# Runs the whole test suite against the build in $1 (default build):
#   doctest unit tests, every tests/vlad/*.vlad and ../shared/conformance/*.vlad through
#   `vlad --check`, golden-output programs (tests/golden, scheme-examples), and the shell checks
#   in tests/cli.sh. Ends with one line: N passed, N failed.
set -u
B=${1:-build}
V=$B/vlad

# The whole suite runs twice: interpreted only, and with the native tier compiling every body on
# its first run (VLAD_JIT_THRESHOLD=1: the most code compiled; the .vlad files also on their
# second, below). The last line adds both passes.
if [ -z "${VLAD_TIER:-}" ]; then
  tp=0; tf=0; recap=""
  for tier in interpreted native; do
    echo "== $tier =="
    log=$(mktemp)
    if [ $tier = interpreted ]; then
      VLAD_TIER=$tier VLAD_JIT=off "$0" "$B" | tee "$log"
    else
      VLAD_TIER=$tier VLAD_JIT=on VLAD_JIT_THRESHOLD=1 "$0" "$B" | tee "$log"
    fi
    line=$(grep -E '^[0-9]+ passed, [0-9]+ failed$' "$log" | tail -1)
    recap+=$(grep -E '^FAILED ' "$log")$'\n'
    rm -f "$log"
    if [ -z "$line" ]; then tf=$((tf + 1)); echo "FAIL: the $tier pass gave no summary"; continue; fi
    p=${line%% passed*}; f=${line#*, }; f=${f%% failed}
    tp=$((tp + p)); tf=$((tf + f))
  done
  # (what failed, again, last: CI keeps only the end of the output)
  printf '%s' "$recap" | grep -v '^$'
  echo "$tp passed, $tf failed"
  [ "$tf" -eq 0 ]
  exit
fi
passed=0
failed=0
recap=()  # (one line for each thing that failed, printed again at the end)
fail() { echo "FAIL: $*"; recap+=("$*"); failed=$((failed + 1)); }
pass() { passed=$((passed + 1)); }

# 1. unit tests (doctest): count test cases
if [ -x "$B/unit-tests" ]; then
  out=$("$B/unit-tests" 2>&1); rc=$?
  line=$(printf '%s\n' "$out" | grep -E '^\[doctest\] test cases:' | tail -1)
  p=$(printf '%s' "$line" | sed -E 's/.*\| *([0-9]+) passed.*/\1/')
  f=$(printf '%s' "$line" | sed -E 's/.*\| *([0-9]+) failed.*/\1/')
  if [ -z "$line" ]; then fail "unit tests did not run (exit $rc)"; printf '%s\n' "$out" | tail -20
  else
    passed=$((passed + p)); failed=$((failed + f))
    if [ "$f" != 0 ]; then
      printf '%s\n' "$out" | grep -B2 -A8 -E 'ERROR|FATAL' | head -60
      recap+=("unit tests: $(printf '%s\n' "$out" | grep -m1 -E 'ERROR|FATAL')")
    fi
    echo "unit tests: $p passed, $f failed"
  fi
fi

# 2. annotated VLAD tests
check_file() {
  local f=$1
  out=$(timeout 300 "$V" --check "$f" 2>&1); rc=$?
  line=$(printf '%s\n' "$out" | grep -E '^[0-9]+ passed, [0-9]+ failed$' | tail -1)
  if [ -z "$line" ]; then fail "$f: no summary (exit $rc)"; printf '%s\n' "$out" | tail -5; return; fi
  p=${line%% passed*}; f2=${line#*, }; f2=${f2%% failed}
  passed=$((passed + p)); failed=$((failed + f2))
  if [ "$f2" != 0 ]; then
    printf '%s\n' "$out" | grep -v -E '^[0-9]+ passed' | head -40
    first=$(printf '%s\n' "$out" | grep -m1 -E 'FAIL' | cut -c1-300)
    recap+=("${first:-$f: $f2 failed}${VLAD_JIT_THRESHOLD:+ (JIT threshold $VLAD_JIT_THRESHOLD)}")
  fi
  printf '%-50s %s\n' "$f" "$line"
}
for f in tests/vlad/*.vlad; do [ -e "$f" ] && check_file "$f"; done
if [ -d ../shared/conformance ]; then
  for f in ../shared/conformance/*.vlad; do check_file "$f"; done
fi
# The native pass runs them again with bodies compiled on their second run: the interpreter's
# first run records at each call the kinds of callee it met (Instr::seen), native code inlines
# only those, and later calls of other kinds take its ways out to the interpreter.
if [ "${VLAD_TIER:-}" = native ]; then
  echo "(again, VLAD_JIT_THRESHOLD=2)"
  for f in tests/vlad/*.vlad ../shared/conformance/*.vlad; do
    [ -e "$f" ] && VLAD_JIT_THRESHOLD=2 check_file "$f"
  done
fi

# 3. golden programs: FILE.vlad with FILE.out (stdout, reals compared within 1e-9) and/or
#    FILE.err (a text the first line of stderr must contain; exit status 1).
golden() {
  local f=$1 base=${1%.vlad}
  if [ -f "$base.err" ]; then
    err=$(timeout 300 "$V" "$f" 2>&1 >/dev/null); rc=$?
    want=$(head -1 "$base.err")
    if [ $rc -eq 1 ] && printf '%s\n' "$err" | head -1 | grep -qF -- "$want"; then pass
    else fail "$f: expected exit 1 and stderr containing '$want', got exit $rc: $(printf '%s' "$err" | head -1)"; fi
  fi
  if [ -f "$base.out" ]; then
    got=$(timeout 600 "$V" "$f" 2>/dev/null); rc=$?
    if [ $rc -eq 0 ] && "$B/compare-output" "$base.out" <(printf "%s\n" "$got"); then pass
    else fail "$f: output differs from $base.out (exit $rc)"; diff <(printf '%s\n' "$got") "$base.out" | head -10; fi
  fi
}
for f in tests/golden/*.vlad scheme-examples/*.vlad; do [ -e "$f" ] && golden "$f"; done

# 3b. regressions found by the fuzzer, replayed in its harness (which starts evaluation the way
#     an embedding host does: no set-up before the first evaluation thread)
if [ -x "$B/fuzz" ]; then
  for f in tests/regress/*.vlad; do
    [ -e "$f" ] || continue
    out=$(timeout 120 "$B/fuzz" --replay "$f" 2>&1); rc=$?
    if [ $rc -eq 0 ]; then pass; else fail "$f: fuzz --replay exited $rc: $(printf '%s' "$out" | tail -2 | tr '\n' ' ')"; fi
  done
fi

# 4. scripts printing `ok - ...` / `not ok - ...` lines: command line and REPL (cli.sh), the
#    cost of AD in primitive operations (cost.sh), the embedding example (embed.sh)
for t in tests/*.sh; do
  [ -x "$t" ] && [ "$t" != tests/run.sh ] || continue
  out=$("$t" "$V" 2>&1)
  p=$(printf '%s\n' "$out" | grep -c '^ok ')
  f=$(printf '%s\n' "$out" | grep -c '^not ok ')
  printf '%s\n' "$out" | grep -E '^(not ok |# )' | head -40
  while IFS= read -r l; do recap+=("$t: $l"); done < <(printf '%s\n' "$out" | grep -E '^not ok ' | head -5)
  passed=$((passed + p)); failed=$((failed + f))
  printf '%-50s %s passed, %s failed\n' "$t" "$p" "$f"
done

for r in "${recap[@]}"; do echo "FAILED ($VLAD_TIER) $r"; done
echo "$VLAD_TIER: $passed passed, $failed failed"
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
