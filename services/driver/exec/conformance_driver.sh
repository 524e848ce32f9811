#!/bin/bash
# berth-driver-exec as the conformance test runs it: with the cgroup parent
# the test chose (BERTH_TEST_CGROUP_PARENT), so that what it leaves behind
# can be told from the cgroups of other tests running at the same time.
exec "$(dirname "$0")/berth-driver-exec" \
  --cgroup_parent="${BERTH_TEST_CGROUP_PARENT:-/berth}" "$@"
