# shellcheck shell=bash disable=SC2154 # runtime_dir, state_dir: the caller's
# What tools/dev up, down and status know of berth's processes, sourced by
# tools/dev (and by services_test.sh). Liveness is judged by what answers, not
# by a pid: the pid of a service killed with -9 may stay a zombie (kill -0
# succeeds on it) or be reused by another process; a service runs only when
# its socket answers a gRPC health check (berth-health-probe).
#
# berth's processes are found by what they are, never by a name pattern:
# - services: executable .../bin/services/<service> with --runtime_dir=<ours>;
# - driver plugins: an executable under the same bin directory whose
#   environment names our plugin socket directory, and whoever listens on a
#   socket there (SO_PEERCRED);
# - shims: .../bin/services/shim/berth-shim writing logs under our state dir;
# - task processes (berth-task-init and what it runs, sandbox agents): those
#   in a cgroup under berth's cgroup parents.
#
# Callers set: runtime_dir, state_dir, and a `say` function. Optional:
# probe (path of berth-health-probe), cgroup_parents (names under each
# hierarchy, default "berth berth-sandbox"), netns_prefix (default berth-),
# netns_dir (default /run/netns), bridge (default berth0).

: "${probe:=bazel-bin/tools/health_probe/berth-health-probe}"
: "${cgroup_parents:=berth berth-sandbox}"
: "${netns_prefix:=berth-}"
: "${netns_dir:=/run/netns}"
: "${bridge:=berth0}"

# pid_alive PID: the process exists and is not a zombie (kill -0 says yes to
# a zombie).
pid_alive() {
  local stat state
  [[ $1 =~ ^[0-9]+$ ]] || return 1
  stat=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
  state=${stat##*) }
  state=${state%% *}
  [[ $state != Z && $state != X && $state != x ]]
}

# answers SOCKET [HEALTH_SERVICE] [TIMEOUT]: the service on SOCKET answers
# its health check SERVING (health service "" by default, "plugin" for a
# driver plugin).
answers() {
  local socket=$1 service=${2:-} timeout=${3:-2s}
  [[ -S $socket ]] || return 1
  "$probe" --socket="$socket" --service="$service" --timeout="$timeout" \
    >/dev/null 2>&1
}

# socket_peer_pid SOCKET: the pid listening on SOCKET (whether it answers
# gRPC or not), or nothing.
socket_peer_pid() {
  [[ -S $1 ]] || return 0
  "$probe" --socket="$1" --peer_pid --timeout=1s 2>/dev/null | head -n 1
}

# berth_pids EXE_SUFFIX KIND NEEDLE: live processes whose executable path
# ends with /EXE_SUFFIX ("" for any) and whose command line (KIND cmdline:
# NEEDLE a substring of it, arguments joined by spaces) or environment (KIND
# environ: NEEDLE one whole VAR=VALUE) holds NEEDLE. A rebuilt binary's
# process still counts (its executable shows as "PATH (deleted)").
berth_pids() {
  local suffix=$1 kind=$2 needle=$3 dir pid exe
  for dir in /proc/[0-9]*; do
    pid=${dir#/proc/}
    exe=$(readlink "$dir/exe" 2>/dev/null) || continue
    exe=${exe% (deleted)}
    [[ -z $suffix || $exe == */"$suffix" ]] || continue
    pid_alive "$pid" || continue
    case $kind in
      cmdline)
        [[ $(tr '\0' ' ' <"$dir/cmdline" 2>/dev/null) == *"$needle"* ]] || continue
        ;;
      environ)
        tr '\0' '\n' <"$dir/environ" 2>/dev/null | grep -qxF -- "$needle" || continue
        ;;
    esac
    echo "$pid"
  done
}

# stop_pids WHAT PID...: SIGTERM to all, up to 10 s for them to go, then
# SIGKILL to those left; says what it did to each.
stop_pids() {
  local what=$1 pid left=()
  shift
  for pid in "$@"; do
    pid_alive "$pid" && kill -TERM "$pid" 2>/dev/null && left+=("$pid")
  done
  for _ in $(seq 100); do
    local still=()
    for pid in "${left[@]}"; do pid_alive "$pid" && still+=("$pid"); done
    ((${#still[@]} == 0)) && break
    sleep 0.1
  done
  for pid in "${left[@]}"; do
    if pid_alive "$pid"; then
      kill -KILL "$pid" 2>/dev/null || true
      say "killed $what (pid $pid): it did not stop within 10 s of SIGTERM"
    else
      say "stopped $what (pid $pid)"
    fi
  done
}

# service_pids NAME BINARY: the live processes of service NAME (BINARY its
# path under bazel-bin) serving our runtime directory.
service_pids() {
  berth_pids "$2" cmdline "--runtime_dir=$runtime_dir"
}

# plugin_pids: the driver plugins serving our plugin socket directory:
# berth-driver-* executables whose environment names it (their tasks inherit
# that environment, but not that executable), and whoever listens on a
# socket there (any plugin).
plugin_pids() {
  local socket pid exe
  {
    for pid in $(berth_pids "" environ "BERTH_PLUGIN_SOCKET_DIR=$runtime_dir/plugins"); do
      exe=$(readlink "/proc/$pid/exe" 2>/dev/null) || continue
      exe=${exe% (deleted)}
      [[ ${exe##*/} == berth-driver-* ]] && echo "$pid"
    done
    for socket in "$runtime_dir"/plugins/*.sock; do
      [[ -S $socket ]] && socket_peer_pid "$socket"
    done
  } | sort -un
}

# shim_pids: the sandbox driver's shims of our tasks.
shim_pids() {
  berth_pids services/shim/berth-shim cmdline "--task_log_dir=$state_dir/"
}

# cgroup_parent_dirs: each hierarchy's directory of each berth cgroup parent
# that exists (v1: /sys/fs/cgroup/<controller>/<parent>; v2:
# /sys/fs/cgroup/<parent>).
cgroup_parent_dirs() {
  local parent dir
  for parent in $cgroup_parents; do
    for dir in /sys/fs/cgroup/"$parent" /sys/fs/cgroup/*/"$parent"; do
      [[ -d $dir ]] && echo "$dir"
    done
  done
}

# remove_cgroup DIR: kills every process in DIR and below (until none is
# left: a forking process is caught on the next pass), then removes the
# directories, deepest first. Prints how many processes it killed.
remove_cgroup() {
  local dir=$1 killed=0 pid sub
  for _ in $(seq 50); do
    local any=""
    while read -r pid; do
      [[ -n $pid ]] || continue
      any=yes
      kill -KILL "$pid" 2>/dev/null && killed=$((killed + 1))
    done < <(find "$dir" -name cgroup.procs -exec cat {} + 2>/dev/null)
    [[ -z $any ]] && break
    sleep 0.1
  done
  while read -r sub; do
    rmdir "$sub" 2>/dev/null || true
  done < <(find "$dir" -depth -type d 2>/dev/null)
  echo "$killed"
}

# orphan_sweep: removes what berth left that the node did not (dead node,
# wiped state, killed services): plugins, shims, task cgroups and their
# processes, network namespaces, veths and the bridge, the firewall rules of
# berth's CNI containers, mounts under berth's directories. Says each thing
# it removes; "nothing" when there was none. Idempotent.
orphan_sweep() {
  local removed=0 pids dir task n ns mount link
  pids=$(plugin_pids | paste -sd ' ')
  if [[ -n $pids ]]; then
    # shellcheck disable=SC2086
    stop_pids "a driver plugin" $pids
    removed=$((removed + $(wc -w <<<"$pids")))
  fi
  pids=$(shim_pids | paste -sd ' ')
  if [[ -n $pids ]]; then
    # shellcheck disable=SC2086
    stop_pids "a shim" $pids
    removed=$((removed + $(wc -w <<<"$pids")))
  fi
  # Tasks: one cgroup per task under each parent (one per hierarchy on v1).
  declare -A tasks=()
  for dir in $(cgroup_parent_dirs); do
    for task in "$dir"/*/; do
      [[ -d $task ]] || continue
      task=${task%/}
      n=$(remove_cgroup "$task")
      tasks[${task##*/}]=$((${tasks[${task##*/}]:-0} + n))
      [[ -d $task ]] && say "cannot remove the cgroup $task"
    done
  done
  for task in "${!tasks[@]}"; do
    say "removed the cgroups of task $task (killed ${tasks[$task]} processes)"
    removed=$((removed + 1))
  done
  for ns in "$netns_dir/$netns_prefix"*; do
    [[ -e $ns ]] || continue
    if ip netns del "${ns##*/}" 2>/dev/null || { umount -l "$ns" 2>/dev/null; rm -f "$ns"; }; then
      say "removed the network namespace ${ns##*/}"
      removed=$((removed + 1))
    fi
  done
  if ip link show "$bridge" >/dev/null 2>&1; then
    for link in $(ip -o link show master "$bridge" 2>/dev/null | awk -F': ' '{ sub(/@.*/, "", $2); print $2 }'); do
      ip link del "$link" 2>/dev/null && say "removed the veth $link" && removed=$((removed + 1))
    done
    ip link del "$bridge" && say "removed the bridge $bridge" && removed=$((removed + 1))
  fi
  n=$(remove_container_rules)
  if ((n > 0)); then
    say "removed $n iptables rules of berth's CNI containers ($netns_prefix*)"
    removed=$((removed + 1))
  fi
  # Mounts under berth's directories (snapshots, task roots), deepest first.
  for mount in $(awk -v a="$state_dir/" -v b="$runtime_dir/" \
    'index($5, a) == 1 || index($5, b) == 1 { print $5 }' /proc/self/mountinfo | sort -r); do
    umount -l "$mount" 2>/dev/null && say "unmounted $mount" && removed=$((removed + 1))
  done
  echo "$removed"
}

# remove_container_rules: removes the iptables rules whose comment names a
# CNI container id "<netns_prefix>..." (berth-netns's), and the
# per-container CNI-* chains they jump to (the shared CNI-FORWARD, CNI-ADMIN
# and CNI-HOSTPORT-* stay). Prints how many rules went.
remove_container_rules() {
  command -v iptables-save >/dev/null || { echo 0; return; }
  local table script total=0 n
  for table in nat filter; do
    script=$(iptables-save -t "$table" 2>/dev/null | awk -v id="id: \\\\\"$netns_prefix" '
      /^-A / && index($0, id) {
        sub(/^-A /, "-D "); rules[++n] = $0
        if (match($0, / -j CNI-[^ ]+/)) {
          c = substr($0, RSTART + 4, RLENGTH - 4)
          if (c !~ /^CNI-HOSTPORT-/ && c != "CNI-FORWARD" && c != "CNI-ADMIN") chains[c] = 1
        }
      }
      END {
        if (!n) exit
        for (i = 1; i <= n; i++) print rules[i]
        for (c in chains) { print "-F " c; print "-X " c }
        print "# " n
      }')
    [[ -n $script ]] || continue
    n=${script##*# }
    if printf '*%s\n%s\nCOMMIT\n' "$table" "${script%# *}" | iptables-restore --noflush 2>/dev/null; then
      total=$((total + n))
    else
      say "iptables-restore could not remove the $n rules of berth's containers in table $table"
    fi
  done
  echo "$total"
}
