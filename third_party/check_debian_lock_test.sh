#!/usr/bin/env bash
# Shows that check_debian_lock.sh passes matching versions and fails, naming the
# package or tool, the version found and the version wanted, on each mismatch.
set -u
check=$(dirname "$0")/check_debian_lock.sh
[[ -f $check ]] || check=third_party/check_debian_lock.sh
dir=$(mktemp -d "${TEST_TMPDIR:-/tmp}/lock.XXXXXX")
trap 'rm -rf "$dir"' EXIT

# A fake dpkg-query that answers from $dir/installed ("package version" lines)
# and says every tool under $dir belongs to fake-grpc.
cat >"$dir/dpkg-query" <<'FAKE'
#!/usr/bin/env bash
case $1 in
  --show)
    line=$(awk -v p="$3" '$1 == p { print $2 }' "$FAKE_INSTALLED")
    [[ -n $line ]] || exit 1
    echo "installed $line" ;;
  --search) echo "fake-grpc: $2" ;;
esac
FAKE
printf '#!/bin/sh\necho "libprotoc 3.21.12"\n' >"$dir/protoc"
printf '#!/bin/sh\nexit 0\n' >"$dir/grpc_cpp_plugin"
chmod +x "$dir/dpkg-query" "$dir/protoc" "$dir/grpc_cpp_plugin"
export DPKG_QUERY=$dir/dpkg-query FAKE_INSTALLED=$dir/installed

cat >"$dir/installed" <<'LIST'
libgrpc++-dev 1.51.1-3+b1
g++ 4:12.2.0-3
fake-grpc 1.51.1-3
LIST

failures=0
expect() {  # expect pass|fail "needle" LOCK-CONTENTS ARGS...
  local want=$1 needle=$2 lock=$3
  shift 3
  printf '%s\n' "$lock" >"$dir/lock"
  local out rc
  out=$(bash "$check" "$dir/lock" "$@" 2>&1)
  rc=$?
  if [[ $want == pass && $rc -ne 0 ]] || [[ $want == fail && $rc -eq 0 ]]; then
    echo "FAIL: expected $want for [$*] with lock [$lock], got exit $rc: $out"
    failures=$((failures + 1))
  elif [[ -n $needle && $out != *"$needle"* ]]; then
    echo "FAIL: output for [$*] lacks [$needle]: $out"
    failures=$((failures + 1))
  else
    echo "ok: $want [$*]${out:+ -> $out}"
  fi
}

expect pass "" "package libgrpc++-dev 1.51.1" package libgrpc++-dev
expect pass "" "package g++ 12.2.0  # epoch and revision are ignored" package g++
expect fail "Debian package libgrpc++-dev is version 1.51.1, but third_party/debian.lock wants version 1.51.2" \
  "package libgrpc++-dev 1.51.2" package libgrpc++-dev
expect fail "Debian package libfoo-dev is not installed; third_party/debian.lock wants version 1.0" \
  "package libfoo-dev 1.0" package libfoo-dev
expect fail "Debian package g++ is used by the build but not named in third_party/debian.lock" \
  "package libgrpc++-dev 1.51.1" package g++
expect pass "" "tool protoc $dir/protoc 3.21.12" tool protoc
expect fail "$dir/protoc is version 3.21.12, but third_party/debian.lock pins protoc at version 3.21.13" \
  "tool protoc $dir/protoc 3.21.13" tool protoc
expect pass "" "tool grpc_cpp_plugin $dir/grpc_cpp_plugin 1.51.1" tool grpc_cpp_plugin
expect fail "$dir/grpc_cpp_plugin is version 1.51.1, but third_party/debian.lock pins grpc_cpp_plugin at version 1.50.0" \
  "tool grpc_cpp_plugin $dir/grpc_cpp_plugin 1.50.0" tool grpc_cpp_plugin
expect fail "$dir/missing (tool protoc) is not installed" "tool protoc $dir/missing 3.21.12" tool protoc
# Every mismatch is reported, not only the first.
expect fail "libbar-dev" $'package libfoo-dev 1.0\npackage libbar-dev 2.0' package libfoo-dev package libbar-dev

# The real lock file parses and names the packages the workspace checks.
real_lock=$(dirname "$check")/debian.lock
for p in libgrpc++-dev protobuf-compiler libabsl-dev libgoogle-glog-dev libgtest-dev libbenchmark-dev bazel-bootstrap clang-14; do
  awk -v p="$p" '$1 == "package" && $2 == p { found = 1 } END { exit !found }' "$real_lock" || { echo "FAIL: debian.lock does not name $p"; failures=$((failures + 1)); }
done

if ((failures)); then
  echo "$failures check(s) failed"
  exit 1
fi
echo "all lock checks behaved"
