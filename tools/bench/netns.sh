#!/usr/bin/env bash
# The benchmark of issue 6, point 8: berth-netns's Prerun + Postrun of a
# fresh allocation, through its gRPC socket, next to the same work done
# directly, measured in the same run, in interleaved rounds, with the medians
# and the ratios against the targets at the end. See tools/bench/README.md.
#
#   bridge  Prerun(NETWORK_MODE_BRIDGE) + Postrun, next to `ip netns add`,
#           the ADD of the bridge, portmap and firewall plugins of the very
#           conflist berth-netns uses (prevResult chained), their DEL in
#           reverse order (with the ADD result), `ip netns del`.
#           Target: berth <= 1.2x direct.
#   none    Prerun(NETWORK_MODE_NONE) + Postrun, next to `ip netns add X`
#           and `ip netns del X`. Target: berth <= 2x direct.
#
# usage: tools/bench/netns.sh [--rounds=5] [--cycles=20] [--warmup=2]
#            [--subnet=10.212.0.0/24]
#
#   --rounds   rounds; each runs both sides once (the direct one first in odd
#              rounds, last in even ones)
#   --cycles   timed cycles of each figure per side and round
#   --warmup   untimed cycles of each figure before them
#   --subnet   the bridge network's subnet, a /24 nothing on the machine
#              routes or filters yet
#
# Needs root (namespaces, bridges, iptables). Installs
# containernetworking-plugins, iproute2 and iptables from Debian when
# missing. berth-netns runs on directories of its own in a temporary
# directory, with a namespace prefix, network, bridge (bbench<pid>) and
# subnet of its own; the direct side's namespaces are
# /var/run/netns/berth-bench-<pid>-direct-*. Never sends a packet.
# Leaves nothing behind: the service, its bridge, namespaces, IP leases,
# iptables rules naming the run's ids or addresses, the temporary directory;
# says so at the end, and exits 1 if anything is left (or leaked by a cycle).
set -euo pipefail

rounds=5
cycles=20
warmup=2
subnet=10.212.0.0/24

# say, die, usage, require_positive_integers.
source "$(dirname "${BASH_SOURCE[0]}")/script_lib.sh"

for arg in "$@"; do
  case $arg in
    --rounds=*) rounds=${arg#*=} ;;
    --cycles=*) cycles=${arg#*=} ;;
    --warmup=*) warmup=${arg#*=} ;;
    --subnet=*) subnet=${arg#*=} ;;
    -h | --help)
      usage
      exit 0
      ;;
    *)
      usage >&2
      say "unknown argument: $arg"
      exit 2
      ;;
  esac
done
require_positive_integers rounds cycles
[[ $warmup =~ ^[0-9]+$ ]] || {
  say "--warmup must be a non-negative integer, not '$warmup'"
  exit 2
}
[[ $subnet =~ ^([0-9]{1,3}\.[0-9]{1,3}\.[0-9]{1,3})\.0/24$ ]] || {
  say "--subnet must be a /24 (A.B.C.0/24), not '$subnet'"
  exit 2
}
net_prefix="${BASH_REMATCH[1]}." # "10.212.0.": what names our addresses
((EUID == 0)) || die "needs root (namespaces, bridges, iptables)"

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$root"

# --- Debian packages -------------------------------------------------------
missing=()
for package in containernetworking-plugins iproute2 iptables; do
  dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q 'install ok installed' ||
    missing+=("$package")
done
if ((${#missing[@]})); then
  say "installing from Debian: ${missing[*]}"
  DEBIAN_FRONTEND=noninteractive apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
    "${missing[@]}" >/dev/null
fi
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin:$PATH
cni_path=/usr/lib/cni
for plugin in bridge host-local portmap firewall; do
  [[ -x $cni_path/$plugin ]] || die "$cni_path/$plugin missing (package containernetworking-plugins)"
done
command -v ip >/dev/null || die "ip missing (package iproute2)"
command -v iptables-save >/dev/null || die "iptables-save missing (package iptables)"

# --- build -----------------------------------------------------------------
# -c opt; no bazel-* symlinks (--symlink_prefix=/), so that those of the other
# builds in this tree stay as they are. Quiet unless it fails.
bazel_build() {
  local log
  log=$(bazel build -c opt --symlink_prefix=/ "$@" 2>&1) && return 0
  printf '%s\n' "$log" | tail -n 20 >&2
  return 1
}
say "building (bazel build -c opt)"
bazel_build //tools/bench:netns_bench //services/netns_hook:berth-netns ||
  die "bazel build of //tools/bench:netns_bench and //services/netns_hook:berth-netns failed"
bin=$(bazel info -c opt bazel-bin 2>/dev/null) || die "bazel info failed"
client=$bin/tools/bench/netns_bench
service=$bin/services/netns_hook/berth-netns

# --- the run's names ---------------------------------------------------------
prefix="berth-bench-$$-"          # berth's namespaces and CNI container ids
direct_prefix="berth-bench-$$-direct" # the direct side's
bridge="bbench$$"
network="berth-bench-$$"
# Nothing may use the subnet yet: its addresses name our rules and leases.
if ip -o route show | grep -qF -- "$net_prefix" ||
  ip -o addr show | grep -qF -- " $net_prefix" ||
  iptables-save 2>/dev/null | grep -qF -- "$net_prefix"; then
  die "the subnet $subnet is in use on this machine (a route, an address or an iptables rule names it); choose another with --subnet"
fi
ip link show "$bridge" >/dev/null 2>&1 && die "a link named $bridge exists already"
forward_before=$(cat /proc/sys/net/ipv4/ip_forward)

# --- clean-up, whatever happens from here on ---------------------------------
# A short directory: berth-netns's socket goes in it.
tmp=$(mktemp -d /tmp/berth-bench-XXXXXX)
# Every process of this run carries this variable (the script's children
# inherit it), so that the clean-up finds whatever a killed step left.
export BERTH_BENCH_RUN=$tmp
tag="BERTH_BENCH_RUN=$tmp"
service_pid=""
leaked=() # what the cycles left (found before the clean-up sweeps)

tagged_pids() {
  local p pid
  for p in /proc/[0-9]*; do
    pid=${p#/proc/}
    [[ $pid == "$$" || $pid == "$BASHPID" ]] && continue
    grep -qzx -- "$tag" "$p/environ" 2>/dev/null && echo "$pid"
  done
  return 0
}
# The rules (iptables-save lines) naming the run's ids or addresses.
our_rules() {
  iptables-save 2>/dev/null | grep -e '^-A ' | grep -F -e "$prefix" -e "$net_prefix" || true
}
# The namespaces of the run: berth's (files in its directory) and the direct
# side's.
our_namespaces() {
  local f
  for f in "$tmp/netns"/* /var/run/netns/"$direct_prefix"*; do
    [[ -e $f ]] && echo "$f"
  done
  return 0
}
# Mounts under the temporary directory (the namespace directory and its
# namespaces).
our_mounts() {
  awk -v t="$tmp" '$5 == t || index($5, t "/") == 1 { print $5 }' /proc/self/mountinfo
}
# IP leases host-local keeps for the network (files named by an address).
our_leases() {
  find "$tmp/state/netns/ipam" -type f -name "$net_prefix*" 2>/dev/null || true
}
our_veths() {
  ip -o link show master "$bridge" 2>/dev/null | awk -F': ' '{ print $2 }' | cut -d@ -f1
}

# Removes the rules naming the run's ids or addresses and the per-container
# chains they jump to (the chains every container shares stay: CNI-FORWARD,
# CNI-ADMIN, CNI-HOSTPORT-*), in one iptables-restore per table.
sweep_rules() {
  local table rules chains chain
  for table in nat filter; do
    rules=$(iptables-save -t "$table" 2>/dev/null | grep -e '^-A ' |
      grep -F -e "$prefix" -e "$net_prefix" || true)
    [[ -n $rules ]] || continue
    chains=$(grep -oE -- '-j CNI-[A-Za-z0-9_-]+' <<<"$rules" | cut -c4- | sort -u |
      grep -vE '^CNI-(FORWARD|ADMIN|HOSTPORT-.*)$' || true)
    {
      echo "*$table"
      sed 's/^-A /-D /' <<<"$rules"
      for chain in $chains; do printf -- '-F %s\n-X %s\n' "$chain" "$chain"; done
      echo COMMIT
    } | iptables-restore --noflush
  done
}

stop_service() {
  local i status=0
  [[ -n $service_pid ]] || return 0
  kill -TERM "$service_pid" 2>/dev/null
  for ((i = 0; i < 100; i++)); do
    kill -0 "$service_pid" 2>/dev/null || break
    sleep 0.1
  done
  if kill -0 "$service_pid" 2>/dev/null; then
    say "WARNING: berth-netns (pid $service_pid) did not stop within 10 s of SIGTERM; killing it"
    kill -KILL "$service_pid" 2>/dev/null
  fi
  wait "$service_pid" 2>/dev/null || status=$?
  ((status == 0)) || say "WARNING: berth-netns exited with status $status after SIGTERM (log: tail of $tmp/netns.log below)"
  ((status == 0)) || tail -n 5 "$tmp/netns.log" >&2
  service_pid=""
  return 0
}

cleanup() {
  local status=$? leftovers=() pids=() f rules namespaces leases veths mounts i
  trap - EXIT INT TERM
  set +e
  stop_service
  mapfile -t pids < <(tagged_pids)
  if ((${#pids[@]})); then
    say "killing what a step left: pids ${pids[*]}"
    kill -KILL "${pids[@]}" 2>/dev/null
    sleep 0.5
  fi

  # What the cycles left (after a complete run: a leak).
  rules=$(our_rules)
  namespaces=$(our_namespaces)
  leases=$(our_leases)
  veths=$(our_veths)
  [[ -z $rules ]] || leaked+=("$(wc -l <<<"$rules") iptables rules")
  [[ -z $namespaces ]] || leaked+=("namespaces: $(tr '\n' ' ' <<<"$namespaces")")
  [[ -z $leases ]] || leaked+=("leases: $(tr '\n' ' ' <<<"$leases")")
  [[ -z $veths ]] || leaked+=("veths on $bridge: $(tr '\n' ' ' <<<"$veths")")
  if ((${#leaked[@]})); then
    say "WARNING: the cycles left: ${leaked[*]}; removing them"
    [[ -z $rules ]] || printf '  %s\n' "$rules" >&2
    status=1
  fi

  # The clean-up proper.
  sweep_rules
  for f in /var/run/netns/"$direct_prefix"*; do
    [[ -e $f ]] && ip netns del "${f##*/}"
  done
  for f in "$tmp/netns"/*; do
    [[ -e $f ]] || continue
    umount -l "$f" 2>/dev/null
    rm -f "$f"
  done
  for ((i = 0; i < 4; i++)); do
    mountpoint -q "$tmp/netns" 2>/dev/null || break
    umount -l "$tmp/netns"
  done
  for f in $(our_veths); do ip link del "$f" 2>/dev/null; done
  ip link del "$bridge" 2>/dev/null
  if [[ $forward_before == 0 && $(cat /proc/sys/net/ipv4/ip_forward) == 1 ]]; then
    echo 0 >/proc/sys/net/ipv4/ip_forward
    say "net.ipv4.ip_forward set back to 0 (the bridge plugin turns it on)"
  fi
  mounts=$(our_mounts)
  [[ -n $mounts ]] || rm -rf "$tmp"

  # What is left (nothing, normally).
  mapfile -t pids < <(tagged_pids)
  ((${#pids[@]} == 0)) || leftovers+=("processes: ${pids[*]}")
  [[ -z $(our_rules) ]] || leftovers+=("iptables rules: $(our_rules | wc -l)")
  namespaces=$(our_namespaces)
  [[ -z $namespaces ]] || leftovers+=("namespaces: $(tr '\n' ' ' <<<"$namespaces")")
  [[ -z $mounts ]] || leftovers+=("mounts: $(tr '\n' ' ' <<<"$mounts")")
  ! ip link show "$bridge" >/dev/null 2>&1 || leftovers+=("bridge $bridge")
  ! ip -o route show | grep -qF -- "$net_prefix" || leftovers+=("routes to $subnet")
  [[ ! -e $tmp ]] || leftovers+=("directory: $tmp (leases, records)")
  if ((${#leftovers[@]})); then
    say "WARNING: left behind: ${leftovers[*]}"
    status=1
  else
    say "clean-up: berth-netns stopped;${leaked[*]:+ what the cycles left removed;} no namespace, veth, bridge, lease, iptables rule naming $prefix or $subnet, process or temporary file left"
  fi
  exit "$status"
}
trap cleanup EXIT
trap 'say "interrupted"; exit 130' INT
trap 'say "terminated"; exit 143' TERM

# --- berth-netns ------------------------------------------------------------------
install -d -m 0750 "$tmp/run"  # a runtime directory open to others is refused
"$service" --runtime_dir="$tmp/run" --state_dir="$tmp/state" \
  --netns_dir="$tmp/netns" --namespace_prefix="$prefix" \
  --cni_config_dir="$tmp/cni" --cni_path="$cni_path" \
  --bridge_network="$network" --bridge_name="$bridge" \
  --bridge_subnet="$subnet" </dev/null >"$tmp/netns.log" 2>&1 &
service_pid=$!
for ((i = 0; i < 300; i++)); do
  [[ -S $tmp/run/netns.sock ]] && break
  kill -0 "$service_pid" 2>/dev/null || {
    cat "$tmp/netns.log" >&2
    service_pid=""
    die "berth-netns exited at start (its log is above)"
  }
  sleep 0.1
done
[[ -S $tmp/run/netns.sock ]] || die "berth-netns made no socket $tmp/run/netns.sock within 30 s"
conflist=$tmp/cni/$network.conflist
[[ -f $conflist ]] || die "berth-netns wrote no $conflist"

# --- rounds ----------------------------------------------------------------------
samples=$tmp/samples
: >"$samples"
step() { # NAME COMMAND...
  local name=$1 log=$tmp/step.log
  shift
  if ! "$@" >"$log" 2>&1; then
    grep -v '^sample ' "$log" >&2 # what it printed but the samples
    die "round $round: $name failed after $(grep -c '^sample ' "$log") samples: $*"
  fi
  grep '^sample ' "$log" >>"$samples"
  grep '^median ' "$log" | grep -E ' (berth|direct)_(bridge|none) ' |
    awk '{ printf "  %-14s %10.3f %s\n", $2, $3, $4 }' >&2
}
berth_side() {
  step "berth-netns" "$client" --socket="$tmp/run/netns.sock" \
    --cycles="$cycles" --warmup="$warmup" --id_prefix="r$round"
}
direct_side() {
  step "direct" "$client" --direct --conflist="$conflist" --cni_path="$cni_path" \
    --ifname=eth0 --cycles="$cycles" --warmup="$warmup" \
    --id_prefix="$direct_prefix-r$round"
}
say "berth-netns on $tmp (bridge $bridge, subnet $subnet, ids $prefix*); direct namespaces /var/run/netns/$direct_prefix-*"
say "$rounds rounds of $cycles bridge and $cycles none cycles per side ($warmup untimed first)"
for ((round = 1; round <= rounds; round++)); do
  say "round $round/$rounds ($(cut -d' ' -f1-3 /proc/loadavg) load)"
  if ((round % 2)); then
    direct_side
    berth_side
  else
    berth_side
    direct_side
  fi
done

# --- the table -------------------------------------------------------------------
# The direct side's plugin steps, in the order they ran.
plugin_steps=$(grep -oE '^sample direct_bridge_(add|del)_[A-Za-z0-9_.-]+' "$samples" |
  cut -d' ' -f2 | awk '!seen[$0]++' | tr '\n' ' ')
sort -k2,2 -k3,3g "$samples" | awk -v rounds="$rounds" -v steps="$plugin_steps" '
  { name = $2; n[name]++; v[name, n[name]] = $3; unit[name] = $4 }
  function median(name,   k) {
    k = n[name]
    return k % 2 ? v[name, (k + 1) / 2] : (v[name, k / 2] + v[name, k / 2 + 1]) / 2
  }
  function row(name, what) {
    if (!(name in n)) { printf "%-26s %-52s %s\n", name, what, "not measured"; return }
    printf "%-26s %-52s %9.3f %-2s %9.3f %9.3f %4d\n", name, what, median(name),
      unit[name], v[name, 1], v[name, n[name]], n[name]
  }
  function ratio(label, a, b, target, what,   r) {
    if (!(a in n) || !(b in n) || median(b) == 0) {
      printf "%-8s %s / %s: not measured\n", label, a, b; return
    }
    r = median(a) / median(b)
    if (target == 0) {
      printf "%-8s %-20s / %-18s = %6.3f   no target: %+.3f ms, %s\n", label, a, b, r,
        median(a) - median(b), what
      return
    }
    printf "%-8s %-20s / %-18s = %6.3f   target <= %.2f: %s (%+.3f ms)\n", label, a, b, r,
      target, r <= target ? "met" : "MISSED", median(a) - median(b)
  }
  END {
    printf "\nmedians over %d rounds (ms)\n", rounds
    printf "%-26s %-52s %9s %-2s %9s %9s %4s\n", "figure", "what", "median", "", "min", "max", "n"
    row("berth_bridge", "Prerun(BRIDGE) + Postrun through the socket")
    row("direct_bridge", "ip netns add, ADD x3, DEL x3, ip netns del")
    row("berth_none", "Prerun(NONE) + Postrun through the socket")
    row("direct_none", "ip netns add + ip netns del")
    printf "where the bridge cycle goes\n"
    row("berth_bridge_prerun", "Prerun(BRIDGE)")
    row("direct_bridge_add", "ip netns add + the ADDs")
    row("berth_bridge_postrun", "Postrun of it")
    row("direct_bridge_del", "the DELs + ip netns del")
    row("direct_bridge_netns_add", "  ip netns add")
    k = split(steps, s, " ")
    for (i = 1; i <= k; i++) {
      p = s[i]; sub(/^direct_bridge_/, "", p); sub(/_/, " ", p)
      row(s[i], "  " toupper(substr(p, 1, 3)) substr(p, 4))
    }
    row("direct_bridge_netns_del", "  ip netns del")
    row("berth_none_prerun", "Prerun(NONE)")
    row("berth_none_postrun", "Postrun of it")
    printf "\nratios of medians\n"
    ratio("bridge", "berth_bridge", "direct_bridge", 1.2)
    ratio("none", "berth_none", "direct_none", 2.0)
    ratio("prerun", "berth_bridge_prerun", "direct_bridge_add", 0, "Prerun against netns add + ADDs")
    ratio("postrun", "berth_bridge_postrun", "direct_bridge_del", 0, "Postrun against DELs + netns del")
  }'
say "berth-netns: $service; subnet $subnet; CNI_PATH $cni_path"
