#!/bin/bash
# Third-party drivers under a real berth-node (plugins/DRIVERS.md): the C++
# mock driver and the Python example driver, loaded through a plugins.json
# (the Python one with "env": PYTHONPATH for its stubs), each run through
# `berth`: output and exit code, logs, exec, stats, stop, network modes, and
# recovery across a kill -9 of the node (plugins reattached) and a SIGTERM
# of the node (plugins shut down, relaunched, tasks recovered with
# RecoverTask, one of them having exited meanwhile).
#
# usage: third_party_driver_test.sh NODE CLI NETNS MOCK_DRIVER PYTHON_DRIVER
set -u
node_bin=$(readlink -f "$1") cli=$(readlink -f "$2") netns_bin=$(readlink -f "$3")
mock_bin=$(readlink -f "$4") python_bin=$(readlink -f "$5")
export PATH="/usr/sbin:/sbin:$PATH"

if [[ $(id -u) -ne 0 ]]; then
  echo "SKIPPED: needs root (network namespaces through berth-netns)"
  exit 0
fi

# The Python stubs: from the runfiles, else from the source tree the
# driver's runfile links to.
runfiles="${RUNFILES_DIR:-${TEST_SRCDIR:-}}"
stubs="$runfiles/${TEST_WORKSPACE:-berth}/api/gen/python"
[[ -d $stubs/berth ]] || stubs="$(dirname "$(realpath "$5")")/../../../api/gen/python"
[[ -d $stubs/berth ]] || { echo "FAILED: no Python stubs at $stubs"; exit 1; }
stubs=$(realpath "$stubs")

tag="t$((RANDOM % 90000 + 10000))"
dir="$(mktemp -d /tmp/berth-XXXXXX)"
run="$dir/run" state="$dir/state"
subnet="10.213.$((RANDOM % 200 + 20)).0/24"
# shellcheck source=services/node/e2e/e2e_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/e2e_lib.sh"

plugins_up() {
  berth node status --json | /usr/bin/python3 -c '
import json, sys
up = {p["name"] for p in json.load(sys.stdin)["plugins"] if p.get("healthy") and p.get("pid")}
sys.exit(0 if {"mock", "python"} <= up else 1)'
}
start_node() {
  "$node_bin" --runtime_dir="$run" --state_dir="$state" \
    --plugin_config="$dir/plugins.json" --stats_socket=none \
    --proxy_socket=none --images_socket=none >>"$dir/node.log" 2>&1 &
  node_pid=$!
  wait_for 150 plugins_up
}
plugin_pid() {  # plugin_pid NAME
  berth node status --json | /usr/bin/python3 -c "
import json, sys
print([p.get('pid', 0) for p in json.load(sys.stdin)['plugins'] if p['name'] == '$1'][0])"
}
state_of() { task_field "$1" 't["state"]' 2>/dev/null; }
exited() { [[ $(state_of "$1") == TASK_STATE_EXITED ]]; }
running() { [[ $(state_of "$1") == TASK_STATE_RUNNING ]]; }

cleanup() {
  for task in $(berth ps -a -q 2>/dev/null); do berth rm -f "$task" >/dev/null 2>&1; done
  [[ -n ${node_pid:-} ]] && kill "$node_pid" 2>/dev/null && wait "$node_pid" 2>/dev/null
  [[ -n ${netns_pid:-} ]] && kill "$netns_pid" 2>/dev/null && wait "$netns_pid" 2>/dev/null
  pkill -9 -f "$dir/" 2>/dev/null
  ip link del "b$tag" 2>/dev/null
  umount "$dir/netns" 2>/dev/null
  rm -rf "$dir"
}
trap cleanup EXIT

mkdir -p "$state"
install -d -m 0750 "$run"  # a runtime directory open to others is refused
cat >"$dir/plugins.json" <<JSON
{"plugins": [
  {"name": "mock", "binary": "$mock_bin"},
  {"name": "python", "binary": "$python_bin", "env": {"PYTHONPATH": "$stubs"}}
]}
JSON
start_netns || { echo "FAILED: berth-netns did not start:"; cat "$dir/netns.log"; exit 1; }
start_node || { echo "FAILED: berth-node did not start its plugins:"; cat "$dir/node.log"; exit 1; }

for d in mock python; do
  # --- output on the right streams and the exit code.
  out=$(berth run --rm --driver "$d" --net host -- /bin/sh -c 'echo out; echo err >&2; exit 3' 2>"$dir/$d.err")
  code=$?
  if [[ $code -eq 3 && $out == out && $(cat "$dir/$d.err") == err ]]; then
    pass "${d}_output_and_exit_code"
  else
    fail "${d}_output_and_exit_code" "exit $code, stdout '$out', stderr '$(cat "$dir/$d.err")'"
  fi

  # --- logs of a running task, all and the last line.
  berth run -d --driver "$d" --net host --name "$d-web" -- \
    /bin/sh -c 'for i in 1 2 3; do echo line$i; done; exec sleep 60' >/dev/null
  wait_for 50 bash -c "$(declare -f berth); cli='$cli' run='$run'; berth logs $d-web | grep -q line3"
  logs=$(berth logs "$d-web" 2>&1) tail=$(berth logs --tail 1 "$d-web" 2>&1)
  if [[ $logs == $'line1\nline2\nline3' && $tail == line3 ]]; then
    pass "${d}_logs"
  else
    fail "${d}_logs" "logs '$logs', --tail 1 '$tail'"
  fi

  # --- exec: output and exit code, in the task's directory.
  out=$(berth exec "$d-web" -- /bin/sh -c 'echo in-exec; exit 4' 2>&1)
  code=$?
  [[ $code -eq 4 && $out == in-exec ]] && pass "${d}_exec" ||
    fail "${d}_exec" "exit $code, output '$out'"

  # --- stats through the node from the driver.
  stats=$(berth stats --no-stream --json "$d-web" 2>&1)
  [[ $stats == *memory* && $stats == *cpu* ]] && pass "${d}_stats" ||
    fail "${d}_stats" "$stats"

  # --- stop: the task ends by SIGTERM.
  berth stop --timeout 5 "$d-web" >/dev/null 2>&1
  if exited "$d-web" && [[ $(task_field "$d-web" 't["exitResult"].get("signal", 0)') == 15 ]]; then
    pass "${d}_stop"
  else
    fail "${d}_stop" "$(berth inspect "$d-web" 2>&1)"
  fi
  id=$(task_field "$d-web" 't["id"]')
  berth rm "$d-web" >/dev/null 2>&1
  [[ ! -e $state/node/tasks/$id ]] && pass "${d}_rm_leaves_nothing" ||
    fail "${d}_rm_leaves_nothing" "$(find "$state/node/tasks/$id" | head)"
done

# --- network modes: the Python driver joins the namespace berth-netns made
# (--net none: a namespace of its own with only lo); the mock cannot join one
# and says so before anything is made.
host_ns=$(readlink /proc/self/ns/net)
# (/proc/net/dev lists the interfaces of the reader's namespace.)
out=$(berth run --rm --driver python --net none -- /bin/sh -c 'readlink /proc/self/ns/net; tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d " "' 2>&1)
if [[ $? -eq 0 && $out == net:* && ${out%%$'\n'*} != "$host_ns" && ${out#*$'\n'} == lo ]]; then
  pass python_joins_the_tasks_namespace
else
  fail python_joins_the_tasks_namespace "host $host_ns, task: $out"
fi
err=$(berth run --driver mock --net none --name mock-net -- /bin/true 2>&1)
code=$?
# shellcheck disable=SC2053
if [[ $code -ne 0 && $err == "berth: spec.network: driver mock cannot join a network namespace"* ]] &&
   ! berth inspect mock-net >/dev/null 2>&1; then
  pass mock_refuses_a_namespace
else
  fail mock_refuses_a_namespace "exit $code: $err"
fi

# --- recovery. kill -9 of the node: the plugins keep running and are
# reattached; a task that exits meanwhile is recorded with its real code.
for d in mock python; do
  berth run -d --driver "$d" --net host --name "$d-live" -- /bin/sleep 300 >/dev/null
  berth run -d --driver "$d" --net host --name "$d-ends" -- /bin/sh -c 'sleep 2; exit 6' >/dev/null
done
wait_for 50 running python-ends
before_mock=$(plugin_pid mock) before_python=$(plugin_pid python)
kill -9 "$node_pid"; wait "$node_pid" 2>/dev/null
sleep 3  # the -ends tasks exit while the node is away
start_node || fail node_restart "berth-node did not come back"
for d in mock python; do
  wait_for 100 exited "$d-ends"
  if running "$d-live" && exited "$d-ends" &&
     [[ $(task_field "$d-ends" 't["exitResult"].get("exitCode", 0)') == 6 ]]; then
    pass "${d}_node_kill9_recovered"
  else
    fail "${d}_node_kill9_recovered" "live: $(state_of "$d-live"); ends: $(berth inspect "$d-ends" 2>&1)"
  fi
done
[[ $(plugin_pid mock) == "$before_mock" && $(plugin_pid python) == "$before_python" ]] &&
  pass plugins_reattached ||
  fail plugins_reattached "pids mock $before_mock → $(plugin_pid mock), python $before_python → $(plugin_pid python)"

# A reattached Python driver has lost the stderr pipe of the node it was
# started by: it still answers (and logs without dying).
berth run --rm --driver python --net host -- /bin/true >/dev/null 2>&1 &&
  pass python_answers_after_reattach || fail python_answers_after_reattach "run failed"

# SIGTERM of the node: it shuts its plugins down (tasks keep running); the
# next node launches them again and recovers the tasks with RecoverTask,
# one of which exits while no driver runs.
for d in mock python; do
  berth run -d --driver "$d" --net host --name "$d-ends2" -- /bin/sh -c 'sleep 2; exit 9' >/dev/null
done
kill -TERM "$node_pid"; wait "$node_pid"
node_code=$?
sleep 3
start_node || fail node_restart "berth-node did not come back"
for d in mock python; do
  wait_for 100 exited "$d-ends2"
  if [[ $node_code -eq 0 ]] && running "$d-live" && exited "$d-ends2" &&
     [[ $(task_field "$d-ends2" 't["exitResult"].get("exitCode", 0)') == 9 ]]; then
    pass "${d}_node_sigterm_recovered"
  else
    fail "${d}_node_sigterm_recovered" "node exit $node_code; live: $(state_of "$d-live"); ends2: $(berth inspect "$d-ends2" 2>&1)"
  fi
  # The recovered task is the driver's again: stop reaches it.
  berth stop --timeout 5 "$d-live" >/dev/null 2>&1
  [[ $(task_field "$d-live" 't["exitResult"].get("signal", 0)') == 15 ]] &&
    pass "${d}_recovered_task_stops" || fail "${d}_recovered_task_stops" "$(berth inspect "$d-live" 2>&1)"
done

for task in $(berth ps -a -q 2>/dev/null); do berth rm -f "$task" >/dev/null 2>&1; done
left=$(find "$state/node/tasks" -mindepth 1 -maxdepth 1 2>/dev/null)
[[ -z $left ]] && pass nothing_left || fail nothing_left "$left"

if ((failures > 0)); then
  echo "--- node log"; cat "$dir/node.log"
  exit 1
fi
echo "all passed"
