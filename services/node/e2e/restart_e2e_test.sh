#!/bin/bash
# berth-node whose state is gone while its plugins and tasks still run (issue
# 18, point 4): the node's database is wiped under a running node, its exec
# and sandbox plugins and their tasks; the node is killed with -9 and started
# again. It must become healthy (its plugins' sockets were still served by
# the old plugins, which it has no record of: it stops them and launches
# fresh ones), leave no process, cgroup or shim of the tasks it has no record
# of, and run new tasks.
#
# The network of a task it has no record of (berth-netns's namespace, veth
# and rules) is removed too, once berth-netns answers.
#
# usage: restart_e2e_test.sh NODE CLI DRIVER STATS PROXY SANDBOX AGENT SHIM INIT NETNS
set -u
node_bin=$(readlink -f "$1") cli=$(readlink -f "$2") driver_bin=$(readlink -f "$3")
stats_bin=$(readlink -f "$4") proxy_bin=$(readlink -f "$5") sandbox_bin=$(readlink -f "$6")
agent_bin=$(readlink -f "$7") shim_bin=$(readlink -f "$8") init_bin=$(readlink -f "$9")
netns_bin=$(readlink -f "${10}")
export PATH="/usr/sbin:/sbin:$PATH"

if [[ $(id -u) -ne 0 ]]; then
  echo "SKIPPED: needs root (namespaces, cgroups)"
  exit 0
fi

tag="r$((RANDOM % 90000 + 10000))"
dir="$(mktemp -d /tmp/berth-XXXXXX)"
run="$dir/run" state="$dir/state"
subnet="10.215.$((RANDOM % 200 + 20)).0/24"
# shellcheck source=services/node/e2e/e2e_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/e2e_lib.sh"

test_cgroups() {
  find /sys/fs/cgroup/*/"berth-$tag" /sys/fs/cgroup/*/"berth-$tag-sandbox" \
    /sys/fs/cgroup/"berth-$tag" /sys/fs/cgroup/"berth-$tag-sandbox" \
    -mindepth 1 -maxdepth 1 -type d 2>/dev/null
}
# Live (not zombie) processes whose command line mentions the test's dir.
test_pids() {
  local pid state
  for pid in $(pgrep -f -- "$dir/"); do
    state=$(awk '{ sub(/^.*\) /, ""); print $1 }' "/proc/$pid/stat" 2>/dev/null)
    [[ -n $state && $state != Z ]] && echo "$pid"
  done
}
alive() { [[ -d /proc/$1 ]] && [[ $(awk '{ sub(/^.*\) /, ""); print $1 }' "/proc/$1/stat" 2>/dev/null) != Z ]]; }

cleanup() {
  for task in $(berth ps -a -q 2>/dev/null); do berth rm -f "$task" >/dev/null 2>&1; done
  stop_pid "${node_pid:-}"
  stop_pid "${stats_pid:-}"
  stop_pid "${proxy_pid:-}"
  stop_pid "${netns_pid:-}"
  ip link del "b$tag" 2>/dev/null
  for ns in "$dir"/netns/*; do [[ -e $ns ]] && umount -l "$ns" 2>/dev/null; done
  pkill -9 -f "$dir/" 2>/dev/null
  for c in $(test_cgroups); do
    for p in $(cat "$c"/cgroup.procs 2>/dev/null); do kill -9 "$p" 2>/dev/null; done
  done
  sleep 0.2
  awk -v d="$dir/" 'index($5, d) == 1 { print $5 }' /proc/self/mountinfo | sort -r |
    xargs -r -n1 umount -l 2>/dev/null
  remove_test_cgroups
  rm -rf --one-file-system "$dir"
}
trap cleanup EXIT

start_node() {
  "$node_bin" --runtime_dir="$run" --state_dir="$state" \
    --images_socket=none --plugin_config="$dir/plugins.json" >>"$dir/node.log" 2>&1 &
  node_pid=$!
}

mkdir -p "$run" "$state"
# Sockets go only in a runtime directory closed to others.
chmod 0700 "$run"
chmod 0755 "$dir"
write_exec_and_sandbox_plugins
"$stats_bin" --runtime_dir="$run" >>"$dir/stats.log" 2>&1 &
stats_pid=$!
"$proxy_bin" --runtime_dir="$run" --state_dir="$state" >>"$dir/proxy.log" 2>&1 &
proxy_pid=$!
wait_for 100 test -S "$run/proxy.sock" || { echo "FAILED: berth-proxy did not start:"; cat "$dir/proxy.log"; exit 1; }
start_netns || { echo "FAILED: berth-netns did not start:"; cat "$dir/netns.log"; exit 1; }
start_node
wait_for 300 berth node status ||
  { echo "FAILED: berth-node is not healthy:"; tail -30 "$dir/node.log"; exit 1; }

ids=()
for driver in exec exec sandbox; do
  net=host
  ((${#ids[@]} == 0)) && net=bridge
  id=$(berth run -d --net "$net" --driver "$driver" -- /bin/sleep 1000) ||
    { echo "FAILED: berth run -d --driver $driver: $id"; tail -20 "$dir/node.log"; exit 1; }
  ids+=("$id")
done
for id in "${ids[@]}"; do
  wait_for 100 bash -c "[[ \$('$cli' --socket='$run/node.sock' ps -q -f id=$id) ]]" ||
    fail "task $id runs" "it is not running: $(berth ps -a 2>&1)"
done
old_netns=$(ls "$dir/netns" 2>/dev/null | wc -l)
((old_netns >= 1)) || fail "the bridge task's namespace" "none in $dir/netns"
old_plugins=$(pgrep -f -- "--state_dir=$state/(exec|sandbox)" | paste -sd ' ')
old_cgroups=$(test_cgroups | wc -l)
old_tasks=$(for c in $(test_cgroups); do cat "$c"/cgroup.procs; done | sort -u | paste -sd ' ')
old_shims=$(pgrep -f -- "--task_log_dir=$state/node/tasks/" | paste -sd ' ')
echo "before: plugins $old_plugins; $old_cgroups task cgroups; task processes $old_tasks; shims ${old_shims:-none}"
[[ $(wc -w <<<"$old_plugins") -eq 2 ]] || fail "two plugins run" "found '$old_plugins'"
((old_cgroups >= 3)) || fail "three task cgroups" "found $old_cgroups"
[[ -n $old_tasks ]] || fail "task processes" "none found in the task cgroups"

# The node dies; its state goes with it; the plugins and tasks run on.
kill -9 "$node_pid"
wait "$node_pid" 2>/dev/null
rm -f "$state"/node/state.db*
start_node
if wait_for 300 berth node status; then
  pass "the restarted node is healthy"
else
  fail "the restarted node is healthy" "$(berth node status 2>&1 | tail -5)"
  tail -30 "$dir/node.log"
fi
for pid in $old_plugins; do
  alive "$pid" && fail "the old plugins are stopped" "pid $pid runs: $(tr '\0' ' ' </proc/$pid/cmdline)"
done
new_plugins=$(pgrep -f -- "--state_dir=$state/(exec|sandbox)" | paste -sd ' ')
[[ $(wc -w <<<"$new_plugins") -eq 2 ]] && pass "two fresh plugins run ($new_plugins)" ||
  fail "two fresh plugins run" "found '$new_plugins'"
left=""
for pid in $old_tasks $old_shims; do alive "$pid" && left="$left $pid"; done
[[ -z $left ]] && pass "no process of the unrecorded tasks is left" ||
  fail "no process of the unrecorded tasks is left" "pids$left: $(ps -o pid,args -p "${left# }" 2>&1 | tail -n +2)"
[[ $(test_cgroups | wc -l) -eq 0 ]] && pass "no task cgroup is left" ||
  fail "no task cgroup is left" "$(test_cgroups)"
[[ -z $(berth ps -a -q 2>&1) ]] && pass "the node lists no task" || fail "the node lists no task" "$(berth ps -a 2>&1)"
if wait_for 300 bash -c "[[ -z \$(ls '$dir/netns') ]]"; then
  pass "the unrecorded task's network namespace is removed"
else
  fail "the unrecorded task's network namespace is removed" "$(ls "$dir/netns")"
fi
grep -q "has no record of" "$dir/node.log" && pass "the node logged what it removed" ||
  fail "the node logged what it removed" "no 'has no record of' line"

for driver in exec sandbox; do
  out=$(timeout 60 "$cli" --socket="$run/node.sock" run --rm --net host --driver "$driver" -- /bin/echo "hello $driver" 2>&1)
  [[ $out == "hello $driver" ]] && pass "a new $driver task runs" || fail "a new $driver task runs" "$out"
done

if ((failures > 0)); then
  echo "--- node log"; tail -40 "$dir/node.log"
  echo "FAILED: $failures checks"
  exit 1
fi
echo "PASSED"
