#!/bin/bash
# Smoke test of netns_bench (the program of tools/bench/netns.sh), against a
# berth-netns it starts on directories, a namespace prefix, bridge and subnet
# of its own, and directly with that berth-netns's conflist: each side runs a
# few cycles (the CNI plugins of /usr/lib/cni, real namespaces) and must exit
# 0 and print its figures; a failing client must exit 1 naming what failed
# (no socket; a Prerun that fails; a plugin missing or failing on the direct
# side) and leave nothing behind. Any of that failing fails the test. Never a
# time, never a packet.
#
# Needs root (namespaces, bridges, iptables): skips, saying why, without it or
# without the CNI plugins.
#
# usage: netns_smoke_test.sh NETNS_BENCH BERTH_NETNS
set -u

client=$1
service=$2
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
if ((EUID != 0)); then
  echo "SKIPPED: needs root (namespaces, bridges, iptables)"
  exit 0
fi
for tool in /usr/lib/cni/bridge /usr/lib/cni/host-local /usr/lib/cni/portmap \
  /usr/lib/cni/firewall; do
  if [[ ! -x $tool ]]; then
    echo "SKIPPED: no $tool (package containernetworking-plugins)"
    exit 0
  fi
done
if ! command -v ip >/dev/null || ! command -v iptables-save >/dev/null; then
  echo "SKIPPED: no ip or iptables-save (packages iproute2, iptables)"
  exit 0
fi

# A short directory: the services' sockets go in it.
tmp=$(mktemp -d /tmp/berth-nbs-XXXXXX)
tag="BERTH_BENCH_SMOKE=$tmp"
export BERTH_BENCH_SMOKE=$tmp
prefix="berth-nbs-$$-"
direct_prefix="${prefix}direct"
bridge="bnbs$$"
network="berth-nbs-$$"
# A /24 of 10.212.100-249 that nothing routes or filters yet (netns.sh uses
# 10.212.0.0/24 by default, the netns_hook tests 10.211.*).
subnet=""
for ((i = 0; i < 150; i++)); do
  third=$((100 + ($$ + i) % 150))
  net_prefix="10.212.$third."
  if ! ip -o route show | grep -qF -- "$net_prefix" &&
    ! iptables-save 2>/dev/null | grep -qF -- "$net_prefix"; then
    subnet="10.212.$third.0/24"
    break
  fi
done
out=$tmp/out
err=$tmp/err
failures=0
passed=0
pids=()

fail() {
  echo "FAIL: $*"
  echo "---- stdout ----"
  cat "$out"
  echo "---- stderr ----"
  cat "$err"
  failures=$((failures + 1))
}
pass() {
  echo "PASS: $*"
  passed=$((passed + 1))
}

# Starts berth-netns on $tmp/NAME with --cni_path=$2; waits for its socket.
start_service() { # NAME CNI_PATH
  local dir=$tmp/$1 i
  install -d -m 0750 "$dir/run"  # a runtime directory open to others is refused
  "$service" --runtime_dir="$dir/run" --state_dir="$dir/state" \
    --netns_dir="$dir/netns" --namespace_prefix="$prefix$1-" \
    --cni_config_dir="$dir/cni" --cni_path="$2" \
    --bridge_network="$network" --bridge_name="$bridge" \
    --bridge_subnet="$subnet" </dev/null >"$dir/log" 2>&1 &
  pids+=($!)
  for ((i = 0; i < 300; i++)); do
    [[ -S $dir/run/netns.sock ]] && return 0
    kill -0 "$!" 2>/dev/null || break
    sleep 0.1
  done
  echo "FAIL: berth-netns on $dir did not start:"
  cat "$dir/log"
  return 1
}

# What the test's cycles may have left, one line each.
leftovers() {
  local f
  for f in "$tmp"/*/netns/* /var/run/netns/"$prefix"*; do
    [[ -e $f ]] && echo "namespace $f"
  done
  iptables-save 2>/dev/null | grep '^-A ' | grep -F -e "$prefix" -e "$net_prefix" |
    sed 's/^/rule /'
  ip -o link show master "$bridge" 2>/dev/null | awk -F': ' '{ print "veth " $2 }'
  find "$tmp"/*/state/netns/ipam -type f -name "$net_prefix*" 2>/dev/null | sed 's/^/lease /'
  return 0
}

cleanup() {
  local pid f
  for pid in "${pids[@]}"; do kill -KILL "$pid" 2>/dev/null; done
  wait 2>/dev/null
  for f in /var/run/netns/"$prefix"*; do [[ -e $f ]] && ip netns del "${f##*/}"; done
  for f in "$tmp"/*/netns/*; do
    umount -l "$f" 2>/dev/null
    rm -f "$f"
  done
  for f in "$tmp"/*/netns; do
    while mountpoint -q "$f"; do umount -l "$f" || break; done
  done
  ip link del "$bridge" 2>/dev/null
  rm -rf "$tmp"
}
trap cleanup EXIT

if [[ -z $subnet ]]; then
  echo "FAIL: no free /24 in 10.212.100-249.0/24"
  exit 1
fi
echo "berth-netns on $tmp, bridge $bridge, subnet $subnet, ids $prefix*"
start_service main /usr/lib/cni || exit 1
conflist=$tmp/main/cni/$network.conflist

# expect_figure NAME: a "median NAME VALUE ms n=2 ..." line and two "sample
# NAME" lines.
expect_figure() {
  grep -qE "^median $1 [0-9]+\.[0-9]+ ms n=2 min=[0-9.]+ max=[0-9.]+$" "$out" ||
    return 1
  [[ $(grep -cE "^sample $1 [0-9]+\.[0-9]+ ms$" "$out") -eq 2 ]]
}
check() { # NAME FIGURES COMMAND... (expected to succeed and print FIGURES)
  local name=$1 figures=$2 code missing=() figure
  shift 2
  "$@" >"$out" 2>"$err"
  code=$?
  if ((code != 0)); then
    fail "$name: exited with code $code"
    return
  fi
  for figure in $figures; do
    expect_figure "$figure" || missing+=("$figure")
  done
  if ((${#missing[@]})); then
    fail "$name: no figure for ${missing[*]}"
  else
    pass "$name: $figures"
    grep '^median ' "$out"
  fi
}
# expect_failure NAME MESSAGE COMMAND...: exit code 1, MESSAGE on stderr, no
# median.
expect_failure() {
  local name=$1 message=$2 code
  shift 2
  "$@" >"$out" 2>"$err"
  code=$?
  if ((code != 1)); then
    fail "$name: exited with code $code, want 1"
  elif ! grep -qF -- "$message" "$err"; then
    fail "$name: stderr does not say \"$message\""
  elif grep -q '^median ' "$out"; then
    fail "$name: printed a median although it failed"
  else
    pass "$name: exit 1, \"$message\""
  fi
}

# 1. Both sides, both figures, two timed cycles each.
check "netns_bench --socket" \
  "berth_bridge berth_bridge_prerun berth_bridge_postrun berth_none berth_none_prerun berth_none_postrun" \
  "$client" --socket="$tmp/main/run/netns.sock" --cycles=2 --warmup=1 --id_prefix=ok
check "netns_bench --direct" \
  "direct_bridge direct_bridge_add direct_bridge_del direct_bridge_netns_add direct_bridge_add_bridge direct_bridge_add_portmap direct_bridge_add_firewall direct_bridge_del_firewall direct_bridge_del_portmap direct_bridge_del_bridge direct_bridge_netns_del direct_none" \
  "$client" --direct --conflist="$conflist" --cycles=2 --warmup=0 \
  --id_prefix="$direct_prefix-ok"

# 2. Failures are loud and leave nothing: no service on the socket; a
#    berth-netns that cannot find the bridge plugin (its Prerun fails); on
#    the direct side a conflist naming a plugin that is not installed, and
#    one whose second plugin fails at ADD (the first one's work is undone).
expect_failure "netns_bench, no socket" \
  "FAILED: dialing berth-netns: " \
  "$client" --socket="$tmp/none.sock" --dial_timeout=200ms --cycles=1
mkdir -p "$tmp/empty"
if start_service noplugins "$tmp/empty"; then
  expect_failure "netns_bench, Prerun fails" \
    "FAILED: Prerun(NETWORK_MODE_BRIDGE) of allocation bad-bridge-0: FAILED_PRECONDITION: " \
    "$client" --socket="$tmp/noplugins/run/netns.sock" --cycles=1 --warmup=0 \
    --id_prefix=bad
  grep -qF "not found in $tmp/empty" "$err" ||
    fail "netns_bench, Prerun fails: the error does not name the plugin directory"
else
  failures=$((failures + 1))
fi
mkdir -p "$tmp/plugins"
cat >"$tmp/plugins/failing" <<'EOF'
#!/bin/sh
cat >/dev/null
echo '{"cniVersion":"1.0.0","code":11,"msg":"refused on purpose"}'
exit 1
EOF
chmod +x "$tmp/plugins/failing"
make_conflist() { # TYPE FILE: the bridge plugin of the test's network, then TYPE
  cat >"$2" <<EOF
{
  "cniVersion": "1.0.0",
  "name": "$network",
  "plugins": [
    {
      "type": "bridge",
      "bridge": "$bridge",
      "isGateway": true,
      "ipMasq": true,
      "ipam": {
        "type": "host-local",
        "ranges": [[{"subnet": "$subnet"}]],
        "dataDir": "$tmp/main/state/netns/ipam"
      }
    },
    {"type": "$1"}
  ]
}
EOF
}
make_conflist missing "$tmp/missing.conflist"
expect_failure "netns_bench --direct, missing plugin" \
  "FAILED: CNI plugin \"missing\" of $tmp/missing.conflist not found in /usr/lib/cni" \
  "$client" --direct --conflist="$tmp/missing.conflist" --cycles=1 --warmup=0 \
  --id_prefix="$direct_prefix-missing"
make_conflist failing "$tmp/failing.conflist"
expect_failure "netns_bench --direct, failing plugin" \
  "FAILED: CNI ADD of plugin \"failing\" for container $direct_prefix-failing-bridge-0 exited with code 1: stdout: {\"cniVersion\":\"1.0.0\",\"code\":11,\"msg\":\"refused on purpose\"}" \
  "$client" --direct --conflist="$tmp/failing.conflist" \
  --cni_path="$tmp/plugins:/usr/lib/cni" --cycles=1 --warmup=0 \
  --id_prefix="$direct_prefix-failing"

# 3. The services stop cleanly; nothing is left: namespaces, rules, veths,
#    leases, processes.
for i in "${!pids[@]}"; do
  kill -TERM "${pids[$i]}"
  wait "${pids[$i]}"
  code=$?
  if ((code != 0)); then
    : >"$out"
    cp "$tmp/main/log" "$err"
    fail "berth-netns (pid ${pids[$i]}) exited with code $code after SIGTERM"
  fi
done
pids=()
left=$(leftovers)
if [[ -n $left ]]; then
  echo "$left" >"$out"
  : >"$err"
  fail "left behind by the cycles"
else
  pass "no namespace, rule, veth or lease left"
fi
left=""
for p in /proc/[0-9]*; do
  [[ ${p#/proc/} == "$$" ]] && continue
  grep -qzx -- "$tag" "$p/environ" 2>/dev/null && left+=" ${p#/proc/}"
done
if [[ -n $left ]]; then
  ps -o pid,args -p "${left// /,}" >"$out" 2>&1
  : >"$err"
  fail "processes left behind:$left"
else
  pass "no process left behind"
fi

echo "$passed passed, $failures failed"
[[ $failures -eq 0 ]]
