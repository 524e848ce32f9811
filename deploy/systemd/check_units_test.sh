#!/bin/bash
# The units pass check_units.sh, and the check fails when it should: a
# misspelled flag, a node unit without KillMode=process or without its
# ordering.
set -u
check="$1"; unit_dir=$(dirname "$2"); shift 2
binaries=("$@")
failures=0
expect() {  # expect pass|fail WHAT DIR
  local out code
  out=$(bash "$check" "$3" "${binaries[@]}" 2>&1); code=$?
  if [[ $1 == pass && $code -eq 0 ]] || [[ $1 == fail && $code -ne 0 ]]; then
    echo "ok: $2"
  else
    echo "WRONG: $2 (exit $code): $out"; failures=$((failures + 1))
  fi
}
expect pass "the units as shipped" "$unit_dir"
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
copy() {
  rm -rf "$tmp/u"; mkdir "$tmp/u"; cp "$unit_dir"/*.service "$unit_dir"/*.conf "$tmp/u/"
}
copy; sed -i 's/--plugin_config=/--plugin_configs=/' "$tmp/u/berth-node.service"
expect fail "a flag the binary does not have" "$tmp/u"
copy; sed -i '/^KillMode=process/d' "$tmp/u/berth-node.service"
expect fail "berth-node without KillMode=process" "$tmp/u"
copy; sed -i 's/ berth-proxy.service//' "$tmp/u/berth-node.service"
expect fail "berth-node not ordered after berth-proxy" "$tmp/u"
copy; sed -i 's/^Restart=on-failure/RuntimeDirectory=berth\n&/' "$tmp/u/berth-stats.service"
expect fail "a unit that would give /run/berth back to root:root" "$tmp/u"
copy; sed -i 's/0750 root berth/0755 root berth/' "$tmp/u/berth.tmpfiles.conf"
expect fail "/run/berth open to others" "$tmp/u"
copy; rm "$tmp/u/berth.sysusers.conf"
expect fail "no sysusers.d file for group berth" "$tmp/u"
copy; sed -i 's/--socket_group=berth/--socket_group=staff/' "$tmp/u/berth-node.service"
expect fail "berth-node's socket group is not the one made and given /run/berth" "$tmp/u"
((failures == 0))
