#!/bin/bash
# Debian's docker-registry on 127.0.0.1 for shell tests and benchmarks, as
# //services/images/testing:registry_fixture runs it for C++ tests.
#
#   export BERTH_REGISTRY_DIR=$(mktemp -d)     # the state: config, storage,
#                                              # CA, pid, log
#   registry.sh start [--tls] [--auth USER:PASSWORD]
#                                # prints the endpoint, 127.0.0.1:PORT
#   registry.sh push SOURCE REPO:TAG [--format oci|v2s2]
#                                # SOURCE: an OCI layout directory, or any
#                                # skopeo source (oci-archive:FILE, ...)
#   registry.sh env              # REGISTRY_ENDPOINT=, REGISTRY_URL=,
#                                # REGISTRY_CA= and, with auth,
#                                # REGISTRY_USER=, REGISTRY_PASSWORD= lines
#   registry.sh stop             # SIGTERM, waits; the directory stays
#
# Only Debian's docker-registry, skopeo, openssl, htpasswd and python3 (a
# free port, the readiness probe) are used; nothing leaves 127.0.0.1.
set -euo pipefail

REGISTRY=/usr/bin/docker-registry
SKOPEO=/usr/bin/skopeo
OPENSSL=/usr/bin/openssl
HTPASSWD=/usr/bin/htpasswd
PYTHON=/usr/bin/python3

die() {
  echo "registry.sh: $*" >&2
  exit 1
}

[[ -n "${BERTH_REGISTRY_DIR:-}" ]] || die "set BERTH_REGISTRY_DIR to a directory for its state"
STATE=$BERTH_REGISTRY_DIR
mkdir -p "$STATE"
STATE=$(cd "$STATE" && pwd)

# The tools' environment: none of the caller's proxies or REGISTRY_*
# variables (which would override the registry's configuration).
tool() {
  env -i PATH=/usr/bin:/bin HOME="$STATE" TMPDIR="$STATE" LC_ALL=C "$@"
}

running() {
  [[ -f "$STATE/pid" ]] && kill -0 "$(cat "$STATE/pid")" 2>/dev/null
}

free_port() {
  "$PYTHON" -c 'import socket
s = socket.socket()
s.bind(("127.0.0.1", 0))
print(s.getsockname()[1])'
}

# Exits 0 once GET URL answers 200 (or 401 when auth is on).
probe() {
  "$PYTHON" - "$1" "$2" "$3" <<'EOF'
import ssl, sys, urllib.error, urllib.request
url, ca, auth = sys.argv[1], sys.argv[2], sys.argv[3] == "1"
handlers = [urllib.request.ProxyHandler({})]
if ca:
    handlers.append(urllib.request.HTTPSHandler(
        context=ssl.create_default_context(cafile=ca)))
try:
    urllib.request.build_opener(*handlers).open(url, timeout=2)
except urllib.error.HTTPError as e:
    sys.exit(0 if auth and e.code == 401 else 1)
except Exception:
    sys.exit(1)
EOF
}

make_certificates() {
  mkdir -p "$STATE/pki" "$STATE/certs.d"
  tool "$OPENSSL" req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 \
    -nodes -keyout "$STATE/pki/ca.key" -out "$STATE/certs.d/ca.crt" -days 2 \
    -subj "/CN=berth test registry CA" \
    -addext basicConstraints=critical,CA:TRUE \
    -addext keyUsage=critical,keyCertSign,cRLSign 2>"$STATE/openssl.log" ||
    die "openssl (CA): $(cat "$STATE/openssl.log")"
  tool "$OPENSSL" req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 \
    -nodes -keyout "$STATE/pki/server.key" -out "$STATE/pki/server.crt" \
    -days 2 -subj /CN=127.0.0.1 -CA "$STATE/certs.d/ca.crt" \
    -CAkey "$STATE/pki/ca.key" -addext subjectAltName=IP:127.0.0.1 \
    -addext basicConstraints=critical,CA:FALSE \
    -addext extendedKeyUsage=serverAuth 2>"$STATE/openssl.log" ||
    die "openssl (server): $(cat "$STATE/openssl.log")"
}

write_config() {
  local endpoint=$1 tls=$2 auth=$3
  {
    cat <<EOF
version: 0.1
log:
  level: warn
  accesslog:
    disabled: true
storage:
  filesystem:
    rootdirectory: "$STATE/storage"
  delete:
    enabled: true
  maintenance:
    uploadpurging:
      enabled: false
http:
  addr: "$endpoint"
EOF
    if [[ $tls == 1 ]]; then
      printf '  tls:\n    certificate: "%s"\n    key: "%s"\n' \
        "$STATE/pki/server.crt" "$STATE/pki/server.key"
    fi
    if [[ $auth == 1 ]]; then
      printf 'auth:\n  htpasswd:\n    realm: "berth-test-registry"\n    path: "%s"\n' \
        "$STATE/htpasswd"
    fi
  } >"$STATE/config.yml"
}

cmd_start() {
  local tls=0 auth=0 creds=""
  while (($#)); do
    case $1 in
      --tls) tls=1 ;;
      --auth)
        auth=1
        creds=${2:?--auth needs USER:PASSWORD}
        shift
        ;;
      *) die "start: unknown argument $1" ;;
    esac
    shift
  done
  running && die "already running (pid $(cat "$STATE/pid")) in $STATE"
  rm -f "$STATE/pid" "$STATE/endpoint" "$STATE/tls" "$STATE/creds"
  mkdir -p "$STATE/storage"
  local ca=""
  if [[ $tls == 1 ]]; then
    make_certificates
    ca=$STATE/certs.d/ca.crt
    touch "$STATE/tls"
  fi
  if [[ $auth == 1 ]]; then
    [[ $creds == *:* ]] || die "--auth wants USER:PASSWORD"
    tool "$HTPASSWD" -Bbn "${creds%%:*}" "${creds#*:}" >"$STATE/htpasswd"
    (umask 077 && printf '%s\n' "$creds" >"$STATE/creds")
  fi
  local scheme=http
  [[ $tls == 1 ]] && scheme=https
  local attempt port endpoint pid
  for attempt in 1 2 3 4 5; do
    port=$(free_port)
    endpoint=127.0.0.1:$port
    write_config "$endpoint" "$tls" "$auth"
    : >"$STATE/registry.log"
    # A simple command, so that $! is the registry itself (env and setsid
    # exec it); setsid: it outlives this script and the caller's terminal.
    env -i PATH=/usr/bin:/bin HOME="$STATE" TMPDIR="$STATE" LC_ALL=C \
      setsid "$REGISTRY" serve "$STATE/config.yml" \
      </dev/null >>"$STATE/registry.log" 2>&1 &
    pid=$!
    echo "$pid" >"$STATE/pid"
    local deadline=$((SECONDS + 20))
    while kill -0 "$pid" 2>/dev/null; do
      if probe "$scheme://$endpoint/v2/" "$ca" "$auth"; then
        echo "$endpoint" >"$STATE/endpoint"
        echo "$endpoint"
        return 0
      fi
      ((SECONDS < deadline)) || {
        kill "$pid"
        die "GET $scheme://$endpoint/v2/ did not answer in 20 s: $(tail -5 "$STATE/registry.log")"
      }
      sleep 0.01
    done
    rm -f "$STATE/pid"
    grep -q "address already in use" "$STATE/registry.log" ||
      die "docker-registry exited: $(tail -5 "$STATE/registry.log")"
  done
  die "no free port after 5 attempts"
}

# skopeo's flags to reach the registry, with PREFIX "dest-" or "".
access_args() {
  local prefix=$1
  if [[ -f "$STATE/tls" ]]; then
    echo "--${prefix}cert-dir=$STATE/certs.d"
  else
    echo "--${prefix}tls-verify=false"
  fi
  if [[ -f "$STATE/creds" ]]; then
    echo "--${prefix}creds=$(cat "$STATE/creds")"
  fi
}

cmd_push() {
  local source=${1:?push SOURCE REPO:TAG} target=${2:?push SOURCE REPO:TAG}
  shift 2
  local format=oci
  while (($#)); do
    case $1 in
      --format)
        format=${2:?--format oci|v2s2}
        shift
        ;;
      *) die "push: unknown argument $1" ;;
    esac
    shift
  done
  [[ -f "$STATE/endpoint" ]] || die "not started in $STATE"
  case $source in
    oci:* | oci-archive:* | docker-archive:* | dir:*) ;;
    *) source=oci:$(cd "$source" && pwd) ;;
  esac
  local args
  mapfile -t args < <(access_args dest-)
  tool "$SKOPEO" --insecure-policy --tmpdir "$STATE" copy --quiet --all \
    --format "$format" "${args[@]}" "$source" \
    "docker://$(cat "$STATE/endpoint")/$target"
}

cmd_env() {
  [[ -f "$STATE/endpoint" ]] || die "not started in $STATE"
  local endpoint scheme=http
  endpoint=$(cat "$STATE/endpoint")
  [[ -f "$STATE/tls" ]] && scheme=https
  echo "REGISTRY_ENDPOINT=$endpoint"
  echo "REGISTRY_URL=$scheme://$endpoint"
  if [[ -f "$STATE/tls" ]]; then
    echo "REGISTRY_CA=$STATE/certs.d/ca.crt"
  else
    echo "REGISTRY_CA="
  fi
  if [[ -f "$STATE/creds" ]]; then
    local creds
    creds=$(cat "$STATE/creds")
    echo "REGISTRY_USER=${creds%%:*}"
    echo "REGISTRY_PASSWORD=${creds#*:}"
  fi
}

cmd_stop() {
  if ! running; then
    rm -f "$STATE/pid" "$STATE/endpoint"
    return 0
  fi
  local pid i
  pid=$(cat "$STATE/pid")
  kill -TERM "$pid"
  for i in $(seq 500); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.01
  done
  if kill -0 "$pid" 2>/dev/null; then
    kill -KILL "$pid"
    echo "registry.sh: docker-registry (pid $pid) ignored SIGTERM for 5 s; killed" >&2
  fi
  rm -f "$STATE/pid" "$STATE/endpoint"
}

case ${1:-} in
  start | push | env | stop)
    command=$1
    shift
    "cmd_$command" "$@"
    ;;
  *) die "usage: registry.sh start [--tls] [--auth USER:PASSWORD] | push SOURCE REPO:TAG [--format oci|v2s2] | env | stop" ;;
esac
