#!/bin/bash
# Each check of the contract berth-node relies on (node_contract_checks.cc,
# and checks.cc's inspect_handle_recovers) and each isolation check
# (isolation_checks.cc) fails when it should:
# against the example Python driver broken in that one rule
# (testing/broken_python_driver.py, BERTH_BROKEN_DRIVER_BREAKS; for the
# isolation checks, claims_isolation: it claims what it does not enforce),
# the suite, filtered to that check, exits 1 with a FAIL line for it.
#
# usage: conformance_broken_contract_test.sh DRIVER_TEST SUITE BROKEN_DRIVER PYTHON_DRIVER
set -u
driver_test="$1" suite="$2" broken="$3" python_driver="$4"

if [[ $(id -u) -ne 0 ]]; then
  echo "SKIPPED: network_group needs root to make a network namespace"
  exit 0
fi
# check rule
cases=(
  "task_dir_as_handed_over own_cwd"
  "logs_where_the_node_reads logs_elsewhere"
  "logs_rotation no_rotation"
  "work_dir ignore_work_dir"
  "network_group ignore_netns"
  "exit_while_driver_down exit_lost_while_down"
  "many_tasks_waited small_pool"
  "shutdown_with_calls_open slow_shutdown"
  "isolation_own_root claims_isolation"
  "isolation_mounts claims_isolation"
  "isolation_capability_set claims_isolation"
  "isolation_no_new_privileges claims_isolation"
  "isolation_seccomp claims_isolation"
  "isolation_masked_paths claims_isolation"
  "isolation_user_namespaces claims_isolation"
  "isolation_privileged claims_isolation"
  "inspect_handle_recovers foreign_inspect_handle"
  "inspect_handle_recovers unrecoverable_inspect_handle"
)
status=0
for c in "${cases[@]}"; do
  read -r check rule <<<"$c"
  echo "=== $check against a driver breaking $rule"
  if ! BERTH_BROKEN_DRIVER_BREAKS="$rule" "$driver_test" --expect=fail \
      --python_driver="$python_driver" "--line=FAIL $check: " \
      "$suite" "$broken" -- --filter="$check"; then
    echo "FAILED: $check did not fail against a driver breaking $rule" >&2
    status=1
  fi
done
exit "$status"
