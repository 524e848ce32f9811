#!/usr/bin/env bash
# Shows that the API compatibility test fails when it should, on the real API:
# each breaking edit of the current descriptor is caught with its rule, an
# addition passes, and a baseline edited by hand (not by move_baseline) fails.
#
#   api_compat_detects_breaking_test.sh API_COMPAT COMPAT_TEST BASELINE LOCK CURRENT
set -u
api_compat=$1 compat_test=$2 baseline=$3 lock=$4 current=$5
work=$(mktemp -d "${TEST_TMPDIR:-/tmp}/compat.XXXXXX")
trap 'rm -rf "$work"' EXIT
failures=0

# mutate NAME PYTHON: writes $work/NAME.txtpb, the current API edited by PYTHON
# (which sees `fds`, the FileDescriptorSet, and helpers).
mutate() {
  /usr/bin/python3 - "$current" "$work/$1.txtpb" "$2" <<'PY'
import sys
from google.protobuf import descriptor_pb2, text_format
src, dst, edit = sys.argv[1:]
fds = text_format.Parse(open(src).read(), descriptor_pb2.FileDescriptorSet())
def file(package):
    return next(f for f in fds.file if f.package == package)
def message(package, name):
    return next(m for m in file(package).message_type if m.name == name)
def field(package, msg, name):
    return next(f for f in message(package, msg).field if f.name == name)
def service(package, name):
    return next(s for s in file(package).service if s.name == name)
def enum(package, name):
    return next(e for e in file(package).enum_type if e.name == name)
exec(edit)
open(dst, "w").write(text_format.MessageToString(fds))
PY
}

# expect WANT_RC NEEDLE DESCRIPTION -- COMMAND...
expect() {
  local want=$1 needle=$2 what=$3
  shift 4
  local out rc
  out=$("$@" 2>&1); rc=$?
  if [[ $rc -ne $want || $out != *"$needle"* ]]; then
    echo "FAIL: $what: exit $rc (wanted $want), output lacks or has [$needle]:"; echo "$out"
    failures=$((failures + 1))
  else
    echo "ok: $what${out:+: $(head -n 1 <<<"$out")}"
  fi
}

check() {  # check NAME: the compatibility test on the mutated current API
  bash "$compat_test" "$api_compat" "$baseline" "$lock" "$work/$1.txtpb"
}

mutate renumber 'field("berth.driver.v1", "TaskConfig", "id").number = 99'
expect 1 "[FIELD_RENUMBERED] field berth.driver.v1.TaskConfig.id" "a renumbered field breaks" -- check renumber
mutate retype 'field("berth.stats.v1", "MemoryStats", "rss").type = descriptor_pb2.FieldDescriptorProto.TYPE_INT64'
expect 1 "[FIELD_TYPE_CHANGED] field berth.stats.v1.MemoryStats.rss" "a retyped field breaks" -- check retype
mutate remove_field 'm = message("berth.node.v1", "TaskSpec"); del m.field[0]'
expect 1 "[FIELD_REMOVED] field berth.node.v1.TaskSpec.name" "a removed field breaks" -- check remove_field
mutate remove_rpc 's = service("berth.driver.v1", "DriverService"); [s.method.remove(x) for x in list(s.method) if x.name == "TaskStats"]'
expect 1 "[RPC_REMOVED] rpc berth.driver.v1.DriverService.TaskStats" "a removed RPC breaks" -- check remove_rpc
mutate streaming 'next(x for x in service("berth.driver.v1", "DriverService").method if x.name == "TaskEvents").server_streaming = False'
expect 1 "[RPC_SERVER_STREAMING_CHANGED]" "a change of streaming breaks" -- check streaming
mutate remove_value 'e = enum("berth.stats.v1", "Backend"); del e.value[3]'
expect 1 "[ENUM_VALUE_REMOVED] enum value berth.stats.v1.Backend.BACKEND_PROCFS" "a removed enum value breaks" -- check remove_value
mutate add 'm = message("berth.driver.v1", "TaskConfig"); f = m.field.add(name="labels", number=50, label=1, type=9, json_name="labels")'
expect 0 "compatible with" "an added field is compatible" -- check add
expect 0 "compatible with" "the current API is compatible with itself" -- \
  bash "$compat_test" "$api_compat" "$baseline" "$lock" "$current"

# A baseline changed by hand, not by move_baseline, fails the test.
cp "$baseline" "$work/baseline.txtpb"
chmod u+w "$work/baseline.txtpb"
echo "# edited by hand" >>"$work/baseline.txtpb"
expect 1 "changed without bazel run //api:move_baseline" "a hand-edited baseline is refused" -- \
  bash "$compat_test" "$api_compat" "$work/baseline.txtpb" "$lock" "$current"

if ((failures)); then echo "$failures check(s) failed"; exit 1; fi
echo "the compatibility test fails when it should"
