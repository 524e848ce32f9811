#!/bin/bash
# End-to-end test of a whole node: berth-node (with berth-driver-exec as its
# plugin), berth-netns and berth-stats on a temporary runtime and state
# directory, driven through the `berth` command line as a user would.
#
# Each scenario prints "PASS name" or "FAIL name: why"; the test fails if
# any failed, and at the end checks that nothing is left: no process, no
# namespace, no veth on the test's bridge, no iptables rule naming the test's
# network, no cgroup.
#
# usage: node_e2e_test.sh NODE CLI DRIVER NETNS STATS PROXY SANDBOX AGENT SHIM INIT
set -u
# Absolute, and through the runfiles' symbolic links: the driver finds
# berth-task-init next to its real path.
node_bin=$(readlink -f "$1") cli=$(readlink -f "$2") driver_bin=$(readlink -f "$3")
netns_bin=$(readlink -f "$4") stats_bin=$(readlink -f "$5")
proxy_bin=$(readlink -f "$6") sandbox_bin=$(readlink -f "$7") agent_bin=$(readlink -f "$8")
shim_bin=$(readlink -f "$9") init_bin=$(readlink -f "${10}")
export PATH="/usr/sbin:/sbin:$PATH"

if [[ $(id -u) -ne 0 ]]; then
  echo "SKIPPED: needs root (namespaces, cgroups, CNI)"
  exit 0
fi
if [[ ! -x /usr/lib/cni/bridge ]]; then
  echo "FAILED: no CNI plugins in /usr/lib/cni (Debian's containernetworking-plugins; tools/dev installs it)"
  exit 1
fi

tag="e$((RANDOM % 90000 + 10000))"
dir="$(mktemp -d /tmp/berth-XXXXXX)"
run="$dir/run" state="$dir/state"
bridge="b$tag" network="berth-$tag" prefix="berth-$tag-"
subnet="10.212.$((RANDOM % 200 + 20)).0/24"
cgroup_parent="/berth-$tag"
pids=()
# shellcheck source=services/node/e2e/e2e_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/e2e_lib.sh"

start_node() {
  # Without berth-images (image tasks: image_e2e_test), so that
  # `berth node status` reports every service it has healthy.
  "$node_bin" --runtime_dir="$run" --state_dir="$state" \
    --plugin_config="$dir/plugins.json" --images_socket=none \
    >>"$dir/node.log" 2>&1 &
  node_pid=$!
  wait_for 100 berth node status
}

cleanup() {
  for task in $(berth ps -a -q 2>/dev/null); do berth rm -f "$task" >/dev/null 2>&1; done
  [[ -n ${node_pid:-} ]] && kill "$node_pid" 2>/dev/null && wait "$node_pid" 2>/dev/null
  [[ -n ${netns_pid:-} ]] && kill "$netns_pid" 2>/dev/null && wait "$netns_pid" 2>/dev/null
  [[ -n ${stats_pid:-} ]] && kill "$stats_pid" 2>/dev/null && wait "$stats_pid" 2>/dev/null
  [[ -n ${proxy_pid:-} ]] && kill "$proxy_pid" 2>/dev/null && wait "$proxy_pid" 2>/dev/null
  pkill -9 -f "$dir/" 2>/dev/null
  ip link del "$bridge" 2>/dev/null
  umount "$dir/netns" 2>/dev/null
  for c in /sys/fs/cgroup/*/"berth-$tag"* /sys/fs/cgroup/"berth-$tag"*; do
    [[ -d $c ]] && find "$c" -depth -type d -exec rmdir {} \; 2>/dev/null
  done
  rm -rf "$dir"
}
trap cleanup EXIT

mkdir -p "$state"
install -d -m 0750 "$run"  # a runtime directory open to others is refused
cat >"$dir/plugins.json" <<JSON
{"plugins": [{"name": "exec", "binary": "$driver_bin",
  "args": ["--cgroup_parent=$cgroup_parent", "--state_dir=$state/exec"]},
 {"name": "sandbox", "binary": "$sandbox_bin",
  "args": ["--cgroup_parent=$cgroup_parent-sandbox", "--state_dir=$state/sandbox",
           "--agent_path=$agent_bin", "--shim_path=$shim_bin", "--init_path=$init_bin"]}]}
JSON
"$stats_bin" --runtime_dir="$run" >>"$dir/stats.log" 2>&1 &
stats_pid=$!
"$proxy_bin" --runtime_dir="$run" --state_dir="$state" >>"$dir/proxy.log" 2>&1 &
proxy_pid=$!
wait_for 100 test -S "$run/proxy.sock" || { echo "FAILED: berth-proxy did not start:"; cat "$dir/proxy.log"; exit 1; }
start_netns || { echo "FAILED: berth-netns did not start:"; cat "$dir/netns.log"; exit 1; }
start_node || { echo "FAILED: berth-node did not start:"; cat "$dir/node.log"; exit 1; }

# --- run → exit code, output on the right streams.
out=$(berth run --net host -- /bin/sh -c 'echo to-out; echo to-err >&2; exit 3' 2>"$dir/err")
code=$?
if [[ $code -eq 3 && $out == to-out && $(cat "$dir/err") == to-err ]]; then
  pass run_exit_code
else
  fail run_exit_code "exit $code, stdout '$out', stderr '$(cat "$dir/err")'"
fi
berth run --net host --name killed -- /bin/sh -c 'kill -TERM $$' >/dev/null 2>&1
code=$?
[[ $code -eq 143 ]] && pass run_signal_exit || fail run_signal_exit "exit $code, want 143"

# --- events: a task's life as it happens.
berth events >"$dir/events" 2>&1 &
events_pid=$!
sleep 0.5
berth run --net host --name eventful -- /bin/sh -c 'exit 2' >/dev/null 2>&1
berth rm eventful >/dev/null
wait_for 50 grep -q removed "$dir/events"
kill "$events_pid" 2>/dev/null; wait "$events_pid" 2>/dev/null
types=$(awk '$2 != "driver" {print $2}' "$dir/events" | tr '\n' ' ')
# The driver's own events come through too (EVENT_TYPE_DRIVER).
if [[ $types == "created started exited removed " ]] && grep -q "exited with code 2" "$dir/events" &&
   grep -q " driver [0-9a-f]* exec: started" "$dir/events"; then
  pass events
else
  fail events "got: $(cat "$dir/events")"
fi

# --- a sandboxed task through berth-proxy: output, exit code, exec.
out=$(berth run --driver sandbox --net bridge --name boxed -- /bin/sh -c 'echo sandboxed; exit 6' 2>&1)
code=$?
berth run -d --driver sandbox --net host --name box -- /bin/sleep 30 >/dev/null
exec_out=$(berth exec box -- /bin/sh -c 'echo inside; exit 3' 2>&1)
exec_code=$?
if [[ $code -eq 6 && $out == sandboxed && $exec_code -eq 3 && $exec_out == inside ]]; then
  pass sandbox_task_and_exec
else
  fail sandbox_task_and_exec "run: exit $code '$out'; exec: exit $exec_code '$exec_out'"
fi
berth rm -f box boxed >/dev/null

# --- bad specs: a clear error, nothing persisted as running.
before=$(berth ps -a -q | wc -l)
msg=$(berth run --driver nope -- /bin/true 2>&1)
code=$?
after=$(berth ps -a -q | wc -l)
if [[ $code -ne 0 && $msg == *'unknown driver "nope"'* && $before -eq $after ]]; then
  pass unknown_driver
else
  fail unknown_driver "exit $code, '$msg', tasks $before -> $after"
fi
msg=$(berth run --net host --name bad-command -- /nonexistent/binary 2>&1)
code=$?
state_now=$(task_field bad-command 't["state"]')
if [[ $code -ne 0 && $msg == *driver_config.command* && $msg == *"/nonexistent/binary"* &&
      $state_now == TASK_STATE_FAILED && -z $(berth ps -q) ]]; then
  pass bad_field
else
  fail bad_field "exit $code, '$msg', state $state_now, running: $(berth ps -q)"
fi
# The same with --rm: the error, and nothing of the task stays listed.
msg=$(berth run --rm --net host --name bad-rm -- /nonexistent/binary 2>&1)
code=$?
if [[ $code -ne 0 && $msg == *driver_config.command* ]] && ! berth inspect bad-rm >/dev/null 2>&1 &&
   ! berth ps -a | grep -q bad-rm; then
  pass rm_after_failed_start
else
  fail rm_after_failed_start "exit $code, '$msg'; $(berth ps -a)"
fi

# --- two bridge tasks reach each other.
berth run -d --net bridge --name server -- /usr/bin/python3 -c '
import socket
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("0.0.0.0", 7000)); s.listen(1)
c, _ = s.accept(); c.sendall(b"hello from " + socket.gethostname().encode() + b"\n"); c.close()' >/dev/null
server_ip=$(task_field server 't["network"]["addresses"][0]["cidr"].split("/")[0]')
reply=$(berth run --net bridge --name client -- /usr/bin/python3 -c "
import socket, time
for _ in range(50):
    try:
        s = socket.create_connection(('$server_ip', 7000), timeout=2); break
    except OSError:
        time.sleep(0.1)
print(s.recv(100).decode().strip())" 2>&1)
client_ip=$(task_field client 't["network"]["addresses"][0]["cidr"].split("/")[0]')
if [[ $reply == "hello from server" && -n $server_ip && $server_ip != "$client_ip" ]]; then
  pass bridge_tasks_reach_each_other
else
  fail bridge_tasks_reach_each_other "server $server_ip client $client_ip reply '$reply'"
fi

# --- logs -f follows until the task ends.
berth run -d --net host --name ticker -- /bin/sh -c 'for i in 1 2 3 4 5; do echo tick $i; sleep 0.3; done' >/dev/null
berth logs -f ticker >"$dir/follow" 2>&1 &
follow_pid=$!
if wait_for 100 grep -q "tick 1" "$dir/follow" && ! grep -q "tick 5" "$dir/follow" &&
   wait_for 100 bash -c "! kill -0 $follow_pid" &&
   [[ $(cat "$dir/follow") == $'tick 1\ntick 2\ntick 3\ntick 4\ntick 5' ]]; then
  pass logs_follow
else
  fail logs_follow "got '$(cat "$dir/follow")'"
fi
[[ $(berth logs --tail 2 ticker) == $'tick 4\ntick 5' ]] && pass logs_tail ||
  fail logs_tail "got '$(berth logs --tail 2 ticker)'"

# --- exec -t under a real terminal: size, resize on SIGWINCH, exit code.
berth run -d --net host --name shell -- /bin/sleep 60 >/dev/null
pty_out=$(/usr/bin/python3 - "$cli" "$run/node.sock" <<'PY'
import fcntl, os, pty, select, signal, struct, sys, termios, time
cli, sock = sys.argv[1], sys.argv[2]
pid, fd = pty.fork()
if pid == 0:
    os.execv(cli, [cli, "--socket=" + sock, "exec", "-it", "shell", "--",
                   "/bin/sh", "-c", "stty size; read line; stty size; exit 7"])
def size(rows, cols):
    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
size(30, 100)
out = b""
def read_until(token, timeout=20):
    global out
    end = time.time() + timeout
    while token not in out and time.time() < end:
        r, _, _ = select.select([fd], [], [], 0.2)
        if r:
            try: out += os.read(fd, 4096)
            except OSError: break
read_until(b"30 100")
size(40, 120)
os.kill(pid, signal.SIGWINCH)
time.sleep(0.5)
os.write(fd, b"go\r")
read_until(b"40 120")
_, status = os.waitpid(pid, 0)
print(out.decode(errors="replace").replace("\r", "").replace("\n", "|"))
print("exit", os.waitstatus_to_exitcode(status))
PY
)
if [[ $pty_out == *"30 100"*"40 120"* && $pty_out == *"exit 7"* ]]; then
  pass exec_tty_resize_exit_code
else
  fail exec_tty_resize_exit_code "$pty_out"
fi
berth rm -f shell >/dev/null

# --- stats of a running task: memory, and PIDS as its cgroup counts them
# (sh and its two sleeps, at least) with its limit.
berth run -d --net host --pids 64 --name busy -- /bin/sh -c 'sleep 30 & sleep 30 & wait' >/dev/null
pids_column() { berth stats --no-stream busy 2>&1 | awk 'NR == 2 { print $NF }'; }
for _ in $(seq 50); do
  [[ $(pids_column) =~ ^[0-9]+$ ]] && (($(pids_column) >= 3)) && break
  sleep 0.1
done
stats=$(berth stats --no-stream --json busy 2>&1)
pids=$(pids_column)
if [[ $stats == *memory* && $stats =~ \"limit\":\ ?\"64\" && $pids =~ ^[0-9]+$ ]] && ((pids >= 3)); then
  pass stats_no_stream
else
  fail stats_no_stream "PIDS column '$pids'; $stats"
fi
berth rm -f busy >/dev/null

# --- restart policies: on-failure with a limit; always until stopped.
berth run -d --net host --name flaky --restart on-failure:2 -- /bin/sh -c 'echo "run at $(date +%s%N)"; exit 1' >/dev/null
wait_for 150 bash -c "$(declare -f berth task_field); cli='$cli' run='$run'; [[ \$(task_field flaky 't[\"state\"]') == TASK_STATE_EXITED ]]"
restarts=$(task_field flaky 't.get("restarts", 0)')
# Every run's output is kept: berth logs shows the three runs.
runs_logged=$(berth logs flaky | grep -c "^run at ")
[[ $restarts == 2 && $(task_field flaky 't["exitResult"]["exitCode"]') == 1 && $runs_logged == 3 ]] &&
  pass restart_on_failure_limit || fail restart_on_failure_limit "restarts $restarts, runs in the logs $runs_logged"
berth run -d --net host --name forever --restart always -- /bin/sh -c 'sleep 0.2' >/dev/null
wait_for 100 bash -c "$(declare -f berth task_field); cli='$cli' run='$run'; (( \$(task_field forever 't.get(\"restarts\", 0)') >= 2 ))"
berth stop --timeout 1 forever >/dev/null
after_stop=$(task_field forever 't.get("restarts", 0)')
sleep 1.5
if [[ $(task_field forever 't["state"]') == TASK_STATE_EXITED &&
      $(task_field forever 't.get("stopped", False)') == True &&
      $(task_field forever 't.get("restarts", 0)') == "$after_stop" ]]; then
  pass restart_always_until_stopped
else
  fail restart_always_until_stopped "$(berth inspect forever)"
fi

# --- kill -9 of berth-stats: the driver registers its tasks again.
berth run -d --net host --name measured -- /bin/sleep 30 >/dev/null
kill -9 "$stats_pid"; wait "$stats_pid" 2>/dev/null
"$stats_bin" --runtime_dir="$run" >>"$dir/stats.log" 2>&1 &
stats_pid=$!
wait_for 100 test -S "$run/stats.sock"
if wait_for 100 bash -c "'$cli' --socket='$run/node.sock' stats --no-stream --json measured | grep -q memory"; then
  pass stats_after_berth_stats_restart
else
  fail stats_after_berth_stats_restart "$(berth stats --no-stream --json measured 2>&1)"
fi
berth rm -f measured >/dev/null

# --- kill -9 of berth-node while a task runs: tracked after the restart, and
# its later exit recorded.
berth run -d --net bridge --name survivor -- /bin/sh -c 'sleep 3; exit 4' >/dev/null
kill -9 "$node_pid"; wait "$node_pid" 2>/dev/null
start_node || fail node_restart "berth-node did not come back"
state_now=$(task_field survivor 't["state"]')
wait_for 100 bash -c "$(declare -f berth task_field); cli='$cli' run='$run'; [[ \$(task_field survivor 't[\"state\"]') == TASK_STATE_EXITED ]]"
code_now=$(task_field survivor 't["exitResult"].get("exitCode", 0)')
if [[ $state_now == TASK_STATE_RUNNING && $code_now == 4 ]]; then
  pass node_kill9_task_recovered
else
  fail node_kill9_task_recovered "state after restart $state_now, exit code $code_now"
fi

# --- a clean restart of berth-node (SIGTERM: it stops its plugins, not the
# tasks): the new node launches new plugins, which recover the task.
berth run -d --net host --name steady -- /bin/sh -c 'sleep 3; exit 8' >/dev/null
kill -TERM "$node_pid"; wait "$node_pid"
node_code=$?
alive=$(pgrep -f -- "--state_dir=$state/exec" | wc -l)
start_node || fail node_clean_restart "berth-node did not come back"
state_now=$(task_field steady 't["state"]')
wait_for 100 bash -c "$(declare -f berth task_field); cli='$cli' run='$run'; [[ \$(task_field steady 't[\"state\"]') == TASK_STATE_EXITED ]]"
code_now=$(task_field steady 't["exitResult"].get("exitCode", 0)')
if [[ $node_code -eq 0 && $alive -eq 0 && $state_now == TASK_STATE_RUNNING && $code_now == 8 ]]; then
  pass node_clean_restart_task_recovered
else
  fail node_clean_restart_task_recovered "node exit $node_code, exec drivers left running $alive, state $state_now, exit code $code_now"
fi

# --- kill -9 of berth-node in the middle of a start (its driver frozen in
# StartTask): the next node destroys what the driver made and starts the
# task again; one copy of it runs.
driver_pid=$(berth node status --json | /usr/bin/python3 -c 'import json,sys; print([p for p in json.load(sys.stdin)["plugins"] if p["name"]=="exec"][0]["pid"])')
kill -STOP "$driver_pid"
berth run -d --net host --name interrupted -- /bin/sh -c "echo run >>'$dir/interrupted'; exec sleep 301" >/dev/null 2>&1 &
run_pid=$!
wait_for 50 bash -c "[[ \$(/usr/bin/python3 -c \"import sqlite3; print(sqlite3.connect('$state/node/state.db').execute('select count(*) from tasks where name=\\\"interrupted\\\"').fetchone()[0])\") == 1 ]]"
kill -9 "$node_pid"; wait "$node_pid" 2>/dev/null
kill -CONT "$driver_pid"
wait "$run_pid" 2>/dev/null
start_node || fail node_restart "berth-node did not come back"
wait_for 100 bash -c "$(declare -f berth task_field); cli='$cli' run='$run'; [[ \$(task_field interrupted 't[\"state\"]') == TASK_STATE_RUNNING ]]"
sleep 0.5
copies=$(pgrep -f "^sleep 301" | wc -l)
if [[ $(task_field interrupted 't["state"]') == TASK_STATE_RUNNING && $copies -eq 1 ]]; then
  pass node_kill9_during_start
else
  fail node_kill9_during_start "state $(task_field interrupted 't["state"]'), $copies copies running, runs: $(wc -l <"$dir/interrupted" 2>/dev/null)"
fi
berth rm -f interrupted >/dev/null

# --- SIGTERM of berth-node while its driver is frozen in StartTask: the node
# still stops (the start is abandoned, not failed), and the next one starts
# the task.
driver_pid=$(berth node status --json | /usr/bin/python3 -c 'import json,sys; print([p for p in json.load(sys.stdin)["plugins"] if p["name"]=="exec"][0]["pid"])')
kill -STOP "$driver_pid"
berth run -d --net host --name abandoned -- /bin/sh -c "exec sleep 302" >"$dir/abandoned.out" 2>&1 &
run_pid=$!
sleep 1
kill -TERM "$node_pid"
stopped=no
wait_for 150 bash -c "! kill -0 $node_pid" && stopped=yes
wait "$node_pid" 2>/dev/null
kill -CONT "$driver_pid"
wait "$run_pid" 2>/dev/null
start_node || fail node_restart "berth-node did not come back"
wait_for 100 bash -c "$(declare -f berth task_field); cli='$cli' run='$run'; [[ \$(task_field abandoned 't[\"state\"]') == TASK_STATE_RUNNING ]]"
sleep 0.5
copies=$(pgrep -f "^sleep 302" | wc -l)
if [[ $stopped == yes && $(task_field abandoned 't["state"]') == TASK_STATE_RUNNING && $copies -eq 1 ]]; then
  pass node_sigterm_during_start
else
  fail node_sigterm_during_start "node stopped: $stopped, state $(task_field abandoned 't["state"]'), $copies copies; run said: $(cat "$dir/abandoned.out")"
fi
berth rm -f abandoned >/dev/null

# --- kill -9 of the exec driver: relaunched, task recovered.
berth run -d --net host --name orphan -- /bin/sh -c 'sleep 3; exit 9' >/dev/null
driver_pid=$(berth node status --json | /usr/bin/python3 -c 'import json,sys; print([p for p in json.load(sys.stdin)["plugins"] if p["name"]=="exec"][0]["pid"])')
kill -9 "$driver_pid"
wait_for 100 bash -c "$(declare -f berth task_field); cli='$cli' run='$run'; [[ \$(task_field orphan 't[\"state\"]') == TASK_STATE_EXITED ]]"
code_now=$(task_field orphan 't["exitResult"].get("exitCode", 0)')
new_pid=$(berth node status --json | /usr/bin/python3 -c 'import json,sys; print([p for p in json.load(sys.stdin)["plugins"] if p["name"]=="exec"][0].get("pid", 0))')
if [[ $code_now == 9 && $new_pid != 0 && $new_pid != "$driver_pid" ]]; then
  pass driver_kill9_task_recovered
else
  fail driver_kill9_task_recovered "exit code $code_now, driver pid $driver_pid -> $new_pid"
fi

# --- kill -9 of berth-netns between Prerun and Postrun: nothing leaked.
berth run -d --net bridge --name netns-orphan -- /bin/sleep 2 >/dev/null
kill -9 "$netns_pid"; wait "$netns_pid" 2>/dev/null
sleep 3  # the task ends while berth-netns is away; Postrun waits for it
start_netns || fail netns_restart "berth-netns did not come back"
ns=$(task_field netns-orphan 't["network"].get("namespacePath", "")')
wait_for 300 test ! -e "$ns"
if [[ $(task_field netns-orphan 't["state"]') == TASK_STATE_EXITED && -n $ns && ! -e $ns ]]; then
  pass netns_kill9_nothing_leaked
else
  fail netns_kill9_nothing_leaked "state $(task_field netns-orphan 't["state"]'), namespace $ns $(ls -l "$ns" 2>&1)"
fi

# --- remove everything; then nothing may be left.
for task in $(berth ps -a -q); do berth rm -f "$task" >/dev/null || fail rm "$task"; done
[[ -z $(berth ps -a -q) ]] && pass rm_all || fail rm_all "left: $(berth ps -a -q)"
leftovers=""
[[ -n $(ls -A "$dir/netns" 2>/dev/null) ]] && leftovers+=" namespaces: $(ls "$dir/netns")"
[[ -n $(ip -o link show master "$bridge" 2>/dev/null) ]] && leftovers+=" veths on $bridge"
[[ -n $(iptables-save 2>/dev/null | grep -- "$prefix") ]] && leftovers+=" iptables rules naming $prefix"
[[ -n $(ls -A "$state/node/tasks" 2>/dev/null) ]] && leftovers+=" task dirs: $(ls "$state/node/tasks")"
[[ -n $(ls -A "$state/node/logs" 2>/dev/null) ]] && leftovers+=" kept logs: $(ls "$state/node/logs")"
for c in /sys/fs/cgroup/*/"berth-$tag"* /sys/fs/cgroup/"berth-$tag"*; do
  [[ -n $(find "$c" -mindepth 1 -type d 2>/dev/null) ]] && leftovers+=" cgroups under $c"
done
[[ -z $leftovers ]] && pass nothing_left || fail nothing_left "$leftovers"

if ((failures > 0)); then
  echo "--- berth-node log (last 40 lines)"; tail -n 40 "$dir/node.log"
  echo "FAILED: $failures scenarios"
  exit 1
fi
echo "all scenarios passed"
