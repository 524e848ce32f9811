#!/bin/bash
# Runs make_test_images_test.py with Debian's python3 (see BUILD.bazel).
set -euo pipefail
exec /usr/bin/python3 "$@"
