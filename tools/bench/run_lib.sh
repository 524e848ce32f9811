# Sourced by the benchmark scripts that start berth-node and a private
# containerd (images.sh; node.sh has the same code inline): Debian packages,
# the run's processes, cgroups and mounts for the clean-up, and containerd on
# the run's temporary directory. Needs script_lib.sh's say and die.
#
# The caller sets, before using what needs them:
#   tmp            the run's temporary directory
#   tag            "BERTH_BENCH_RUN=$tmp", exported to every process of the run
#   prefix         the containerd namespace; its cgroups hold it in their name
#   cgroup_parent  the exec driver's --cgroup_parent, without the "/"; empty:
#                  none of the run's
#   ctr_sock, ctr_bin, containerd_bin, ctr (ctr -a "$ctr_sock" -n "$prefix")
#                  for containerd
# shellcheck shell=bash disable=SC2154

# Installs those of the named Debian packages that are missing.
install_missing() { # PACKAGE...
  local package missing=()
  for package in "$@"; do
    dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q 'install ok installed' ||
      missing+=("$package")
  done
  ((${#missing[@]})) || return 0
  say "installing from Debian: ${missing[*]}"
  DEBIAN_FRONTEND=noninteractive apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
    "${missing[@]}" >/dev/null
}

# Processes (but this shell and the subshell running this) whose environment
# has $tag.
tagged_pids() {
  local p pid
  for p in /proc/[0-9]*; do
    pid=${p#/proc/}
    [[ $pid == "$$" || $pid == "$BASHPID" ]] && continue
    grep -qzx -- "$tag" "$p/environ" 2>/dev/null && echo "$pid"
  done
  return 0
}
# Cgroups of this run (the driver's parent, containerd's namespace), deepest
# first.
our_cgroups() {
  local dir
  if [[ -n $cgroup_parent ]]; then
    for dir in /sys/fs/cgroup/*/"$cgroup_parent" /sys/fs/cgroup/"$cgroup_parent"; do
      [[ -d $dir ]] && find "$dir" -depth -type d
    done
  fi
  find /sys/fs/cgroup -mindepth 2 -maxdepth 6 -depth -type d -name "*$prefix*" 2>/dev/null
  return 0
}
# Processes in those cgroups.
cgroup_pids() {
  local cgroup
  for cgroup in $(our_cgroups); do cat "$cgroup/cgroup.procs" 2>/dev/null; done | sort -un
  return 0
}
# Mounts under the temporary directory (snapshots, the tasks' roots), deepest
# first.
our_mounts() {
  awk -v t="$tmp/" 'index($5, t) == 1 { print $5 }' /proc/self/mountinfo | sort -r
}
# Removes the empty cgroups $cgroup_parent a previous run killed before its
# clean-up left; dies if one has processes (another run now), clearing
# cgroup_parent so that the clean-up leaves it alone.
remove_stale_cgroup_parent() {
  local dir
  for dir in /sys/fs/cgroup/*/"$cgroup_parent" /sys/fs/cgroup/"$cgroup_parent"; do
    [[ -d $dir ]] || continue
    find "$dir" -depth -type d -exec rmdir {} \; 2>/dev/null
    [[ ! -d $dir ]] || {
      cgroup_parent=""
      die "$dir exists with processes in it (another $bench_script running?)"
    }
  done
}
# SIGTERM, then up to 10 s for it to go; 1 if it did not.
stop_pid() { # PID (empty: nothing)
  local i
  [[ -n $1 ]] && kill -0 "$1" 2>/dev/null || return 0
  kill -TERM "$1"
  for ((i = 0; i < 100; i++)); do
    kill -0 "$1" 2>/dev/null || return 0
    sleep 0.1
  done
  return 1
}

# A private containerd: its root, state and sockets under $tmp/ctr, nothing of
# it but the overlayfs snapshotter and the runc shim v2 (no CRI, no /opt
# plugins). Sets containerd_pid; dies if it does not answer within 30 s.
start_containerd() {
  local i
  mkdir -p "$tmp/ctr"
  cat >"$tmp/ctr/config.toml" <<EOF
version = 2
disabled_plugins = ["io.containerd.grpc.v1.cri", "io.containerd.internal.v1.opt",
  "io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs",
  "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.aufs",
  "io.containerd.tracing.processor.v1.otlp", "io.containerd.internal.v1.tracing"]
[grpc]
  address = "$ctr_sock"
[ttrpc]
  address = "$ctr_sock.ttrpc"
[debug]
  address = ""
[metrics]
  address = ""
EOF
  "$containerd_bin" --root "$tmp/ctr/root" --state "$tmp/ctr/state" \
    --address "$ctr_sock" --config "$tmp/ctr/config.toml" </dev/null \
    >"$tmp/ctr/containerd.log" 2>&1 &
  containerd_pid=$!
  for ((i = 0; i < 300; i++)); do
    kill -0 "$containerd_pid" 2>/dev/null || {
      tail -n 20 "$tmp/ctr/containerd.log" >&2
      die "containerd exited at start (its log above)"
    }
    "$ctr_bin" -a "$ctr_sock" version >/dev/null 2>&1 && return 0
    sleep 0.1
  done
  die "containerd did not answer within 30 s"
}
# Its containers (normally none: --rm) killed and deleted, then containerd
# stopped; 1 if it ignored SIGTERM for 10 s.
stop_containerd() {
  local cid
  [[ -n $containerd_pid ]] && kill -0 "$containerd_pid" 2>/dev/null || return 0
  for cid in $("${ctr[@]}" containers list -q 2>/dev/null); do
    "${ctr[@]}" tasks kill -s KILL "$cid" >/dev/null 2>&1
    "${ctr[@]}" tasks delete -f "$cid" >/dev/null 2>&1
    "${ctr[@]}" containers delete "$cid" >/dev/null 2>&1
  done
  stop_pid "$containerd_pid"
}
