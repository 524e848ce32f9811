#!/bin/bash
# The mock driver behind a wrapper that leaves a cgroup behind under the
# parent the conformance test chose: conformance_driver_test.sh must notice.
if [[ -n "${BERTH_TEST_CGROUP_PARENT:-}" ]]; then
  mkdir -p "/sys/fs/cgroup/pids${BERTH_TEST_CGROUP_PARENT}/left-behind"
fi
exec "$BERTH_LEAKY_DRIVER_WRAPS" "$@"
