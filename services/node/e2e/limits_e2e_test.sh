#!/bin/bash
# Limits of what a task may make grow (issue 18), on a real berth-node with
# the exec and sandbox drivers.
#
# A fork bomb must not take the node down: with --default_pids_limit=64 a
# task forks for ever without asking for a process limit. The node's
# default is what the task gets (berth inspect shows it, the task's pids
# cgroup holds it and refuses forks beyond it); while the bomb runs the node
# answers and another task starts, runs and exits with its output; once the
# bomb is removed none of its processes and no cgroup of it is left. The
# limit keeps the bomb to 64 processes (and --cpus to one core).
#
# A task's output is kept in files rotated by size on both drivers (the exec
# driver's berth-task-init and the sandbox driver's berth-shim write them):
# a task writing 1 MiB with --log-max-size 64k --log-max-files 2 leaves
# stdout.log and two rotated files, none above 64 KiB, and `berth logs`
# still gives the newest output, ending with its last line.
#
# usage: limits_e2e_test.sh NODE CLI DRIVER INIT PROXY SANDBOX AGENT SHIM
set -u
node_bin=$(readlink -f "$1") cli=$(readlink -f "$2") driver_bin=$(readlink -f "$3")
init_bin=$(readlink -f "$4") proxy_bin=$(readlink -f "$5")
sandbox_bin=$(readlink -f "$6") agent_bin=$(readlink -f "$7")
shim_bin=$(readlink -f "$8")
export PATH="/usr/sbin:/sbin:$PATH"

if [[ $(id -u) -ne 0 ]]; then
  echo "SKIPPED: needs root (cgroups, namespaces)"
  exit 0
fi
if [[ ! -f /sys/fs/cgroup/pids/cgroup.procs && ! -f /sys/fs/cgroup/cgroup.controllers ]]; then
  echo "SKIPPED: no cgroup v1 pids hierarchy and no cgroup v2 here"
  exit 0
fi

tag="b$((RANDOM % 90000 + 10000))"
dir="$(mktemp -d /tmp/berth-XXXXXX)"
run="$dir/run" state="$dir/state"
limit=64
# shellcheck source=services/node/e2e/e2e_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/e2e_lib.sh"

# The bomb: bash retries a failed fork (its processes stay at the limit
# rather than die out as dash's do); the marker finds its processes.
marker="forkbomb-$tag"
bomb="f(){ f|f& }; : $marker; while :; do f; done"

mounts_left() { awk -v d="$dir/" 'index($2, d) == 1 { print $2 }' /proc/mounts; }
bomb_pids() { pgrep -f -- "$marker" | grep -vx "$$" || true; }

cleanup() {
  for task in $(berth ps -a -q 2>/dev/null); do berth rm -f "$task" >/dev/null 2>&1; done
  stop_pid "${node_pid:-}"
  stop_pid "${proxy_pid:-}"
  # A bomb that outlived its removal (a failure above): killed round after
  # round, each killing what forked since the last.
  for _ in $(seq 50); do
    pids=$(bomb_pids)
    [[ -z $pids ]] && break
    kill -9 $pids 2>/dev/null
    sleep 0.1
  done
  pkill -9 -f "$dir/" 2>/dev/null
  mounts_left | sort -r | xargs -r -n1 umount -l 2>/dev/null
  remove_test_cgroups
  rm -rf "$dir"
}
trap cleanup EXIT

# The pids cgroup directory of task $1 of driver parent $2 (v1 or v2).
pids_dir() {
  if [[ -d /sys/fs/cgroup/pids ]]; then
    echo "/sys/fs/cgroup/pids/$2/$1"
  else
    echo "/sys/fs/cgroup/$2/$1"
  fi
}
# pids.events' "max": forks the limit refused.
refused_forks() { awk '$1 == "max" { print $2 }' "$1/pids.events" 2>/dev/null; }

mkdir -p "$run" "$state"
chmod 0700 "$run"  # only its owner may reach the sockets
chmod 0755 "$dir"
write_exec_and_sandbox_plugins
"$proxy_bin" --runtime_dir="$run" --state_dir="$state" >>"$dir/proxy.log" 2>&1 &
proxy_pid=$!
wait_for 100 test -S "$run/proxy.sock" ||
  { echo "FAILED: berth-proxy did not start:"; cat "$dir/proxy.log"; exit 1; }
"$node_bin" --runtime_dir="$run" --state_dir="$state" \
  --plugin_config="$dir/plugins.json" --netns_socket=none --images_socket=none \
  --stats_socket=none --default_pids_limit="$limit" >>"$dir/node.log" 2>&1 &
node_pid=$!
wait_for 100 berth ps && wait_for 100 test -S "$run/plugins/exec.sock" &&
  wait_for 100 test -S "$run/plugins/sandbox.sock" ||
  { echo "FAILED: berth-node did not start:"; cat "$dir/node.log"; exit 1; }

# The flag is checked when the node starts.
out=$("$node_bin" --runtime_dir="$dir/other" --plugin_config="$dir/plugins.json" \
  --default_pids_limit=5 2>&1)
code=$?
if [[ $code -eq 2 ]] && grep -q -- "--default_pids_limit must be 0 (none) or 32 to 4194304" <<<"$out"; then
  pass bad_default_refused
else
  fail bad_default_refused "exit $code: $out"
fi

for driver in exec sandbox; do
  parent="berth-$tag"
  [[ $driver == sandbox ]] && parent="berth-$tag-sandbox"
  if ! berth run -d --driver "$driver" --net host --cpus 1 --name "bomb-$driver" \
    -- /bin/bash -c "$bomb" >/dev/null 2>"$dir/err"; then
    fail "bomb_started_$driver" "$(cat "$dir/err")"
    continue
  fi
  id=$(task_field "bomb-$driver" 't["id"]')
  cg=$(pids_dir "$id" "$parent")

  # The node's default is in force: in the spec, and in the cgroup.
  limit_seen=$(task_field "bomb-$driver" 't["spec"]["resources"]["pidsLimit"]' 2>&1)
  if [[ $limit_seen == "$limit" ]]; then pass "default_in_inspect_$driver"
  else fail "default_in_inspect_$driver" "spec.resources.pidsLimit is '$limit_seen', want $limit"; fi
  if [[ $(cat "$cg/pids.max" 2>&1) == "$limit" ]]; then pass "pids_max_$driver"
  else fail "pids_max_$driver" "$cg/pids.max: $(cat "$cg/pids.max" 2>&1)"; fi

  # The bomb reaches the limit: forks are refused (bounded: 30 s).
  refused=""
  for _ in $(seq 300); do
    n=$(refused_forks "$cg")
    [[ -n $n && $n -gt 0 ]] && { refused=$n; break; }
    sleep 0.1
  done
  if [[ -n $refused ]]; then pass "forks_refused_$driver"
  else fail "forks_refused_$driver" "no fork refused in 30 s (pids.current $(cat "$cg/pids.current" 2>&1))"; fi

  # While it runs: the node answers, another task runs to its end with its
  # output, and the bomb stays within the limit.
  if berth ps >/dev/null 2>"$dir/err"; then pass "node_answers_$driver"
  else fail "node_answers_$driver" "$(cat "$dir/err")"; fi
  out=$(timeout 60 "$cli" --socket="$run/node.sock" run --rm --driver "$driver" --net host \
    -- /bin/sh -c 'echo "still here: $((6 * 7))"; exit 3' 2>&1)
  code=$?
  if [[ $code -eq 3 && $out == "still here: 42" ]]; then pass "other_task_runs_$driver"
  else fail "other_task_runs_$driver" "exit $code, output: $out"; fi
  # The most it held over 2 s of bombing.
  most=0
  for _ in $(seq 20); do
    current=$(cat "$cg/pids.current" 2>&1)
    [[ $current =~ ^[0-9]+$ ]] || { most="unreadable: $current"; break; }
    ((current > most)) && most=$current
    sleep 0.1
  done
  if [[ $most =~ ^[0-9]+$ ]] && ((most <= limit && most >= limit / 2)); then
    pass "within_limit_$driver"
  else
    fail "within_limit_$driver" "pids.current at most $most, limit $limit"
  fi
  if [[ $(task_field "bomb-$driver" 't["state"]') == TASK_STATE_RUNNING ]]; then
    pass "bomb_still_running_$driver"
  else
    fail "bomb_still_running_$driver" "$(berth inspect "bomb-$driver" 2>&1 | head -c 600)"
  fi

  # Removed: nothing of it is left.
  if timeout 60 "$cli" --socket="$run/node.sock" rm -f "bomb-$driver" >/dev/null 2>"$dir/err"; then
    pass "bomb_removed_$driver"
  else
    fail "bomb_removed_$driver" "$(cat "$dir/err")"
  fi
  left=""
  for _ in $(seq 100); do
    left=$(bomb_pids)
    [[ -z $left && ! -d $cg ]] && break
    sleep 0.1
  done
  if [[ -z $left ]]; then pass "no_process_left_$driver"
  else fail "no_process_left_$driver" "pids $(tr '\n' ' ' <<<"$left")"; fi
  if [[ ! -d $cg ]]; then pass "no_cgroup_left_$driver"
  else fail "no_cgroup_left_$driver" "$cg is still there"; fi
done

# --- Output rotated by size.
for driver in exec sandbox; do
  out=$(timeout 120 "$cli" --socket="$run/node.sock" run --driver "$driver" --net host \
    --name "chatty-$driver" --log-max-size 64k --log-max-files 2 -- /bin/sh -c \
    'i=0; while [ $i -lt 16384 ]; do echo "line $i of the chatty task: 0123456789abcdef"; i=$((i + 1)); done; echo last-line' \
    2>&1 | tail -n 1)
  if [[ $out == last-line ]]; then pass "chatty_ran_$driver"
  else fail "chatty_ran_$driver" "the last line was '$out'"; fi
  id=$(task_field "chatty-$driver" 't["id"]')
  logs="$state/node/tasks/$id/logs"
  files=$(cd "$logs" 2>/dev/null && ls stdout.log* | sort | tr '\n' ' ')
  if [[ $files == "stdout.log stdout.log.1 stdout.log.2 " ]]; then pass "rotated_files_$driver"
  else fail "rotated_files_$driver" "files in $logs: '$files'"; fi
  biggest=$(stat -c %s "$logs"/stdout.log* 2>/dev/null | sort -n | tail -n 1)
  if [[ -n $biggest ]] && ((biggest <= 65536)); then pass "files_within_size_$driver"
  else fail "files_within_size_$driver" "the largest is '$biggest' bytes, above 65536"; fi
  berth logs "chatty-$driver" >"$dir/chatty.out" 2>&1
  kept=$(stat -c %s "$dir/chatty.out")
  if [[ $(tail -n 1 "$dir/chatty.out") == last-line ]] && ((kept > 65536 && kept <= 3 * 65536)) &&
    grep -q '^line 16383 of the chatty task' "$dir/chatty.out"; then
    pass "logs_reads_newest_$driver"
  else
    fail "logs_reads_newest_$driver" "$kept bytes, ending: $(tail -n 2 "$dir/chatty.out")"
  fi
  berth rm -f "chatty-$driver" >/dev/null 2>&1
done

# The node survived it all.
if kill -0 "$node_pid" 2>/dev/null && berth ps >/dev/null 2>&1; then pass node_alive
else fail node_alive "$(tail -n 20 "$dir/node.log")"; fi

if [[ $failures -ne 0 ]]; then
  echo "--- node.log (end)"
  tail -n 40 "$dir/node.log"
fi
echo "$failures failure(s)"
[[ $failures -eq 0 ]]
