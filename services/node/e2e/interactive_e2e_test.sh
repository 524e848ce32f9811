#!/bin/bash
# `berth run -it` and `berth attach` in a real terminal (issue 17, point 1):
# berth-node with the exec and sandbox drivers, and the `berth` binary
# driven in tmux (a private server: -L, -f /dev/null) as a user types:
#
#   1. run -it --rm -- /bin/sh: a prompt, `echo hello-$$` answered, stdin
#      is a terminal of the pane's size (stty size), resized with the pane,
#      `exit 3` is berth's exit code 3, the task is removed;
#   2. the same, ended by Ctrl-D: exit 0, removed;
#   3. run -it, then Ctrl-P Ctrl-Q: berth exits 0 and says so, the task
#      keeps running (berth ps); `berth attach` joins the same shell (a
#      shell variable set before is still there), `exit 5` is attach's exit
#      code;
#   4. run -itd prints the id; attach; Ctrl-D;
#   5. run -i without a terminal: piped stdin, its end closes the task's;
#   6. sessions 1 and 2 on the sandbox driver.
#
# Each pane is printed (the transcript). PASS/FAIL lines; fails if any failed.
#
# usage: interactive_e2e_test.sh NODE CLI DRIVER STATS PROXY SANDBOX AGENT SHIM INIT
set -u
node_bin=$(readlink -f "$1") cli=$(readlink -f "$2") driver_bin=$(readlink -f "$3")
stats_bin=$(readlink -f "$4") proxy_bin=$(readlink -f "$5")
sandbox_bin=$(readlink -f "$6") agent_bin=$(readlink -f "$7")
shim_bin=$(readlink -f "$8") init_bin=$(readlink -f "$9")
export PATH="/usr/sbin:/sbin:/usr/bin:/bin:$PATH"

if [[ $(id -u) -ne 0 ]]; then
  echo "SKIPPED: needs root (namespaces, cgroups)"
  exit 0
fi
if ! command -v tmux >/dev/null; then
  echo "FAILED: no tmux (pinned in third_party/debian.lock; apt-get install tmux)"
  exit 1
fi

tag="i$((RANDOM % 90000 + 10000))"
dir="$(mktemp -d /tmp/berth-XXXXXX)"
run="$dir/run" state="$dir/state"
# shellcheck source=services/node/e2e/e2e_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/e2e_lib.sh"

# tmux of our own: its socket in $dir, no configuration read.
export TMUX_TMPDIR="$dir"
unset TMUX
tm() { tmux -L "berth-$tag" -f /dev/null "$@"; }

cleanup() {
  tm kill-server 2>/dev/null
  for task in $(berth ps -a -q 2>/dev/null); do berth rm -f "$task" >/dev/null 2>&1; done
  stop_pid "${node_pid:-}"
  stop_pid "${stats_pid:-}"
  stop_pid "${proxy_pid:-}"
  remove_test_cgroups
  rm -rf "$dir"
}
trap cleanup EXIT

mkdir -p "$state"
install -d -m 0750 "$run"  # a runtime directory open to others is refused
write_exec_and_sandbox_plugins
"$stats_bin" --runtime_dir="$run" >>"$dir/stats.log" 2>&1 &
stats_pid=$!
"$proxy_bin" --runtime_dir="$run" --state_dir="$state" >>"$dir/proxy.log" 2>&1 &
proxy_pid=$!
wait_for 100 test -S "$run/proxy.sock" || { echo "FAILED: berth-proxy did not start:"; cat "$dir/proxy.log"; exit 1; }
"$node_bin" --runtime_dir="$run" --state_dir="$state" \
  --plugin_config="$dir/plugins.json" --images_socket=none \
  >>"$dir/node.log" 2>&1 &
node_pid=$!
if ! wait_for 100 berth ps || ! wait_for 100 test -S "$run/plugins/exec.sock"; then
  echo "FAILED: berth-node did not start:"
  tail -30 "$dir/node.log"
  exit 1
fi

# berth in a pane: `berth ARGS`, then its exit code in $dir/code.SESSION and
# on the screen; the pane stays for capture-pane.
cat >"$dir/in-pane.sh" <<SH
#!/bin/bash
session=\$1; shift
"$cli" --socket="$run/node.sock" "\$@"
code=\$?
echo "\$code" >"$dir/code.\$session"
echo "[berth exited \$code]"
exec sleep 600
SH
chmod +x "$dir/in-pane.sh"

# start SESSION ARGS...: a new detached tmux session, 100x30, running berth.
start() {
  local session=$1; shift
  local words="" word
  for word in "$@"; do words+=" $(printf '%q' "$word")"; done
  tm new-session -d -s "$session" -x 100 -y 30 "$dir/in-pane.sh $session$words"
}
pane() { tm capture-pane -p -t "$1" 2>/dev/null; }
# type SESSION TEXT: TEXT as typed, then Enter.
type_line() { tm send-keys -t "$1" -l "$2" && tm send-keys -t "$1" Enter; }
# wait_pane SESSION REGEX: up to 15 s for a line of the pane to match.
wait_pane() {
  local _
  for _ in $(seq 150); do
    pane "$1" | grep -Eq "$2" && return 0
    sleep 0.1
  done
  return 1
}
# code_of SESSION: berth's exit code, once it has exited (up to 15 s).
code_of() {
  wait_for 150 test -s "$dir/code.$1" && cat "$dir/code.$1" || echo "(still running)"
}
show() {
  echo "--- tmux pane $1:"
  pane "$1" | sed -e :a -e '/^\n*$/{$d;N;ba' -e '}'
  echo "---"
}
gone() { ! berth inspect "$1" >/dev/null 2>&1; }

# Sessions 1 and 2 on a driver ($1).
shell_sessions() {
  local driver=$1 s1="$1-exit" s2="$1-ctrld" prompt='^[#$] ?'
  start "$s1" run -it --rm --driver "$driver" --net host --name "$s1" -- /bin/sh
  if wait_pane "$s1" "$prompt"; then pass "${driver}_prompt"; else
    fail "${driver}_prompt" "no shell prompt: $(pane "$s1" | tr '\n' '|')"; fi
  type_line "$s1" 'echo hello-$$; test -t 0 && echo stdin-is-a-tty'
  if wait_pane "$s1" '^hello-[0-9]+$' && wait_pane "$s1" '^stdin-is-a-tty$'; then
    pass "${driver}_echo_through_the_terminal"
  else
    fail "${driver}_echo_through_the_terminal" "$(pane "$s1" | tr '\n' '|')"
  fi
  # The terminal's size, and its change (tmux resizes the pane: SIGWINCH to
  # berth, a resize frame to the task's terminal).
  local size
  size=$(tm display-message -p -t "$s1" '#{pane_height} #{pane_width}')
  type_line "$s1" 'echo size=$(stty size)'
  wait_pane "$s1" "^size=$size\$" && pass "${driver}_terminal_size" ||
    fail "${driver}_terminal_size" "want size=$size: $(pane "$s1" | tr '\n' '|')"
  tm resize-window -t "$s1" -x 120 -y 41
  size=$(tm display-message -p -t "$s1" '#{pane_height} #{pane_width}')
  type_line "$s1" 'echo resized=$(stty size)'
  wait_pane "$s1" "^resized=$size\$" && pass "${driver}_terminal_resized" ||
    fail "${driver}_terminal_resized" "want resized=$size: $(pane "$s1" | tr '\n' '|')"
  type_line "$s1" 'exit 3'
  local code
  code=$(code_of "$s1")
  [[ $code == 3 ]] && pass "${driver}_exit_code_is_the_shells" ||
    fail "${driver}_exit_code_is_the_shells" "berth exited $code, want 3"
  wait_for 50 gone "$s1" && pass "${driver}_rm_removed_it" ||
    fail "${driver}_rm_removed_it" "$(berth ps -a 2>&1)"
  show "$s1"

  start "$s2" run -it --rm --driver "$driver" --net host --name "$s2" -- /bin/sh
  wait_pane "$s2" "$prompt" || fail "${driver}_ctrl_d_prompt" "$(pane "$s2" | tr '\n' '|')"
  tm send-keys -t "$s2" C-d
  code=$(code_of "$s2")
  [[ $code == 0 ]] && pass "${driver}_ctrl_d_ends_the_shell" ||
    fail "${driver}_ctrl_d_ends_the_shell" "berth exited $code, want 0: $(pane "$s2" | tr '\n' '|')"
  wait_for 50 gone "$s2" && pass "${driver}_ctrl_d_rm_removed_it" ||
    fail "${driver}_ctrl_d_rm_removed_it" "$(berth ps -a 2>&1)"
  show "$s2"
}

shell_sessions exec

# --- 3. detach with Ctrl-P Ctrl-Q, attach again.
start detach run -it --net host --name keeper -- /bin/sh
wait_pane detach '^[#$] ?' || fail detach_prompt "$(pane detach | tr '\n' '|')"
# A shell variable: only the same shell knows it after the attach.
type_line detach "kept=kept-$tag; echo \$kept"
wait_pane detach "^kept-$tag\$" || fail detach_first_echo "$(pane detach | tr '\n' '|')"
tm send-keys -t detach C-p C-q
code=$(code_of detach)
[[ $code == 0 ]] && pass detach_keys_exit_0 || fail detach_keys_exit_0 "berth exited $code"
pane detach | grep -q '^berth: detached from keeper; berth attach keeper to come back$' && pass detach_says_so ||
  fail detach_says_so "$(pane detach | tr '\n' '|')"
state=$(task_field keeper 't["state"]' 2>&1)
[[ $state == TASK_STATE_RUNNING ]] && pass detached_task_keeps_running ||
  fail detached_task_keeps_running "state $state"
berth ps | grep -q keeper && pass ps_shows_the_detached_task ||
  fail ps_shows_the_detached_task "$(berth ps 2>&1)"
show detach

start reattach attach keeper
sleep 0.5
type_line reattach 'echo "again-$kept"'
if wait_pane reattach "^again-kept-$tag\$"; then pass attach_joins_the_same_shell; else
  fail attach_joins_the_same_shell "want again-kept-$tag: $(pane reattach | tr '\n' '|')"; fi
type_line reattach 'exit 5'
code=$(code_of reattach)
[[ $code == 5 ]] && pass attach_exits_with_the_tasks_code ||
  fail attach_exits_with_the_tasks_code "berth attach exited $code, want 5"
exit_code=$(task_field keeper 't.get("exitResult", {}).get("exitCode", 0)' 2>&1)
[[ $exit_code == 5 ]] && pass detached_task_exit_recorded ||
  fail detached_task_exit_recorded "inspect says $exit_code"
show reattach
berth rm keeper >/dev/null 2>&1

# --- 4. run -itd, attach, Ctrl-D.
id=$(berth run -itd --net host --name later -- /bin/sh 2>"$dir/err")
[[ $id =~ ^[0-9a-f]{32}$ ]] && pass run_itd_prints_the_id ||
  fail run_itd_prints_the_id "got '$id': $(head -c 300 "$dir/err")"
start later attach later
sleep 0.5
type_line later 'echo attached-$((6*7))'
wait_pane later '^attached-42$' && pass attach_to_run_itd ||
  fail attach_to_run_itd "$(pane later | tr '\n' '|')"
tm send-keys -t later C-d
code=$(code_of later)
[[ $code == 0 ]] && pass attach_ctrl_d_exit_0 || fail attach_ctrl_d_exit_0 "exited $code"
show later
berth rm later >/dev/null 2>&1

# --- 5. -i without a terminal: piped stdin; its end is the task's.
out=$(printf 'echo piped-$((2+2))\nexit 4\n' | berth run -i --rm --net host -- /bin/sh 2>&1)
code=$?
[[ $out == piped-4 && $code == 4 ]] && pass run_i_piped_stdin ||
  fail run_i_piped_stdin "exit $code, output '$out'"
out=$(echo 'cat' | berth run -i --rm --net host -- /bin/sh -c 'cat; echo eof-seen' 2>&1)
code=$?
[[ $out == $'cat\neof-seen' && $code == 0 ]] && pass run_i_end_of_stdin_closes_the_tasks ||
  fail run_i_end_of_stdin_closes_the_tasks "exit $code, output '$out'"

# --- 6. the sandbox driver (a driver claiming no attach is refused by the
# node: said as a SKIP line, not passed).
if ! wait_for 100 test -S "$run/plugins/sandbox.sock"; then
  fail sandbox_driver_started "$(grep -i sandbox "$dir/node.log" | tail -5)"
elif probe=$(berth run -itd --driver sandbox --net host -- /bin/true 2>&1) ||
  [[ $probe != *"does not support attach"* ]]; then
  berth rm -f "$probe" >/dev/null 2>&1
  shell_sessions sandbox
else
  echo "SKIP sandbox sessions: $probe"
fi

left=$(berth ps -a -q 2>&1)
[[ -z $left ]] && pass nothing_left || fail nothing_left "tasks left: $left"

if [[ $failures -ne 0 ]]; then
  echo "FAILED: $failures check(s); node log tail:"
  tail -30 "$dir/node.log"
  exit 1
fi
echo "PASSED"
