#!/bin/bash
# Smoke test of tools/bench/python_driver_node.sh (issue 13, point 4) with
# the binaries of the build: a usage error exits 2; a tiny run (5 tasks, a
# second of steady state) exits 0 and prints every figure: no probe failed,
# the plugin was not relaunched, it exited 0 at the node's SIGTERM, every
# task kept running and was recovered. Never a time.
#
# usage: python_driver_node_smoke_test.sh SCRIPT BERTH_NODE BERTH
set -u
script=$1 node=$2 cli=$3
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
if ((EUID != 0)); then
  echo "SKIPPED: needs root (berth-node's state)"
  exit 0
fi
failures=0
check() {  # check NAME CONDITION...
  local name=$1; shift
  if "$@"; then echo "ok: $name"; else echo "FAIL: $name"; failures=$((failures + 1)); fi
}
"$script" --tasks=zero >/dev/null 2>&1
check "a usage error exits 2" test $? -eq 2

out=$("$script" --tasks=5 --parallel=2 --steady=1 --node="$node" --cli="$cli" 2>&1)
code=$?
echo "$out"
check "a tiny run exits 0" test "$code" -eq 0
check "no probe failed" grep -qE "health probes +[0-9]+ probes, 0 failed" <<<"$out"
check "the plugin was not relaunched" grep -qE "plugin relaunched +no" <<<"$out"
check "the plugin exited 0 at the node's SIGTERM" grep -q "plugin python stopped: exited with code 0" <<<"$out"
check "every task kept running" grep -qE "tasks after it +5 still running" <<<"$out"
check "every task was recovered" grep -qE "recovery +5 of 5 recovered" <<<"$out"
check "nothing left" grep -qE "removal +[0-9]+ ms for all; 0 task monitors left" <<<"$out"
((failures == 0)) || exit 1
echo PASSED
