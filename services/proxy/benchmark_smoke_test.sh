#!/bin/sh
# Runs a benchmark binary ($1) with the rest of the arguments, briefly, so
# that it keeps compiling and running. Fails if it fails.
set -eu
"$@"
