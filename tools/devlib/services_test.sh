#!/usr/bin/env bash
# Test of tools/devlib/services.sh: liveness is judged by what answers on the
# socket, not by a pid.
# usage: services_test.sh SERVICES_SH BERTH_HEALTH_PROBE HEALTH_TEST_SERVER
set -uo pipefail
lib=$(realpath "$1")
probe=$(realpath "$2")
server=$(realpath "$3")
# /tmp: a socket path must fit in 108 bytes, which TEST_TMPDIR may not.
tmp=$(mktemp -d /tmp/devlib.XXXXXX)
failures=0
started=()
say() { printf 'say: %s\n' "$*" >&2; }
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
ok() { echo "ok: $*"; }
cleanup() {
  local pid
  for pid in "${started[@]}"; do kill -KILL "$pid" 2>/dev/null; done
  [[ -n ${cgroup:-} && -d ${cgroup:-} ]] && rmdir "$cgroup"/* "$cgroup" 2>/dev/null
  rm -rf "$tmp"
}
trap cleanup EXIT

runtime_dir=$tmp/run
state_dir=$tmp/state
# shellcheck source=tools/devlib/services.sh
source "$lib"

# A parent that never reaps: its child, once killed, stays a zombie (as a
# killed service does under an init that does not reap). Prints the child's
# pid.
spawn_unreaped() {
  python3 -c '
import os, sys, time
pid = os.fork()
if pid == 0:
    os.execv(sys.argv[1], sys.argv[1:])
print(pid, flush=True)
while True:
    time.sleep(60)
' "$@" &
  started+=("$!")
}

wait_answers() {
  for _ in $(seq 100); do
    answers "$1" "" 1s && return 0
    sleep 0.1
  done
  return 1
}

install -d -m 0750 "$runtime_dir"  # a runtime directory open to others is refused
sock=$runtime_dir/svc.sock
exec 3< <(spawn_unreaped "$server" "$sock" "--runtime_dir=$runtime_dir")
read -r pid <&3
started+=("$pid")

# 1. A service that answers.
if wait_answers "$sock"; then ok "a serving socket answers"; else fail "the test server never answered on $sock"; fi
peer=$(socket_peer_pid "$sock")
[[ $peer == "$pid" ]] && ok "the peer pid is the server's ($pid)" || fail "socket_peer_pid said '$peer', want $pid"
found=$(berth_pids health_probe/health_test_server cmdline "--runtime_dir=$runtime_dir")
[[ $found == "$pid" ]] && ok "berth_pids finds the server by executable and runtime dir" ||
  fail "berth_pids found '$found', want $pid"
found=$(berth_pids health_probe/health_test_server cmdline "--runtime_dir=$tmp/other")
[[ -z $found ]] && ok "berth_pids skips a server of another runtime dir" || fail "berth_pids found '$found' for another runtime dir"

# 2. A process that exists but does not answer (stopped): kill -0 succeeds,
# the probe does not.
kill -STOP "$pid"
kill -0 "$pid" && ok "kill -0 succeeds on the stopped server" || fail "kill -0 failed on a stopped process"
if answers "$sock" "" 1s; then fail "a stopped server counted as answering"; else ok "a stopped server does not answer"; fi
pid_alive "$pid" && ok "pid_alive: a stopped process is alive" || fail "pid_alive said a stopped process is dead"
kill -CONT "$pid"
wait_answers "$sock" && ok "it answers again once continued" || fail "the continued server does not answer"

# 3. A killed service left a zombie: kill -0 succeeds, it is not alive and
# its socket does not answer.
kill -KILL "$pid"
for _ in $(seq 50); do
  state=$(awk '{ print $3 }' "/proc/$pid/stat" 2>/dev/null)
  [[ $state == Z ]] && break
  sleep 0.1
done
if [[ $state != Z ]]; then
  fail "the killed server is not a zombie (state '$state')"
else
  kill -0 "$pid" && ok "kill -0 succeeds on the zombie" || fail "kill -0 failed on the zombie"
  if pid_alive "$pid"; then fail "pid_alive said the zombie $pid is alive"; else ok "pid_alive: a zombie is not alive"; fi
  if answers "$sock" "" 1s; then fail "the zombie's stale socket counted as answering"; else ok "the stale socket of a killed server does not answer"; fi
  found=$(berth_pids health_probe/health_test_server cmdline "--runtime_dir=$runtime_dir")
  [[ -z $found ]] && ok "berth_pids skips the zombie" || fail "berth_pids found the zombie: '$found'"
fi

# 4. No socket at all; a regular file where a socket should be.
if answers "$runtime_dir/none.sock"; then fail "a missing socket answered"; else ok "a missing socket does not answer"; fi
: >"$runtime_dir/file.sock"
if answers "$runtime_dir/file.sock"; then fail "a regular file answered"; else ok "a regular file does not answer"; fi

# 5. remove_cgroup: kills every process of a cgroup, then removes it.
if ((EUID != 0)); then
  echo "SKIP remove_cgroup: not root"
elif [[ -d /sys/fs/cgroup/pids && -w /sys/fs/cgroup/pids ]]; then
  cgroup=/sys/fs/cgroup/pids/berth-devlib-test-$$
elif [[ -f /sys/fs/cgroup/cgroup.controllers && -w /sys/fs/cgroup ]]; then
  cgroup=/sys/fs/cgroup/berth-devlib-test-$$
else
  echo "SKIP remove_cgroup: no writable pids or cgroup2 hierarchy"
fi
if [[ -n ${cgroup:-} ]]; then
  mkdir -p "$cgroup/task1"
  sh -c "echo \$\$ > $cgroup/task1/cgroup.procs; exec sleep 600" &
  victim=$!
  started+=("$victim")
  for _ in $(seq 50); do grep -qx "$victim" "$cgroup/task1/cgroup.procs" && break; sleep 0.1; done
  killed=$(remove_cgroup "$cgroup/task1")
  wait "$victim" 2>/dev/null
  [[ $killed == 1 ]] && ok "remove_cgroup killed the task's process" || fail "remove_cgroup killed '$killed' processes, want 1"
  [[ ! -d $cgroup/task1 ]] && ok "remove_cgroup removed the cgroup" || fail "$cgroup/task1 is still there"
  rmdir "$cgroup"
fi

if ((failures > 0)); then
  echo "$failures checks failed"
  exit 1
fi
echo "all checks passed"
