#!/bin/bash
# registry.sh starts a registry (plain, then TLS with auth) that skopeo can
# push to and read from, and stops it. Args: registry.sh, the images dir.
set -euo pipefail
REGISTRY_SH=$(realpath "$1")
IMAGES=$(realpath "$2")
export BERTH_REGISTRY_DIR=$TEST_TMPDIR/registry
# A failed check leaves no registry behind.
trap '"$REGISTRY_SH" stop >/dev/null 2>&1 || true' EXIT
fail() {
  echo "FAIL: $*" >&2
  exit 1
}
inspect() {
  env -i PATH=/usr/bin:/bin HOME="$TEST_TMPDIR" /usr/bin/skopeo \
    --tmpdir "$TEST_TMPDIR" inspect "$@"
}
digest_of() {
  /usr/bin/python3 -c 'import json, sys; print(json.load(sys.stdin)["Digest"])'
}
want=$(/usr/bin/python3 -c 'import json, sys
print(json.load(open(sys.argv[1]))["busybox"]["manifest_digest"])' \
  "$IMAGES/images.json")

# Plain HTTP.
endpoint=$("$REGISTRY_SH" start)
[[ $endpoint =~ ^127\.0\.0\.1:[0-9]+$ ]] || fail "start printed '$endpoint'"
"$REGISTRY_SH" push "$IMAGES/busybox" library/busybox:latest
got=$(inspect --tls-verify=false "docker://$endpoint/library/busybox:latest" | digest_of)
[[ $got == "$want" ]] || fail "plain: digest $got, want $want"
"$REGISTRY_SH" push "$IMAGES/busybox" busybox:v2s2 --format v2s2
inspect --raw --tls-verify=false "docker://$endpoint/busybox:v2s2" |
  grep -q 'application/vnd.docker.distribution.manifest.v2+json' ||
  fail "plain: v2s2 push is not a Docker schema 2 manifest"
"$REGISTRY_SH" start 2>/dev/null && fail "a second start succeeded"
"$REGISTRY_SH" env | grep -qx "REGISTRY_URL=http://$endpoint" ||
  fail "env: $("$REGISTRY_SH" env)"
pid=$(cat "$BERTH_REGISTRY_DIR/pid")
[[ $(cat "/proc/$pid/comm") == docker-registry ]] ||
  fail "pid file names $(cat "/proc/$pid/comm"), not docker-registry"
"$REGISTRY_SH" stop
kill -0 "$pid" 2>/dev/null && fail "registry pid $pid still runs after stop"

# TLS and auth.
endpoint=$("$REGISTRY_SH" start --tls --auth alice:s3cret)
eval "$("$REGISTRY_SH" env | sed 's/^/export /')"
[[ -s $REGISTRY_CA && $REGISTRY_USER == alice ]] || fail "env: $("$REGISTRY_SH" env)"
"$REGISTRY_SH" push "oci-archive:$IMAGES/busybox-oci.tar" busybox:tls
got=$(inspect --cert-dir "$(dirname "$REGISTRY_CA")" --creds alice:s3cret \
  "docker://$endpoint/busybox:tls" | digest_of)
[[ $got == "$want" ]] || fail "tls: digest $got, want $want"
inspect --cert-dir "$(dirname "$REGISTRY_CA")" "docker://$endpoint/busybox:tls" \
  >/dev/null 2>&1 && fail "tls: read without credentials"
inspect --creds alice:s3cret "docker://$endpoint/busybox:tls" >/dev/null 2>&1 &&
  fail "tls: read without the CA"
pid=$(cat "$BERTH_REGISTRY_DIR/pid")
"$REGISTRY_SH" stop
kill -0 "$pid" 2>/dev/null && fail "registry pid $pid still runs after stop"
echo PASS
