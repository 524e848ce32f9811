# Helpers of the node's end-to-end tests, sourced by each. The test sets
# $cli (the berth binary) and $run (the runtime directory) before calling
# them, and reads $failures at the end.

failures=0

pass() { echo "PASS $1"; }
fail() { echo "FAIL $1: $2"; failures=$((failures + 1)); }
berth() { "$cli" --socket="$run/node.sock" "$@"; }

# Waits up to $1 tenths of a second for the command in $2... to succeed.
wait_for() {
  local tries=$1; shift
  for _ in $(seq "$tries"); do
    "$@" >/dev/null 2>&1 && return 0
    sleep 0.1
  done
  return 1
}

# task_field TASK PYTHON-EXPR: the expression of `t`, the task as
# `berth inspect` prints it (JSON).
task_field() {
  berth inspect "$1" | /usr/bin/python3 -c "import json,sys; t=json.load(sys.stdin); print($2)"
}
