#!/bin/bash
# A driver that cannot be launched fails the suite once, with the reason,
# not once per check: one FAIL line naming the plugin's exit and its stderr,
# the checks that need no plugin still run.
#
# usage: conformance_launch_failure_test.sh SUITE PLUGIN
set -u
suite="$1" plugin="$2"
out="${TEST_TMPDIR:-/tmp}/report.txt"
"$suite" --plugin="$plugin" >"$out" 2>/dev/null
status=$?
cat "$out"
fail() { echo "FAILED: $*" >&2; exit 1; }
[[ $status -eq 1 ]] || fail "exit $status, want 1"
[[ $(grep -c '^FAIL ' "$out") -eq 1 ]] || fail "want exactly one FAIL line"
grep -q '^FAIL plugin_launch: .*checks that need it were not run.*exited with code 3.*cannot start (a test double)' "$out" ||
  fail "the FAIL line does not give the reason"
grep -q '^PASS cookie_refused$' "$out" || fail "cookie_refused (no plugin needed) did not run"
[[ $(tail -n 1 "$out") == "1 passed, 1 failed, 0 skipped" ]] || fail "summary: $(tail -n 1 "$out")"
echo PASSED
