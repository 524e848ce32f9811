#!/usr/bin/env bash
# Shows that `bazel build --config=clang` fails on a broken lock annotation.
#
# Bazel cannot run inside a Bazel test, so this compiles the two files of this
# package directly with the compiler and the C++ flags .bazelrc gives
# --config=clang (the `build` and `build:clang` --copt/--cxxopt lines, and
# the CC of `build:clang --action_env`, which Bazel compiles C++ with): guarded.cc must compile cleanly,
# and unguarded.cc must fail with each of its three violations named. If
# .bazelrc stopped turning thread-safety warnings into errors, or stopped
# using clang, this fails. Needs clang-14 (third_party/debian.lock) and
# Debian's Abseil headers in /usr/include.
set -u
here=tools/thread_safety
bazelrc=.bazelrc
if [[ -n ${TEST_SRCDIR:-} ]]; then
  cd "$TEST_SRCDIR/${TEST_WORKSPACE:-berth}" || exit 1
else
  cd "$(dirname "${BASH_SOURCE[0]}")/../.." || exit 1
fi

failures=0
fail() {
  echo "FAIL: $*"
  failures=$((failures + 1))
}

# The compiler and flags of --config=clang, from .bazelrc.
cc=$(awk '$1 == "build:clang" { for (i = 2; i <= NF; i++) if ($i ~ /^--action_env=CC=/) { sub(/^--action_env=CC=/, "", $i); print $i } }' "$bazelrc")
flags=()
while read -r flag; do
  flags+=("$flag")
done < <(awk '
  { sub(/#.*/, "") }
  $1 == "build" || $1 == "build:clang" {
    for (i = 2; i <= NF; i++)
      if ($i ~ /^--(copt|cxxopt)=/) { sub(/^--(copt|cxxopt)=/, "", $i); print $i }
  }' "$bazelrc")
echo "compiler: ${cc:-none}"
echo "flags: ${flags[*]}"
if [[ -z $cc ]]; then
  echo "FAIL: $bazelrc sets no CC for --config=clang (build:clang --action_env=CC=...)"
  exit 1
fi
if [[ ! -x $cc ]]; then
  echo "FAIL: $cc is not installed: run 'tools/dev setup' (it installs clang-14, which third_party/debian.lock names)"
  exit 1
fi
[[ " ${flags[*]} " == *" -Wthread-safety "* ]] ||
  fail "$bazelrc gives --config=clang no -Wthread-safety"

compile() {  # compile FILE: prints the diagnostics, returns the compiler's status
  "$cc" -x c++ "${flags[@]}" -fsyntax-only -fno-color-diagnostics "$here/$1" 2>&1
}

# What obeys the annotations compiles without a word about them.
out=$(compile guarded.cc)
rc=$?
if ((rc != 0)); then
  fail "guarded.cc, which holds every lock it needs, does not compile (exit $rc): $out"
elif [[ $out == *thread-safety* ]]; then
  fail "guarded.cc draws thread-safety diagnostics: $out"
else
  echo "ok: guarded.cc compiles"
fi

# What breaks them fails the build, each violation named as an error.
out=$(compile unguarded.cc)
rc=$?
if ((rc == 0)); then
  fail "unguarded.cc compiled (exit 0): the thread-safety warnings are not errors. Diagnostics: ${out:-none}"
fi
for want in \
  "error: writing variable 'value_' requires holding mutex 'mu_' exclusively" \
  "error: calling function 'AddLocked' requires holding mutex 'mu_' exclusively" \
  "error: cannot call function 'Add' while mutex 'mu_' is held"; do
  if [[ $out == *"$want"* ]]; then
    echo "ok: $want"
  else
    fail "unguarded.cc: no [$want] in: $out"
  fi
done

if ((failures)); then
  echo "$failures check(s) failed"
  exit 1
fi
echo "the thread-safety check fails where it should"
