#!/bin/bash
# Smoke test of a benchmark binary: runs every benchmark in it once, briefly,
# and checks that it works, never how fast it is:
# - the binary exits 0 (it exits 1 when a benchmark reported an error);
# - each benchmark named after the binary ran and reported no error;
# - it printed its ratios, each one measured.
#
# usage: smoke_test.sh BINARY BENCHMARK_NAME...
set -u

binary="$1"
shift
out="${TEST_TMPDIR:-$(mktemp -d)}/benchmark_output.txt"

fail() {
  echo "FAIL: $*"
  echo "---- output of $binary ----"
  cat "$out"
  exit 1
}

"$binary" --benchmark_min_time=0.001 --benchmark_repetitions=1 >"$out" 2>&1
code=$?
[[ $code -eq 0 ]] || fail "$binary exited with code $code"
for name in "$@"; do
  # The console prints "NAME/real_time", "NAME/manual_time" or "NAME ".
  grep -q -E -- "^${name}(/[a-z_]+)? " "$out" || fail "benchmark $name did not run"
done
if grep -q "ERROR OCCURRED" "$out"; then fail "a benchmark reported an error"; fi
grep -q "^ratio " "$out" || fail "no ratio was printed"
if grep -q "^ratio .*not measured" "$out"; then fail "a ratio was not measured"; fi
cat "$out"
echo "PASS: $# benchmarks ran; $(grep -c '^ratio ' "$out") ratios printed"
