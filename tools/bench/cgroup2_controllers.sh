#!/usr/bin/env bash
# Sourced by exec_driver.sh and node.sh (after script_lib.sh, for say and
# die; the caller defines the arrays moved, made_dirs and ever_moved).
#
# Cgroup controllers off cgroup2, for crun only.
# crun 1.8.1 refuses a hybrid layout whose cgroup2 hierarchy owns a controller
# ("cgroups in hybrid mode not supported, drop all controllers from
# cgroupv2"). Mounting the controller as a cgroup v1 hierarchy takes it off
# cgroup2; unmounting that hierarchy, once it has no child cgroup left, gives
# it back. Only the crun steps of a round run in that state: the driver and
# the relay see the machine's own layout, and so does everything else on the
# machine for all but a second or two per round.
cgroup_count() { awk -v c="$1" '$1 == c { print $3 }' /proc/cgroups; }
on_cgroup2() { awk -v c="$1" '$1 == c && $2 == 0 { f = 1 } END { exit !f }' /proc/cgroups; }

move_off_cgroup2() {
  local controller mount_point
  [[ $(stat -fc %T /sys/fs/cgroup/unified 2>/dev/null) == cgroup2fs ]] || return 0
  local controllers=()
  read -ra controllers </sys/fs/cgroup/unified/cgroup.controllers
  for controller in "${controllers[@]}"; do
    mount_point=/sys/fs/cgroup/$controller
    mountpoint -q "$mount_point" && die "$mount_point is mounted but $controller is on cgroup2"
    if [[ ! -d $mount_point ]]; then
      mkdir "$mount_point"
      made_dirs+=("$mount_point")
    fi
    moved+=("$controller")
    [[ " ${ever_moved[*]} " == *" $controller "* ]] || ever_moved+=("$controller")
    mount -t cgroup -o "$controller" cgroup "$mount_point" ||
      die "cannot mount $controller as a cgroup v1 hierarchy on $mount_point"
  done
}

# Gives one moved controller back to cgroup2. A v1 hierarchy outlives its
# umount while it has child cgroups, even removed ones the kernel has not
# freed yet (right after `crun delete` it still counts the container's): so
# remove the empty children (crun's; anyone's made while it was mounted) and
# wait until /proc/cgroups counts only the root, then umount and wait for
# hierarchy 0. A hierarchy that lingers with a child after that (made between
# the count and the umount) is mounted again and emptied. One that lingers
# with no child is held by something else (an open file in it, a mount
# namespace made while it was mounted): it goes back by itself once that
# ends, which the clean-up waits for. Children that keep processes, or a
# umount that stays busy (a process with a file or its working directory in
# it), leave it mounted, with a warning naming them: returns 1.
restore_controller() {
  local controller=$1 mount_point=/sys/fs/cgroup/$1 i
  for _ in 1 2 3; do
    if mountpoint -q "$mount_point"; then
      for ((i = 0; i < 150; i++)); do # up to 30 s
        find "$mount_point" -mindepth 1 -depth -type d -exec rmdir {} \; 2>/dev/null || true
        [[ $(cgroup_count "$controller") == 1 ]] && break
        sleep 0.2
      done
      if [[ $(cgroup_count "$controller") != 1 ]]; then
        say "WARNING: cgroups with processes in $mount_point; leaving it mounted:"
        find "$mount_point" -mindepth 1 -type d -exec sh -c \
          'echo "  $1: pids $(tr "\n" " " <"$1/cgroup.procs")"' _ {} \; >&2
        say "once they are gone: find $mount_point -mindepth 1 -depth -type d -exec rmdir {} +; umount $mount_point"
        return 1
      fi
      for ((i = 0; i < 150; i++)); do # up to 30 s while it is busy
        umount "$mount_point" 2>/dev/null && break
        sleep 0.2
      done
      if mountpoint -q "$mount_point"; then
        say "WARNING: cannot umount $mount_point ($(umount "$mount_point" 2>&1)); leaving it mounted; in use by pids: $(users_of "$mount_point")"
        return 1
      fi
    fi
    for ((i = 0; i < 25; i++)); do
      on_cgroup2 "$controller" && return 0
      sleep 0.2
    done
    [[ $(cgroup_count "$controller") == 1 ]] && return 0 # held elsewhere; see above
    mount -t cgroup -o "$controller" cgroup "$mount_point" || return 1
  done
  return 1
}

# Processes with their working directory or an open file under $1.
users_of() {
  local p f
  for p in /proc/[0-9]*; do
    for f in "$p/cwd" "$p"/fd/*; do
      if [[ $(readlink "$f" 2>/dev/null) == "$1"* ]]; then
        printf '%s ' "${p#/proc/}"
        break
      fi
    done
  done
  return 0
}

restore_cgroup2() {
  local controller mount_point status=0 left=() start=$EPOCHREALTIME
  for controller in "${moved[@]}"; do
    if restore_controller "$controller"; then
      say "$controller given back in $(awk -v a="$start" -v b="$EPOCHREALTIME" \
        'BEGIN { printf "%.1f", b - a }') s; /proc/cgroups: $(grep -P "^$controller\t" /proc/cgroups | tr '\t' ' ')"
    else
      left+=("$controller")
      status=1
    fi
  done
  moved=()
  for mount_point in "${made_dirs[@]}"; do
    mountpoint -q "$mount_point" || rmdir "$mount_point" 2>/dev/null || true
  done
  made_dirs=()
  if ((status)); then die "could not give ${left[*]} back to cgroup2"; fi
  return 0
}

# At the end: waits up to 60 s for every controller ever moved to be on
# cgroup2 again (one held elsewhere goes back once that ends).
wait_back_on_cgroup2() {
  local controller i said=0
  for controller in "${ever_moved[@]}"; do
    for ((i = 0; i < 300; i++)); do
      on_cgroup2 "$controller" && break
      if ((!said)); then
        say "waiting for $controller's v1 hierarchy to be released (unmounted, no child cgroup; something still holds it)"
        said=1
      fi
      sleep 0.2
    done
    on_cgroup2 "$controller" || return 1
  done
  return 0
}
