#!/usr/bin/env bash
# The replay of a fuzz target fails when an input crashes it, and passes on
# its seeds: a <name>_corpus_test catches a regression input.
#
#   replay_fails_test.sh REPLAY_BINARY CRASHING_INPUT
set -uo pipefail
replay=$1 crashing=$2
fail() { echo "FAIL: $*" >&2; exit 1; }

out=$("$replay" "$crashing" 2>&1)
status=$?
((status != 0)) || fail "the replay of $crashing exited 0; output: $out"
grep -qF "replay: $crashing" <<<"$out" || fail "the replay did not name $crashing before crashing: $out"
echo "ok: the replay of a crashing input exits $status"

# A directory is replayed file by file: the crashing input among others fails.
dir=${TEST_TMPDIR:-/tmp}/replay_dir.$$
mkdir -p "$dir"
trap 'rm -rf "$dir"' EXIT
printf 'fine' >"$dir/a"
cp "$crashing" "$dir/b"
"$replay" "$dir" >/dev/null 2>&1 && fail "the replay of a directory holding $crashing exited 0"
echo "ok: a directory holding a crashing input fails"
rm "$dir/b"
out=$("$replay" "$dir" 2>&1) || fail "the replay of a directory of good inputs failed: $out"
grep -q "1 input(s) replayed" <<<"$out" || fail "expected one input replayed: $out"
echo "ok: a directory of good inputs passes"

# Nothing to replay is an error, not a pass.
"$replay" >/dev/null 2>&1 && fail "the replay of no input exited 0"
rm "$dir/a"
"$replay" "$dir" >/dev/null 2>&1 && fail "the replay of an empty directory exited 0"
"$replay" "$dir/missing" >/dev/null 2>&1 && fail "the replay of a missing file exited 0"
echo "ok: no input, an empty directory and a missing file fail"
