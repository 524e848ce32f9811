#!/usr/bin/env bash
# The benchmark of issue 7, point 9: stdout throughput through the real
# berth-agent -> berth-proxy -> berth-shim next to a raw pipe -> Unix-socket
# relay (unix_relay_bench) in the same run, NewContainer-to-first-byte
# latency, and memory (PSS from /proc/PID/smaps_rollup) of the proxy per
# sandbox and of one shim. Prints the medians and the ratios against the
# targets (throughput >= 0.5x the relay; shim <= 3 MB).
#
# usage: tools/bench/sandbox_io.sh [--bytes=1073741824] [--repetitions=3]
#            [--proxy=PATH]
#
#   --bytes, --repetitions   per timed stream (both the sandbox and the relay)
#   --proxy=PATH             a berth-proxy binary instead of the one built
#                            here (-c opt)
#
# No root needed: the agent runs as a plain process. Builds with
# `bazel build -c opt --symlink_prefix=/` (no convenience symlinks).
set -euo pipefail

bytes=$((1 << 30))
repetitions=3
proxy=""
for arg in "$@"; do
  case $arg in
    --bytes=*) bytes=${arg#*=} ;;
    --repetitions=*) repetitions=${arg#*=} ;;
    --proxy=*) proxy=${arg#*=} ;;
    -h | --help)
      sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//'
      exit 0
      ;;
    *)
      echo "sandbox_io.sh: unknown argument $arg" >&2
      exit 2
      ;;
  esac
done

cd "$(dirname "${BASH_SOURCE[0]}")/../.."
targets=(//tools/bench:sandbox_io_bench //tools/bench:unix_relay_bench
  //services/agent:berth-agent //services/proxy:berth-proxy
  //services/shim:berth-shim)
bazel build -c opt --symlink_prefix=/ "${targets[@]}" >&2
bin=$(bazel info -c opt bazel-bin 2>/dev/null)
proxy=${proxy:-$bin/services/proxy/berth-proxy}

out=$(mktemp)
trap 'rm -f "$out"' EXIT
"$bin/tools/bench/unix_relay_bench" --bytes="$bytes" \
  --repetitions="$repetitions" | tee -a "$out"
"$bin/tools/bench/sandbox_io_bench" --agent="$bin/services/agent/berth-agent" \
  --proxy="$proxy" --shim="$bin/services/shim/berth-shim" \
  --bytes="$bytes" --repetitions="$repetitions" | tee -a "$out"

median() { awk -v name="$1" '$1 == "median" && $2 == name { print $3 }' "$out"; }
relay=$(median relay_stream)
sandbox=$(median sandbox_stdout)
shim=$(median shim_pss)
shim_private=$(median shim_private)
echo
echo "summary:"
awk -v r="$relay" -v s="$sandbox" -v f="$(median first_byte)" \
  -v p="$(median proxy_private_per_sandbox)" -v pp="$(median proxy_pss)" \
  -v m="$shim" -v mp="$shim_private" 'BEGIN {
  printf "  stdout agent->proxy->shim  %8.1f MB/s\n", s
  printf "  raw pipe->socket relay     %8.1f MB/s\n", r
  printf "  ratio                      %8.2fx (target >= 0.5x)\n", s / r
  printf "  NewContainer->first byte   %8.2f ms\n", f
  printf "  proxy PSS                  %8.0f kB; private per sandbox %.1f kB\n", pp, p
  printf "  one shim PSS               %8.0f kB (%.2fx the 3 MB target); private %.0f kB\n", m, m / 3000, mp
}'
