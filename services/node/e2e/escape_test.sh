#!/bin/bash
# The escape suite of issue 15 (point 10) under a real node: berth-node with
# the exec and sandbox drivers (and berth-stats, berth-proxy) runs
# tools/escape's berth-escape-probe as a task of each driver, as the task's
# default user and as nobody, the probe bound into the task's root with
# `-v HOST:/probe/berth-escape-probe:ro`. Prints each table and one
# side-by-side summary; fails when any probe says ESCAPED, when the probe
# cannot be bound in, or when a NUL byte in an argument reaches the task.
#
# While `-v` is missing or the driver builds no root of its own, the probe is
# run at its host path instead (said as such) so that the table is still
# printed; the missing -v is a failure of its own.
#
# usage: escape_test.sh NODE CLI DRIVER STATS PROXY SANDBOX AGENT SHIM INIT PROBE
# With $ESCAPE_TABLES_DIR set, each table is copied there as
# table.DRIVER.USER (tools/bench/isolation.sh reads them).
set -u
node_bin=$(readlink -f "$1") cli=$(readlink -f "$2") driver_bin=$(readlink -f "$3")
stats_bin=$(readlink -f "$4") proxy_bin=$(readlink -f "$5")
sandbox_bin=$(readlink -f "$6") agent_bin=$(readlink -f "$7")
shim_bin=$(readlink -f "$8") init_bin=$(readlink -f "$9") probe_bin=$(readlink -f "${10}")
export PATH="/usr/sbin:/sbin:$PATH"

if [[ $(id -u) -ne 0 ]]; then
  echo "SKIPPED: needs root (namespaces, cgroups)"
  exit 0
fi

tag="x$((RANDOM % 90000 + 10000))"
dir="$(mktemp -d /tmp/berth-XXXXXX)"
run="$dir/run" state="$dir/state"
cgroup_parent="/berth-$tag"
in_root=/probe/berth-escape-probe
# shellcheck source=services/node/e2e/e2e_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/e2e_lib.sh"

cleanup() {
  for task in $(berth ps -a -q 2>/dev/null); do berth rm -f "$task" >/dev/null 2>&1; done
  [[ -n ${node_pid:-} ]] && kill "$node_pid" 2>/dev/null && wait "$node_pid" 2>/dev/null
  [[ -n ${stats_pid:-} ]] && kill "$stats_pid" 2>/dev/null && wait "$stats_pid" 2>/dev/null
  [[ -n ${proxy_pid:-} ]] && kill "$proxy_pid" 2>/dev/null && wait "$proxy_pid" 2>/dev/null
  pkill -9 -f "$dir/" 2>/dev/null
  for c in /sys/fs/cgroup/*/"berth-$tag"* /sys/fs/cgroup/"berth-$tag"*; do
    [[ -d $c ]] && find "$c" -depth -type d -exec rmdir {} \; 2>/dev/null
  done
  rm -rf "$dir"
}
trap cleanup EXIT

mkdir -p "$state"
install -d -m 0750 "$run"  # a runtime directory open to others is refused
# The fallback's copy of the probe, and a way through $dir for nobody (to
# the task's directory, and to that copy: the runfiles may sit under /root).
chmod 0755 "$dir"
host_probe="$dir/berth-escape-probe"
cp "$probe_bin" "$host_probe" && chmod 0755 "$host_probe"
cat >"$dir/plugins.json" <<JSON
{"plugins": [{"name": "exec", "binary": "$driver_bin",
  "args": ["--cgroup_parent=$cgroup_parent", "--state_dir=$state/exec"]},
 {"name": "sandbox", "binary": "$sandbox_bin",
  "args": ["--cgroup_parent=$cgroup_parent-sandbox", "--state_dir=$state/sandbox",
           "--agent_path=$agent_bin", "--shim_path=$shim_bin", "--init_path=$init_bin"]}]}
JSON
"$stats_bin" --runtime_dir="$run" >>"$dir/stats.log" 2>&1 &
stats_pid=$!
"$proxy_bin" --runtime_dir="$run" --state_dir="$state" >>"$dir/proxy.log" 2>&1 &
proxy_pid=$!
wait_for 100 test -S "$run/proxy.sock" || { echo "FAILED: berth-proxy did not start:"; cat "$dir/proxy.log"; exit 1; }
"$node_bin" --runtime_dir="$run" --state_dir="$state" \
  --plugin_config="$dir/plugins.json" >>"$dir/node.log" 2>&1 &
node_pid=$!
wait_for 100 berth ps || { echo "FAILED: berth-node did not start:"; cat "$dir/node.log"; exit 1; }
wait_for 100 test -S "$run/plugins/sandbox.sock" && wait_for 100 test -S "$run/plugins/exec.sock"

# run_probe DRIVER USER: the probe's table, in $dir/table.DRIVER.USER.
run_probe() {
  local d=$1 user=$2 out code user_flag=()
  [[ $user == nobody ]] && user_flag=(-u nobody)
  local table="$dir/table.$d.$user"
  out=$(berth run --rm --driver "$d" --net host "${user_flag[@]}" \
    -v "$probe_bin:$in_root:ro" -- "$in_root" 2>"$dir/err")
  code=$?
  if [[ $out == "# berth-escape-probe:"* ]]; then
    pass "${d}_${user}_probe_bound_in"
  else
    fail "${d}_${user}_probe_bound_in" \
      "-v $probe_bin:$in_root:ro: exit $code: $(head -c 300 "$dir/err")"
    # The table anyway: the probe at its host path (visible while the task
    # has no root of its own).
    out=$(berth run --rm --driver "$d" --net host "${user_flag[@]}" \
      -- "$host_probe" 2>"$dir/err")
    code=$?
    if [[ $out != "# berth-escape-probe:"* ]]; then
      fail "${d}_${user}_probe_ran" "at $host_probe: exit $code: $(head -c 300 "$dir/err")"
      : >"$table"
      return
    fi
    echo "(${d}, ${user}: the probe ran at its host path $host_probe, not bound in)"
  fi
  printf '%s\n' "$out" >"$table"
  echo "--- $d driver, user $user (exit $code)"
  printf '%s\n' "$out" | column -t -s '|' 2>/dev/null || printf '%s\n' "$out"
  local escaped
  escaped=$(awk -F' [|] ' '$4 == "ESCAPED" { printf "%s ", $1 }' "$table")
  [[ -z $escaped ]] && pass "${d}_${user}_all_refused" ||
    fail "${d}_${user}_all_refused" "ESCAPED: $escaped"
}

# A NUL byte in an argument: the spec is refused (INVALID_ARGUMENT naming
# the field), or the task's groups do not hold 4242 (the byte forged an
# init spec record `group=4242` once). Shells cannot pass one in argv: the
# spec comes as JSON.
nul_argument() {
  local d=$1 out code
  out=$(berth run --rm --json-spec - 2>&1 <<JSON
{"driver": "$d", "network": {"mode": "NETWORK_MODE_HOST"},
 "driverConfig": {"command": "/usr/bin/id", "args": ["-G\\u0000group=4242"]}}
JSON
)
  code=$?
  echo "--- $d driver, an argument with a NUL byte: exit $code: $out"
  if [[ $code -ne 0 && $out == *NUL* ]] || [[ $code -ne 0 && $out == *nvalid* ]]; then
    echo "nul_argument | refused or no group 4242 | exit $code: ${out//$'\n'/ } | refused" >>"$dir/table.$d.root"
    pass "${d}_nul_argument"
  elif [[ $code -eq 0 && $out != *4242* ]]; then
    echo "nul_argument | refused or no group 4242 | groups ${out//$'\n'/ } | refused" >>"$dir/table.$d.root"
    pass "${d}_nul_argument"
  else
    echo "nul_argument | refused or no group 4242 | exit $code: ${out//$'\n'/ } | ESCAPED" >>"$dir/table.$d.root"
    fail "${d}_nul_argument" "exit $code: $out"
  fi
}

for d in exec sandbox; do
  for user in root nobody; do
    run_probe "$d" "$user"
  done
  nul_argument "$d"
done

# One summary: probe | exec root | exec nobody | sandbox root | sandbox nobody.
echo "--- summary"
/usr/bin/python3 - "$dir" <<'PY'
import os, sys
d = sys.argv[1]
columns = [("exec", "root"), ("exec", "nobody"), ("sandbox", "root"), ("sandbox", "nobody")]
order, verdicts = [], {}
for c in columns:
    path = os.path.join(d, "table.%s.%s" % c)
    for line in open(path) if os.path.exists(path) else []:
        parts = [p.strip() for p in line.split(" | ")]
        if len(parts) != 4 or line.startswith("#"):
            continue
        if parts[0] not in order:
            order.append(parts[0])
        verdicts[(parts[0], c)] = parts[3]
rows = [["probe"] + ["%s %s" % c for c in columns]]
rows += [[p] + [verdicts.get((p, c), "-") for c in columns] for p in order]
widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
for r in rows:
    print(" | ".join(v.ljust(w) for v, w in zip(r, widths)).rstrip())
PY

if [[ -n ${ESCAPE_TABLES_DIR:-} ]]; then
  cp "$dir"/table.* "$ESCAPE_TABLES_DIR"/ 2>/dev/null
fi
if ((failures > 0)); then
  echo "$failures failed"
  exit 1
fi
echo "all passed"
