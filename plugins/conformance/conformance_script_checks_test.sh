#!/bin/bash
# conformance_driver_test.sh's own checks fail when they should:
#   --no_skips against a driver that lacks exec_tty (the broken Python
#   driver, whose exec_streaming_tty check is skipped);
#   --cgroup_parent against a driver that leaves a cgroup behind.
# usage: conformance_script_checks_test.sh SCRIPT SUITE MOCK_DRIVER
#        PYTHON_DRIVER BROKEN_PYTHON_DRIVER LEAKY_WRAPPER
set -u
script="$1" suite="$2" mock="$3" python_driver="$4" broken="$5" leaky="$6"
failures=0

expect_failure() {
  local name="$1" want="$2"
  shift 2
  local output
  output="$("$@" 2>&1)"
  local status=$?
  if [[ $status -eq 0 ]]; then
    echo "FAIL $name: the script passed"
    failures=$((failures + 1))
  elif ! grep -qF "$want" <<<"$output"; then
    echo "FAIL $name: exit $status without \"$want\":"
    echo "$output" | tail -n 5
    failures=$((failures + 1))
  else
    echo "PASS $name: $(grep -F "$want" <<<"$output" | head -n 1)"
  fi
}

expect_failure no_skips "checks were skipped" \
  "$script" --expect=pass --no_skips --python_driver="$python_driver" \
  "$suite" "$broken" -- --filter=exec_streaming_tty

if [[ -w /sys/fs/cgroup/pids ]]; then
  export BERTH_LEAKY_DRIVER_WRAPS="$(realpath "$mock")"
  expect_failure cgroup_left_behind "left the cgroup" \
    "$script" --expect=pass --cgroup_parent=/berth-leak-check \
    "$suite" "$leaky" -- --filter=plugin_info
  rmdir /sys/fs/cgroup/pids/berth-leak-check-*/left-behind \
    /sys/fs/cgroup/pids/berth-leak-check-* 2>/dev/null
else
  echo "SKIP cgroup_left_behind: /sys/fs/cgroup/pids is not writable here"
fi
exit $((failures > 0))
