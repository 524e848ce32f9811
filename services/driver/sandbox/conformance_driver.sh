#!/bin/bash
# berth-driver-sandbox as the conformance test runs it: with the berth-proxy
# conformance_test.sh started (BERTH_TEST_PROXY_SOCKET), the cgroup parent
# the suite's wrapper chose (BERTH_TEST_CGROUP_PARENT), and the agent, shim
# and init from the test's runfiles.
dir="$(cd "$(dirname "$0")" && pwd)"
root="$dir/../../.."
exec "$dir/berth-driver-sandbox" \
  --proxy_socket="${BERTH_TEST_PROXY_SOCKET:?}" \
  --agent_path="$root/services/agent/berth-agent" \
  --shim_path="$root/services/shim/berth-shim" \
  --init_path="$root/services/driver/exec/init/berth-task-init" \
  --cgroup_parent="${BERTH_TEST_CGROUP_PARENT:-/berth-sandbox}" "$@"
