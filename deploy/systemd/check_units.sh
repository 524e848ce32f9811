#!/bin/bash
# Checks berth's systemd units against the binaries they start: every flag
# of each ExecStart must be one the binary lists in --help; every unit
# restarts on failure and leaves /run/berth to berth.tmpfiles.conf (no
# RuntimeDirectory=, which would give it back to root:root); that file makes
# it root:<group> 0750 for the group berth.sysusers.conf creates and
# berth-node's --socket_group names; berth-node is ordered after its three
# neighbours and stops only itself (KillMode=process), so that tasks outlive
# it.
#
# usage: check_units.sh UNIT_DIR BINARY...   (binaries named as in ExecStart)
set -u
unit_dir="$1"; shift
declare -A binaries
for binary in "$@"; do binaries[$(basename "$binary")]="$binary"; done
errors=0
error() { echo "$1: $2"; errors=$((errors + 1)); }

for unit in "$unit_dir"/berth-*.service; do
  name=$(basename "$unit")
  exec_start=$(sed -n 's/^ExecStart=//p' "$unit")
  [[ -z $exec_start ]] && { error "$name" "no ExecStart"; continue; }
  read -r -a words <<<"$exec_start"
  program=$(basename "${words[0]}")
  binary=${binaries[$program]:-}
  if [[ -z $binary ]]; then
    error "$name" "starts $program, which is not one of berth's binaries"
    continue
  fi
  help=$("$binary" --helpfull 2>&1)
  for word in "${words[@]:1}"; do
    flag=${word%%=*}; flag=${flag#--}
    grep -q -- "--$flag " <<<"$help" ||
      error "$name" "$program has no flag --$flag"
  done
  grep -qx "Restart=on-failure" "$unit" || error "$name" "no Restart=on-failure"
  grep -q "^RuntimeDirectory" "$unit" &&
    error "$name" "has RuntimeDirectory settings: systemd would make /run/berth root:root at each start (berth.tmpfiles.conf makes it)"
done
node="$unit_dir/berth-node.service"
for neighbour in berth-netns berth-stats berth-proxy; do
  grep -q "^After=.*$neighbour.service" "$node" ||
    error berth-node.service "not ordered after $neighbour.service"
done
grep -qx "KillMode=process" "$node" ||
  error berth-node.service "no KillMode=process: stopping the node would kill every task"
# The node's socket group (default berth) exists and owns /run/berth.
group=$(sed -n 's/^ExecStart=.*--socket_group=\([^ ]*\).*/\1/p' "$node")
group=${group:-berth}
tmpfiles="$unit_dir/berth.tmpfiles.conf"
sysusers="$unit_dir/berth.sysusers.conf"
if [[ ! -f $tmpfiles ]]; then
  error berth.tmpfiles.conf "missing: nothing makes /run/berth"
elif ! grep -Eq "^d /run/berth 0750 root $group( |$)" "$tmpfiles"; then
  error berth.tmpfiles.conf "does not make /run/berth root:$group 0750"
fi
if [[ ! -f $sysusers ]]; then
  error berth.sysusers.conf "missing: nothing creates group $group"
elif ! grep -Eq "^g $group( |$)" "$sysusers"; then
  error berth.sysusers.conf "does not create group $group (berth-node --socket_group)"
fi
if ((errors > 0)); then
  echo "FAILED: $errors problems"
  exit 1
fi
echo "units OK"
