#!/usr/bin/env bash
# The Python example driver under a real berth-node with many tasks at once
# (issue 13, point 4): starts its own berth-node with the driver loaded
# through a plugins.json ("env": PYTHONPATH), starts --tasks sleep tasks
# through `berth run -d --driver python --net host` (--parallel at a time),
# and, from the first start to the end of a steady period, probes the
# plugin as berth-node health-checks it (GetPluginInfo, then grpc.health.v1
# Check, each with the node's 2 s deadline, every --probe_interval) on the
# plugin's own socket. Then stops the node (SIGTERM: it shuts the plugin
# down with a 2 s grace, tasks keep running), starts it again and times the
# recovery of every task, and removes them all. Prints the figures at the
# end; exits 1 when a probe failed, the plugin was relaunched, it was killed
# at shutdown rather than exiting 0, or a task was lost.
#
# usage: tools/bench/python_driver_node.sh [--tasks=1000] [--parallel=8]
#            [--steady=30] [--probe_interval=0.5]
#            [--node=PATH --cli=PATH --driver=PATH]
#
# Needs root (berth-node's state and the tasks' process groups). Builds
# //services/node:berth-node and //services/node/cli:berth (fastbuild: what
# is measured is the Python driver) unless given. Leaves nothing behind:
# tasks, processes, temporary files.
set -euo pipefail
export LC_ALL=C

tasks=1000
parallel=8
steady=30
probe_interval=0.5
node="" cli="" driver=""
for arg in "$@"; do
  case "$arg" in
    --tasks=*) tasks=${arg#*=} ;;
    --parallel=*) parallel=${arg#*=} ;;
    --steady=*) steady=${arg#*=} ;;
    --probe_interval=*) probe_interval=${arg#*=} ;;
    --node=*) node=${arg#*=} ;;
    --cli=*) cli=${arg#*=} ;;
    --driver=*) driver=${arg#*=} ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "python_driver_node.sh: unknown argument $arg (see --help)" >&2; exit 2 ;;
  esac
done
[[ $tasks =~ ^[1-9][0-9]*$ && $parallel =~ ^[1-9][0-9]*$ && $steady =~ ^[0-9]+$ ]] ||
  { echo "python_driver_node.sh: --tasks, --parallel and --steady take positive integers" >&2; exit 2; }
[[ $(id -u) -eq 0 ]] || { echo "python_driver_node.sh: run it as root" >&2; exit 2; }

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
if [[ -z $node || -z $cli ]]; then
  (cd "$root" && bazel build //services/node:berth-node //services/node/cli:berth >&2)
  node=${node:-$root/bazel-bin/services/node/berth-node}
  cli=${cli:-$root/bazel-bin/services/node/cli/berth}
fi
driver=${driver:-$root/plugins/examples/python_driver/berth_python_driver.py}
stubs=$root/api/gen/python

dir=$(mktemp -d /tmp/berth-XXXXXX)
run=$dir/run state=$dir/state
mkdir -p "$state"
install -d -m 0750 "$run"  # a runtime directory open to others is refused
berth() { "$cli" --socket="$run/node.sock" "$@"; }
say() { printf 'python_driver_node: %s\n' "$*" >&2; }
node_pid="" probe_pid=""
cleanup() {
  [[ -n $probe_pid ]] && kill "$probe_pid" 2>/dev/null || true
  if [[ -n $node_pid ]] && kill -0 "$node_pid" 2>/dev/null; then
    berth ps -a -q 2>/dev/null | xargs -r -P "$parallel" -n 20 "$cli" --socket="$run/node.sock" rm -f >/dev/null 2>&1 || true
    kill "$node_pid" 2>/dev/null; wait "$node_pid" 2>/dev/null || true
  fi
  pkill -9 -f "$dir/" 2>/dev/null || true
  rm -rf "$dir"
}
trap cleanup EXIT

cat >"$dir/plugins.json" <<JSON
{"plugins": [{"name": "python", "binary": "$driver", "env": {"PYTHONPATH": "$stubs"}}]}
JSON
start_node() {
  "$node" --runtime_dir="$run" --state_dir="$state" --plugin_config="$dir/plugins.json" \
    --netns_socket=none --stats_socket=none --proxy_socket=none --images_socket=none >>"$dir/node.log" 2>&1 &
  node_pid=$!
  for _ in $(seq 300); do
    [[ -S $run/plugins/python.sock ]] && berth node status --json 2>/dev/null |
      grep -q '"healthy": *true' && return 0
    sleep 0.1
  done
  say "berth-node did not start its plugin:"; cat "$dir/node.log" >&2; exit 1
}
plugin_pid() {
  berth node status --json | python3 -c '
import json, sys
print([p.get("pid", 0) for p in json.load(sys.stdin)["plugins"] if p["name"] == "python"][0])'
}
running_count() { berth ps -q 2>/dev/null | wc -l; }
millis() { date +%s%3N; }

# The probe: as berth-node health-checks a plugin, on the plugin's socket,
# until $dir/stop-probe exists; one line per probe: "ms_info ms_health" or
# "FAIL what".
cat >"$dir/probe.py" <<'PY'
import os, sys, time
import grpc
from berth.plugin.v1 import plugin_pb2, plugin_pb2_grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc
socket, interval, stop, out = sys.argv[1], float(sys.argv[2]), sys.argv[3], sys.argv[4]
channel = grpc.insecure_channel("unix:" + socket)
info = plugin_pb2_grpc.PluginServiceStub(channel)
health = health_pb2_grpc.HealthStub(channel)
with open(out, "w", buffering=1) as f:
    while not os.path.exists(stop):
        try:
            t0 = time.monotonic()
            info.GetPluginInfo(plugin_pb2.GetPluginInfoRequest(), timeout=2.0)
            t1 = time.monotonic()
            health.Check(health_pb2.HealthCheckRequest(service="plugin"), timeout=2.0)
            t2 = time.monotonic()
            f.write("%.3f %.3f\n" % ((t1 - t0) * 1e3, (t2 - t1) * 1e3))
        except grpc.RpcError as e:
            f.write("FAIL %s\n" % e.code())
        time.sleep(interval)
PY
if ! PYTHONPATH=$stubs /usr/bin/python3 -c 'import grpc_health.v1.health_pb2' 2>/dev/null; then
  # The stubs of grpc.health.v1 are checked in under api/gen/python too.
  say "no grpc_health stubs under $stubs"; exit 1
fi

start_node
first_pid=$(plugin_pid)
PYTHONPATH=$stubs /usr/bin/python3 "$dir/probe.py" "$run/plugins/python.sock" "$probe_interval" \
  "$dir/stop-probe" "$dir/probes.txt" &
probe_pid=$!

say "starting $tasks tasks, $parallel at a time"
t0=$(millis)
seq "$tasks" | xargs -P "$parallel" -I{} "$cli" --socket="$run/node.sock" run -d \
  --driver python --net host --name "t{}" -- /bin/sleep 3600 >/dev/null
t1=$(millis)
started=$(running_count)
say "$started running after $(( (t1 - t0) / 1000 )) s; steady for $steady s"
sleep "$steady"
touch "$dir/stop-probe"; wait "$probe_pid" || true; probe_pid=""

driver_pid=$(plugin_pid)
rss_kb() { awk '/^Rss:/ { print $2 }' "/proc/$1/smaps_rollup" 2>/dev/null || echo 0; }
pss_kb() { awk '/^Pss:/ { print $2 }' "/proc/$1/smaps_rollup" 2>/dev/null || echo 0; }
driver_rss=$(rss_kb "$driver_pid")
driver_threads=$(awk '/^Threads:/ { print $2 }' "/proc/$driver_pid/status")
monitors_pss=0 monitors=0
for pid in $(pgrep -f -- "--monitor $state" || true); do
  monitors_pss=$((monitors_pss + $(pss_kb "$pid"))); monitors=$((monitors + 1))
done
node_threads=$(awk '/^Threads:/ { print $2 }' "/proc/$node_pid/status")
node_rss=$(rss_kb "$node_pid")
status_json=$(berth node status --json)

# Shutdown: berth-node stops its plugin (Shutdown, 2 s grace, then kill).
t2=$(millis)
kill -TERM "$node_pid"; wait "$node_pid" || true
t3=$(millis)
node_pid=""
stopped_line=$(grep "plugin python stopped:" "$dir/node.log" | tail -n 1)
# Each task of this node has its monitor (it names this node's state
# directory): a live monitor is a live task, whatever else runs here.
left_running=$(pgrep -c -f -- "--monitor $state" || true)

# Recovery: a new node relaunches the plugin and recovers every task.
# (berth ps shows the recorded state at once; the node logs each task its
# driver has recovered.)
log_lines=$(wc -l <"$dir/node.log")
recovered_count() { tail -n +"$((log_lines + 1))" "$dir/node.log" | grep -c ": recovered by driver python" || true; }
t4=$(millis)
start_node
for _ in $(seq 1200); do
  (( $(recovered_count) >= started )) && break
  sleep 0.1
done
t5=$(millis)
recovered=$(recovered_count)

t6=$(millis)
berth ps -a -q | xargs -r -P "$parallel" -n 20 "$cli" --socket="$run/node.sock" rm -f >/dev/null
t7=$(millis)
# The drivers' monitors name the state directory: none may be left.
for _ in $(seq 50); do
  left_after=$(pgrep -c -f -- "--monitor $state" || true)
  ((left_after == 0)) && break
  sleep 0.1
done

ok=1
summary=$(/usr/bin/python3 - "$dir/probes.txt" <<'PY'
import statistics, sys
info, health, failed = [], [], 0
for line in open(sys.argv[1]):
    parts = line.split()
    if parts[0] == "FAIL":
        failed += 1
        continue
    info.append(float(parts[0]))
    health.append(float(parts[1]))
if not info:
    print("no probe answered")
    sys.exit(1)
print("%d probes, %d failed; GetPluginInfo median %.1f ms, max %.1f ms; "
      "Check median %.1f ms, max %.1f ms" % (
          len(info) + failed, failed, statistics.median(info), max(info),
          statistics.median(health), max(health)))
sys.exit(1 if failed else 0)
PY
) || ok=0
restarted=$([[ $first_pid == "$driver_pid" ]] && echo no || echo yes)
[[ $restarted == no ]] || ok=0
[[ $stopped_line == *"exited with code 0"* ]] || ok=0
(( started == tasks && recovered == tasks && left_running == tasks && left_after == 0 )) || ok=0

cat <<EOF

python driver under berth-node, $tasks tasks ($parallel starts at a time)
  started            $started running in $(( t1 - t0 )) ms ($(awk -v n="$started" -v ms=$((t1 - t0)) 'BEGIN { printf "%.1f", n * 1000 / ms }') tasks/s)
  health probes      $summary
  plugin relaunched  $restarted (pid $first_pid -> $driver_pid)
  memory             driver RSS $((driver_rss / 1024)) MiB, $driver_threads threads; $monitors monitors PSS $((monitors_pss / 1024)) MiB ($(( monitors > 0 ? monitors_pss / monitors : 0 )) KiB each); berth-node RSS $((node_rss / 1024)) MiB, $node_threads threads
  node SIGTERM       $(( t3 - t2 )) ms to exit; ${stopped_line#*] }
  tasks after it     $left_running still running
  recovery           $recovered of $started recovered by the relaunched driver $(( t5 - t4 )) ms after a new berth-node started
  removal            $(( t7 - t6 )) ms for all; $left_after task monitors left
EOF
if ((ok == 0)); then
  say "FAILED: see the figures above"; exit 1
fi
