# Sourced first by the benchmark scripts (exec_driver.sh, netns.sh, node.sh):
# their messages, --help and the check of their numeric flags. Messages start
# with the running script's name.

bench_script=$(basename "$0")

say() { printf '%s: %s\n' "$bench_script" "$*" >&2; }
die() {
  say "FAILED: $*"
  exit 1
}
# The script's opening comment, from its second line to `set -euo pipefail`.
usage() {
  sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'
}
# Exits 2 naming the flag unless each named variable holds a positive integer
# (the variable and its flag share a name: rounds ↔ --rounds).
require_positive_integers() {
  local n
  for n in "$@"; do
    [[ ${!n} =~ ^[1-9][0-9]*$ ]] || {
      say "--$n must be a positive integer, not '${!n}'"
      exit 2
    }
  done
}
