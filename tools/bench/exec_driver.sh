#!/usr/bin/env bash
# The benchmark of issue 5, point 9: a driver plugin's StartTask, ExecTask and
# ExecTaskStreaming next to crun, a raw Unix-socket relay and a bare gRPC echo
# of ExecTaskStreaming, measured in the same run, in interleaved rounds, with
# the medians and the ratios (against the targets where there are some) at the
# end. See tools/bench/README.md.
#
# usage: tools/bench/exec_driver.sh [--driver=PATH] [--rounds=5]
#            [--repetitions=20] [--stream_repetitions=2]
#            [--stream_bytes=1073741824] [--memory_tasks=100]
#
#   --driver=PATH   the driver plugin binary, or a Bazel label of one (built
#                   -c opt), e.g. --driver=//plugins/examples/mock_driver; by
#                   default //services/driver/exec:berth-driver-exec when it
#                   builds, else //plugins/examples/mock_driver
#   --rounds        rounds; each runs every reference and the driver benchmark
#                   once (references first in odd rounds, last in even ones)
#   --repetitions   timed start / exec calls (and crun runs / execs) per round
#   --stream_repetitions, --stream_bytes
#                   timed streams per round (driver, relay and gRPC echo),
#                   bytes each
#   --memory_tasks  tasks running at once for task_memory (one sample per
#                   round): the driver's PSS growth plus the PSS of each
#                   task's own process (berth-task-init), per task
#
# Needs root (crun, cgroups). Installs crun, busybox-static and jq from Debian
# when missing. On this hybrid cgroup layout crun refuses to run while the
# cgroup2 hierarchy (/sys/fs/cgroup/unified) owns a controller (hugetlb here):
# while crun runs (its steps of each round, not the driver's), each such
# controller is mounted as a cgroup v1 hierarchy (which takes it off cgroup2);
# it is given back after them, and at the end whatever happens.
# Leaves nothing behind: containers, cgroups, processes, temporary files.
set -euo pipefail

# The driver measured by default, and the one used while it does not build.
DEFAULT_DRIVER_TARGET=//services/driver/exec:berth-driver-exec
FALLBACK_DRIVER_TARGET=//plugins/examples/mock_driver

driver=""
rounds=5
repetitions=20
stream_repetitions=2
stream_bytes=$((1 << 30))
memory_tasks=100

# say, die, usage, require_positive_integers.
source "$(dirname "${BASH_SOURCE[0]}")/script_lib.sh"

for arg in "$@"; do
  case $arg in
    --driver=*) driver=${arg#*=} ;;
    --rounds=*) rounds=${arg#*=} ;;
    --repetitions=*) repetitions=${arg#*=} ;;
    --stream_repetitions=*) stream_repetitions=${arg#*=} ;;
    --stream_bytes=*) stream_bytes=${arg#*=} ;;
    --memory_tasks=*) memory_tasks=${arg#*=} ;;
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
require_positive_integers rounds repetitions stream_repetitions stream_bytes memory_tasks
((EUID == 0)) || die "needs root (crun, cgroups)"

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$root"

# --- Debian packages -------------------------------------------------------
missing=()
for package in crun busybox-static jq; do
  dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q 'install ok installed' ||
    missing+=("$package")
done
if ((${#missing[@]})); then
  say "installing from Debian: ${missing[*]}"
  DEBIAN_FRONTEND=noninteractive apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
    "${missing[@]}" >/dev/null
fi
crun_bin=$(command -v crun) || die "crun is not on PATH after installing it"
busybox=/bin/busybox
[[ -x $busybox ]] || die "$busybox missing (package busybox-static)"

# --- build -----------------------------------------------------------------
# -c opt; no bazel-* symlinks (--symlink_prefix=/), so that those of the other
# builds in this tree stay as they are.
# Quiet unless it fails.
bazel_build() {
  local log
  log=$(bazel build -c opt --symlink_prefix=/ "$@" 2>&1) && return 0
  printf '%s\n' "$log" | tail -n 20 >&2
  return 1
}
bin=$(bazel info -c opt bazel-bin 2>/dev/null) || die "bazel info failed"
# //a/b:c -> $bin/a/b/c, //a/b -> $bin/a/b/b
label_path() {
  local label=${1#//}
  [[ $label == *:* ]] || label="$label:${label##*/}"
  echo "$bin/${label%%:*}/${label#*:}"
}
say "building (bazel build -c opt)"
bazel_build //tools/bench:exec_driver_bench //tools/bench:unix_relay_bench \
  //tools/bench:spawn_bench || die "bazel build of //tools/bench failed"
if [[ $driver == //* ]]; then
  bazel_build "$driver" || die "bazel build of $driver failed"
  driver=$(label_path "$driver")
elif [[ -z $driver ]]; then
  if [[ -f services/driver/exec/BUILD.bazel ]] && bazel_build "$DEFAULT_DRIVER_TARGET"; then
    driver=$(label_path "$DEFAULT_DRIVER_TARGET")
  else
    say "note: $DEFAULT_DRIVER_TARGET does not build (yet); measuring $FALLBACK_DRIVER_TARGET"
    bazel_build "$FALLBACK_DRIVER_TARGET" || die "bazel build of $FALLBACK_DRIVER_TARGET failed"
    driver=$(label_path "$FALLBACK_DRIVER_TARGET")
  fi
fi
[[ -x $driver && -f $driver ]] || die "--driver: $driver is not an executable file"
client=$bin/tools/bench/exec_driver_bench
relay=$bin/tools/bench/unix_relay_bench
spawn=$bin/tools/bench/spawn_bench

# --- clean-up, whatever happens from here on ---------------------------------
tmp=$(mktemp -d /tmp/berth-bench-XXXXXX)
# Every process of this run carries this variable (the script's children
# inherit it; the driver, its tasks and the containers are given it), so that
# the clean-up finds whatever a killed step left.
export BERTH_BENCH_RUN=$tmp
tag="BERTH_BENCH_RUN=$tmp"
prefix="berth-bench-$$" # containers, tasks and so their cgroups
crun_root=$tmp/crun
crun=("$crun_bin" "--root=$crun_root")
run_id=$prefix-run
sleep_id=$prefix-sleep
moved=()       # controllers moved off cgroup2, while crun runs
ever_moved=()  # all the controllers moved during the run
made_dirs=()   # their mount points, made here

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
# Cgroups of this run's containers and tasks, deepest first.
our_cgroups() {
  find /sys/fs/cgroup -mindepth 2 -maxdepth 6 -depth -type d -name "*$prefix*" 2>/dev/null
  return 0
}
# The driver runs with its default --cgroup_parent (/berth) and makes that
# parent where it is missing: the ones this run made go with it.
driver_parents() { find /sys/fs/cgroup -mindepth 1 -maxdepth 2 -type d -name berth 2>/dev/null; }
driver_parents_before=$(driver_parents)
driver_parents_made() {
  local dir
  for dir in $(driver_parents); do
    grep -qxF -- "$dir" <<<"$driver_parents_before" || echo "$dir"
  done
  return 0
}

# --- cgroup controllers off cgroup2, for crun only ---------------------------------
# move_off_cgroup2, restore_cgroup2, wait_back_on_cgroup2 (and why).
# shellcheck source=tools/bench/cgroup2_controllers.sh
source "$root/tools/bench/cgroup2_controllers.sh"

cleanup() {
  local status=$? leftovers=() pids=() cgroups cgroup controller
  trap - EXIT INT TERM
  set +e
  if [[ -d $crun_root ]]; then
    "${crun[@]}" delete -f "$sleep_id" >/dev/null 2>&1
    "${crun[@]}" delete -f "$run_id" >/dev/null 2>&1
  fi
  mapfile -t pids < <(tagged_pids)
  if ((${#pids[@]})); then
    say "killing what a step left: pids ${pids[*]}"
    kill -KILL "${pids[@]}" 2>/dev/null
    sleep 0.5
  fi
  for cgroup in $(our_cgroups) $(driver_parents_made); do rmdir "$cgroup" 2>/dev/null; done
  (restore_cgroup2) || status=1
  wait_back_on_cgroup2
  rm -rf "$tmp"

  # What is left (nothing, normally).
  mapfile -t pids < <(tagged_pids)
  ((${#pids[@]} == 0)) || leftovers+=("processes: ${pids[*]}")
  cgroups="$(our_cgroups)$(driver_parents_made)"
  [[ -z $cgroups ]] || leftovers+=("cgroups: $cgroups")
  [[ ! -e $tmp ]] || leftovers+=("directory: $tmp")
  for controller in "${ever_moved[@]}"; do
    on_cgroup2 "$controller" ||
      leftovers+=("$controller not back on cgroup2 ($(grep -P "^$controller\t" /proc/cgroups | tr '\t' ' '))")
  done
  if ((${#leftovers[@]})); then
    say "WARNING: left behind: ${leftovers[*]}"
    status=1
  else
    say "clean-up: no container, cgroup, process or temporary file left; /proc/cgroups: $(grep -P '^hugetlb\t' /proc/cgroups | tr '\t' ' ')"
  fi
  exit "$status"
}
trap cleanup EXIT
trap 'say "interrupted"; exit 130' INT
trap 'say "terminated"; exit 143' TERM

# --- the OCI bundles ---------------------------------------------------------
# A busybox-static root file system; the config from `crun spec` (new pid,
# network, ipc, uts and mount namespaces), without a terminal, with $tag in the
# environment.
oci=$tmp/oci
mkdir -p "$oci/rootfs/bin" "$oci/rootfs/proc" "$oci/rootfs/dev" "$oci/rootfs/sys" \
  "$oci/rootfs/tmp" "$oci/rootfs/etc"
cp "$busybox" "$oci/rootfs/bin/busybox"
for applet in sh true sleep cat; do ln -s busybox "$oci/rootfs/bin/$applet"; done
make_bundle() { # DIR ARGS_JSON
  mkdir -p "$1"
  (cd "$1" && "$crun_bin" spec)
  jq --arg root "$oci/rootfs" --arg tag "$tag" --argjson args "$2" \
    '.process.terminal = false | .process.args = $args | .root.path = $root
     | .process.env += [$tag]' "$1/config.json" >"$1/config.json.new"
  mv "$1/config.json.new" "$1/config.json"
}
make_bundle "$oci/true" '["/bin/true"]'
make_bundle "$oci/sleep" '["/bin/sleep", "3600"]'

# --- rounds ----------------------------------------------------------------------
samples=$tmp/samples
: >"$samples"
# Runs one program of a round; keeps its samples; fails naming it.
step() { # NAME COMMAND...
  local name=$1 log=$tmp/step.log
  shift
  if ! "$@" >"$log" 2>&1; then
    cat "$log" >&2
    die "round $round: $name failed: $*"
  fi
  grep '^sample ' "$log" >>"$samples"
  grep 'WARNING' "$log" >&2 || true
  grep '^median ' "$log" | awk '{ printf "  %-14s %10.3f %s\n", $2, $3, $4 }' >&2
}
references() {
  move_off_cgroup2
  if ((round == 1)); then # once by hand first: an error shows its message
    "${crun[@]}" run --bundle "$oci/true" "$run_id" </dev/null >/dev/null ||
      die "crun run of the busybox bundle failed (see above)"
  fi
  "${crun[@]}" run -d --bundle "$oci/sleep" "$sleep_id" </dev/null >/dev/null \
    2>"$tmp/crun-sleep.err" ||
    die "crun run -d of the sleep bundle failed: $(cat "$tmp/crun-sleep.err")"
  if ((round == 1)); then
    "${crun[@]}" exec "$sleep_id" /bin/true </dev/null >/dev/null ||
      die "crun exec into $sleep_id failed (see above)"
  fi
  step "crun run" "$spawn" --name=crun_run --repetitions="$repetitions" -- \
    "${crun[@]}" run --bundle "$oci/true" "$run_id"
  step "crun exec" "$spawn" --name=crun_exec --repetitions="$repetitions" -- \
    "${crun[@]}" exec "$sleep_id" /bin/true
  "${crun[@]}" delete -f "$sleep_id" >/dev/null || die "crun delete -f $sleep_id failed"
  restore_cgroup2
  step "relay" "$relay" --bytes="$stream_bytes" --repetitions="$stream_repetitions" \
    --tmp_dir="$tmp"
  step "grpc echo" "$client" --echo_server --stream_repetitions="$stream_repetitions" \
    --stream_bytes="$stream_bytes" --tag_env="$tag" --tmp_dir="$tmp"
}
driver_bench() {
  step "exec_driver_bench" "$client" --driver="$driver" --repetitions="$repetitions" \
    --figures=start,exec,stream,memory --memory_tasks="$memory_tasks" \
    --stream_repetitions="$stream_repetitions" --stream_bytes="$stream_bytes" \
    --tag_env="$tag" --task_prefix="$prefix" --tmp_dir="$tmp"
}
if [[ $(stat -fc %T /sys/fs/cgroup/unified 2>/dev/null) == cgroup2fs &&
  -n $(cat /sys/fs/cgroup/unified/cgroup.controllers) ]]; then
  say "cgroup2 owns $(cat /sys/fs/cgroup/unified/cgroup.controllers): moved off it (mounted as cgroup v1 on /sys/fs/cgroup/<controller>) while crun runs, then given back"
fi
say "driver: $driver"
say "$rounds rounds of $repetitions start/exec repetitions and $stream_repetitions streams of $stream_bytes bytes"
for ((round = 1; round <= rounds; round++)); do
  say "round $round/$rounds ($(cut -d' ' -f1-3 /proc/loadavg) load)"
  if ((round % 2)); then
    references
    driver_bench
  else
    driver_bench
    references
  fi
done

# --- the table -------------------------------------------------------------------
sort -k2,2 -k3,3g "$samples" | awk -v rounds="$rounds" -v bytes="$stream_bytes" '
  { name = $2; n[name]++; v[name, n[name]] = $3; unit[name] = $4 }
  function median(name,   k) {
    k = n[name]
    return k % 2 ? v[name, (k + 1) / 2] : (v[name, k / 2] + v[name, k / 2 + 1]) / 2
  }
  function row(name, what) {
    if (!(name in n)) { printf "%-14s %-46s %s\n", name, what, "not measured"; return }
    printf "%-14s %-46s %9.3f %-4s %9.3f %9.3f %4d\n", name, what, median(name),
      unit[name], v[name, 1], v[name, n[name]], n[name]
  }
  # target 0: no target; what the ratio tells instead.
  function ratio(label, a, b, target, lower_is_better, what,   r, met) {
    if (!(a in n) || !(b in n) || median(b) == 0) {
      printf "%-10s %s / %s: not measured\n", label, a, b; return
    }
    r = median(a) / median(b)
    if (target == 0) {
      printf "%-10s %-13s / %-13s = %6.3f   no target: %s\n", label, a, b, r, what
      return
    }
    met = lower_is_better ? r <= target : r >= target
    printf "%-10s %-13s / %-13s = %6.3f   target %s %.2f: %s\n", label, a, b, r,
      lower_is_better ? "<=" : ">=", target, met ? "met" : "MISSED"
  }
  END {
    mib = bytes / 1048576
    size = mib >= 1024 && mib % 1024 == 0 ? (mib / 1024) " GiB" : mib " MiB"
    printf "\nmedians over %d rounds\n", rounds
    printf "%-14s %-46s %9s %-4s %9s %9s %4s\n", "figure", "what", "median", "", "min", "max", "n"
    row("driver_start", "StartTask(/bin/true) until the call returns")
    row("crun_run", "crun run, busybox bundle, /bin/true")
    row("driver_exec", "ExecTask(/bin/true) into a sleep task")
    row("crun_exec", "crun exec /bin/true into a crun run -d sleep")
    row("driver_stream", "ExecTaskStreaming, " size " through cat")
    row("relay_stream", "raw Unix-socket relay, " size " through cat")
    row("echo_stream", "ExecTaskStreaming, " size ", bare gRPC echo")
    row("task_memory", "kB per running task: driver growth + its process")
    printf "\nratios of medians\n"
    ratio("start", "driver_start", "crun_run", 0.5, 1)
    ratio("exec", "driver_exec", "crun_exec", 0.5, 1)
    ratio("streaming", "driver_stream", "relay_stream", 0.5, 0)
    ratio("berth", "driver_stream", "echo_stream", 0, 0,
      "the driver, SDK, cat and pipes against bare gRPC")
    ratio("grpc", "echo_stream", "relay_stream", 0, 0,
      "what gRPC with 32 KiB frames allows against the relay")
    if ("task_memory" in n) {
      printf "%-10s %-29s = %6.1f kB target <= 1024 kB (1 MiB): %s\n", "memory",
        "task_memory", median("task_memory"),
        median("task_memory") <= 1024 ? "met" : "MISSED"
    }
  }'
say "driver: $driver"
