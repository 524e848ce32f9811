#!/bin/bash
# User namespaces end to end (issue 15, points 5 and 9): berth-node with the
# exec and sandbox drivers and a configured id range (--userns_base, so that /etc/subuid does
# not matter) runs tasks with `--userns auto`. Checks that the task's root is
# root inside and the range's first id on the host (its files in a writable
# -v are owned by it), that host system files stay readable, that exec joins
# the namespace, that logs arrive, that a range is one task's only (the next
# task is refused while it exists, also after the node restarts) and is
# released when the task is removed; then the same of a sandbox task (root
# inside, the range outside, exec in its namespace).
#
# usage: userns_test.sh NODE CLI DRIVER STATS PROXY SANDBOX AGENT SHIM INIT
set -u
node_bin=$(readlink -f "$1") cli=$(readlink -f "$2") driver_bin=$(readlink -f "$3")
stats_bin=$(readlink -f "$4") proxy_bin=$(readlink -f "$5")
sandbox_bin=$(readlink -f "$6") agent_bin=$(readlink -f "$7")
shim_bin=$(readlink -f "$8") init_bin=$(readlink -f "$9")
export PATH="/usr/sbin:/sbin:$PATH"

if [[ $(id -u) -ne 0 ]]; then
  echo "SKIPPED: needs root (namespaces, cgroups)"
  exit 0
fi
if [[ ! -e /proc/self/ns/user ]]; then
  echo "SKIPPED: the kernel has no user namespaces"
  exit 0
fi

tag="u$((RANDOM % 90000 + 10000))"
dir="$(mktemp -d /tmp/berth-XXXXXX)"
run="$dir/run" state="$dir/state"
cgroup_parent="/berth-$tag"
# One range only, of ids no file on this host should own.
base=$((4000000 + (RANDOM % 1000) * 65536))
# shellcheck source=services/node/e2e/e2e_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/e2e_lib.sh"

start_node() {
  "$node_bin" --runtime_dir="$run" --state_dir="$state" \
    --plugin_config="$dir/plugins.json" \
    --userns_base="$base" --userns_count=65536 --userns_size=65536 \
    >>"$dir/node.log" 2>&1 &
  node_pid=$!
  wait_for 100 berth ps && wait_for 100 test -S "$run/plugins/exec.sock" &&
    wait_for 100 test -S "$run/plugins/sandbox.sock"
}

cleanup() {
  for task in $(berth ps -a -q 2>/dev/null); do berth rm -f "$task" >/dev/null 2>&1; done
  [[ -n ${node_pid:-} ]] && kill "$node_pid" 2>/dev/null && wait "$node_pid" 2>/dev/null
  [[ -n ${stats_pid:-} ]] && kill "$stats_pid" 2>/dev/null && wait "$stats_pid" 2>/dev/null
  [[ -n ${proxy_pid:-} ]] && kill "$proxy_pid" 2>/dev/null && wait "$proxy_pid" 2>/dev/null
  for c in /sys/fs/cgroup/*/"berth-$tag"* /sys/fs/cgroup/"berth-$tag"*; do
    [[ -d $c ]] && find "$c" -depth -type d -exec rmdir {} \; 2>/dev/null
  done
  rm -rf "$dir"
}
trap cleanup EXIT

mkdir -p "$state" "$dir/data"
install -d -m 0750 "$run"  # a runtime directory open to others is refused
# The task's root (host id $base) goes through $dir to its task directory
# and writes into the bound directory.
chmod 0755 "$dir"
chmod 0777 "$dir/data"
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
start_node || { echo "FAILED: berth-node did not start:"; cat "$dir/node.log"; exit 1; }

# --- root inside, the range's first id outside.
out=$(berth run --rm --userns auto --net host -v "$dir/data:/data" -- /bin/sh -c \
  'id -u; id -g; cat /proc/self/uid_map; echo hi > /data/made; head -c 4 /usr/bin/env | tail -c 3; echo' 2>"$dir/err")
code=$?
echo "--- berth run --userns auto (exit $code):"
printf '%s\n' "$out"
[[ $code -eq 0 ]] && pass run_exit_0 || fail run_exit_0 "exit $code: $(head -c 500 "$dir/err")"
[[ $out == $'0\n0\n'* ]] && pass root_inside || fail root_inside "got '$out'"
if [[ $(printf '%s\n' "$out" | sed -n 3p | tr -s ' ') == " 0 $base 65536" ]]; then
  pass uid_map_is_the_range
else
  fail uid_map_is_the_range "want 0 $base 65536, got '$(printf '%s\n' "$out" | sed -n 3p)'"
fi
owner=$(stat -c %u:%g "$dir/data/made" 2>&1)
[[ $owner == "$base:$base" ]] && pass file_owned_by_mapped_ids ||
  fail file_owned_by_mapped_ids "$dir/data/made is $owner, want $base:$base"
[[ $out == *$'\nELF'* ]] && pass host_usr_readable || fail host_usr_readable "got '$out'"

# --- a running task: exec joins its namespace; logs arrive.
id=$(berth run -d --userns auto --net host --name keeper -- /bin/sh -c \
  'echo hello from $(id -u); readlink /proc/self/ns/user; exec sleep 1000' 2>"$dir/err")
[[ -n $id ]] || fail keeper_started "$(head -c 500 "$dir/err")"
wait_for 50 sh -c "'$cli' --socket='$run/node.sock' logs keeper | grep -q hello"
logs=$(berth logs keeper 2>&1)
[[ $logs == "hello from 0"* ]] && pass logs_arrive || fail logs_arrive "got '$logs'"
task_ns=$(printf '%s\n' "$logs" | sed -n 2p)
exec_out=$(berth exec keeper -- /bin/sh -c 'id -u; readlink /proc/self/ns/user' 2>&1)
if [[ $exec_out == $'0\n'"$task_ns" && $task_ns == user:* && $task_ns != "$(readlink /proc/self/ns/user)" ]]; then
  pass exec_joins_the_user_namespace
else
  fail exec_joins_the_user_namespace "task's $task_ns, exec printed '$exec_out'"
fi

# --- the one range is keeper's: another task is refused.
refused=$(berth run --rm --userns auto --net host -- /bin/true 2>&1)
code=$?
[[ $code -ne 0 ]] && pass second_range_refused ||
  fail second_range_refused "exit 0 with the only range taken: $refused"
echo "(refused: $refused)"

# --- after a restart of the node: the range is still keeper's, exec works.
kill "$node_pid" && wait "$node_pid" 2>/dev/null
start_node || { echo "FAILED: berth-node did not restart:"; tail -20 "$dir/node.log"; exit 1; }
exec_out=$(berth exec keeper -- /usr/bin/id -u 2>&1)
[[ $exec_out == 0 ]] && pass exec_after_node_restart || fail exec_after_node_restart "got '$exec_out'"
berth run --rm --userns auto --net host -- /bin/true >/dev/null 2>&1 &&
  fail range_kept_across_restart "a second task got a range while keeper holds the only one" ||
  pass range_kept_across_restart

# --- released at removal.
berth rm -f keeper >/dev/null
out=$(berth run --rm --userns auto --net host -- /usr/bin/id -u 2>&1)
[[ $out == 0 ]] && pass range_released_at_removal || fail range_released_at_removal "got '$out'"

# --- a sandbox task: the whole sandbox in the namespace (the range is free
# again); exec'd commands too.
id=$(berth run -d --driver sandbox --userns auto --net host -v "$dir/data:/data" \
  --name boxed -- /bin/sh -c \
  'echo boxed $(id -u); cat /proc/self/uid_map; readlink /proc/self/ns/user; touch /data/boxed; exec sleep 1000' \
  2>"$dir/err")
[[ -n $id ]] && pass sandbox_started || fail sandbox_started "$(head -c 500 "$dir/err")"
wait_for 50 sh -c "'$cli' --socket='$run/node.sock' logs boxed | grep -q '^user:'"
logs=$(berth logs boxed 2>&1)
echo "--- berth logs boxed:"
printf '%s\n' "$logs"
[[ $logs == "boxed 0"* ]] && pass sandbox_root_inside || fail sandbox_root_inside "got '$logs'"
if [[ $(printf '%s\n' "$logs" | sed -n 2p | tr -s ' ') == " 0 $base 65536" ]]; then
  pass sandbox_uid_map_is_the_range
else
  fail sandbox_uid_map_is_the_range "want 0 $base 65536, got '$(printf '%s\n' "$logs" | sed -n 2p)'"
fi
owner=$(stat -c %u:%g "$dir/data/boxed" 2>&1)
[[ $owner == "$base:$base" ]] && pass sandbox_file_owned_by_mapped_ids ||
  fail sandbox_file_owned_by_mapped_ids "$dir/data/boxed is $owner, want $base:$base"
task_ns=$(printf '%s\n' "$logs" | sed -n 3p)
exec_out=$(berth exec boxed -- /bin/sh -c 'id -u; readlink /proc/self/ns/user' 2>&1)
if [[ $exec_out == $'0\n'"$task_ns" && $task_ns == user:* && $task_ns != "$(readlink /proc/self/ns/user)" ]]; then
  pass sandbox_exec_in_the_user_namespace
else
  fail sandbox_exec_in_the_user_namespace "task's $task_ns, exec printed '$exec_out'"
fi
berth rm -f boxed >/dev/null

# --- without --userns: the host's ids, as before.
out=$(berth run --rm --net host -v "$dir/data:/data" -- /bin/sh -c 'touch /data/host-root; cat /proc/self/uid_map' 2>&1)
[[ $(stat -c %u "$dir/data/host-root" 2>&1) == 0 && $(echo "$out" | tr -s ' ') == " 0 0 4294967295" ]] &&
  pass no_userns_by_default || fail no_userns_by_default "got '$out'"

if ((failures > 0)); then
  echo "$failures failed; node log:"
  tail -30 "$dir/node.log"
  exit 1
fi
echo "all passed"
