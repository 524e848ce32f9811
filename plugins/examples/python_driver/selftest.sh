#!/usr/bin/env bash
# Runs selftest.py from the test's runfiles, where api/gen/python sits three
# directories above this one as it does in a checkout.
exec /usr/bin/python3 "$(dirname "$0")/selftest.py"
