#!/bin/bash
# The short chaos soak of `bazel test //...` (see BUILD.bazel).
#
# usage: chaos_test.sh CHAOS_PY --node=... (the binaries' flags of chaos.py)
set -u
chaos=$1
shift
if [[ $(id -u) -ne 0 ]]; then
  echo "SKIPPED: the chaos soak needs root (namespaces, cgroups, overlay mounts)"
  exit 0
fi
failures=0

# 1. The soak's own check: each injected fault is reported, naming its task,
# and the soak fails.
out=$(/usr/bin/python3 "$chaos" "$@" --seed=4 --lifecycles=6 --concurrency=3 --targets= \
  --inject=twice=0,output=1,code=2,keep=3,leak=0 2>&1)
code=$?
echo "$out"
want=(
  '^MISMATCH lifecycle 0 .*ran 2 times \(marker lines\), expected exactly 1'
  '^MISMATCH lifecycle 1 .*stdout differs: [0-9]+ bytes expected, [0-9]+ found'
  '^MISMATCH lifecycle 2 .*recorded exit code [0-9]+, expected code [0-9]+'
  '^LEAK task left in berth ps -a: chaos-k[0-9]+-3$'
  '^LEAK process left: pid [0-9]+: /bin/sh -c while :; do sleep 1; done chaos-k'
  '^LEAK mount left: .*/state/node/leaked/mnt'
  '^LEAK socket left: .*/state/node/leaked/sock$'
  '^LEAK file left: .*/state/node/leaked/tmpfile$'
  'mismatches: 3; leaks: 6; service problems: 0$'
)
for pattern in "${want[@]}"; do
  if ! grep -Eq -- "$pattern" <<<"$out"; then
    echo "FAIL self-check: no line matches '$pattern'"
    failures=$((failures + 1))
  fi
done
if [[ $code -ne 1 ]]; then
  echo "FAIL self-check: the soak exited $code with injected faults, want 1"
  failures=$((failures + 1))
fi

# 2. The short soak: 30 lifecycles on both drivers, images and imageless,
# bridge and none, while every target is killed every 1 to 3 s: berth-node,
# berth-netns, berth-stats, berth-images, berth-proxy, both driver plugins
# and task shims.
seed=${CHAOS_SEED:-18}
echo "--- short soak, seed $seed"
/usr/bin/python3 "$chaos" "$@" --seed="$seed" --lifecycles=30 --concurrency=4 \
  --kill_min=1 --kill_max=3 --max_seconds=150 --targets=berth-node,berth-netns,berth-stats,berth-images,berth-proxy,exec-driver,sandbox-driver,shim
code=$?
if [[ $code -ne 0 ]]; then
  echo "FAIL short soak: exit $code"
  failures=$((failures + 1))
fi

if [[ $failures -ne 0 ]]; then
  echo "FAILED: $failures"
  exit 1
fi
echo "PASSED"
