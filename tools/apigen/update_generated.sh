#!/usr/bin/env bash
# bazel run //api:update_generated: copies the code generated inside the build
# into api/gen and api/berth.txtpb of the workspace.
set -euo pipefail
generated=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
cd "${BUILD_WORKSPACE_DIRECTORY:?run me with bazel run //api:update_generated}"
for kind in cpp python; do
  rm -rf "api/gen/$kind"
  mkdir -p "api/gen/$kind"
  cp -RL "$generated/$kind/." "api/gen/$kind/"
  chmod -R u+w,a+r "api/gen/$kind"
  find "api/gen/$kind" -type d -exec chmod 755 {} +
  find "api/gen/$kind" -type f -exec chmod 644 {} +
done
cp -L "$generated/berth.txtpb" api/berth.txtpb
chmod 644 api/berth.txtpb
echo "updated api/gen and api/berth.txtpb; review with: git status api/ && git diff --stat api/"
