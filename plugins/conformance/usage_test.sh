#!/bin/bash
# berth-driver-conformance's command line: usage errors exit 2 naming the
# flag; --help and --version exit 0.
# usage: usage_test.sh SUITE
set -u
suite="$1"
failures=0

# expect CODE PATTERN ARGS...: the exit code is CODE and stdout+stderr match
# the extended regular expression PATTERN.
expect() {
  local want="$1" pattern="$2"
  shift 2
  local output status
  output="$("$suite" "$@" 2>&1)"
  status=$?
  if [[ $status -ne $want ]] || ! grep -qE -e "$pattern" <<<"$output"; then
    echo "FAIL: $suite $*: exit $status (want $want), output:" >&2
    echo "$output" >&2
    echo "(want a match of: $pattern)" >&2
    failures=$((failures + 1))
  else
    echo "ok: $* -> exit $status"
  fi
}

expect 2 '--plugin is required'
expect 2 '--plugin=/nonexistent/driver: No such file' --plugin=/nonexistent/driver
expect 2 'unknown flag --plugins=x' --plugins=x
expect 2 'unexpected argument extra' --plugin=/bin/true extra
expect 2 '--task-config' --plugin=/bin/true --task-config='[1]'
expect 2 '--filter=zzz matches no check' --verbosity=0 --plugin=/bin/true --filter=zzz
expect 2 '--start_timeout must be positive' --plugin=/bin/true --start-timeout=0s
expect 0 'exec_streaming_100mb' --help
expect 0 '^berth-driver-conformance 0\.1\.0$' --version
exit $((failures > 0))
