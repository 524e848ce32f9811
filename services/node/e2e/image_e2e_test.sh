#!/bin/bash
# Image tasks end to end (issue 16, point 5): berth-images, berth-node with
# the exec and sandbox drivers, and `berth`. The test images
# (//tools/testimages) are imported through the node (`berth image import`,
# forwarded to berth-images); `berth run busybox echo hi` runs on both
# drivers, with and without `--userns auto` (what a task in a user
# namespace writes is stored owned by its mapped ids); the multi-layer image's
# Entrypoint, Cmd, WorkingDir and User apply unless the command line
# overrides them; `berth inspect` shows the image and its digests; a task's
# snapshot is an overlay mount under berth-images' state while it exists and
# is gone after `berth rm`; a restart mounts the task's snapshot again when
# its mount went (as after a host restart), with what the task wrote; an
# image that is not stored fails the run naming it and leaves nothing; at
# the end no snapshot, overlay mount or cgroup is left.
#
# usage: image_e2e_test.sh NODE CLI DRIVER STATS PROXY SANDBOX AGENT SHIM INIT IMAGES TESTIMAGES
set -u
node_bin=$(readlink -f "$1") cli=$(readlink -f "$2") driver_bin=$(readlink -f "$3")
stats_bin=$(readlink -f "$4") proxy_bin=$(readlink -f "$5")
sandbox_bin=$(readlink -f "$6") agent_bin=$(readlink -f "$7")
shim_bin=$(readlink -f "$8") init_bin=$(readlink -f "$9")
images_bin=$(readlink -f "${10}") testimages=$(readlink -f "${11}")
export PATH="/usr/sbin:/sbin:$PATH"

if [[ $(id -u) -ne 0 ]]; then
  echo "SKIPPED: needs root (overlay mounts, namespaces, cgroups)"
  exit 0
fi
if ! grep -qw overlay /proc/filesystems && ! modprobe overlay 2>/dev/null; then
  echo "SKIPPED: the kernel has no overlay file system"
  exit 0
fi

tag="i$((RANDOM % 90000 + 10000))"
dir="$(mktemp -d /tmp/berth-XXXXXX)"
run="$dir/run" state="$dir/state"
# Ranges for two --userns auto tasks at once, of ids no file here owns.
base=$((4000000 + (RANDOM % 1000) * 65536 * 2))
# shellcheck source=services/node/e2e/e2e_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/e2e_lib.sh"

start_node() {
  "$node_bin" --runtime_dir="$run" --state_dir="$state" \
    --plugin_config="$dir/plugins.json" --netns_socket=none \
    --userns_base="$base" --userns_count=131072 --userns_size=65536 \
    >>"$dir/node.log" 2>&1 &
  node_pid=$!
  wait_for 100 berth ps && wait_for 100 test -S "$run/plugins/exec.sock" &&
    wait_for 100 test -S "$run/plugins/sandbox.sock"
}

# Overlay mounts (snapshots) under the test's directory.
mounts_left() { awk -v d="$dir/" 'index($2, d) == 1 { print $2 }' /proc/mounts; }
snapshots_left() { ls -A "$state/images/snapshots" 2>/dev/null | grep -v '^tmp-' ; }

cleanup() {
  for task in $(berth ps -a -q 2>/dev/null); do berth rm -f "$task" >/dev/null 2>&1; done
  stop_pid "${node_pid:-}"
  stop_pid "${images_pid:-}"
  stop_pid "${stats_pid:-}"
  stop_pid "${proxy_pid:-}"
  mounts_left | sort -r | xargs -r -n1 umount -l 2>/dev/null
  remove_test_cgroups
  rm -rf "$dir"
}
trap cleanup EXIT

mkdir -p "$state"
install -d -m 0750 "$run"  # a runtime directory open to others is refused
chmod 0755 "$dir"
write_exec_and_sandbox_plugins
echo '{}' >"$dir/registries.json"
"$stats_bin" --runtime_dir="$run" >>"$dir/stats.log" 2>&1 &
stats_pid=$!
"$proxy_bin" --runtime_dir="$run" --state_dir="$state" >>"$dir/proxy.log" 2>&1 &
proxy_pid=$!
"$images_bin" --runtime_dir="$run" --state_dir="$state" \
  --registries_config="$dir/registries.json" >>"$dir/images.log" 2>&1 &
images_pid=$!
wait_for 100 test -S "$run/proxy.sock" || { echo "FAILED: berth-proxy did not start:"; cat "$dir/proxy.log"; exit 1; }
wait_for 100 test -S "$run/images.sock" || { echo "FAILED: berth-images did not start:"; cat "$dir/images.log"; exit 1; }
start_node || { echo "FAILED: berth-node did not start:"; cat "$dir/node.log"; exit 1; }

# --- node status: berth-images among the services, healthy.
status=$(berth node status 2>&1)
code=$?
echo "--- berth node status (exit $code):"
printf '%s\n' "$status"
if [[ $code -eq 0 && $(printf '%s\n' "$status" | awk '$1 == "berth-images" { print $3 }') == yes ]]; then
  pass node_status_images_healthy
else
  fail node_status_images_healthy "exit $code"
fi

# --- import through node.sock.
json() { /usr/bin/python3 -c "import json,sys; d=json.load(open('$testimages/images.json')); print($1)"; }
busybox_manifest=$(json 'd["busybox"]["manifest_digest"]')
busybox_config=$(json 'd["busybox"]["config_digest"]')
out=$(berth image import --name busybox "$testimages/busybox-oci.tar" 2>&1)
code=$?
echo "--- berth image import busybox-oci.tar (exit $code): $out"
[[ $code -eq 0 && $out == *docker.io/library/busybox:latest* ]] && pass import_busybox ||
  fail import_busybox "exit $code: $out"
out=$(berth image import --name multilayer "$testimages/multilayer-docker.tar" 2>&1)
code=$?
echo "--- berth image import multilayer-docker.tar (exit $code): $out"
[[ $code -eq 0 ]] && pass import_multilayer || fail import_multilayer "exit $code: $out"

# --- berth run busybox echo hi: both drivers, with and without a user
# namespace.
for driver in exec sandbox; do
  for userns in host auto; do
    name="run_${driver}_userns_${userns}"
    out=$(berth run --rm --pull never --net host --driver "$driver" --userns "$userns" \
      busybox echo hi 2>"$dir/err")
    code=$?
    if [[ $code -eq 0 && $out == hi ]]; then
      pass "$name"
    else
      fail "$name" "exit $code, stdout '$out', stderr '$(head -c 800 "$dir/err")'"
    fi
    # The image's own files, as the task sees them (its root is the image).
    out=$(berth run --rm --pull never --net host --driver "$driver" --userns "$userns" \
      busybox sh -c 'id -u; ls /bin/busybox; test -e /usr/bin/sudo && echo host-usr' 2>"$dir/err")
    if [[ $out == $'0\n/bin/busybox' ]]; then
      pass "${name}_root_is_the_image"
    else
      fail "${name}_root_is_the_image" "stdout '$out', stderr '$(head -c 800 "$dir/err")'"
    fi
  done
done

# --- the image's Entrypoint, Cmd, WorkingDir and User, unless overridden.
out=$(berth run --rm --pull never --net host multilayer 2>&1)
[[ $out == "from image" ]] && pass image_entrypoint_and_cmd || fail image_entrypoint_and_cmd "got '$out'"
out=$(berth run --rm --pull never --net host multilayer hello there 2>&1)
[[ $out == "hello there" ]] && pass command_replaces_cmd || fail command_replaces_cmd "got '$out'"
out=$(berth run --rm --pull never --net host --entrypoint /bin/sh multilayer -c 'pwd; id -u; id -g' 2>&1)
[[ $out == $'/work\n65534\n65534' ]] && pass entrypoint_workdir_user ||
  fail entrypoint_workdir_user "got '$out'"
out=$(berth run --rm --pull never --net host --user 0 --entrypoint /bin/sh multilayer -c 'id -u' 2>&1)
[[ $out == 0 ]] && pass spec_user_wins || fail spec_user_wins "got '$out'"
# A user's name is looked up in the image's /etc/passwd, not the host's: the
# image's nobody (its home /nonexistent, its groups) runs; the host's daemon
# is no user of the image's.
out=$(berth run --rm --pull never --net host -u nobody busybox sh -c 'id -u; id -G; echo $HOME' 2>&1)
out_daemon=$(berth run --rm --pull never --net host -u daemon busybox id -u 2>&1)
code=$?
echo "--- berth run -u daemon busybox id -u (exit $code): $out_daemon"
if [[ $out == $'65534\n65534\n/nonexistent' && $code -ne 0 &&
  $out_daemon == *'no user named "daemon" in the image'\''s /etc/passwd'* ]]; then
  pass user_from_image_passwd
else
  fail user_from_image_passwd "-u nobody: '$out'; -u daemon (exit $code): '$out_daemon'"
fi

# --- a task that stays: inspect shows its image; its snapshot is mounted
# while it exists and is gone once it is removed.
for driver in exec sandbox; do
  id=$(berth run -d --pull never --net host --driver "$driver" --name "keeper-$driver" \
    busybox sh -c 'echo written > /made-by-task; exec sleep 1000' 2>"$dir/err")
  if [[ -z $id ]]; then
    fail "keeper_${driver}_started" "$(head -c 800 "$dir/err")"
    berth rm -f "keeper-$driver" >/dev/null 2>&1
    continue
  fi
  id=$(task_field "keeper-$driver" 't["id"]')
  image_name=$(task_field "keeper-$driver" 't["image"]["name"]')
  digest=$(task_field "keeper-$driver" 't["image"]["digest"]')
  config=$(task_field "keeper-$driver" 't["image"]["configDigest"]')
  rootfs=$(task_field "keeper-$driver" 't["image"]["rootfs"]')
  echo "--- keeper-$driver: $image_name $digest $config $rootfs"
  if [[ $image_name == docker.io/library/busybox:latest && $digest == "$busybox_manifest" &&
        $config == "$busybox_config" ]]; then
    pass "inspect_${driver}_shows_the_image"
  else
    fail "inspect_${driver}_shows_the_image" "name $image_name digest $digest config $config (want $busybox_manifest, $busybox_config)"
  fi
  if [[ $rootfs == "$state/images/snapshots/"* ]] && awk -v r="$rootfs" '$2 == r && $3 == "overlay"' /proc/mounts | grep -q .; then
    pass "snapshot_${driver}_mounted"
  else
    fail "snapshot_${driver}_mounted" "rootfs '$rootfs' is no overlay mount"
  fi
  wait_for 50 test -e "$rootfs/made-by-task" && pass "task_${driver}_writes_its_snapshot" ||
    fail "task_${driver}_writes_its_snapshot" "no $rootfs/made-by-task"
  berth rm -f "keeper-$driver" >/dev/null 2>"$dir/err" || fail "rm_$driver" "$(cat "$dir/err")"
  if [[ ! -e $rootfs ]] && ! awk -v r="$rootfs" '$2 == r' /proc/mounts | grep -q .; then
    pass "rm_${driver}_releases_the_snapshot"
  else
    fail "rm_${driver}_releases_the_snapshot" "$rootfs is still there"
  fi
done

# --- a task in a user namespace writes its snapshot: what it makes (a file,
# a directory) and what it changes of the image (copied up) are stored in
# the snapshot's upper directory owned by its mapped host ids (the layers
# are idmapped below the overlay, the upper is not), never by the host's
# root; inside, the image's files are its root's.
for driver in exec sandbox; do
  name="userns_${driver}_upper_owned_by_mapped_ids"
  id=$(berth run -d --pull never --net host --driver "$driver" --userns auto \
    --name "mapped-$driver" busybox sh -c \
    'stat -c %u:%g /bin/busybox > /made-by-task; mkdir /made-dir; touch /bin/busybox; exec sleep 1000' \
    2>"$dir/err")
  if [[ -z $id ]]; then
    fail "$name" "$(head -c 800 "$dir/err")"
    berth rm -f "mapped-$driver" >/dev/null 2>&1
    continue
  fi
  rootfs=$(task_field "mapped-$driver" 't["image"]["rootfs"]')
  upper="${rootfs%/rootfs}/upper"
  wait_for 50 test -s "$upper/made-by-task"
  # The task writes made-by-task first, then the directory and the copy-up.
  wait_for 50 test -e "$upper/bin/busybox"
  owners=$(cd "$upper" 2>/dev/null && stat -c '%n %u %g' made-by-task made-dir bin/busybox 2>&1)
  seen=$(cat "$upper/made-by-task" 2>/dev/null)
  echo "--- mapped-$driver: upper $upper: $(printf '%s' "$owners" | tr '\n' ';') task saw busybox as $seen"
  bad=$(printf '%s\n' "$owners" | awk -v lo="$base" -v hi=$((base + 131072)) \
    'NF != 3 || $2 < lo || $2 >= hi || $3 < lo || $3 >= hi')
  if [[ $(printf '%s\n' "$owners" | wc -l) -eq 3 && -z $bad && $seen == 0:0 ]]; then
    pass "$name"
  else
    fail "$name" "owners '$owners' (want ids in [$base, $((base + 131072)))), busybox seen as '$seen' (want 0:0)"
  fi
  berth rm -f "mapped-$driver" >/dev/null 2>"$dir/err" || fail "rm_mapped_$driver" "$(cat "$dir/err")"
done

# --- a restart after the snapshot's mount went (as a host restart leaves
# it): the first run's snapshot is unmounted on the host, then the run is
# killed; its restart prepares the snapshot again, which berth-images mounts
# again with what the first run wrote (within a boot the upper is kept).
id=$(berth run -d --pull never --net host --restart on-failure:1 --name remount busybox sh -c \
  'echo run >> /runs; [ $(wc -l < /runs) -gt 1 ] && cat /runs; exec sleep 1000' 2>"$dir/err")
if [[ -z $id ]]; then
  fail remount_started "$(head -c 800 "$dir/err")"
else
  id=$(task_field remount 't["id"]')
  rootfs=$(task_field remount 't["image"]["rootfs"]')
  wait_for 50 test -s "$rootfs/runs"
  umount -l "$rootfs"
  if awk -v r="$rootfs" '$2 == r' /proc/mounts | grep -q . || [[ -e $rootfs/runs ]]; then
    fail remount_unmounted "$rootfs is still mounted"
  fi
  # The run's processes, killed as a host restart would.
  procs=$(find /sys/fs/cgroup -maxdepth 4 -path "*/berth-$tag/$id/cgroup.procs" 2>/dev/null)
  [[ -n $procs ]] || fail remount_cgroup "no cgroup of task $id below berth-$tag"
  for _ in 1 2 3 4 5; do
    # shellcheck disable=SC2086
    pids=$(cat $procs 2>/dev/null | sort -u)
    [[ -z $pids ]] && break
    # shellcheck disable=SC2086
    kill -9 $pids 2>/dev/null
    sleep 0.2
  done
  wait_for 100 bash -c "$(declare -f berth task_field); cli='$cli' run='$run'; [[ \$(task_field remount 't.get(\"restarts\", 0)') == 1 && \$(task_field remount 't[\"state\"]') == TASK_STATE_RUNNING ]]"
  state_now=$(task_field remount 't["state"] + " restarts " + str(t.get("restarts", 0)) + " " + t.get("error", "")')
  wait_for 50 bash -c "[[ \$(wc -l < '$rootfs/runs' 2>/dev/null) -eq 2 ]]"
  runs=$(cat "$rootfs/runs" 2>/dev/null | tr '\n' ' ')
  echo "--- remount: $state_now; $rootfs/runs: $runs"
  if [[ $state_now == "TASK_STATE_RUNNING restarts 1 "* && $runs == "run run " ]] &&
     awk -v r="$rootfs" '$2 == r && $3 == "overlay"' /proc/mounts | grep -q .; then
    pass restart_mounts_the_snapshot_again
  else
    fail restart_mounts_the_snapshot_again "state '$state_now', runs '$runs' (want 'run run '), mounts: $(awk -v r="$rootfs" '$2 == r' /proc/mounts)"
  fi
  berth rm -f remount >/dev/null 2>"$dir/err" || fail rm_remount "$(cat "$dir/err")"
fi

# --- an image that is not stored: the run fails naming it, nothing stays.
out=$(berth run --rm --pull never --net host nosuch:1 true 2>&1)
code=$?
echo "--- berth run nosuch:1 (exit $code): $out"
[[ $code -ne 0 && $out == *nosuch* ]] && pass missing_image_named || fail missing_image_named "exit $code: $out"

# --- nothing left: no snapshot, overlay mount, task or task cgroup.
left=$(snapshots_left)
[[ -z $left ]] && pass no_snapshot_left || fail no_snapshot_left "$left"
left=$(mounts_left)
[[ -z $left ]] && pass no_mount_left || fail no_mount_left "$left"
left=$(berth ps -a -q)
[[ -z $left ]] && pass no_task_left || fail no_task_left "$left"
left=$(find /sys/fs/cgroup/*/"berth-$tag"* /sys/fs/cgroup/"berth-$tag"* -mindepth 1 -type d 2>/dev/null)
[[ -z $left ]] && pass no_cgroup_left || fail no_cgroup_left "$left"

if [[ $failures -ne 0 ]]; then
  echo "--- berth-node log (tail):"; tail -40 "$dir/node.log"
  echo "--- berth-images log (tail):"; tail -40 "$dir/images.log"
  echo "FAILED: $failures checks"
  exit 1
fi
echo "all passed"
