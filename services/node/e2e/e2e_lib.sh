# Helpers of the node's end-to-end tests, sourced by each. The test sets
# $cli (the berth binary) and $run (the runtime directory) before calling
# them, and reads $failures at the end.

failures=0

pass() { echo "PASS $1"; }
fail() { echo "FAIL $1: $2"; failures=$((failures + 1)); }
berth() { "$cli" --socket="$run/node.sock" "$@"; }

# Waits up to $1 tenths of a second for the command in $2... to succeed.
wait_for() {
  local tries=$1; shift
  for _ in $(seq "$tries"); do
    "$@" >/dev/null 2>&1 && return 0
    sleep 0.1
  done
  return 1
}

# Starts berth-netns ($netns_bin) on $run and $state, with its namespaces in
# $dir/netns, its CNI configuration in $dir/cni, and a bridge network of the
# test's own: network berth-$tag, bridge b$tag, subnet $subnet, namespaces
# named berth-$tag-*. Sets $netns_pid; fails unless its socket appears.
start_netns() {
  "$netns_bin" --runtime_dir="$run" --state_dir="$state" \
    --netns_dir="$dir/netns" --namespace_prefix="berth-$tag-" \
    --cni_config_dir="$dir/cni" --bridge_network="berth-$tag" \
    --bridge_name="b$tag" --bridge_subnet="$subnet" \
    >>"$dir/netns.log" 2>&1 &
  netns_pid=$!
  wait_for 100 test -S "$run/netns.sock"
}

# task_field TASK PYTHON-EXPR: the expression of `t`, the task as
# `berth inspect` prints it (JSON).
task_field() {
  berth inspect "$1" | /usr/bin/python3 -c "import json,sys; t=json.load(sys.stdin); print($2)"
}

# Stops the process $1 (a pid, or empty for none) and reaps it.
stop_pid() {
  [[ -n ${1:-} ]] && kill "$1" 2>/dev/null && wait "$1" 2>/dev/null
  return 0
}

# Removes the cgroups of the test's drivers (--cgroup_parent=/berth-$tag...)
# on every hierarchy.
remove_test_cgroups() {
  for c in /sys/fs/cgroup/*/"berth-$tag"* /sys/fs/cgroup/"berth-$tag"*; do
    [[ -d $c ]] && find "$c" -depth -type d -exec rmdir {} \; 2>/dev/null
  done
  return 0
}

# Writes $dir/plugins.json: the exec driver ($driver_bin) and the sandbox
# driver ($sandbox_bin, with $agent_bin, $shim_bin, $init_bin), their
# cgroups below /berth-$tag, their state in $state.
write_exec_and_sandbox_plugins() {
  cat >"$dir/plugins.json" <<JSON
{"plugins": [{"name": "exec", "binary": "$driver_bin",
  "args": ["--cgroup_parent=/berth-$tag", "--state_dir=$state/exec"]},
 {"name": "sandbox", "binary": "$sandbox_bin",
  "args": ["--cgroup_parent=/berth-$tag-sandbox", "--state_dir=$state/sandbox",
           "--agent_path=$agent_bin", "--shim_path=$shim_bin", "--init_path=$init_bin"]}]}
JSON
}
