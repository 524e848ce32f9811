#!/bin/bash
# Runs berth-driver-conformance against a driver and checks its report.
#
# usage: conformance_driver_test.sh [OPTION...] SUITE PLUGIN [-- SUITE_FLAG...]
#   --expect=pass        exit 0 and "N passed, 0 failed, N skipped" last
#                        (the default)
#   --expect=fail        exit 1 and at least one failure
#   --line=PREFIX        a report line must start with PREFIX (repeatable)
#   --no_skips           no check may be skipped (a driver with every
#                        capability)
#   --cgroup_parent=P    for a driver making cgroups: P (made unique with
#                        this shell's pid) is exported as
#                        BERTH_TEST_CGROUP_PARENT for the driver's wrapper,
#                        no cgroup P/* may be left under /sys/fs/cgroup/*,
#                        and P itself is removed at the end
#   --python_driver=PATH the example Python driver: PYTHONPATH is set to the
#                        checked-in stubs, and BERTH_BROKEN_DRIVER_WRAPS to
#                        PATH (for testing/broken_python_driver.py)
# Also checks that the suite left nothing behind: its temporary directory is
# gone and no process runs in it or with it in its environment.
set -u

expect=pass
lines=()
python_driver=""
no_skips=0
cgroup_parent=""
while [[ $# -gt 0 && "$1" == --* ]]; do
  case "$1" in
    --expect=*) expect="${1#--expect=}" ;;
    --line=*) lines+=("${1#--line=}") ;;
    --python_driver=*) python_driver="${1#--python_driver=}" ;;
    --no_skips) no_skips=1 ;;
    --cgroup_parent=*) cgroup_parent="${1#--cgroup_parent=}-$$" ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
  shift
done
if [[ $# -lt 2 ]]; then
  echo "usage: $0 [OPTION...] SUITE PLUGIN [-- SUITE_FLAG...]" >&2
  exit 2
fi
suite="$1"
plugin="$2"
shift 2
[[ "${1:-}" == "--" ]] && shift

fail() {
  echo "FAILED: $*" >&2
  echo "--- the suite's stderr ---" >&2
  cat "$stderr_file" >&2
  exit 1
}

if [[ -n "$python_driver" ]]; then
  # The checked-in stubs: from the runfiles once //api exports them to this
  # package, else from the source tree the driver's runfile links to.
  runfiles="${RUNFILES_DIR:-${TEST_SRCDIR:-}}"
  stubs="$runfiles/${TEST_WORKSPACE:-berth}/api/gen/python"
  if [[ ! -d "$stubs/berth" ]]; then
    stubs="$(dirname "$(realpath "$python_driver")")/../../../api/gen/python"
  fi
  [[ -d "$stubs/berth" ]] || { echo "no Python stubs at $stubs" >&2; exit 1; }
  export PYTHONPATH="$(realpath "$stubs")"
  export BERTH_BROKEN_DRIVER_WRAPS="$python_driver"
fi

if [[ -n "$cgroup_parent" ]]; then
  export BERTH_TEST_CGROUP_PARENT="$cgroup_parent"
  trap 'rmdir /sys/fs/cgroup/*"$cgroup_parent" 2>/dev/null' EXIT
fi

out_dir="${TEST_UNDECLARED_OUTPUTS_DIR:-${TEST_TMPDIR:-/tmp}}"
stdout_file="$out_dir/report.txt"
stderr_file="$out_dir/stderr.txt"
"$suite" --plugin="$plugin" --plugin_logs "$@" >"$stdout_file" \
  2>"$stderr_file"
status=$?

echo "--- berth-driver-conformance --plugin=$plugin${*:+ $*} (exit $status) ---"
cat "$stdout_file"

summary_re='^[0-9]+ passed, [0-9]+ failed, [0-9]+ skipped$'
last="$(tail -n 1 "$stdout_file")"
[[ "$last" =~ $summary_re ]] || fail "the last line is not a summary: $last"
# Every line but the summary is a check's result.
if grep -vE "$summary_re" "$stdout_file" | grep -qvE '^(PASS [a-z0-9_]+|(FAIL|SKIP) [a-z0-9_]+: .+)$'; then
  fail "a report line is neither PASS, FAIL nor SKIP"
fi
failed="$(echo "$last" | sed -E 's/.* ([0-9]+) failed.*/\1/')"
case "$expect" in
  pass)
    [[ $status -eq 0 ]] || fail "exit $status, want 0"
    [[ "$failed" -eq 0 ]] || fail "$failed checks failed"
    ;;
  fail)
    [[ $status -eq 1 ]] || fail "exit $status, want 1"
    [[ "$failed" -gt 0 ]] || fail "no check failed"
    ;;
  *) echo "bad --expect=$expect" >&2; exit 2 ;;
esac
if [[ $no_skips -eq 1 ]] && grep -q '^SKIP ' "$stdout_file"; then
  fail "checks were skipped: $(grep '^SKIP ' "$stdout_file" | tr '\n' ' ')"
fi
for prefix in "${lines[@]+"${lines[@]}"}"; do
  awk -v p="$prefix" 'index($0, p) == 1 { found = 1 } END { exit !found }' \
    "$stdout_file" || fail "no report line starts with: $prefix"
done

# Nothing left behind.
work_dir="$(sed -nE 's/.*temporary directory (\/tmp\/berth-[A-Za-z0-9]+).*/\1/p' "$stderr_file" | head -n 1)"
[[ -n "$work_dir" ]] || fail "the suite did not say its temporary directory"
[[ ! -e "$work_dir" ]] || fail "the suite left $work_dir behind"
for proc in /proc/[0-9]*; do
  cwd="$(readlink "$proc/cwd" 2>/dev/null || true)"
  if [[ "$cwd" == "$work_dir"* ]] ||
     tr '\0' '\n' <"$proc/environ" 2>/dev/null | grep -qF "$work_dir"; then
    fail "process ${proc#/proc/} ($(tr '\0' ' ' <"$proc/cmdline")) is left from the suite"
  fi
done
if [[ -n "$cgroup_parent" ]]; then
  for dir in /sys/fs/cgroup/*"$cgroup_parent"/*/; do
    [[ -d "$dir" ]] || continue
    fail "the driver left the cgroup $dir behind"
  done
fi
echo "PASSED"
