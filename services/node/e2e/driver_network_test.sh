#!/bin/bash
# berth-node with a driver that makes its own networks (its capabilities say
# must_create_network): the node calls the driver's CreateNetwork and
# DestroyNetwork instead of berth-netns' Prerun and Postrun, and needs no
# berth-netns for it. A driver that does not make networks, on a node
# without berth-netns, gets a clear error naming the field instead: at once
# when the node runs with --netns_socket=none, after a short wait when
# berth-netns is not running.
#
# The mock driver plays both parts, one node after the other (two copies of
# one driver cannot serve at once: the socket is named after the driver):
# first with --must_create_network (its networks are records under its state
# directory, with a documentation address; no traffic), then without.
#
# usage: driver_network_test.sh NODE CLI MOCK_DRIVER
set -u
node_bin=$(readlink -f "$1") cli=$(readlink -f "$2") mock_bin=$(readlink -f "$3")

dir="$(mktemp -d /tmp/berth-XXXXXX)"
run="$dir/run" state="$dir/state"
# shellcheck source=services/node/e2e/e2e_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/e2e_lib.sh"
plugin_up() {
  berth node status --json | /usr/bin/python3 -c 'import json,sys; sys.exit(0 if [p for p in json.load(sys.stdin)["plugins"] if p["name"] == "mock" and p.get("pid")] else 1)'
}
records() { find "$state" -path '*/networks/*' -type f 2>/dev/null; }

cleanup() {
  for task in $(berth ps -a -q 2>/dev/null); do berth rm -f "$task" >/dev/null 2>&1; done
  [[ -n ${node_pid:-} ]] && kill "$node_pid" 2>/dev/null && wait "$node_pid" 2>/dev/null
  pkill -9 -f "$dir/" 2>/dev/null
  rm -rf "$dir"
}
trap cleanup EXIT

start_node() {  # start_node NODE-FLAG [DRIVER ARG]
  local node_flag=$1 args=""
  [[ $# -gt 1 ]] && args="\"$2\""
  cat >"$dir/plugins.json" <<JSON
{"plugins": [{"name": "mock", "binary": "$mock_bin", "args": [$args]}]}
JSON
  "$node_bin" --runtime_dir="$run" --state_dir="$state" \
    --plugin_config="$dir/plugins.json" "$node_flag" >>"$dir/node.log" 2>&1 &
  node_pid=$!
  # Not `berth node status`: it fails for the services this node goes
  # without (berth-netns, berth-stats, berth-proxy).
  if ! wait_for 100 plugin_up; then
    echo "FAILED: berth-node did not start:"; cat "$dir/node.log"; exit 1
  fi
}

mkdir -p "$state"
install -d -m 0750 "$run"  # a runtime directory open to others is refused
# No berth-netns is started at all; the node's default socket for it is
# <runtime dir>/netns.sock.
start_node --netns_socket=none --must_create_network

# --- bridge mode on the driver that makes networks: its CreateNetwork runs
# (a record named by the task id, holding the task's name as host name), the
# task carries the network it returned, and removing the task destroys it.
if berth run -d --driver mock --net bridge --name web -- /bin/sleep 30 >"$dir/web.id" 2>"$dir/web.err"; then
  id=$(task_field web 't["id"]')
  record=$(records)
  cidr=$(task_field web 't["network"]["addresses"][0]["cidr"]' 2>/dev/null)
  if [[ $record == */networks/"$id" && $(cat "$record") == web && $cidr == 192.0.2.1/24 &&
        $(task_field web 't["state"]') == TASK_STATE_RUNNING && -d $state/node/tasks/$id ]]; then
    pass driver_creates_network
  else
    fail driver_creates_network "record '$record', address '$cidr'; $(berth inspect web)"
  fi
  berth rm -f web >/dev/null
  if [[ -z $(records) && ! -e $state/node/tasks/$id ]]; then
    pass driver_destroys_network
  else
    fail driver_destroys_network "left: $(records) $(ls -d "$state/node/tasks/$id" 2>/dev/null)"
  fi
else
  fail driver_creates_network "berth run failed: $(cat "$dir/web.err")"
fi

# --- host mode on the same driver: no network to make.
berth run --driver mock --net host --name hosted -- /bin/true >/dev/null 2>&1
if [[ $? -eq 0 && -z $(records) ]]; then
  pass host_mode_makes_no_network
else
  fail host_mode_makes_no_network "records: $(records)"
fi
berth rm -f hosted >/dev/null 2>&1

# --- bridge mode on a driver that does not make networks, on a node without
# berth-netns: a clear error naming the field and the cause, and nothing
# left running.
no_netns_case() {  # no_netns_case NAME EXPECTED-ERROR-GLOB
  berth run --driver mock --net bridge --name "$1" -- /bin/sleep 31 >/dev/null 2>"$dir/$1.err"
  local code=$? state
  state=$(task_field "$1" 't["state"]' 2>/dev/null)
  # shellcheck disable=SC2053
  if [[ $code -ne 0 && $(cat "$dir/$1.err") == $2 && $state != TASK_STATE_RUNNING ]] &&
     ! pgrep -f "^/bin/sleep 31" >/dev/null; then
    pass "$1"
  else
    fail "$1" "exit $code: $(cat "$dir/$1.err"); state '$state'"
  fi
  berth rm -f "$1" >/dev/null 2>&1
}
# (--join_networks: a driver that could join the namespace berth-netns makes,
# were it there; one that cannot is refused earlier, for that: below.)
kill -TERM "$node_pid"; wait "$node_pid"
start_node --netns_socket=none --join_networks
no_netns_case node_without_netns "berth: spec.network: this node runs without berth-netns*"
kill -TERM "$node_pid"; wait "$node_pid"
start_node --netns_socket="$run/netns.sock" --join_networks
no_netns_case netns_not_running "berth: task *: spec.network: berth-netns does not answer on $run/netns.sock (no such socket, waited 10s): is it running?"
kill -TERM "$node_pid"; wait "$node_pid"
start_node --netns_socket="$run/netns.sock"
no_netns_case driver_cannot_join "berth: spec.network: driver mock cannot join a network namespace*"

if ((failures > 0)); then
  echo "--- node log"; cat "$dir/node.log"
  exit 1
fi
echo "all passed"
