#!/bin/bash
# `berth run` as docker users type it (issue 17), each flag through the
# `berth` command line against a real node: berth-node with the exec and
# sandbox drivers, berth-netns (a bridge network of the test's own),
# berth-images (busybox and the health image of //tools/testimages),
# berth-stats and berth-proxy.
#
# Covered: --label, --label-file, --env-file, --hostname, --dns,
# --dns-search, --dns-option, --add-host, --ulimit, --stop-signal (and an
# image's StopSignal), --stop-timeout, --health-cmd, --health-interval,
# --health-retries, --health-timeout, --health-start-period,
# --health-on-failure, --no-healthcheck (and an image's HEALTHCHECK), -i
# with stdin, `berth attach` without a terminal, --init, docker's spellings
# --cpus, --pids-limit and --publish, ps --filter and --format, the health
# in ps, inspect and events, `berth completion bash` completing a task of
# the node, and the usage errors (exit 2) of malformed values. The terminal
# (-it, Ctrl-D, detach keys) is interactive_e2e_test's.
#
# usage: run_flags_e2e_test.sh NODE CLI DRIVER NETNS STATS PROXY SANDBOX AGENT SHIM INIT IMAGES TESTIMAGES
set -u
node_bin=$(readlink -f "$1") cli=$(readlink -f "$2") driver_bin=$(readlink -f "$3")
netns_bin=$(readlink -f "$4") stats_bin=$(readlink -f "$5") proxy_bin=$(readlink -f "$6")
sandbox_bin=$(readlink -f "$7") agent_bin=$(readlink -f "$8")
shim_bin=$(readlink -f "$9") init_bin=$(readlink -f "${10}")
images_bin=$(readlink -f "${11}") testimages=$(readlink -f "${12}")
export PATH="/usr/sbin:/sbin:$PATH"

if [[ $(id -u) -ne 0 ]]; then
  echo "SKIPPED: needs root (namespaces, cgroups, overlay mounts)"
  exit 0
fi

tag="f$((RANDOM % 90000 + 10000))"
dir="$(mktemp -d /tmp/berth-XXXXXX)"
run="$dir/run" state="$dir/state"
subnet="10.214.$((RANDOM % 200 + 20)).0/24"
# shellcheck source=services/node/e2e/e2e_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/e2e_lib.sh"

mounts_left() { awk -v d="$dir/" 'index($2, d) == 1 { print $2 }' /proc/mounts; }

cleanup() {
  for task in $(berth ps -a -q 2>/dev/null); do berth rm -f "$task" >/dev/null 2>&1; done
  stop_pid "${node_pid:-}"
  stop_pid "${netns_pid:-}"
  stop_pid "${images_pid:-}"
  stop_pid "${stats_pid:-}"
  stop_pid "${proxy_pid:-}"
  pkill -9 -f "$dir/" 2>/dev/null
  ip link del "b$tag" 2>/dev/null
  mounts_left | sort -r | xargs -r -n1 umount -l 2>/dev/null
  remove_test_cgroups
  rm -rf "$dir"
}
trap cleanup EXIT

mkdir -p "$state"
install -d -m 0750 "$run"  # a runtime directory open to others is refused
chmod 0755 "$dir"
write_exec_and_sandbox_plugins
echo '{}' >"$dir/registries.json"
"$stats_bin" --runtime_dir="$run" >>"$dir/stats.log" 2>&1 &
stats_pid=$!
"$proxy_bin" --runtime_dir="$run" --state_dir="$state" >>"$dir/proxy.log" 2>&1 &
proxy_pid=$!
"$images_bin" --runtime_dir="$run" --state_dir="$state" \
  --registries_config="$dir/registries.json" >>"$dir/images.log" 2>&1 &
images_pid=$!
wait_for 100 test -S "$run/proxy.sock" || { echo "FAILED: berth-proxy did not start:"; cat "$dir/proxy.log"; exit 1; }
wait_for 100 test -S "$run/images.sock" || { echo "FAILED: berth-images did not start:"; cat "$dir/images.log"; exit 1; }
start_netns || { echo "FAILED: berth-netns did not start:"; cat "$dir/netns.log"; exit 1; }
"$node_bin" --runtime_dir="$run" --state_dir="$state" \
  --plugin_config="$dir/plugins.json" >>"$dir/node.log" 2>&1 &
node_pid=$!
wait_for 100 berth ps && wait_for 100 test -S "$run/plugins/exec.sock" &&
  wait_for 100 test -S "$run/plugins/sandbox.sock" ||
  { echo "FAILED: berth-node did not start:"; cat "$dir/node.log"; exit 1; }

berth image import --name busybox "$testimages/busybox-oci.tar" >/dev/null 2>&1 ||
  { echo "FAILED: importing busybox"; exit 1; }
berth image import --name health "$testimages/health-oci.tar" >/dev/null 2>&1 ||
  { echo "FAILED: importing the health image"; exit 1; }

# check NAME EXPECTED-CODE PATTERN CMD...: runs CMD, passes when it exits
# EXPECTED-CODE and its output (stdout and stderr) matches the extended
# regular expression PATTERN.
check() {
  local name=$1 want=$2 pattern=$3; shift 3
  local out code
  out=$("$@" 2>&1)
  code=$?
  if [[ $code -eq $want ]] && grep -Eq -- "$pattern" <<<"$out"; then
    pass "$name"
  else
    fail "$name" "exit $code (want $want), output: $(head -c 1200 <<<"$out")"
  fi
}

# field_is NAME TASK PYTHON-EXPR WANT: the task's inspect field equals WANT.
field_is() {
  local got
  got=$(task_field "$2" "$3" 2>&1)
  if [[ $got == "$4" ]]; then pass "$1"; else fail "$1" "$3 is '$got', want '$4'"; fi
}

# wait_health TASK STATUS: up to 20 s for `berth ps --filter health=STATUS`
# to list TASK.
wait_health() {
  wait_for 200 bash -c "$(declare -f berth); cli='$cli' run='$run';
    berth ps --filter health=$2 --format '{{.Names}}' | grep -qx '$1'"
}

# --- Files as the task sees them, on both drivers.
printf 'FROM_FILE=yes\n# a comment\n\nPASSED\n' >"$dir/env.list"
printf 'team=infra\n# comment\ntier=web\n' >"$dir/labels.list"
for driver in exec sandbox; do
  check "hostname_$driver" 0 '^box-1\.example$' \
    berth run --rm --driver "$driver" --net none --hostname box-1.example -- /bin/hostname
  check "dns_$driver" 0 'nameserver 192\.0\.2\.53' \
    berth run --rm --driver "$driver" --net none --dns 192.0.2.53 --dns-search corp.example \
    --dns-option ndots:2 -- /bin/cat /etc/resolv.conf
  out=$(berth run --rm --driver "$driver" --net none --dns 192.0.2.53 --dns-search corp.example \
    --dns-option ndots:2 -- /bin/cat /etc/resolv.conf 2>&1)
  if grep -q '^search corp.example' <<<"$out" && grep -q '^options ndots:2' <<<"$out"; then
    pass "dns_search_option_$driver"
  else
    fail "dns_search_option_$driver" "resolv.conf: $out"
  fi
  check "add_host_$driver" 0 '^192\.0\.2\.7[[:space:]]+db\.internal' \
    berth run --rm --driver "$driver" --net none --add-host db.internal:192.0.2.7 -- /bin/cat /etc/hosts
  check "ulimit_$driver" 0 '^Max open files +100 +200 ' \
    berth run --rm --driver "$driver" --net none --ulimit nofile=100:200 -- /bin/cat /proc/self/limits
  check "env_file_$driver" 0 '^FROM_FILE=yes$' \
    env PASSED=from-caller "$cli" --socket="$run/node.sock" run --rm --driver "$driver" --net none \
    --env-file "$dir/env.list" -- /usr/bin/env
  check "env_file_passes_caller_$driver" 0 '^PASSED=from-caller$' \
    env PASSED=from-caller "$cli" --socket="$run/node.sock" run --rm --driver "$driver" --net none \
    --env-file "$dir/env.list" -- /usr/bin/env
  # -i: the task reads what berth is given on stdin, and ends when it ends.
  check "interactive_stdin_$driver" 0 '^hello through stdin$' \
    bash -c "echo 'hello through stdin' | '$cli' --socket='$run/node.sock' run -i --rm --driver $driver --net none -- /bin/cat"
  # An image's root has no /etc/hosts of its own: the node's is bound in.
  check "image_hosts_$driver" 0 'db\.internal' \
    berth run --rm --pull never --driver "$driver" --net none --add-host db.internal:192.0.2.7 \
    busybox cat /etc/hosts
done

# --- Bridge network: the task's own address under its host name in
# /etc/hosts, and --publish (docker's spelling of -p).
out=$(berth run --rm --net bridge --hostname web-1 --publish 18080:80 -- /bin/cat /etc/hosts 2>&1)
if grep -Eq '^10\.214\.[0-9]+\.[0-9]+[[:space:]]+web-1' <<<"$out"; then
  pass hosts_bridge_address
else
  fail hosts_bridge_address "/etc/hosts: $out"
fi
berth run -d --name pub --net bridge --publish 18081:80 -- /bin/sleep 600 >/dev/null
field_is publish_alias pub 't["spec"]["network"]["portMappings"][0]["hostPort"]' 18081
berth rm -f pub >/dev/null

# --- Labels and ps --filter / --format.
berth run -d --name lab1 --label app=web --label-file "$dir/labels.list" -- /bin/sleep 600 >/dev/null
berth run -d --name lab2 --label app=db -- /bin/sleep 600 >/dev/null
field_is label_in_inspect lab1 't["spec"]["labels"]["app"]' web
field_is label_file_in_inspect lab1 't["spec"]["labels"]["tier"]' web
check ps_filter_label_value 0 '^lab1$' berth ps --filter label=app=web --format '{{.Names}}'
out=$(berth ps --filter label=app --format '{{.Names}}' 2>&1 | sort | tr '\n' ' ')
[[ $out == "lab1 lab2 " ]] && pass ps_filter_label_key || fail ps_filter_label_key "listed: $out"
out=$(berth ps --filter label=team=infra --filter name=lab --format '{{.Names}}' 2>&1 | tr '\n' ' ')
[[ $out == "lab1 " ]] && pass ps_filter_and || fail ps_filter_and "listed: $out"
check ps_format_label 0 '^lab2 db$' berth ps --filter name=lab2 --format '{{.Names}} {{.Label "app"}}'
check ps_format_table 0 '^NAMES' berth ps --format 'table {{.Names}}\t{{.Status}}'
out=$(berth ps --filter name=lab1 --format json 2>&1)
/usr/bin/python3 -c 'import json,sys; d=json.loads(sys.stdin.readline()); assert d["Names"]=="lab1", d' <<<"$out" &&
  pass ps_format_json || fail ps_format_json "$out"
berth stop lab2 >/dev/null
out=$(berth ps -a --filter status=exited --format '{{.Names}}' 2>&1 | tr '\n' ' ')
[[ $out == *lab2* && $out != *lab1* ]] && pass ps_filter_status || fail ps_filter_status "listed: $out"
check ps_filter_bad_key 2 'filter' berth ps --filter colour=red

# --- Completion of the node's task and image names, as a user's shell does
# it: the script loaded in bash, `berth` on PATH, the socket on the line.
script="$dir/berth-completion.bash"
mkdir -p "$dir/bin" && ln -sf "$cli" "$dir/bin/berth"
# complete_words WORD...: the COMPREPLY of bash completing the last word of
# `berth --socket=SOCKET WORD...`, one per line.
complete_words() {
  PATH="$dir/bin:$PATH" bash -c '
    source "$1" >/dev/null 2>&1; shift
    fn=$(complete -p berth 2>/dev/null | sed -n "s/.*-F \([^ ]*\).*/\1/p")
    COMP_WORDS=(berth "$@"); COMP_CWORD=$#
    COMP_LINE="berth $*"; COMP_POINT=${#COMP_LINE}
    "$fn" berth "${COMP_WORDS[COMP_CWORD]}" "${COMP_WORDS[COMP_CWORD-1]}"
    printf "%s\n" "${COMPREPLY[@]}"' _ "$script" --socket="$run/node.sock" "$@" 2>&1
}
if berth completion bash >"$script" 2>"$dir/err"; then
  out=$(complete_words stop la)
  if grep -qx lab1 <<<"$out" && grep -qx lab2 <<<"$out"; then
    pass completion_task_names
  else
    fail completion_task_names "COMPREPLY: $out"
  fi
  out=$(complete_words run --pull never bu)
  grep -q '^busybox' <<<"$out" && pass completion_image_names || fail completion_image_names "COMPREPLY: $out"
else
  fail completion_task_names "berth completion bash: $(cat "$dir/err")"
fi
berth rm -f lab1 lab2 >/dev/null

# --- Stop settings.
berth run -d --name sig --stop-signal SIGQUIT -- /bin/sh -c \
  "trap 'echo got-quit; exit 7' QUIT; echo ready; while :; do sleep 0.1; done" >/dev/null
wait_for 100 bash -c "'$cli' --socket='$run/node.sock' logs sig | grep -q ready"
berth stop sig >/dev/null 2>&1
field_is stop_signal_exit_code sig 't["exitResult"].get("exitCode", 0)' 7
check stop_signal_trap_ran 0 got-quit berth logs sig
berth run -d --name slow --stop-timeout 1 -- /bin/sh -c "trap '' TERM; while :; do sleep 0.1; done" >/dev/null
field_is stop_timeout_in_inspect slow 't["spec"]["stopTimeout"]' 1s
berth stop slow >/dev/null 2>&1
field_is stop_timeout_kills slow 't["exitResult"].get("signal", 0)' 9
berth run -d --name imgsig --pull never health >/dev/null
berth stop imgsig >/dev/null 2>&1
field_is image_stop_signal imgsig 't["exitResult"].get("signal", 0)' 10
berth rm -f sig slow imgsig >/dev/null

# --- Health checks: starting, healthy, unhealthy, events, on-failure.
berth events --json >"$dir/events.json" 2>/dev/null &
events_pid=$!
berth run -d --name hc --health-cmd 'test -f /tmp/ok' --health-interval 200ms \
  --health-retries 2 --health-timeout 2s --health-start-period 0s -- /bin/sleep 600 >/dev/null
field_is health_starting hc 't["health"]["status"]' HEALTH_STATUS_STARTING
berth exec hc /bin/touch /tmp/ok
wait_health hc healthy && pass health_healthy || fail health_healthy "$(berth inspect hc)"
check ps_shows_health 0 'healthy' berth ps --filter name=hc
berth exec hc /bin/rm /tmp/ok
wait_health hc unhealthy && pass health_unhealthy || fail health_unhealthy "$(berth inspect hc)"
field_is health_log hc 'any(r.get("exitCode", 0) != 0 for r in t["health"]["log"])' True
field_is health_interval_in_inspect hc 't["healthcheck"]["interval"]' 0.200s
stop_pid "$events_pid"
for status in healthy unhealthy; do
  grep -q "\"health_status\": *\"$status\"" "$dir/events.json" && pass "event_$status" ||
    fail "event_$status" "events: $(tail -c 1500 "$dir/events.json")"
done
berth rm -f hc >/dev/null
# A check that outlives its timeout fails.
berth run -d --name hto --health-cmd 'sleep 5' --health-interval 200ms --health-timeout 300ms \
  --health-retries 1 -- /bin/sleep 600 >/dev/null
wait_health hto unhealthy && pass health_timeout_fails || fail health_timeout_fails "$(berth inspect hto)"
berth rm -f hto >/dev/null
# --health-on-failure restart: an unhealthy task is restarted.
berth run -d --name hr --health-cmd 'test -f /tmp/ok' --health-interval 200ms --health-retries 1 \
  --health-on-failure restart -- /bin/sleep 600 >/dev/null
wait_for 200 bash -c "[[ \$('$cli' --socket='$run/node.sock' inspect hr |
  /usr/bin/python3 -c 'import json,sys; print(json.load(sys.stdin).get(\"restarts\", 0))') -ge 1 ]]" &&
  pass health_on_failure_restart || fail health_on_failure_restart "$(berth inspect hr)"
berth rm -f hr >/dev/null
# The image's HEALTHCHECK, and --no-healthcheck turning it off.
berth run -d --name himg --pull never health >/dev/null
field_is image_healthcheck himg 't["healthcheck"]["test"]' "['CMD-SHELL', 'test -f /tmp/healthy']"
berth exec himg /bin/touch /tmp/healthy
wait_health himg healthy && pass image_health_healthy || fail image_health_healthy "$(berth inspect himg)"
berth run -d --name hnone --pull never --no-healthcheck health >/dev/null
field_is no_healthcheck hnone '"health" in t or "healthcheck" in t' False
berth rm -f himg hnone >/dev/null
# Settings alone change the image's HEALTHCHECK (docker's merge): its test
# stays, retimed; without an image they are a usage error.
berth run -d --name hmerge --pull never --health-interval 300ms --health-retries 1 health >/dev/null
field_is merge_keeps_image_test hmerge 't["healthcheck"]["test"]' "['CMD-SHELL', 'test -f /tmp/healthy']"
field_is merge_interval hmerge 't["healthcheck"]["interval"]' 0.300s
field_is merge_retries hmerge 't["healthcheck"]["retries"]' 1
berth exec hmerge /bin/touch /tmp/healthy
wait_health hmerge healthy && pass merge_health_healthy || fail merge_health_healthy "$(berth inspect hmerge)"
berth rm -f hmerge >/dev/null
check health_settings_without_image 2 'health-interval without --health-cmd' \
  berth run --rm --health-interval 1s -- /bin/true

# --- `berth attach` without a terminal: stdin in, output out, the exit.
berth run -d -i --name att -- /bin/cat >/dev/null
check attach_stdin 0 '^through attach$' bash -c "echo 'through attach' | '$cli' --socket='$run/node.sock' attach att"
field_is attach_stdin_close_ends att 't["state"]' TASK_STATE_EXITED
berth rm -f att >/dev/null

# --- docker's spellings and --init.
berth run -d --name res --cpus 0.5 --pids-limit 50 --init -- /bin/sleep 600 >/dev/null
field_is cpus_alias res 't["spec"]["resources"]["cpuMillicores"]' 500
field_is pids_limit_alias res 't["spec"]["resources"]["pidsLimit"]' 50
# cgroup v2 shows the task's pids.max at the top, v1 under pids/.
check pids_limit_in_task 0 '^50$' berth exec res /bin/sh -c \
  'cat /sys/fs/cgroup/pids.max 2>/dev/null || cat /sys/fs/cgroup/pids/pids.max'
berth rm -f res >/dev/null

# --- Usage errors: exit 2, naming the flag and the value.
check bad_add_host 2 'add-host.*nocolon' berth run --rm --add-host nocolon -- /bin/true
check bad_add_host_ip 2 'add-host.*db:300\.1\.1\.1' berth run --rm --add-host db:300.1.1.1 -- /bin/true
check bad_ulimit 2 'ulimit.*nofile=10:5' berth run --rm --ulimit nofile=10:5 -- /bin/true
check bad_ulimit_name 2 'ulimit.*bogus=1' berth run --rm --ulimit bogus=1 -- /bin/true
check bad_label 2 'label.*=x' berth run --rm --label =x -- /bin/true
check bad_dns 2 'dns.*1\.2\.3' berth run --rm --dns 1.2.3 -- /bin/true
check bad_health_interval 2 'health-interval.*5x' berth run --rm --health-cmd true --health-interval 5x -- /bin/true
check bad_stop_signal 2 'stop-signal.*SIGNOPE' berth run --rm --stop-signal SIGNOPE -- /bin/true
check bad_hostname 2 'hostname.*bad_host' berth run --rm --hostname 'bad_host!' -- /bin/true

# --- Nothing left: no task, no berth mount of a task.
check no_tasks_left 0 '^$' berth ps -a -q
echo "$failures failure(s)"
[[ $failures -eq 0 ]]
