#!/usr/bin/env bash
# Checks installed Debian packages and code generators against debian.lock.
#
#   check_debian_lock.sh LOCK [package NAME | tool NAME]...
#
# Prints one line per mismatch, naming the package (or tool), the version found
# and the version wanted, and exits 1 if there was any. The repository rules in
# debian.bzl run it when they fetch; check_debian_lock_test runs it against a
# fake dpkg-query ($DPKG_QUERY) and fake tools.
set -u
lock=$1
shift
dpkg_query=${DPKG_QUERY:-dpkg-query}
fix="run 'tools/dev test' (it installs what third_party/debian.lock names) or move the pin in third_party/debian.lock"

# '4:12.2.0-3' -> '12.2.0'; '1.51.1-3+b1' -> '1.51.1'
upstream() {
  local v=${1#*:}
  [[ $v == *-* ]] && v=${v%-*}
  printf '%s' "$v"
}

# installed_version PACKAGE: the upstream version, or nothing if not installed.
installed_version() {
  local out
  out=$("$dpkg_query" --show --showformat='${db:Status-Status} ${Version}' "$1" 2>/dev/null) || return 0
  set -- $out
  [[ ${1:-} == installed && -n ${2:-} ]] && upstream "$2"
}

lock_field() {  # lock_field KIND NAME FIELD_INDEX
  awk -v kind="$1" -v name="$2" -v field="$3" \
    '{ sub(/#.*/, "") } $1 == kind && $2 == name { print $field; exit }' "$lock"
}

failures=0
complain() {
  echo "$*" >&2
  failures=$((failures + 1))
}

while (($#)); do
  kind=$1 name=$2
  shift 2
  case $kind in
    package)
      wanted=$(lock_field package "$name" 3)
      if [[ -z $wanted ]]; then
        complain "Debian package $name is used by the build but not named in third_party/debian.lock"
        continue
      fi
      found=$(installed_version "$name")
      if [[ -z $found ]]; then
        complain "Debian package $name is not installed; third_party/debian.lock wants version $wanted: $fix"
      elif [[ $found != "$wanted" ]]; then
        complain "Debian package $name is version $found, but third_party/debian.lock wants version $wanted: $fix"
      fi
      ;;
    tool)
      path=$(lock_field tool "$name" 3)
      wanted=$(lock_field tool "$name" 4)
      if [[ -z $path || -z $wanted ]]; then
        complain "tool $name is used by the build but not named in third_party/debian.lock"
        continue
      fi
      if [[ ! -x $path ]]; then
        complain "$path (tool $name) is not installed; third_party/debian.lock pins $name at version $wanted: $fix"
        continue
      fi
      if [[ $name == protoc ]]; then
        # protoc says its own version: "libprotoc 3.21.12".
        found=$("$path" --version 2>&1)
        found=${found#libprotoc }
      else
        # The gRPC plugins have no --version: ask the package that owns them.
        owner=$("$dpkg_query" --search "$path" 2>/dev/null | head -n 1)
        owner=${owner%%:*}
        found=$([[ -n $owner ]] && installed_version "$owner")
      fi
      if [[ $found != "$wanted" ]]; then
        complain "$path is version ${found:-unknown}, but third_party/debian.lock pins $name at version $wanted: $fix"
      fi
      ;;
    *)
      echo "usage: $0 LOCK [package NAME | tool NAME]..." >&2
      exit 2
      ;;
  esac
done
((failures == 0))
