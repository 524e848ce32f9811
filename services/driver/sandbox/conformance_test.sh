#!/bin/bash
# Starts a berth-proxy on a temporary runtime directory, then runs the
# driver conformance suite (conformance_driver_test.sh) against
# berth-driver-sandbox through conformance_driver.sh, which reaches the proxy
# through BERTH_TEST_PROXY_SOCKET. The proxy is started here, not by the
# plugin, so that it carries nothing of the suite's directory and outlives
# restarts of the plugin.
#
# The suite runs once per check (--filter), on the checks listed in
# `checks` ("shutdown" also runs shutdown_with_calls_open). The isolation_*
# checks may not be skipped (each is skipped when its claim is not made);
# isolation_user_namespaces maps the task's root to --userns_base, a range
# of its own (the exec driver's test takes the suite's default, 3400000).
#
# usage: conformance_test.sh PROXY CONFORMANCE_DRIVER_TEST SUITE PLUGIN
set -u
proxy="$1"
driver_test="$2"
suite="$3"
plugin="$4"
checks=(
  cookie_refused health plugin_info api_versions config_schema capabilities
  fingerprint start_wait_inspect exit_code exit_signal wait_twice stop_signal
  stop_timeout_kill destroy signal_task task_events exec_task
  exec_streaming_output exec_streaming_stdin exec_streaming_tty
  exec_streaming_100mb
  unknown_task_not_found missing_command shutdown
  task_stats recover_task inspect_handle_recovers
  task_dir_as_handed_over logs_where_the_node_reads logs_rotation work_dir
  network_host network_group exit_while_driver_down many_tasks_waited
  isolation_own_root isolation_mounts isolation_capability_set
  isolation_no_new_privileges isolation_seccomp isolation_masked_paths
  isolation_user_namespaces isolation_privileged
  attach_tty attach_stdin
)

if [[ $(id -u) -ne 0 ]]; then
  echo "SKIPPED: berth-driver-sandbox needs root to make namespaces"
  exit 0
fi
# Short: Unix socket paths are limited to 108 bytes.
dir="$(mktemp -d /tmp/berth-XXXXXX)"
"$proxy" --runtime_dir="$dir/run" --state_dir="$dir/state" \
  --shim_timeout=10s 2>"${TEST_UNDECLARED_OUTPUTS_DIR:-$dir}/proxy.log" &
proxy_pid=$!
cleanup() {
  kill "$proxy_pid" 2>/dev/null
  wait "$proxy_pid" 2>/dev/null
  rm -rf "$dir"
}
trap cleanup EXIT
for _ in $(seq 1 200); do
  [[ -S "$dir/run/proxy.sock" ]] && break
  kill -0 "$proxy_pid" 2>/dev/null || { echo "berth-proxy exited" >&2; exit 1; }
  sleep 0.05
done
[[ -S "$dir/run/proxy.sock" ]] || { echo "no $dir/run/proxy.sock" >&2; exit 1; }
export BERTH_TEST_PROXY_SOCKET="$dir/run/proxy.sock"
status=0
for check in "${checks[@]}"; do
  no_skips=()
  [[ "$check" == isolation_* ]] && no_skips=(--no_skips)
  if ! "$driver_test" --expect=pass "${no_skips[@]}" \
    --cgroup_parent=/berth-sandbox-conformance \
    "$suite" "$plugin" -- --filter="$check" --userns_base=3600000
  then
    echo "FAILED: check $check" >&2
    status=1
  fi
done
exit "$status"
