#!/bin/bash
# Smoke test of tools/bench/images.sh (issue 16, point 7) with the binaries of
# the build (no bazel inside), without containerd: its usage errors exit 2; a
# tiny run (1 round, a 5 MB big image, 1 unpack, 3 snapshots, 2 runs) exits
# 0, prints every berth and tar figure, the disk rows with busybox's layer
# stored once, and says it left nothing; a berth-images that does not start
# makes it exit 1 naming that, with the registry it had started stopped and
# nothing left either. Any of that failing fails the test. Never a time.
#
# Needs root (overlay mounts, namespaces, cgroups): skips, saying why,
# without it.
#
# usage: images_smoke_test.sh IMAGES_SH TEST_IMAGES_DIR BERTH_NODE BERTH
#            BERTH_IMAGES BERTH_DRIVER_EXEC BERTH_TASK_INIT UNPACK_LAYER
#            IMAGES_SNAPSHOT_BENCH
set -u

script=$1
test_images=$2
shift 2
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
if ((EUID != 0)); then
  echo "SKIPPED: needs root (overlay mounts, namespaces, cgroups)"
  exit 0
fi

parent="berth-imagessmoke-$$"
work=$(mktemp -d /tmp/berth-imagessmoke-XXXXXX)
out=$work/out
err=$work/err
trap 'rm -rf "$work"' EXIT
# The binaries under the names images.sh looks for (--bin_dir).
names=(berth-node berth berth-images berth-driver-exec berth-task-init unpack_layer
  images_snapshot_bench)
mkdir -p "$work/bin" "$work/bad"
for name in "${names[@]}"; do
  ln -s "$(readlink -f "$1")" "$work/bin/$name"
  ln -s "$(readlink -f "$1")" "$work/bad/$name"
  shift
done
rm "$work/bad/berth-images"
ln -s /bin/false "$work/bad/berth-images"

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
# What a run may leave: processes of its driver (their args name $parent),
# cgroups, its temporary directory (named in its progress lines), the
# registry it started.
left_behind() {
  local p what="" dir pid
  for p in /proc/[0-9]*; do
    tr '\0' ' ' <"$p/cmdline" 2>/dev/null | grep -q -- "--cgroup_parent=/$parent" &&
      what+=" process ${p#/proc/}"
  done
  for p in /sys/fs/cgroup/*/"$parent" /sys/fs/cgroup/"$parent"; do
    [[ -e $p ]] && what+=" cgroup $p"
  done
  dir=$(grep -o '/tmp/berth-bench-images-[A-Za-z0-9]*' "$err" | head -n 1)
  [[ -n $dir && -e $dir ]] && what+=" directory $dir"
  [[ -n $dir ]] && grep -q " $dir/" /proc/self/mountinfo && what+=" mounts under $dir"
  pid=$(sed -n 's/.*docker-registry \([0-9]*\) on .*/\1/p' "$err" | head -n 1)
  [[ -n $pid ]] && kill -0 "$pid" 2>/dev/null && what+=" docker-registry $pid"
  echo "$what"
}

# Usage errors: exit 2, before anything is started.
for args in "--rounds=0" "--big_mb=x" "--runs=-1" "--bogus" "--cgroup_parent=a/b" \
  "--bin_dir=$work/missing" "--test_images=$work"; do
  # shellcheck disable=SC2086 # one flag, or none
  "$script" $args >"$out" 2>"$err"
  code=$?
  if ((code == 2)) && grep -q '^images.sh: ' "$err"; then
    pass "$args: exit 2"
  else
    fail "$args: exit $code, expected 2 and a message"
  fi
done
"$script" --help >"$out" 2>"$err"
code=$?
if ((code == 0)) && grep -q '^usage: tools/bench/images.sh' "$out"; then
  pass "--help"
else
  fail "--help: exit $code"
fi

# A tiny run.
"$script" --rounds=1 --big_mb=5 --unpack_runs=1 --snapshot_cycles=3 --runs=2 \
  --skip_containerd --cgroup_parent="$parent" --bin_dir="$work/bin" \
  --test_images="$test_images" >"$out" 2>"$err"
code=$?
missing=""
for figure in berth_pull berth_unpack tar_unpack; do
  grep -qE "^$figure +.* ms +[0-9.]+ +[0-9.]+ +1$" "$out" || missing+=" $figure"
done
for figure in snapshot_prepare_release snapshot_prepare snapshot_release; do
  grep -qE "^$figure +.* ms +[0-9.]+ +[0-9.]+ +3$" "$out" || missing+=" $figure"
done
for figure in berth_run berth_run_noimage; do
  grep -qE "^$figure +.* ms +[0-9.]+ +[0-9.]+ +2$" "$out" || missing+=" $figure"
done
for figure in ctr_pull ctr_run; do
  grep -qE "^$figure .*not measured" "$out" || missing+=" '$figure not measured'"
done
grep -qE '^unpack +berth_unpack +/ tar_unpack += +[0-9.]+ +target <= 1.20: (met|MISSED)' "$out" ||
  missing+=" unpack ratio"
grep -qE '^snapshot +snapshot_prepare_release += +[0-9.]+ ms target <= 5 ms: (met|MISSED)' "$out" ||
  missing+=" snapshot line"
grep -qE '^busybox +[0-9]+ +[0-9]+ +1 +3 +-$' "$out" || missing+=" disk row busybox"
grep -qE '^shared +[0-9]+ +[0-9]+ +2 +6 +-$' "$out" || missing+=" disk row shared"
grep -qE "^shared +2 layer dirs for 2 distinct layers, busybox's base layer 1 time\(s\): stored once" "$out" ||
  missing+=" 'stored once'"
grep -q 'clean-up: no task, container, snapshot, mount, process, cgroup, containerd state or temporary file left' "$err" ||
  missing+=" clean-up line"
if ((code == 0)) && [[ -z $missing ]]; then
  pass "a tiny run: exit 0, every berth figure, the disk rows"
else
  fail "a tiny run: exit $code, missing:$missing"
fi
left=$(left_behind)
if [[ -z $left ]]; then pass "the tiny run left nothing"; else fail "the tiny run left:$left"; fi

# berth-images that does not start: exit 1, named, nothing left (the registry
# was started before it).
"$script" --rounds=1 --big_mb=1 --unpack_runs=1 --snapshot_cycles=1 --runs=1 \
  --skip_containerd --cgroup_parent="$parent" --bin_dir="$work/bad" \
  --test_images="$test_images" >"$out" 2>"$err"
code=$?
if ((code == 1)) && grep -q 'FAILED: berth-images exited at start' "$err" &&
  grep -q 'docker-registry [0-9]* on ' "$err" && grep -q 'clean-up: no task' "$err" &&
  ! grep -q '^medians' "$out"; then
  pass "a berth-images that exits at start: exit 1, named"
else
  fail "a berth-images that exits at start: exit $code"
fi
left=$(left_behind)
if [[ -z $left ]]; then pass "the failed run left nothing"; else fail "the failed run left:$left"; fi

echo "$passed passed, $failures failed"
((failures == 0))
