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
