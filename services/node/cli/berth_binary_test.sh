#!/bin/sh
# The berth binary as a user runs it ($1): --version, --help, socket
# resolution from the environment, the unreachable-node line, usage errors,
# the image commands and docker's spellings of them.
# The commands themselves are tested against a fake node in commands_test.
set -u
berth="$1"
failures=0

check() {  # check NAME EXPECTED ACTUAL
  if [ "$2" != "$3" ]; then
    echo "FAIL $1: expected [$2], got [$3]"
    failures=$((failures + 1))
  fi
}

dir=$(mktemp -d /tmp/berth-XXXXXX)
trap 'rm -rf "$dir"' EXIT

check "--version" "berth 0.1.0" "$("$berth" --version)"

"$berth" --help >"$dir/help"
check "--help exit" 0 $?
check "--help first line" "usage: berth [--socket=PATH] COMMAND [ARGS...]" \
  "$(head -n 1 "$dir/help")"

BERTH_RUNTIME_DIR="$dir/rt" "$berth" ps >"$dir/out" 2>"$dir/err"
check "runtime dir exit" 1 $?
check "runtime dir message" \
  "berth: cannot reach berth-node at $dir/rt/node.sock: is it running? (tools/dev up)" \
  "$(cat "$dir/err")"
check "runtime dir stdout" "" "$(cat "$dir/out")"

BERTH_RUNTIME_DIR="$dir/rt" BERTH_NODE_SOCKET="$dir/n.sock" "$berth" ps \
  2>"$dir/err"
check "node socket exit" 1 $?
check "node socket message" \
  "berth: cannot reach berth-node at $dir/n.sock: is it running? (tools/dev up)" \
  "$(cat "$dir/err")"

BERTH_NODE_SOCKET="$dir/n.sock" "$berth" --socket "$dir/flag.sock" ps \
  2>"$dir/err"
check "--socket message" \
  "berth: cannot reach berth-node at $dir/flag.sock: is it running? (tools/dev up)" \
  "$(cat "$dir/err")"

"$berth" stats --bogus 2>"$dir/err"
check "bad flag exit" 2 $?
check "bad flag message" \
  "berth stats: unknown flag --bogus; see 'berth stats --help'" \
  "$(cat "$dir/err")"

"$berth" image --help >"$dir/out"
check "image --help exit" 0 $?
check "image --help first line" "usage: berth image COMMAND [ARGS...]" \
  "$(head -n 1 "$dir/out")"
for command in "image pull" "image import" "image ls" "image inspect" \
  "image rm" "image prune" "image tag" images pull rmi; do
  # shellcheck disable=SC2086  # the command's words
  "$berth" $command --help >"$dir/out"
  check "$command --help exit" 0 $?
  check "$command --help synopsis" "usage: berth image" \
    "$(head -n 1 "$dir/out" | cut -c 1-18)"
done

BERTH_NODE_SOCKET="$dir/n.sock" "$berth" images 2>"$dir/err"
check "images unreachable exit" 1 $?
check "images unreachable message" \
  "berth: cannot reach berth-node at $dir/n.sock: is it running? (tools/dev up)" \
  "$(cat "$dir/err")"

"$berth" image 2>"$dir/err"
check "image alone exit" 2 $?
"$berth" image frob 2>"$dir/err"
check "image frob message" \
  "berth image: unknown command \"frob\"; see 'berth image --help'" \
  "$(cat "$dir/err")"

"$berth" run /bin/true 2>"$dir/err"
check "run path as image exit" 2 $?
check "run path as image message" \
  "berth run: \"/bin/true\" is not an image reference: to run a host command without an image, put it after --: berth run [FLAGS] -- COMMAND [ARGS...]; see 'berth run --help'" \
  "$(cat "$dir/err")"

[ "$failures" -eq 0 ] || exit 1
echo PASS
