#!/usr/bin/env bash
# bazel run //api:move_baseline -- --reason "WHY": makes the API as it is now
# the v1.0 baseline the compatibility test checks against. Only before berth's
# first release; the reason goes into api/releases/v1.0.lock and the commit.
set -euo pipefail
current=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
shift
reason=
while (($#)); do
  case $1 in
    --reason=*) reason=${1#*=} ;;
    --reason) reason=${2:-}; shift ;;
    *) echo "move_baseline: unknown argument '$1'" >&2; exit 2 ;;
  esac
  shift
done
if [[ -z $reason ]]; then
  echo "move_baseline: say why the baseline moves: bazel run //api:move_baseline -- --reason \"...\"" >&2
  exit 2
fi
cd "${BUILD_WORKSPACE_DIRECTORY:?run me with bazel run //api:move_baseline}"
cp -L "$current" api/releases/v1.0.txtpb
chmod 644 api/releases/v1.0.txtpb
{
  echo "# Checksum of api/releases/v1.0.txtpb, written by bazel run //api:move_baseline."
  echo "# api_compat_test fails when the baseline changes by any other means. Do not edit."
  echo "sha256 $(sha256sum api/releases/v1.0.txtpb | cut -d' ' -f1)"
  echo "moved $(date -u +%Y-%m-%d)"
  echo "reason $reason"
} >api/releases/v1.0.lock
echo "moved the v1.0 baseline to the current API. Commit it with the reason:"
echo "  git commit -m \"api: move the v1.0 baseline: $reason\" api/releases"
