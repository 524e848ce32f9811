#!/usr/bin/env bash
# The benchmark of issue 8, point 8: berth-node end to end through the berth
# CLI, next to containerd (`ctr run --rm`) and crun of an equivalent busybox
# image or bundle, measured in the same run, in interleaved rounds; 100 tasks
# started at once; and what 1000 running tasks cost in memory. Prints the
# medians and the ratios against the targets at the end. See
# tools/bench/README.md.
#
# usage: tools/bench/node.sh [--rounds=5] [--repetitions=10] [--tasks=100]
#            [--memory_tasks=1000] [--memory_batch=50] [--skip_containerd]
#            [--skip_crun] [--cgroup_parent=berth-bench-node]
#            [--node=PATH --cli=PATH --driver=PATH [--init=PATH]]
#
#   --rounds        rounds; each times `berth run --rm --net host -- /bin/true`,
#                   `ctr run --rm` and `crun run` of busybox's /bin/true
#                   (references first in odd rounds, last in even ones), then
#                   starts --tasks tasks at once and removes them
#   --repetitions   timed runs of each of the three per round (one more, untimed,
#                   first)
#   --tasks         `berth run -d --net host -- /bin/sleep 600` launched at
#                   once, per round
#   --memory_tasks  running sleep tasks for the memory figure (once, after the
#                   rounds), started --memory_batch at a time: PSS growth of
#                   berth-node and of the exec driver plus the PSS of every
#                   task's berth-task-init, per task
#   --skip_containerd, --skip_crun
#                   leave a reference out (its rows say "not measured")
#   --cgroup_parent the driver's --cgroup_parent (/NAME; the tasks' cgroups
#                   are /NAME/<id> on every hierarchy); removed at the end
#   --node, --cli, --driver, --init
#                   binaries to use instead of building them (-c opt):
#                   //services/node:berth-node, //services/node/cli:berth,
#                   //services/driver/exec:berth-driver-exec and (given to the
#                   driver as --init_path; by default it finds it itself)
#                   //services/driver/exec/init:berth-task-init
#
# Needs root (cgroups, namespaces). Installs containerd, runc, crun,
# busybox-static and jq from Debian when missing (those that the figures asked
# for need). Starts its own berth-node (driver exec, tasks under the cgroup
# /berth-bench-node) and its own containerd, both on a temporary directory. On
# this hybrid cgroup layout crun refuses to run while cgroup2 owns a
# controller (hugetlb here): while crun runs, and only then, it is mounted as a
# cgroup v1 hierarchy, and given back after (at the end whatever happens), as
# exec_driver.sh does. Leaves nothing behind: tasks, containers, processes,
# cgroups, mounts, containerd state, temporary files.
set -euo pipefail
export LC_ALL=C

rounds=5
repetitions=10
tasks=100
memory_tasks=1000
memory_batch=50
skip_containerd=0
skip_crun=0
cgroup_parent=berth-bench-node
node=""
cli=""
driver=""
init=""

# say, die, usage, require_positive_integers.
source "$(dirname "${BASH_SOURCE[0]}")/script_lib.sh"

for arg in "$@"; do
  case $arg in
    --rounds=*) rounds=${arg#*=} ;;
    --repetitions=*) repetitions=${arg#*=} ;;
    --tasks=*) tasks=${arg#*=} ;;
    --memory_tasks=*) memory_tasks=${arg#*=} ;;
    --memory_batch=*) memory_batch=${arg#*=} ;;
    --skip_containerd) skip_containerd=1 ;;
    --skip_crun) skip_crun=1 ;;
    --cgroup_parent=*) cgroup_parent=${arg#*=} ;;
    --node=*) node=${arg#*=} ;;
    --cli=*) cli=${arg#*=} ;;
    --driver=*) driver=${arg#*=} ;;
    --init=*) init=${arg#*=} ;;
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
require_positive_integers rounds repetitions tasks memory_tasks memory_batch
given=0
for n in node cli driver; do [[ -n ${!n} ]] && given=$((given + 1)); done
if ((given != 0 && given != 3)); then
  say "--node, --cli and --driver go together (all three, or none: built here)"
  exit 2
fi
cgroup_parent=${cgroup_parent#/}
[[ $cgroup_parent =~ ^[A-Za-z0-9][A-Za-z0-9._-]*$ ]] || {
  say "--cgroup_parent must be one cgroup name ([A-Za-z0-9._-]), not '$cgroup_parent'"
  exit 2
}
if [[ -n $init && $given == 0 ]]; then
  say "--init goes with --node, --cli and --driver"
  exit 2
fi
((EUID == 0)) || die "needs root (cgroups, namespaces, containerd, crun)"

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$root"

# --- Debian packages -------------------------------------------------------
wanted=()
((skip_crun)) || wanted+=(crun jq)
((skip_containerd)) || wanted+=(containerd runc)
((skip_crun && skip_containerd)) || wanted+=(busybox-static)
missing=()
for package in "${wanted[@]}"; do
  dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q 'install ok installed' ||
    missing+=("$package")
done
if ((${#missing[@]})); then
  say "installing from Debian: ${missing[*]}"
  DEBIAN_FRONTEND=noninteractive apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
    "${missing[@]}" >/dev/null
fi
busybox=/bin/busybox
if ((!skip_crun || !skip_containerd)); then
  [[ -x $busybox ]] || die "$busybox missing (package busybox-static)"
fi
crun_bin=""
if ((!skip_crun)); then
  crun_bin=$(command -v crun) || die "crun is not on PATH after installing it"
fi
containerd_bin=""
ctr_bin=""
if ((!skip_containerd)); then
  containerd_bin=$(command -v containerd) || die "containerd is not on PATH after installing it"
  ctr_bin=$(command -v ctr) || die "ctr is not on PATH after installing containerd"
  command -v runc >/dev/null || die "runc is not on PATH after installing it"
  python=$(command -v python3) || die "python3 is needed to write the OCI image"
fi

# --- build -----------------------------------------------------------------
# -c opt; no bazel-* symlinks (--symlink_prefix=/), so that those of the other
# builds in this tree stay as they are. Quiet unless it fails.
if ((given == 0)); then
  bin=$(bazel info -c opt bazel-bin 2>/dev/null) || die "bazel info failed"
  say "building (bazel build -c opt)"
  if ! log=$(bazel build -c opt --symlink_prefix=/ //services/node:berth-node \
    //services/node/cli:berth //services/driver/exec:berth-driver-exec \
    //services/driver/exec/init:berth-task-init 2>&1); then
    printf '%s\n' "$log" | tail -n 20 >&2
    die "bazel build failed"
  fi
  node=$bin/services/node/berth-node
  cli=$bin/services/node/cli/berth
  driver=$bin/services/driver/exec/berth-driver-exec
fi
for n in node cli driver init; do
  [[ -z ${!n} ]] && continue
  [[ -x ${!n} && -f ${!n} ]] || die "--$n: ${!n} is not an executable file"
  printf -v "$n" '%s' "$(readlink -f "${!n}")"
done

# --- clean-up, whatever happens from here on ---------------------------------
tmp=$(mktemp -d /tmp/berth-bench-node-XXXXXX)
# Every process of this run carries this variable (the script's children
# inherit it: berth-node, its driver, containerd and its shims; the tasks and
# containers are given it), so that the clean-up finds whatever a killed step
# left.
export BERTH_BENCH_RUN=$tmp
tag="BERTH_BENCH_RUN=$tmp"
prefix="berth-bench-$$" # crun containers, the containerd namespace, cgroups
sock=$tmp/run/node.sock
berth=("$cli" "--socket=$sock")
node_pid=""
driver_pid=""
containerd_pid=""
ctr_sock=$tmp/ctr/containerd.sock
ctr=("$ctr_bin" -a "$ctr_sock" -n "$prefix")
image=berth-bench.local/busybox:latest
crun_root=$tmp/crun
crun=("$crun_bin" "--root=$crun_root")
run_containerd=0 # /run/containerd made here (ctr's fifos, the shims' sockets)
[[ -e /run/containerd ]] || run_containerd=1
moved=()      # controllers moved off cgroup2, while crun runs
ever_moved=() # all the controllers moved during the run
made_dirs=()  # their mount points, made here

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
# Cgroups of this run (the driver's parent, crun's containers, containerd's
# namespace), deepest first.
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
# Mounts under the temporary directory (containerd's snapshots and rootfs),
# deepest first.
our_mounts() {
  awk -v t="$tmp/" 'index($5, t) == 1 { print $5 }' /proc/self/mountinfo | sort -r
}

# --- cgroup controllers off cgroup2, for crun only ---------------------------
# move_off_cgroup2, restore_cgroup2, wait_back_on_cgroup2: shared with
# exec_driver.sh (see there and the README).
# shellcheck source=tools/bench/cgroup2_controllers.sh
source "$root/tools/bench/cgroup2_controllers.sh"

# Removes every task the node knows, 50 at a time.
remove_all_tasks() {
  local ids
  ids=$("${berth[@]}" ps -a -q 2>/dev/null) || return 1
  [[ -z $ids ]] && return 0
  printf '%s\n' $ids | xargs -r -n 1 -P 50 "${berth[@]}" rm -f >/dev/null 2>&1
}

cleanup() {
  local status=$? leftovers=() pids=() cgroups cgroup controller mounts i
  trap - EXIT INT TERM
  set +e
  # berth's tasks, then berth-node (it stops its driver; tasks would outlive
  # it, hence first).
  if [[ -n $node_pid ]] && kill -0 "$node_pid" 2>/dev/null; then
    remove_all_tasks || say "WARNING: could not list the node's tasks to remove them"
    kill -TERM "$node_pid"
    for ((i = 0; i < 100; i++)); do
      kill -0 "$node_pid" 2>/dev/null || break
      sleep 0.1
    done
  fi
  # containerd's containers (normally none: --rm), then containerd.
  if [[ -n $containerd_pid ]] && kill -0 "$containerd_pid" 2>/dev/null; then
    for cid in $("${ctr[@]}" containers list -q 2>/dev/null); do
      "${ctr[@]}" tasks kill -s KILL "$cid" >/dev/null 2>&1
      "${ctr[@]}" tasks delete -f "$cid" >/dev/null 2>&1
      "${ctr[@]}" containers delete "$cid" >/dev/null 2>&1
    done
    kill -TERM "$containerd_pid"
    for ((i = 0; i < 100; i++)); do
      kill -0 "$containerd_pid" 2>/dev/null || break
      sleep 0.1
    done
  fi
  if [[ -d $crun_root ]]; then
    for cid in $("${crun[@]}" list -q 2>/dev/null); do
      "${crun[@]}" delete -f "$cid" >/dev/null 2>&1
    done
  fi
  mapfile -t pids < <(tagged_pids; cgroup_pids)
  if ((${#pids[@]})); then
    say "killing what a step left: pids ${pids[*]}"
    kill -KILL "${pids[@]}" 2>/dev/null
    sleep 0.5
  fi
  for mount in $(our_mounts); do umount "$mount" 2>/dev/null || umount -l "$mount"; done
  for ((i = 0; i < 50; i++)); do
    cgroups=$(our_cgroups)
    [[ -z $cgroups ]] && break
    for cgroup in $cgroups; do rmdir "$cgroup" 2>/dev/null; done
    [[ -z $(our_cgroups) ]] && break
    sleep 0.2
  done
  (restore_cgroup2) || status=1
  wait_back_on_cgroup2
  rm -rf "$tmp"
  if ((run_containerd)) && [[ -d /run/containerd ]]; then
    find /run/containerd -depth -type d -empty -delete 2>/dev/null
  fi

  # What is left (nothing, normally).
  mapfile -t pids < <(tagged_pids; cgroup_pids)
  ((${#pids[@]} == 0)) || leftovers+=("processes: ${pids[*]}")
  cgroups=$(our_cgroups)
  [[ -z $cgroups ]] || leftovers+=("cgroups: $cgroups")
  mounts=$(our_mounts)
  [[ -z $mounts ]] || leftovers+=("mounts: $mounts")
  [[ ! -e $tmp ]] || leftovers+=("directory: $tmp")
  ((run_containerd == 0)) || [[ ! -e /run/containerd ]] ||
    leftovers+=("/run/containerd: $(find /run/containerd | tr '\n' ' ')")
  for controller in "${ever_moved[@]}"; do
    on_cgroup2 "$controller" ||
      leftovers+=("$controller not back on cgroup2 ($(grep -P "^$controller\t" /proc/cgroups | tr '\t' ' '))")
  done
  if ((${#leftovers[@]})); then
    say "WARNING: left behind: ${leftovers[*]}"
    status=1
  else
    say "clean-up: no task, container, process, cgroup, mount or temporary file left; /proc/cgroups: $(grep -P '^hugetlb\t' /proc/cgroups | tr '\t' ' ')"
  fi
  exit "$status"
}
trap cleanup EXIT
trap 'say "interrupted"; exit 130' INT
trap 'say "terminated"; exit 143' TERM

# A previous run killed before its clean-up, or one running now.
for dir in /sys/fs/cgroup/*/"$cgroup_parent" /sys/fs/cgroup/"$cgroup_parent"; do
  [[ -d $dir ]] || continue
  find "$dir" -depth -type d -exec rmdir {} \; 2>/dev/null
  [[ ! -d $dir ]] || {
    cgroup_parent="" # not ours: leave it alone in the clean-up
    die "$dir exists with processes in it (another node.sh running?)"
  }
done

# --- berth-node --------------------------------------------------------------
mkdir -p "$tmp/state" "$tmp/exec"
install -d -m 0750 "$tmp/run"  # a runtime directory open to others is refused
init_args=""
[[ -z $init ]] || init_args=", \"--init_path=$init\""
cat >"$tmp/plugins.json" <<EOF
{"plugins":[{"name":"exec","binary":"$driver","args":["--state_dir=$tmp/exec","--cgroup_parent=/$cgroup_parent"$init_args]}]}
EOF
"$node" --runtime_dir="$tmp/run" --state_dir="$tmp/state" \
  --plugin_config="$tmp/plugins.json" --netns_socket=none --stats_socket=none \
  --proxy_socket=none --images_socket=none </dev/null >"$tmp/node.log" 2>&1 &
node_pid=$!
for ((i = 0; i < 300; i++)); do # up to 30 s
  kill -0 "$node_pid" 2>/dev/null || {
    tail -n 20 "$tmp/node.log" >&2
    die "berth-node exited at start (its log above)"
  }
  "${berth[@]}" node status >/dev/null 2>&1 && break
  sleep 0.1
done
"${berth[@]}" node status >"$tmp/status" 2>&1 || {
  cat "$tmp/status" >&2
  tail -n 20 "$tmp/node.log" >&2
  die "berth node status: not healthy within 30 s (above: it, then the node's log)"
}
for p in $(ps -o pid= --ppid "$node_pid"); do
  [[ $(readlink "/proc/$p/exe" 2>/dev/null) == "$driver" ]] && driver_pid=$p
done
[[ -n $driver_pid ]] || die "no berth-driver-exec child of berth-node ($node_pid)"
say "berth-node $node_pid, driver $driver_pid, socket $sock"

# --- the references: a busybox bundle for crun, an image for containerd ------
rootfs=$tmp/rootfs
if ((!skip_crun || !skip_containerd)); then
  mkdir -p "$rootfs/bin" "$rootfs/proc" "$rootfs/dev" "$rootfs/sys" "$rootfs/tmp" \
    "$rootfs/etc"
  cp "$busybox" "$rootfs/bin/busybox"
  for applet in sh true sleep; do ln -s busybox "$rootfs/bin/$applet"; done
fi
if ((!skip_crun)); then
  # `crun spec`'s default config (new pid, network, ipc, uts and mount
  # namespaces), no terminal, /bin/true, $tag in the environment.
  bundle=$tmp/bundle
  mkdir -p "$bundle"
  (cd "$bundle" && "$crun_bin" spec)
  jq --arg root "$rootfs" --arg tag "$tag" \
    '.process.terminal = false | .process.args = ["/bin/true"] | .root.path = $root
     | .process.env += [$tag]' "$bundle/config.json" >"$bundle/config.json.new"
  mv "$bundle/config.json.new" "$bundle/config.json"
fi
if ((!skip_containerd)); then
  # An OCI image layout, made here offline: one uncompressed layer with
  # busybox-static and its true and sleep links, a config, a manifest,
  # index.json; the digests computed by python3.
  "$python" - "$rootfs" "$tmp/image" "$image" <<'EOF'
import hashlib, io, json, os, sys, tarfile

rootfs, out, name = sys.argv[1:4]
blobs = os.path.join(out, "blobs", "sha256")
os.makedirs(blobs)

def blob(data):
    digest = hashlib.sha256(data).hexdigest()
    with open(os.path.join(blobs, digest), "wb") as f:
        f.write(data)
    return "sha256:" + digest, len(data)

layer = io.BytesIO()
with tarfile.open(fileobj=layer, mode="w", format=tarfile.PAX_FORMAT) as tar:
    for entry in sorted(os.listdir(rootfs)):
        def clean(info):
            info.uid = info.gid = 0
            info.uname = info.gname = "root"
            info.mtime = 0
            return info
        tar.add(os.path.join(rootfs, entry), arcname=entry, filter=clean)
layer_digest, layer_size = blob(layer.getvalue())
config = {
    "architecture": "amd64",
    "os": "linux",
    "config": {"Cmd": ["/bin/true"], "Env": ["PATH=/bin"]},
    "rootfs": {"type": "layers", "diff_ids": [layer_digest]},
}
config_digest, config_size = blob(json.dumps(config).encode())
manifest = {
    "schemaVersion": 2,
    "mediaType": "application/vnd.oci.image.manifest.v1+json",
    "config": {"mediaType": "application/vnd.oci.image.config.v1+json",
               "digest": config_digest, "size": config_size},
    "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar",
                "digest": layer_digest, "size": layer_size}],
}
manifest_digest, manifest_size = blob(json.dumps(manifest).encode())
index = {
    "schemaVersion": 2,
    "manifests": [{
        "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "digest": manifest_digest, "size": manifest_size,
        "platform": {"architecture": "amd64", "os": "linux"},
        "annotations": {"io.containerd.image.name": name,
                        "org.opencontainers.image.ref.name": name.rsplit(":", 1)[1]},
    }],
}
with open(os.path.join(out, "index.json"), "w") as f:
    json.dump(index, f)
with open(os.path.join(out, "oci-layout"), "w") as f:
    json.dump({"imageLayoutVersion": "1.0.0"}, f)
with tarfile.open(out + ".tar", "w") as tar:
    for entry in ("oci-layout", "index.json", "blobs"):
        tar.add(os.path.join(out, entry), arcname=entry)
EOF
  # A private containerd: its root, state and sockets in the temporary
  # directory, nothing of it but the runc shim v2 (no CRI, no /opt plugins).
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
  for ((i = 0; i < 300; i++)); do # up to 30 s
    kill -0 "$containerd_pid" 2>/dev/null || {
      tail -n 20 "$tmp/ctr/containerd.log" >&2
      die "containerd exited at start (its log above)"
    }
    "$ctr_bin" -a "$ctr_sock" version >/dev/null 2>&1 && break
    sleep 0.1
  done
  "$ctr_bin" -a "$ctr_sock" version >/dev/null 2>&1 || die "containerd did not answer within 30 s"
  "${ctr[@]}" images import "$tmp/image.tar" >"$tmp/ctr/import.log" 2>&1 || {
    cat "$tmp/ctr/import.log" >&2
    die "ctr images import of the busybox image failed"
  }
  say "containerd $containerd_pid ($("$containerd_bin" --version | awk '{ print $3 }'), runc $(runc --version | awk 'NR == 1 { print $3 }')), image $image"
fi

# --- the figures ---------------------------------------------------------------
samples=$tmp/samples
: >"$samples"
# sample NAME MICROSECONDS, as ms
sample_ms() { printf 'sample %s %d.%03d ms\n' "$1" $(($2 / 1000)) $(($2 % 1000)) >>"$samples"; }
now_us() { echo "${EPOCHREALTIME/./}"; }
out=$tmp/out

# Times one command (stdio on files, exit 0 expected) per repetition, and one
# untimed first. The command's arguments may hold {i}, replaced by the number
# of the run (container ids).
time_runs() { # NAME WHAT COMMAND...
  local name=$1 what=$2 i t0 t1 args
  shift 2
  for ((i = 0; i <= repetitions; i++)); do
    args=("${@//\{i\}/r$round-$i}")
    t0=$(now_us)
    "${args[@]}" </dev/null >"$out" 2>&1 || {
      cat "$out" >&2
      die "round $round: $what failed: ${args[*]}"
    }
    t1=$(now_us)
    ((i == 0)) || sample_ms "$name" $((t1 - t0))
  done
}
median_of() { # NAME: the median of this round's samples, for the progress line
  grep "^sample $1 " "$samples" | tail -n "$repetitions" | awk '{ print $3 }' | sort -g |
    awk '{ v[NR] = $1 } END { if (NR) printf "%.3f", NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}
berth_run() {
  time_runs berth_run "berth run --rm" "${berth[@]}" run --rm --net host -e "$tag" -- /bin/true
  say "  berth_run  $(median_of berth_run) ms"
  # No target: the same task with -d, which returns once it is started, and
  # so says how much of berth_run is following the task to its end. The
  # exited tasks are removed after, untimed.
  time_runs berth_run_detached "berth run -d" "${berth[@]}" run -d --net host -e "$tag" -- /bin/true
  "${berth[@]}" ps -a -q | xargs -r "${berth[@]}" rm -f >/dev/null ||
    die "round $round: berth rm -f of the exited /bin/true tasks failed"
  say "  berth_run_detached $(median_of berth_run_detached) ms"
}
ctr_run() {
  ((skip_containerd)) && return 0
  time_runs ctr_run "ctr run --rm" "${ctr[@]}" run --rm --env "$tag" "$image" \
    "bench-{i}" /bin/true
  say "  ctr_run    $(median_of ctr_run) ms"
}
crun_run() {
  ((skip_crun)) && return 0
  move_off_cgroup2
  time_runs crun_run "crun run" "${crun[@]}" run --bundle "$bundle" "$prefix-{i}"
  restore_cgroup2
  say "  crun_run   $(median_of crun_run) ms"
}

# Figure 2: $tasks `berth run -d` at once, until all have returned and
# `berth ps -q` lists them all; then `berth rm -f` of them all at once.
start_many() {
  local i t0 t1 pids=() failed=0 count dir=$tmp/many
  rm -rf "$dir"
  mkdir "$dir"
  t0=$(now_us)
  for ((i = 0; i < tasks; i++)); do
    "${berth[@]}" run -d --net host -e "$tag" -- /bin/sleep 600 </dev/null \
      >"$dir/$i.id" 2>"$dir/$i.err" &
    pids+=($!)
  done
  for ((i = 0; i < tasks; i++)); do
    wait "${pids[i]}" || {
      failed=$((failed + 1))
      ((failed > 3)) || say "berth run -d #$i failed: $(cat "$dir/$i.err")"
    }
  done
  ((failed == 0)) || die "round $round: $failed of $tasks concurrent berth run -d failed"
  for ((i = 0; i < 600; i++)); do # up to 60 s
    count=$("${berth[@]}" ps -q | wc -l)
    ((count >= tasks)) && break
    sleep 0.1
  done
  t1=$(now_us)
  ((count == tasks)) || die "round $round: berth ps -q lists $count tasks, not $tasks"
  sample_ms start_many $((t1 - t0))
  sample_ms start_many_per_task $(((t1 - t0) / tasks))
  pids=()
  t0=$(now_us)
  for ((i = 0; i < tasks; i++)); do
    "${berth[@]}" rm -f "$(cat "$dir/$i.id")" </dev/null >/dev/null 2>"$dir/$i.err" &
    pids+=($!)
  done
  for ((i = 0; i < tasks; i++)); do
    wait "${pids[i]}" || {
      failed=$((failed + 1))
      ((failed > 3)) || say "berth rm -f #$i failed: $(cat "$dir/$i.err")"
    }
  done
  t1=$(now_us)
  ((failed == 0)) || die "round $round: $failed of $tasks concurrent berth rm -f failed"
  count=$("${berth[@]}" ps -a -q | wc -l)
  ((count == 0)) || die "round $round: $count tasks left after berth rm -f of them all"
  sample_ms rm_many $((t1 - t0))
  say "  start_many $(grep '^sample start_many ' "$samples" | tail -n 1 | awk '{ print $3 }') ms for $tasks tasks; rm -f of them $(grep '^sample rm_many ' "$samples" | tail -n 1 | awk '{ print $3 }') ms"
}

say "$rounds rounds of $repetitions runs each, then $tasks tasks at once; then $memory_tasks tasks for memory"
for ((round = 1; round <= rounds; round++)); do
  say "round $round/$rounds ($(cut -d' ' -f1-3 /proc/loadavg) load)"
  if ((round % 2)); then
    ctr_run
    crun_run
    berth_run
  else
    berth_run
    crun_run
    ctr_run
  fi
  start_many
done

# Figure 3: memory with $memory_tasks running sleep tasks.
kb() { awk -v k="$2:" '$1 == k { print $2 }' "/proc/$1/smaps_rollup" 2>/dev/null || echo 0; }
threads() { ls "/proc/$1/task" | wc -l; }
fds() { ls "/proc/$1/fd" | wc -l; }
# The task inits of this run: berth-task-init processes in the driver's cgroup.
init_pids() {
  local p
  for p in /proc/[0-9]*; do
    [[ $(cat "$p/comm" 2>/dev/null) == berth-task-init ]] || continue
    grep -q "/$cgroup_parent/" "$p/cgroup" 2>/dev/null && echo "${p#/proc/}"
  done
  return 0
}
memory_line() { # WHEN
  say "  $1: berth-node PSS $(kb "$node_pid" Pss) kB RSS $(kb "$node_pid" Rss) kB $(threads "$node_pid") threads $(fds "$node_pid") fds; driver PSS $(kb "$driver_pid" Pss) kB RSS $(kb "$driver_pid" Rss) kB $(threads "$driver_pid") threads $(fds "$driver_pid") fds"
}
say "memory: $memory_tasks sleep tasks, $memory_batch at a time"
sync
node_pss0=$(kb "$node_pid" Pss)
node_rss0=$(kb "$node_pid" Rss)
driver_pss0=$(kb "$driver_pid" Pss)
memory_line before
dir=$tmp/memory
mkdir -p "$dir"
started=0
memory_error=""
t0=$(now_us)
while ((started < memory_tasks)) && [[ -z $memory_error ]]; do
  batch=$((memory_tasks - started < memory_batch ? memory_tasks - started : memory_batch))
  pids=()
  for ((i = started; i < started + batch; i++)); do
    "${berth[@]}" run -d --net host -e "$tag" -- /bin/sleep 3600 </dev/null \
      >"$dir/$i.id" 2>"$dir/$i.err" &
    pids+=($!)
  done
  ok=0
  for ((i = 0; i < batch; i++)); do
    rc=0
    wait "${pids[i]}" || rc=$?
    if ((rc == 0)); then
      ok=$((ok + 1))
    elif [[ -z $memory_error ]]; then
      memory_error="berth run -d (one of tasks $((started + 1))-$((started + batch))) exited $rc: $(cat "$dir/$((started + i)).err")"
    fi
  done
  started=$((started + ok))
  if ((started % 200 < memory_batch || started == memory_tasks)); then
    say "  $started running ($(cut -d' ' -f1-3 /proc/loadavg) load)"
  fi
done
t1=$(now_us)
running=$("${berth[@]}" ps -q | wc -l)
if [[ -n $memory_error ]]; then
  say "MEMORY: FAILED after $started tasks: $memory_error"
  say "MEMORY: berth ps -q lists $running running tasks; the figure below is for those"
fi
sleep 2 # let the tasks' sleeps settle
sync
node_pss1=$(kb "$node_pid" Pss)
node_rss1=$(kb "$node_pid" Rss)
driver_pss1=$(kb "$driver_pid" Pss)
memory_line after
mapfile -t inits < <(init_pids)
init_sum=0
for p in "${inits[@]}"; do init_sum=$((init_sum + $(kb "$p" Pss))); done
say "  ${#inits[@]} berth-task-init processes, PSS sum $init_sum kB; berth ps -q: $running; started in $(((t1 - t0) / 1000)) ms"
((${#inits[@]} > 0)) || die "no berth-task-init found in the cgroup /$cgroup_parent"
n=${#inits[@]}
awk -v n="$n" -v np0="$node_pss0" -v np1="$node_pss1" -v nr0="$node_rss0" \
  -v nr1="$node_rss1" -v dp0="$driver_pss0" -v dp1="$driver_pss1" -v init="$init_sum" 'BEGIN {
  printf "sample memory_per_task %.1f kB\n", (np1 - np0 + dp1 - dp0 + init) / n
  printf "sample node_growth_per_task %.1f kB\n", (np1 - np0) / n
  printf "sample driver_growth_per_task %.1f kB\n", (dp1 - dp0) / n
  printf "sample init_pss_per_task %.1f kB\n", init / n
  printf "sample node_pss_before %d kB\nsample node_pss_after %d kB\n", np0, np1
  printf "sample node_rss_before %d kB\nsample node_rss_after %d kB\n", nr0, nr1
  printf "sample driver_pss_before %d kB\nsample driver_pss_after %d kB\n", dp0, dp1
}' >>"$samples"
echo "sample memory_tasks_running $n tasks" >>"$samples"
say "  removing them (berth rm -f, 50 at a time)"
t0=$(now_us)
remove_all_tasks || die "removing the memory tasks failed"
t1=$(now_us)
left=$("${berth[@]}" ps -a -q | wc -l)
((left == 0)) || say "WARNING: $left tasks left after berth rm -f of all"
say "  removed in $(((t1 - t0) / 1000)) ms"
kill -0 "$node_pid" 2>/dev/null || die "berth-node ($node_pid) is gone after the memory figure"
kill -0 "$driver_pid" 2>/dev/null || die "the driver ($driver_pid) is gone after the memory figure (restarted as $(ps -o pid= --ppid "$node_pid" | tr -d ' '))"
"${berth[@]}" node status >"$tmp/status" 2>&1 || {
  cat "$tmp/status" >&2
  die "berth node status after the memory figure: not healthy"
}
memory_line "after removing them"
printf 'sample node_pss_removed %d kB\nsample driver_pss_removed %d kB\n' \
  "$(kb "$node_pid" Pss)" "$(kb "$driver_pid" Pss)" >>"$samples"
"${berth[@]}" node status >&2
say "node and driver still up; berth node status healthy"

# --- the table -------------------------------------------------------------------
sort -k2,2 -k3,3g "$samples" | awk -v rounds="$rounds" -v tasks="$tasks" \
  -v mtasks="$memory_tasks" -v merror="$memory_error" '
  { name = $2; n[name]++; v[name, n[name]] = $3; unit[name] = $4 }
  function median(name,   k) {
    k = n[name]
    return k % 2 ? v[name, (k + 1) / 2] : (v[name, k / 2] + v[name, k / 2 + 1]) / 2
  }
  function row(name, what) {
    if (!(name in n)) { printf "%-24s %-50s %s\n", name, what, "not measured"; return }
    f = unit[name] == "ms" ? "%10.3f" : "%10.1f"
    printf "%-24s %-50s " f " %-5s " f " " f " %4d\n", name, what, median(name),
      unit[name], v[name, 1], v[name, n[name]], n[name]
  }
  function ratio(label, a, b, target, what,   r) {
    if (!(a in n) || !(b in n) || median(b) == 0) {
      printf "%-8s %s / %s: not measured\n", label, a, b; return
    }
    r = median(a) / median(b)
    if (target == 0) {
      printf "%-8s %-9s / %-9s = %6.3f   no target: %s\n", label, a, b, r, what
      return
    }
    printf "%-8s %-9s / %-9s = %6.3f   target <= %.2f: %s\n", label, a, b, r, target,
      r <= target ? "met" : "MISSED"
  }
  END {
    printf "\nmedians over %d rounds (memory: one sample, after the rounds)\n", rounds
    printf "%-24s %-50s %10s %-5s %10s %10s %4s\n", "figure", "what", "median", "", "min", "max", "n"
    row("berth_run", "berth run --rm --net host -- /bin/true")
    row("berth_run_detached", "berth run -d --net host -- /bin/true (no wait)")
    row("ctr_run", "ctr run --rm, busybox image, /bin/true")
    row("crun_run", "crun run, busybox bundle, /bin/true")
    row("start_many", tasks " x berth run -d sleep at once, until ps lists all")
    row("start_many_per_task", "the same, per task")
    row("rm_many", tasks " x berth rm -f at once")
    row("memory_tasks_running", "sleep tasks running for the memory figure")
    row("memory_per_task", "(node + driver growth + init PSS) / tasks")
    row("node_growth_per_task", "berth-node PSS growth / tasks")
    row("driver_growth_per_task", "berth-driver-exec PSS growth / tasks")
    row("init_pss_per_task", "berth-task-init PSS / tasks")
    row("node_pss_before", "berth-node PSS before")
    row("node_pss_after", "berth-node PSS with the tasks")
    row("node_rss_before", "berth-node RSS before")
    row("node_rss_after", "berth-node RSS with the tasks")
    row("driver_pss_before", "berth-driver-exec PSS before")
    row("driver_pss_after", "berth-driver-exec PSS with the tasks")
    row("node_pss_removed", "berth-node PSS once they are removed")
    row("driver_pss_removed", "berth-driver-exec PSS once they are removed")
    if ("berth_run" in n) {
      slow = 0
      for (i = 1; i <= n["berth_run"]; i++) if (v["berth_run", i] >= 100) slow++
      printf "berth_run: %d of %d runs took 100 ms or more\n", slow, n["berth_run"]
    }
    printf "\nratios of medians\n"
    ratio("ctr", "berth_run", "ctr_run", 0.25)
    ratio("crun", "berth_run", "crun_run", 0, "berth end to end against a bare crun run")
    ratio("detached", "berth_run_detached", "ctr_run", 0, "berth run -d (started, not waited for) against ctr run --rm")
    if ("memory_per_task" in n) {
      printf "%-8s %-31s = %6.1f kB target <= 1024 kB (1 MiB) with %d tasks: %s\n", "memory",
        "memory_per_task", median("memory_per_task"), median("memory_tasks_running"),
        (median("memory_per_task") <= 1024 && median("memory_tasks_running") >= mtasks) ? "met" : "MISSED"
    }
    if (merror != "")
      printf "%-8s FAILED at %d of %d tasks: %s\n", "memory", median("memory_tasks_running"), mtasks, merror
  }'
if [[ -n $memory_error ]]; then
  die "the memory figure did not reach $memory_tasks tasks: $memory_error"
fi
