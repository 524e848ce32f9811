#!/usr/bin/env bash
# Shows that check_sync.sh fails when a .proto changes without regeneration,
# and when a checked-in file is missing or extra; and passes when nothing
# changed. Runs generate.sh itself with the pinned tools it is given.
#
#   check_sync_test.sh GENERATE CHECK_SYNC PROTOC GRPC_CPP_PLUGIN GRPC_PYTHON_PLUGIN
set -u
generate=$1 check_sync=$2 protoc=$3 cpp_plugin=$4 python_plugin=$5
work=$(mktemp -d "${TEST_TMPDIR:-/tmp}/sync.XXXXXX")
trap 'rm -rf "$work"' EXIT
wkt=$(dirname "$(dirname "$(dirname "$(find -L . -path '*include/google/protobuf/descriptor.proto' | head -n 1)")")")
failures=0

# generate_from PROTO_ROOT OUT: runs generate.sh over every .proto under PROTO_ROOT.
generate_from() {
  local files
  files=$(cd "$1" && find berth grpc_health -name '*.proto' | sort)
  # shellcheck disable=SC2086
  bash "$generate" --protoc="$protoc" --grpc_cpp_plugin="$cpp_plugin" \
    --grpc_python_plugin="$python_plugin" --out="$2" -I"$1" -I"$wkt" $files
}

# expect WANT_RC NEEDLE OUTPUT RC DESCRIPTION
expect() {
  if [[ $4 -ne $1 ]]; then
    echo "FAIL: $5: exit $4, wanted $1. Output:"; echo "$3"; failures=$((failures + 1))
  elif [[ $3 != *"$2"* ]]; then
    echo "FAIL: $5: output lacks [$2]:"; echo "$3"; failures=$((failures + 1))
  else
    echo "ok: $5"
  fi
}

mkdir -p "$work/src"
cp -RL api/berth third_party/grpc_health "$work/src/"
chmod -R u+w "$work/src"

# 1. Unchanged .proto files: in sync.
generate_from "$work/src" "$work/unchanged" || exit 1
out=$(bash "$check_sync" "$work/unchanged" . 2>&1); rc=$?
expect 0 "match the .proto files" "$out" $rc "unchanged protos are in sync"

# 2. A .proto edited without regeneration: every file generated from it is stale.
cat >>"$work/src/berth/driver/v1/driver.proto" <<'PROTO'

// Added by check_sync_test.sh.
message SyncCheckProbe {
  // A field.
  string probe = 1;
}
PROTO
generate_from "$work/src" "$work/edited" || exit 1
out=$(bash "$check_sync" "$work/edited" . 2>&1); rc=$?
for stale in api/gen/cpp/berth/driver/v1/driver.pb.h api/gen/cpp/berth/driver/v1/driver.pb.cc \
  api/gen/python/berth/driver/v1/driver_pb2.py api/berth.txtpb; do
  expect 1 "stale:   $stale" "$out" $rc "edited driver.proto makes $stale stale"
done
expect 1 "Fix: bazel run //api:update_generated" "$out" $rc "the failure names the fix"
[[ $out != *"node.pb.h"* ]] && echo "ok: untouched node.proto is not reported" ||
  { echo "FAIL: node.proto reported stale"; failures=$((failures + 1)); }

# 3. A checked-in file missing, and one no .proto generates.
mkdir -p "$work/root/api"
cp -RL api/gen api/berth.txtpb "$work/root/api/"
chmod -R u+w "$work/root"
rm "$work/root/api/gen/cpp/berth/stats/v1/stats.grpc.pb.h"
touch "$work/root/api/gen/python/berth/stats/v1/leftover_pb2.py"
out=$(bash "$check_sync" "$work/unchanged" "$work/root" 2>&1); rc=$?
expect 1 "missing: api/gen/cpp/berth/stats/v1/stats.grpc.pb.h" "$out" $rc "a deleted file is missing"
expect 1 "extra:   api/gen/python/berth/stats/v1/leftover_pb2.py" "$out" $rc "a stray file is extra"

if ((failures)); then echo "$failures check(s) failed"; exit 1; fi
echo "sync check fails when it should"
