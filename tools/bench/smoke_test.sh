#!/bin/bash
# Smoke test of tools/bench's programs, against the mock driver and without
# crun (exec_driver.sh alone runs crun): each runs briefly (4 MiB streams, 2
# repetitions; the client against the driver and against the gRPC echo) and
# must exit 0 and print its figures; a failing client or command must exit 1
# naming what failed and leave no process behind. Never a time.
#
# usage: smoke_test.sh EXEC_DRIVER_BENCH UNIX_RELAY_BENCH SPAWN_BENCH DRIVER
set -u

client=$1
relay=$2
spawn=$3
driver=$4
# A short directory: the driver's socket goes in it (at most 107 bytes).
tmp=$(mktemp -d /tmp/berth-bench-smoke-XXXXXX)
tag="BERTH_BENCH_SMOKE=$tmp"
trap 'rm -rf "$tmp"' EXIT
out=$tmp/out
err=$tmp/err
failures=0
passed=0

fail() {
  echo "FAIL: $*"
  echo "---- stdout ----"
  cat "$out"
  echo "---- stderr ----"
  cat "$err"
  failures=$((failures + 1))
}
pass() {
  echo "PASS: $*"
  passed=$((passed + 1))
}

# Processes started with $tag in their environment that still run.
leftovers() {
  local p
  for p in /proc/[0-9]*; do
    grep -qzx -- "$tag" "$p/environ" 2>/dev/null && echo "${p#/proc/}"
  done
  return 0
}

# expect_figure NAME UNIT: a "median NAME VALUE UNIT n=2 ..." line and two
# "sample NAME" lines.
expect_figure() {
  grep -qE "^median $1 [0-9]+\.[0-9]+ $2 n=2 min=[0-9.]+ max=[0-9.]+$" "$out" ||
    return 1
  [[ $(grep -cE "^sample $1 [0-9]+\.[0-9]+ $2$" "$out") -eq 2 ]]
}

check() { # NAME COMMAND... (expected to succeed)
  local name=$1
  shift
  "$@" >"$out" 2>"$err"
  local code=$?
  if [[ $code -ne 0 ]]; then
    fail "$name: exited with code $code"
    return 1
  fi
  return 0
}

# 1. The client against the mock driver: three figures.
if check "exec_driver_bench" "$client" --driver="$driver" --repetitions=2 \
  --warmup=1 --stream_repetitions=2 --stream_bytes=$((4 << 20)) \
  --tag_env="$tag" --tmp_dir="$tmp"; then
  missing=()
  expect_figure driver_start ms || missing+=(driver_start)
  expect_figure driver_exec ms || missing+=(driver_exec)
  expect_figure driver_stream MB/s || missing+=(driver_stream)
  if ((${#missing[@]})); then
    fail "exec_driver_bench: no figure for ${missing[*]}"
  else
    pass "exec_driver_bench: driver_start, driver_exec, driver_stream"
    grep '^median ' "$out"
  fi
fi

# 2. The relay.
if check "unix_relay_bench" "$relay" --bytes=$((4 << 20)) --repetitions=2 \
  --tmp_dir="$tmp"; then
  if expect_figure relay_stream MB/s; then
    pass "unix_relay_bench: relay_stream"
    grep '^median ' "$out"
  else
    fail "unix_relay_bench: no relay_stream figure"
  fi
fi

# 3. The gRPC echo: the client's streaming figure against the bare echo
#    server, which it starts itself (with the tag in its environment).
if check "exec_driver_bench --echo_server" "$client" --echo_server \
  --warmup=1 --stream_repetitions=2 --stream_bytes=$((4 << 20)) \
  --tag_env="$tag" --tmp_dir="$tmp"; then
  if expect_figure echo_stream MB/s; then
    pass "exec_driver_bench --echo_server: echo_stream"
    grep '^median ' "$out"
  else
    fail "exec_driver_bench --echo_server: no echo_stream figure"
  fi
fi

# 4. spawn_bench (what times crun in exec_driver.sh), on /bin/true.
if check "spawn_bench" "$spawn" --name=bin_true --repetitions=2 -- /bin/true; then
  if expect_figure bin_true ms; then
    pass "spawn_bench: bin_true"
  else
    fail "spawn_bench: no bin_true figure"
  fi
fi

# expect_failure NAME MESSAGE COMMAND...: exit code 1, MESSAGE on stderr.
expect_failure() {
  local name=$1 message=$2
  shift 2
  "$@" >"$out" 2>"$err"
  local code=$?
  if [[ $code -ne 1 ]]; then
    fail "$name: exited with code $code, want 1"
  elif ! grep -qF -- "$message" "$err"; then
    fail "$name: stderr does not say \"$message\""
  elif grep -q '^median ' "$out"; then
    fail "$name: printed a median although it failed"
  else
    pass "$name: exit 1, \"$message\""
  fi
}

# 5. Failures are loud: a binary that is not a driver plugin; a stream that
#    cannot finish in time (after start and exec worked), whose task must be
#    removed all the same; the same for the echo, whose server must go; a
#    command that exits non-zero.
expect_failure "exec_driver_bench, not a plugin" \
  "FAILED: launching the driver /bin/false" \
  "$client" --driver=/bin/false --tmp_dir="$tmp"
expect_failure "exec_driver_bench, stream past its deadline" \
  "FAILED: ExecTaskStreaming of \`cat\` in task bench-sleeper-" \
  "$client" --driver="$driver" --repetitions=1 --warmup=0 \
  --stream_bytes=$((64 << 20)) --stream_timeout=1ms --tag_env="$tag" \
  --tmp_dir="$tmp"
expect_failure "exec_driver_bench --echo_server, stream past its deadline" \
  "FAILED: ExecTaskStreaming of \`cat\` in task grpc-echo of the gRPC echo server" \
  "$client" --echo_server --warmup=0 --stream_bytes=$((64 << 20)) \
  --stream_timeout=1ms --tag_env="$tag" --tmp_dir="$tmp"
expect_failure "spawn_bench, /bin/false" \
  "FAILED: bin_false: \`/bin/false\` exited with code 1" \
  "$spawn" --name=bin_false --repetitions=1 -- /bin/false

# 6. Nothing left: no process of a task, of the driver or of the echo
#    server, no directory.
sleep 0.2
left=$(leftovers)
if [[ -n $left ]]; then
  ps -o pid,args -p "$(paste -sd, <<<"$left")" >"$out" 2>&1
  : >"$err"
  fail "processes left behind: $left"
else
  pass "no process left behind"
fi
if find "$tmp" -mindepth 1 -maxdepth 1 ! -name out ! -name err | grep -q .; then
  ls -la "$tmp" >"$out"
  : >"$err"
  fail "files left in $tmp"
else
  pass "no temporary directory left behind"
fi

echo "$passed passed, $failures failed"
[[ $failures -eq 0 ]]
