#!/usr/bin/env bash
# The benchmark of issue 16, point 7: berth's images next to containerd's,
# measured in the same run, in interleaved rounds, and printed as one table
# of medians and ratios against the targets at the end:
#   pull      `berth image pull` of a ~100 MB multi-layer image from a local
#             docker-registry, through berth-node and berth-images, next to
#             `ctr images pull --plain-http` (download, verify, unpack), both
#             stores emptied before every pull;
#   unpack    berth's unpacker (unpack_layer) of the image's biggest gzip
#             layer next to `tar -xzf` of the same blob;
#   snapshot  PrepareSnapshot + ReleaseSnapshot on images.sock;
#   run       `berth run --rm busybox /bin/true` next to `ctr run --rm` of the
#             same image;
#   disk      the berth store after pulling busybox, then `shared` (busybox's
#             layer and one of its own): the base layer is stored once.
# See tools/bench/README.md, "Images".
#
# usage: tools/bench/images.sh [--rounds=5] [--big_mb=100] [--unpack_runs=3]
#            [--snapshot_cycles=20] [--runs=10] [--skip_containerd]
#            [--cgroup_parent=berth-bench-images]
#            [--bin_dir=DIR [--test_images=DIR]]
#
#   --rounds           rounds; each pulls once per side, unpacks
#                      --unpack_runs times per side, times --snapshot_cycles
#                      snapshots and --runs runs per side (references first
#                      in odd rounds, last in even ones)
#   --big_mb           size of the big image's data (5 layers over busybox's)
#   --unpack_runs      timed unpacks of the layer per side and round
#   --snapshot_cycles  timed prepare + release cycles per round (2 untimed
#                      first)
#   --runs             timed `berth run --rm` (with the image, and without
#                      one) and `ctr run --rm` per round (one more, untimed,
#                      first)
#   --skip_containerd  leave containerd out (its rows say "not measured";
#                      tar is still measured)
#   --cgroup_parent    the exec driver's --cgroup_parent (/NAME); removed at
#                      the end
#   --bin_dir          take berth-node, berth, berth-images,
#                      berth-driver-exec, berth-task-init, unpack_layer and
#                      images_snapshot_bench from DIR instead of building
#                      them (bazel build -c opt)
#   --test_images      the directory of //tools/testimages:images (busybox/,
#                      shared/, busybox-oci.tar); by default built with the
#                      binaries, or with --bin_dir made by
#                      tools/testimages/make_test_images.py (the same bytes)
#
# Needs root (overlay mounts, namespaces, cgroups). Installs containerd and
# runc (unless --skip_containerd), docker-registry, skopeo and busybox-static
# from Debian when missing. Starts Debian's docker-registry on 127.0.0.1
# (services/images/testing/registry.sh), berth-images and berth-node (exec
# driver) and its own containerd, all on a temporary directory. Leaves
# nothing behind: tasks, containers, snapshots, mounts, processes, cgroups,
# the containerd namespace and state, temporary files.
set -euo pipefail
export LC_ALL=C

rounds=5
big_mb=100
unpack_runs=3
snapshot_cycles=20
runs=10
skip_containerd=0
cgroup_parent="berth-bench-images"
bin_dir=""
test_images=""

# say, die, usage, require_positive_integers; install_missing, tagged_pids,
# our_cgroups, cgroup_pids, our_mounts, remove_stale_cgroup_parent, stop_pid,
# start_containerd, stop_containerd.
# shellcheck source=tools/bench/script_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/script_lib.sh"
# shellcheck source=tools/bench/run_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/run_lib.sh"

for arg in "$@"; do
  case $arg in
    --rounds=*) rounds=${arg#*=} ;;
    --big_mb=*) big_mb=${arg#*=} ;;
    --unpack_runs=*) unpack_runs=${arg#*=} ;;
    --snapshot_cycles=*) snapshot_cycles=${arg#*=} ;;
    --runs=*) runs=${arg#*=} ;;
    --skip_containerd) skip_containerd=1 ;;
    --cgroup_parent=*) cgroup_parent=${arg#*=} ;;
    --bin_dir=*) bin_dir=${arg#*=} ;;
    --test_images=*) test_images=${arg#*=} ;;
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
require_positive_integers rounds big_mb unpack_runs snapshot_cycles runs
cgroup_parent=${cgroup_parent#/}
[[ $cgroup_parent =~ ^[A-Za-z0-9][A-Za-z0-9._-]*$ ]] || {
  say "--cgroup_parent must be one cgroup name ([A-Za-z0-9._-]), not '$cgroup_parent'"
  exit 2
}
if [[ -n $bin_dir && ! -d $bin_dir ]]; then
  say "--bin_dir: $bin_dir is not a directory"
  exit 2
fi
if [[ -n $test_images && ! -f $test_images/busybox-oci.tar ]]; then
  say "--test_images: $test_images has no busybox-oci.tar (//tools/testimages:images?)"
  exit 2
fi
[[ -z $bin_dir ]] || bin_dir=$(cd "$bin_dir" && pwd)
[[ -z $test_images ]] || test_images=$(cd "$test_images" && pwd)
((EUID == 0)) || die "needs root (overlay mounts, namespaces, cgroups, containerd)"

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$root"
registry_sh=$root/services/images/testing/registry.sh
make_images=$root/tools/testimages/make_test_images.py
[[ -f $registry_sh ]] || die "$registry_sh missing"
[[ -f $make_images ]] || die "$make_images missing"

# --- Debian packages -------------------------------------------------------
wanted=(docker-registry skopeo busybox-static)
((skip_containerd)) || wanted+=(containerd runc)
install_missing "${wanted[@]}"
for tool in /usr/bin/docker-registry /usr/bin/skopeo /usr/bin/python3 /bin/busybox; do
  [[ -x $tool ]] || die "$tool missing"
done
containerd_bin=""
ctr_bin=""
if ((!skip_containerd)); then
  containerd_bin=$(command -v containerd) || die "containerd is not on PATH after installing it"
  ctr_bin=$(command -v ctr) || die "ctr is not on PATH after installing containerd"
  command -v runc >/dev/null || die "runc is not on PATH after installing it"
fi

# --- build -----------------------------------------------------------------
# -c opt; no bazel-* symlinks (--symlink_prefix=/), so that those of the other
# builds in this tree stay as they are. Quiet unless it fails.
names=(berth-node berth berth-images berth-driver-exec berth-task-init unpack_layer
  images_snapshot_bench)
targets=(//services/node:berth-node //services/node/cli:berth
  //services/images:berth-images //services/driver/exec:berth-driver-exec
  //services/driver/exec/init:berth-task-init //services/images/unpack:unpack_layer
  //tools/bench:images_snapshot_bench)
declare -A binary
if [[ -z $bin_dir ]]; then
  bin=$(bazel info -c opt bazel-bin 2>/dev/null) || die "bazel info failed"
  build=("${targets[@]}")
  [[ -n $test_images ]] || build+=(//tools/testimages:images)
  say "building (bazel build -c opt): ${build[*]}"
  if ! log=$(bazel build -c opt --symlink_prefix=/ "${build[@]}" 2>&1); then
    printf '%s\n' "$log" | grep -E 'ERROR|error:' | head -n 20 >&2
    printf '%s\n' "$log" | tail -n 5 >&2
    die "bazel build failed"
  fi
  for i in "${!names[@]}"; do
    label=${targets[i]#//}
    binary[${names[i]}]=$bin/${label%%:*}/${label#*:}
  done
  [[ -n $test_images ]] || test_images=$bin/tools/testimages/images
else
  for name in "${names[@]}"; do binary[$name]=$bin_dir/$name; done
fi
for name in "${names[@]}"; do
  [[ -x ${binary[$name]} && -f ${binary[$name]} ]] ||
    die "${binary[$name]} is not an executable file"
  binary[$name]=$(readlink -f "${binary[$name]}")
done

# --- clean-up, whatever happens from here on ---------------------------------
tmp=$(mktemp -d /tmp/berth-bench-images-XXXXXX)
# Every process of this run but the registry carries this variable (the
# script's children inherit it: berth-images, berth-node, its driver,
# containerd and its shims; the tasks and containers are given it), so that
# the clean-up finds whatever a killed step left.
export BERTH_BENCH_RUN=$tmp
tag="BERTH_BENCH_RUN=$tmp"
prefix="berth-bench-$$" # the containerd namespace, its cgroups
sock=$tmp/run/node.sock
images_sock=$tmp/run/images.sock
store=$tmp/state/images
berth=("${binary[berth]}" "--socket=$sock")
node_pid=""
images_pid=""
containerd_pid=""
registry_pid=""
export BERTH_REGISTRY_DIR=$tmp/registry
ctr_sock=$tmp/ctr/containerd.sock
ctr=("$ctr_bin" -a "$ctr_sock" -n "$prefix")
run_containerd=0 # /run/containerd made here (ctr's fifos, the shims' sockets)
[[ -e /run/containerd ]] || run_containerd=1

remove_all_tasks() {
  local ids
  ids=$("${berth[@]}" ps -a -q 2>/dev/null) || return 1
  [[ -z $ids ]] && return 0
  printf '%s\n' "$ids" | xargs -r -n 1 -P 10 "${berth[@]}" rm -f >/dev/null 2>&1
}

cleanup() {
  local status=$? leftovers=() pids=() cgroups cgroup mounts mount i
  trap - EXIT INT TERM
  set +e
  # berth's tasks, then berth-node (it stops its driver), then berth-images
  # (it keeps the snapshots of tasks it does not know are gone: those of a
  # node that could not remove its tasks are unmounted below).
  if [[ -n $node_pid ]] && kill -0 "$node_pid" 2>/dev/null; then
    remove_all_tasks || say "WARNING: could not list the node's tasks to remove them"
  fi
  stop_pid "$node_pid" || say "WARNING: berth-node ($node_pid) ignored SIGTERM for 10 s"
  stop_pid "$images_pid" || say "WARNING: berth-images ($images_pid) ignored SIGTERM for 10 s"
  stop_containerd || say "WARNING: containerd ($containerd_pid) ignored SIGTERM for 10 s"
  [[ -d $BERTH_REGISTRY_DIR ]] && "$registry_sh" stop >/dev/null 2>&1
  mapfile -t pids < <(tagged_pids; cgroup_pids)
  [[ -n $registry_pid ]] && kill -0 "$registry_pid" 2>/dev/null && pids+=("$registry_pid")
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
  [[ -z $(our_mounts) ]] && rm -rf "$tmp"
  if ((run_containerd)) && [[ -d /run/containerd ]]; then
    find /run/containerd -depth -type d -empty -delete 2>/dev/null
  fi

  # What is left (nothing, normally).
  mapfile -t pids < <(tagged_pids; cgroup_pids)
  [[ -n $registry_pid ]] && kill -0 "$registry_pid" 2>/dev/null && pids+=("$registry_pid")
  ((${#pids[@]} == 0)) || leftovers+=("processes: ${pids[*]}")
  cgroups=$(our_cgroups)
  [[ -z $cgroups ]] || leftovers+=("cgroups: $cgroups")
  mounts=$(our_mounts)
  [[ -z $mounts ]] || leftovers+=("mounts: $mounts")
  [[ ! -e $tmp ]] || leftovers+=("directory: $tmp")
  ((run_containerd == 0)) || [[ ! -e /run/containerd ]] ||
    leftovers+=("/run/containerd: $(find /run/containerd | tr '\n' ' ')")
  if ((${#leftovers[@]})); then
    say "WARNING: left behind: ${leftovers[*]}"
    status=1
  else
    say "clean-up: no task, container, snapshot, mount, process, cgroup, containerd state or temporary file left"
  fi
  exit "$status"
}
trap cleanup EXIT
trap 'say "interrupted"; exit 130' INT
trap 'say "terminated"; exit 143' TERM

# A previous run killed before its clean-up, or one running now.
remove_stale_cgroup_parent

samples=$tmp/samples
: >"$samples"
out=$tmp/out
# sample NAME MICROSECONDS, as ms
sample_ms() { printf 'sample %s %d.%03d ms\n' "$1" $(($2 / 1000)) $(($2 % 1000)) >>"$samples"; }
now_us() { echo "${EPOCHREALTIME/./}"; }
# Runs a command with stdio on files; exit 0 expected, else its output is
# shown and the run fails naming WHAT.
must() { # WHAT COMMAND...
  local what=$1
  shift
  "$@" </dev/null >"$out" 2>&1 || {
    cat "$out" >&2
    die "$what failed: $*"
  }
}
# Runs one command as must does, its time in µs left in $elapsed.
elapsed=0
timed() { # WHAT COMMAND...
  local what=$1 t0 t1
  shift
  t0=$(now_us)
  "$@" </dev/null >"$out" 2>&1 || {
    cat "$out" >&2
    die "${round:+round $round: }$what failed: $*"
  }
  t1=$(now_us)
  elapsed=$((t1 - t0))
}
last_ms() { # NAME: its last sample, for the progress lines
  grep "^sample $1 " "$samples" | tail -n 1 | awk '{ print $3 }'
}

# --- the images ----------------------------------------------------------------
mkdir -p "$tmp/images"
if [[ -z $test_images ]]; then
  say "making the test images (make_test_images.py: busybox, shared, archives)"
  must "make_test_images.py" /usr/bin/python3 "$make_images" --out "$tmp/images/test" \
    --only=busybox,shared,archives
  test_images=$tmp/images/test
fi
for entry in busybox shared busybox-oci.tar; do
  [[ -e $test_images/$entry ]] || die "$test_images/$entry missing"
done
say "making the big image ($big_mb MB of data: make_test_images.py --only= --big-mb $big_mb)"
must "make_test_images.py --big-mb" /usr/bin/python3 "$make_images" --out "$tmp/images/big" \
  --only= --big-mb "$big_mb"
big_layout=$tmp/images/big/big
# The big image's size and layers, and its biggest gzip layer: path, size,
# diff_id.
read -r big_bytes big_layers layer_blob layer_size layer_diff_id < <(
  /usr/bin/python3 - "$big_layout" "$tmp/images/big/images.json" <<'EOF'
import json, os, sys
layout, summary = sys.argv[1:3]
blobs = os.path.join(layout, "blobs", "sha256")
index = json.load(open(os.path.join(layout, "index.json")))
manifest = json.load(open(os.path.join(blobs, index["manifests"][0]["digest"][7:])))
layers = manifest["layers"]
total = sum(l["size"] for l in layers) + manifest["config"]["size"]
gzip = [l for l in layers if l["mediaType"].endswith("gzip")]
biggest = max(gzip, key=lambda l: l["size"])
diff_ids = {l["digest"]: l["diff_id"] for l in json.load(open(summary))["big"]["layers"]}
print(total, len(layers), os.path.join(blobs, biggest["digest"][7:]), biggest["size"],
      diff_ids[biggest["digest"]])
EOF
)
[[ -f $layer_blob ]] || die "the big image's biggest layer blob is missing"
say "big image: $big_bytes bytes in $big_layers layers; biggest gzip layer $layer_size bytes"

# --- the registry --------------------------------------------------------------
endpoint=$("$registry_sh" start 2>"$out") || {
  cat "$out" >&2
  die "registry.sh start failed"
}
registry_pid=$(cat "$BERTH_REGISTRY_DIR/pid")
must "registry.sh push big" "$registry_sh" push "$big_layout" bench/big:latest
must "registry.sh push busybox" "$registry_sh" push "$test_images/busybox" bench/busybox:latest
must "registry.sh push shared" "$registry_sh" push "$test_images/shared" bench/shared:latest
big_ref=$endpoint/bench/big:latest
say "docker-registry $registry_pid on $endpoint: bench/big, bench/busybox, bench/shared"

# --- berth-images and berth-node -----------------------------------------------
mkdir -p "$tmp/state" "$tmp/exec"
install -d -m 0750 "$tmp/run"  # a runtime directory open to others is refused
cat >"$tmp/registries.json" <<EOF
{"registries": {"$endpoint": {"insecure": true}}}
EOF
"${binary[berth-images]}" --runtime_dir="$tmp/run" --state_dir="$tmp/state" \
  --registries_config="$tmp/registries.json" </dev/null >"$tmp/images.log" 2>&1 &
images_pid=$!
for ((i = 0; i < 300; i++)); do # up to 30 s
  kill -0 "$images_pid" 2>/dev/null || {
    tail -n 20 "$tmp/images.log" >&2
    die "berth-images exited at start (its log above)"
  }
  [[ -S $images_sock ]] && break
  sleep 0.1
done
[[ -S $images_sock ]] || die "berth-images: no $images_sock within 30 s"
cat >"$tmp/plugins.json" <<EOF
{"plugins":[{"name":"exec","binary":"${binary[berth-driver-exec]}","args":["--state_dir=$tmp/exec","--cgroup_parent=/$cgroup_parent","--init_path=${binary[berth-task-init]}"]}]}
EOF
"${binary[berth-node]}" --runtime_dir="$tmp/run" --state_dir="$tmp/state" \
  --plugin_config="$tmp/plugins.json" --images_socket="$images_sock" \
  --netns_socket=none --stats_socket=none --proxy_socket=none \
  </dev/null >"$tmp/node.log" 2>&1 &
node_pid=$!
for ((i = 0; i < 300; i++)); do # up to 30 s
  kill -0 "$node_pid" 2>/dev/null || {
    tail -n 20 "$tmp/node.log" >&2
    die "berth-node exited at start (its log above)"
  }
  "${berth[@]}" image ls >/dev/null 2>&1 && break
  sleep 0.1
done
"${berth[@]}" image ls >"$out" 2>&1 || {
  cat "$out" >&2
  tail -n 20 "$tmp/node.log" >&2
  die "berth image ls through berth-node: no answer within 30 s (above: it, then the node's log)"
}
say "berth-images $images_pid, berth-node $node_pid, socket $sock"

# --- containerd ------------------------------------------------------------------
if ((!skip_containerd)); then
  start_containerd
  say "containerd $containerd_pid ($("$containerd_bin" --version | awk '{ print $3 }'), runc $(runc --version | awk 'NR == 1 { print $3 }')), namespace $prefix"
fi

# --- emptying the stores -----------------------------------------------------------
# berth: every image removed (the big one by name, then prune -a), then
# nothing may be left in blobs/ and layers/.
empty_berth() {
  if "${berth[@]}" image inspect "$big_ref" >/dev/null 2>&1; then
    must "berth image rm" "${berth[@]}" image rm "$big_ref"
  fi
  must "berth image prune -a" "${berth[@]}" image prune -a -f
  local left
  left=$(find "$store/blobs" "$store/layers" -mindepth 1 -maxdepth 2 2>/dev/null | grep -v '/blobs/sha256$' || true)
  [[ -z $left ]] || die "the berth store is not empty after rm and prune -a: $(echo "$left" | tr '\n' ' ' | head -c 300)"
  [[ -z $("${berth[@]}" image ls -q) ]] || die "berth image ls lists images after prune -a"
}
# containerd: every image removed, waiting for its garbage collection
# (--sync); content and snapshots it left removed; nothing may be left.
empty_ctr() {
  local images=() key left i
  mapfile -t images < <("${ctr[@]}" images ls -q) || die "ctr images ls failed"
  ((${#images[@]} == 0)) || must "ctr images rm" "${ctr[@]}" images rm --sync "${images[@]}"
  for key in $("${ctr[@]}" content ls -q); do
    must "ctr content rm" "${ctr[@]}" content rm "$key"
  done
  for ((i = 0; i < 20; i++)); do # children before parents
    left=$("${ctr[@]}" snapshots ls | awk 'NR > 1 { print $1 }')
    [[ -z $left ]] && break
    for key in $left; do "${ctr[@]}" snapshots rm "$key" >/dev/null 2>&1 || true; done
  done
  [[ -z $("${ctr[@]}" content ls -q) ]] || die "containerd still has content after images rm"
  [[ -z $("${ctr[@]}" snapshots ls | awk 'NR > 1') ]] || die "containerd still has snapshots after images rm"
}
empty_stores() {
  empty_berth
  ((skip_containerd)) || empty_ctr
}
# The busybox image for the run and snapshot figures, imported (untimed) into
# both stores after each emptying.
busybox_berth=docker.io/library/busybox:latest
import_busybox() {
  must "berth image import" "${berth[@]}" image import --name busybox:latest \
    "$test_images/busybox-oci.tar"
  ((skip_containerd)) ||
    must "ctr images import" "${ctr[@]}" images import --base-name docker.io/library/busybox \
      "$test_images/busybox-oci.tar"
}

# --- the figures -------------------------------------------------------------------
# The berth store's unpacked layers (layers/<diff_id hex>/, not tmp-*) and
# blobs; a directory's disk use.
layer_dirs() {
  find "$store/layers" -mindepth 1 -maxdepth 1 -type d ! -name 'tmp-*' 2>/dev/null | wc -l
}
blob_count() { find "$store/blobs/sha256" -type f 2>/dev/null | wc -l; }
kib() { du -sk "$1" 2>/dev/null | awk '{ print $1 }'; }
berth_pull() {
  sync
  timed "berth image pull" "${berth[@]}" image pull "$big_ref"
  sample_ms berth_pull "$elapsed"
  must "berth image inspect after the pull" "${berth[@]}" image inspect "$big_ref"
  [[ $(layer_dirs) == "$big_layers" ]] ||
    die "round $round: berth image pull left $(layer_dirs) layer directories, not $big_layers (not unpacked?)"
  (($(blob_count) >= big_layers + 2)) ||
    die "round $round: berth image pull left $(blob_count) blobs, fewer than $((big_layers + 2)) (layers, config, manifest)"
  say "  berth_pull   $(last_ms berth_pull) ms"
}
ctr_pull() {
  ((skip_containerd)) && return 0
  sync
  timed "ctr images pull" "${ctr[@]}" images pull --plain-http "$big_ref"
  sample_ms ctr_pull "$elapsed"
  [[ $("${ctr[@]}" snapshots ls | awk 'NR > 1' | wc -l) == "$big_layers" ]] ||
    die "round $round: ctr images pull left $("${ctr[@]}" snapshots ls | awk 'NR > 1' | wc -l) snapshots, not $big_layers (not unpacked?)"
  say "  ctr_pull     $(last_ms ctr_pull) ms"
}
berth_unpack() {
  local i dir
  for ((i = 0; i < unpack_runs; i++)); do
    dir=$tmp/unpack/berth-$round-$i
    sync
    timed "unpack_layer" "${binary[unpack_layer]}" "$layer_blob" "$dir"
    sample_ms berth_unpack "$elapsed"
    grep -qx "diff_id $layer_diff_id" "$out" ||
      die "round $round: unpack_layer printed no diff_id $layer_diff_id: $(head -c 300 "$out")"
    rm -rf "$dir"
  done
  say "  berth_unpack $(last_ms berth_unpack) ms"
}
tar_unpack() {
  local i dir
  for ((i = 0; i < unpack_runs; i++)); do
    dir=$tmp/unpack/tar-$round-$i
    mkdir -p "$dir"
    sync
    timed "tar -xzf" tar -xzf "$layer_blob" -C "$dir"
    sample_ms tar_unpack "$elapsed"
    rm -rf "$dir"
  done
  say "  tar_unpack   $(last_ms tar_unpack) ms"
}
snapshots() {
  must "images_snapshot_bench" "${binary[images_snapshot_bench]}" --socket="$images_sock" \
    --reference="$busybox_berth" --cycles="$snapshot_cycles" --warmup=2 \
    --id_prefix="bench-$$-r$round"
  grep '^sample snapshot_' "$out" | awk '{ printf "sample %s %.3f ms\n", $2, $3 }' >>"$samples"
  say "  snapshot     $(grep '^median snapshot_prepare_release ' "$out" | awk '{ print $3 }') ms (median of the round)"
}
time_runs() { # NAME WHAT COMMAND... ({i}: the number of the run)
  local name=$1 what=$2 i args
  shift 2
  for ((i = 0; i <= runs; i++)); do
    args=("${@//\{i\}/r$round-$i}")
    timed "$what" "${args[@]}"
    ((i == 0)) || sample_ms "$name" "$elapsed"
  done
}
run_median() { # NAME: the median of this round's samples
  grep "^sample $1 " "$samples" | tail -n "$runs" | awk '{ print $3 }' | sort -g |
    awk '{ v[NR] = $1 } END { if (NR) printf "%.3f", NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}
berth_run() {
  time_runs berth_run "berth run --rm busybox /bin/true" \
    "${berth[@]}" run --rm --net host -e "$tag" busybox /bin/true
  say "  berth_run    $(run_median berth_run) ms (median of the round)"
  # No target: the same task without an image (the host's root), which says
  # what the image's snapshot adds.
  time_runs berth_run_noimage "berth run --rm -- /bin/true" \
    "${berth[@]}" run --rm --net host -e "$tag" -- /bin/true
  say "  berth_run_noimage $(run_median berth_run_noimage) ms (median of the round)"
}
ctr_run() {
  ((skip_containerd)) && return 0
  time_runs ctr_run "ctr run --rm" "${ctr[@]}" run --rm --env "$tag" "$busybox_berth" \
    "bench-{i}" /bin/true
  say "  ctr_run      $(run_median ctr_run) ms (median of the round)"
}

mkdir -p "$tmp/unpack"
say "$rounds rounds: pull, unpack x$unpack_runs, $snapshot_cycles snapshots, run x$runs"
for ((round = 1; round <= rounds; round++)); do
  say "round $round/$rounds ($(cut -d' ' -f1-3 /proc/loadavg) load)"
  empty_stores
  if ((round % 2)); then
    ctr_pull
    berth_pull
    tar_unpack
    berth_unpack
  else
    berth_pull
    ctr_pull
    berth_unpack
    tar_unpack
  fi
  empty_stores
  import_busybox
  snapshots
  if ((round % 2)); then
    ctr_run
    berth_run
  else
    berth_run
    ctr_run
  fi
done

# --- disk: busybox, then shared (busybox's layer and one of its own) ----------------
say "disk: pulling busybox, then shared, into emptied stores"
empty_stores
disk=$tmp/disk
: >"$disk"
for name in busybox shared; do
  must "berth image pull $name" "${berth[@]}" image pull "$endpoint/bench/$name:latest"
  ctr_kib="-"
  if ((!skip_containerd)); then
    must "ctr images pull $name" "${ctr[@]}" images pull --plain-http "$endpoint/bench/$name:latest"
    ctr_kib=$(($(kib "$tmp/ctr/root/io.containerd.content.v1.content") + $(kib "$tmp/ctr/root/io.containerd.snapshotter.v1.overlayfs")))
  fi
  printf '%s %s %s %s %s %s\n' "$name" "$(kib "$store/blobs")" "$(kib "$store/layers")" \
    "$(layer_dirs)" "$(blob_count)" "$ctr_kib" >>"$disk"
done
# The distinct layers of the two images, as their summaries say.
distinct=$(/usr/bin/python3 - "$test_images" <<'EOF'
import json, os, sys
d = sys.argv[1]
def diff_ids(name):
    layout = os.path.join(d, name)
    blobs = os.path.join(layout, "blobs", "sha256")
    index = json.load(open(os.path.join(layout, "index.json")))
    manifest = json.load(open(os.path.join(blobs, index["manifests"][0]["digest"][7:])))
    config = json.load(open(os.path.join(blobs, manifest["config"]["digest"][7:])))
    return config["rootfs"]["diff_ids"]
print(len(set(diff_ids("busybox")) | set(diff_ids("shared"))))
EOF
)
base_diff_id=$(/usr/bin/python3 -c 'import json, os, sys
d = sys.argv[1]
layout = os.path.join(d, "busybox")
blobs = os.path.join(layout, "blobs", "sha256")
index = json.load(open(os.path.join(layout, "index.json")))
manifest = json.load(open(os.path.join(blobs, index["manifests"][0]["digest"][7:])))
print(json.load(open(os.path.join(blobs, manifest["config"]["digest"][7:])))["rootfs"]["diff_ids"][0][7:])' "$test_images")
base_copies=$(find "$store/layers" -mindepth 1 -maxdepth 1 -type d -name "$base_diff_id" | wc -l)
echo "distinct $distinct $base_copies" >>"$disk"

# --- the table -------------------------------------------------------------------
sort -k2,2 -k3,3g "$samples" | awk -v rounds="$rounds" -v big_mb="$big_mb" \
  -v big_bytes="$big_bytes" -v big_layers="$big_layers" -v layer_size="$layer_size" \
  -v unpack_runs="$unpack_runs" -v cycles="$snapshot_cycles" -v runs="$runs" \
  -v disk="$disk" '
  { name = $2; n[name]++; v[name, n[name]] = $3; unit[name] = $4 }
  function median(name,   k) {
    k = n[name]
    return k % 2 ? v[name, (k + 1) / 2] : (v[name, k / 2] + v[name, k / 2 + 1]) / 2
  }
  function row(name, what) {
    if (!(name in n)) { printf "%-26s %-58s %s\n", name, what, "not measured"; return }
    printf "%-26s %-58s %10.3f %-3s %10.3f %10.3f %4d\n", name, what, median(name),
      unit[name], v[name, 1], v[name, n[name]], n[name]
  }
  function ratio(label, a, b, target,   r) {
    if (!(a in n) || !(b in n) || median(b) == 0) {
      printf "%-9s %s / %s: not measured\n", label, a, b; return
    }
    r = median(a) / median(b)
    printf "%-9s %-13s / %-10s = %6.3f   target <= %.2f: %s\n", label, a, b, r, target,
      r <= target ? "met" : "MISSED"
  }
  END {
    printf "\nmedians over %d rounds (big image: %.1f MB in %d layers; unpacked layer: %.1f MB gzip)\n",
      rounds, big_bytes / 1e6, big_layers, layer_size / 1e6
    printf "%-26s %-58s %10s %-3s %10s %10s %4s\n", "figure", "what", "median", "", "min", "max", "n"
    row("berth_pull", "berth image pull (node -> berth-images), cold store")
    row("ctr_pull", "ctr images pull --plain-http (overlayfs unpack), cold")
    row("berth_unpack", "unpack_layer BLOB DIR (berth unpacker)")
    row("tar_unpack", "tar -xzf BLOB -C DIR")
    row("snapshot_prepare_release", "PrepareSnapshot + ReleaseSnapshot on images.sock")
    row("snapshot_prepare", "PrepareSnapshot alone")
    row("snapshot_release", "ReleaseSnapshot alone")
    row("berth_run", "berth run --rm --net host busybox /bin/true")
    row("berth_run_noimage", "berth run --rm --net host -- /bin/true (no image)")
    row("ctr_run", "ctr run --rm busybox /bin/true")
    printf "\nratios of medians\n"
    ratio("pull", "berth_pull", "ctr_pull", 1.0)
    ratio("unpack", "berth_unpack", "tar_unpack", 1.2)
    ratio("run", "berth_run", "ctr_run", 0.25)
    if (("berth_run" in n) && ("berth_run_noimage" in n))
      printf "%-9s berth_run - berth_run_noimage = %.3f ms   no target: what the image adds\n",
        "image", median("berth_run") - median("berth_run_noimage")
    if ("snapshot_prepare_release" in n)
      printf "%-9s %-26s = %6.3f ms target <= 5 ms: %s\n", "snapshot",
        "snapshot_prepare_release", median("snapshot_prepare_release"),
        median("snapshot_prepare_release") <= 5 ? "met" : "MISSED"
    else
      printf "%-9s snapshot_prepare_release: not measured\n", "snapshot"
    printf "\ndisk: the berth store (<state_dir>/images) after each pull, du -sk\n"
    printf "%-14s %12s %12s %11s %6s   %s\n", "after pulling", "blobs/ KiB", "layers/ KiB",
      "layer dirs", "blobs", "containerd content + overlayfs KiB"
    while ((getline line < disk) > 0) {
      split(line, f, " ")
      if (f[1] == "distinct") { distinct = f[2]; copies = f[3]; continue }
      printf "%-14s %12d %12d %11d %6d   %s\n", f[1], f[2], f[3], f[4], f[5], f[6]
      dirs = f[4]
    }
    printf "%-9s %d layer dirs for %d distinct layers, busybox'\''s base layer %d time(s): %s\n",
      "shared", dirs, distinct, copies, (dirs == distinct && copies == 1) ? "stored once" : "MISSED"
  }'
