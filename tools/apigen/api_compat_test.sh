#!/usr/bin/env bash
# The API compatibility test: the current API (generated in the sandbox) has no
# breaking change against the frozen baseline, and the baseline is the one
# //api:move_baseline wrote (its checksum matches its lock).
#
#   api_compat_test.sh API_COMPAT BASELINE BASELINE_LOCK CURRENT
set -u
api_compat=$1 baseline=$2 lock=$3 current=$4
wanted=$(awk '$1 == "sha256" { print $2 }' "$lock")
found=$(sha256sum "$baseline" | cut -d' ' -f1)
if [[ -z $wanted || $found != "$wanted" ]]; then
  echo "$baseline changed without bazel run //api:move_baseline (sha256 $found, $lock says ${wanted:-nothing})."
  echo "Restore it (git checkout -- api/releases) or move it on purpose:"
  echo "  bazel run //api:move_baseline -- --reason \"...\""
  exit 1
fi
exec "$api_compat" --baseline="$baseline" --current="$current"
