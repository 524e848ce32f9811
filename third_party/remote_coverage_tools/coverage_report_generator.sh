#!/bin/sh
# Stand-in for Bazel's downloaded coverage tools: berth builds offline.
echo "coverage reports are not available in berth's offline build" >&2
exit 1
