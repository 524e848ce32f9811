#!/bin/bash
# Smoke test of tools/bench/node.sh (issue 8, point 8) with the binaries of
# the build (no bazel inside), without containerd and crun: its usage errors
# exit 2; a tiny run (1 round, 2 runs, 3 tasks at once, 5 tasks for memory)
# exits 0, prints every berth figure and says it left nothing; a berth-node
# that does not start makes it exit 1 naming that, and leave nothing either.
# Any of that failing fails the test. Never a time.
#
# Needs root (cgroups, namespaces): skips, saying why, without it.
#
# usage: node_smoke_test.sh NODE_SH BERTH_NODE BERTH BERTH_DRIVER_EXEC BERTH_TASK_INIT
set -u

script=$1
node=$2
cli=$3
driver=$4
init=$5
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
if ((EUID != 0)); then
  echo "SKIPPED: needs root (cgroups, namespaces)"
  exit 0
fi

parent="berth-nodesmoke-$$"
out=$(mktemp /tmp/berth-nodesmoke-out-XXXXXX)
err=$(mktemp /tmp/berth-nodesmoke-err-XXXXXX)
trap 'rm -f "$out" "$err"' EXIT
failures=0
passed=0
fail() {
  echo "FAIL: $*"
  echo "--- stdout"
  cat "$out"
  echo "--- stderr"
  cat "$err"
  failures=$((failures + 1))
}
pass() {
  echo "ok: $*"
  passed=$((passed + 1))
}
binaries=(--node="$node" --cli="$cli" --driver="$driver" --init="$init")
# What a run may leave: the driver (its args name $parent), cgroups.
left_behind() {
  local p what=""
  for p in /proc/[0-9]*; do
    tr '\0' ' ' <"$p/cmdline" 2>/dev/null | grep -q -- "--cgroup_parent=/$parent" &&
      what+=" process ${p#/proc/}"
  done
  for p in /sys/fs/cgroup/*/"$parent" /sys/fs/cgroup/"$parent"; do
    [[ -e $p ]] && what+=" cgroup $p"
  done
  echo "$what"
}

# Usage errors: exit 2, before anything is started.
for args in "--rounds=0" "--memory_tasks=x" "--bogus" "--node=$node" \
  "--cgroup_parent=a/b" "--init=$init"; do
  "$script" $args >"$out" 2>"$err"
  code=$?
  if ((code == 2)) && grep -q '^node.sh: ' "$err"; then
    pass "$args: exit 2"
  else
    fail "$args: exit $code, expected 2 and a message"
  fi
done
"$script" --help >"$out" 2>"$err"
code=$?
if ((code == 0)) && grep -q '^usage: tools/bench/node.sh' "$out"; then
  pass "--help"
else
  fail "--help: exit $code"
fi

# A tiny run.
"$script" --rounds=1 --repetitions=2 --tasks=3 --memory_tasks=5 --memory_batch=2 \
  --skip_containerd --skip_crun --cgroup_parent="$parent" "${binaries[@]}" \
  >"$out" 2>"$err"
code=$?
missing=""
for figure in berth_run berth_run_detached; do
  grep -qE "^$figure +.* ms +[0-9.]+ +[0-9.]+ +2$" "$out" || missing+=" $figure"
done
for figure in start_many start_many_per_task rm_many memory_per_task \
  node_growth_per_task driver_growth_per_task init_pss_per_task node_rss_after; do
  grep -qE "^$figure +.* +1$" "$out" || missing+=" $figure"
done
grep -qE '^memory_tasks_running +.* 5\.0 tasks' "$out" || missing+=" memory_tasks_running=5"
grep -qE '^ctr_run .*not measured' "$out" || missing+=" 'ctr_run not measured'"
grep -qE '^memory +memory_per_task .*(met|MISSED)' "$out" || missing+=" memory ratio"
grep -q 'node and driver still up' "$err" || missing+=" 'still up'"
grep -q 'clean-up: no task, container, process, cgroup, mount or temporary file left' "$err" ||
  missing+=" clean-up line"
if ((code == 0)) && [[ -z $missing ]]; then
  pass "a tiny run: exit 0, every berth figure"
else
  fail "a tiny run: exit $code, missing:$missing"
fi
left=$(left_behind)
if [[ -z $left ]]; then pass "the tiny run left nothing"; else fail "the tiny run left:$left"; fi

# berth-node that does not start: exit 1, named, nothing left.
"$script" --rounds=1 --repetitions=1 --tasks=1 --memory_tasks=1 --skip_containerd \
  --skip_crun --cgroup_parent="$parent" --node=/bin/false --cli="$cli" \
  --driver="$driver" >"$out" 2>"$err"
code=$?
if ((code == 1)) && grep -q 'FAILED: berth-node exited at start' "$err" &&
  grep -q 'clean-up: no task' "$err" && ! grep -q '^median' "$out"; then
  pass "a node that exits at start: exit 1, named"
else
  fail "a node that exits at start: exit $code"
fi
left=$(left_behind)
if [[ -z $left ]]; then pass "the failed run left nothing"; else fail "the failed run left:$left"; fi

echo "$passed passed, $failures failed"
((failures == 0))
