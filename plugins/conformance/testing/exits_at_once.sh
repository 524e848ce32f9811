#!/bin/sh
# A driver that cannot start: it says why on stderr and exits 3 before any
# handshake (for //plugins/conformance:conformance_launch_failure_test).
echo "exits_at_once: cannot start (a test double)" >&2
exit 3
