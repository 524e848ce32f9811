#!/usr/bin/env bash
# The side-by-side of issue 15, point 11: tools/escape's berth-escape-probe
# under crun (the config `crun spec` generates, a busybox-static root with the
# probe copied in) and under berth (the exec and sandbox drivers of a node
# //services/node/e2e:escape_test.sh starts), as root and as nobody, printed
# as one table: probe | crun | berth exec | berth sandbox, then the same for
# nobody. See tools/bench/README.md.
#
# usage: tools/bench/isolation.sh [--bin_dir=DIR] [--keep_going]
#
#   --bin_dir=DIR  take the binaries (berth-node, berth, berth-driver-exec,
#                  berth-stats, berth-proxy, berth-driver-sandbox,
#                  berth-agent, berth-shim, berth-task-init,
#                  berth-escape-probe) from DIR instead of building them
#   --keep_going   print the table even when a column could not be made
#                  (that column shows "-")
#
# Needs root (crun, namespaces, cgroups). Installs crun and busybox-static
# from Debian when missing. On this hybrid cgroup layout crun refuses to run
# while cgroup2 owns a controller: around the crun runs only, each such
# controller is mounted as a cgroup v1 hierarchy and given back after
# (cgroup2_controllers.sh, as exec_driver.sh does). Leaves nothing behind.
set -euo pipefail

keep_going=0
bin_dir=""

# say, die, usage.
# shellcheck source=tools/bench/script_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/script_lib.sh"

for arg in "$@"; do
  case $arg in
    --keep_going) keep_going=1 ;;
    --bin_dir=*) bin_dir=${arg#*=} ;;
    -h | --help)
      usage
      exit 0
      ;;
    *)
      usage >&2
      say "unknown argument: $arg"
      exit 2
      ;;
  esac
done
((EUID == 0)) || die "needs root (crun, namespaces, cgroups)"

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$root"

# --- Debian packages -------------------------------------------------------
missing=()
for package in crun busybox-static; do
  dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q 'install ok installed' ||
    missing+=("$package")
done
if ((${#missing[@]})); then
  say "installing from Debian: ${missing[*]}"
  DEBIAN_FRONTEND=noninteractive apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
    "${missing[@]}" >/dev/null
fi
crun_bin=$(command -v crun) || die "crun is not on PATH after installing it"
busybox=/bin/busybox
[[ -x $busybox ]] || die "$busybox missing (package busybox-static)"

# --- build -------------------------------------------------------------------
# The test's configuration (not -c opt: nothing here is timed), without
# bazel-* symlinks.
targets=(//services/node:berth-node //services/node/cli:berth
  //services/driver/exec:berth-driver-exec //services/stats:berth-stats
  //services/proxy:berth-proxy //services/driver/sandbox:berth-driver-sandbox
  //services/agent:berth-agent //services/shim:berth-shim
  //services/driver/exec/init:berth-task-init //tools/escape:berth-escape-probe)
binaries=()
if [[ -n $bin_dir ]]; then
  for label in "${targets[@]}"; do
    binaries+=("$bin_dir/${label#*:}")
  done
else
  say "building ${#targets[@]} binaries"
  log=$(bazel build --symlink_prefix=/ "${targets[@]}" 2>&1) || {
    printf '%s\n' "$log" | tail -n 20 >&2
    die "bazel build failed"
  }
  bin=$(bazel info bazel-bin 2>/dev/null) || die "bazel info failed"
  for label in "${targets[@]}"; do
    label=${label#//}
    binaries+=("$bin/${label%%:*}/${label#*:}")
  done
fi
for binary in "${binaries[@]}"; do
  [[ -x $binary && -f $binary ]] || die "$binary is not an executable file"
done
probe=${binaries[9]}

# --- clean-up, whatever happens from here on ---------------------------------
tmp=$(mktemp -d /tmp/berth-isolation-XXXXXX)
crun_root=$tmp/crun-state
crun=("$crun_bin" "--root=$crun_root")
container="berth-isolation-$$"
moved=() ever_moved=() made_dirs=()
# shellcheck source=tools/bench/cgroup2_controllers.sh
source "$root/tools/bench/cgroup2_controllers.sh"
cleanup() {
  local status=$?
  trap - EXIT INT TERM
  set +e
  [[ -d $crun_root ]] && "${crun[@]}" delete -f "$container" >/dev/null 2>&1
  find /sys/fs/cgroup -mindepth 1 -maxdepth 6 -depth -type d -name "*$container*" \
    -exec rmdir {} \; 2>/dev/null
  (restore_cgroup2) || status=1
  wait_back_on_cgroup2 || status=1
  rm -rf "$tmp"
  exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# --- crun --------------------------------------------------------------------
# A bundle per user: busybox-static as /bin/sh (and its applets), the probe at
# /probe/berth-escape-probe, `crun spec`'s config running it.
make_bundle() { # make_bundle DIR UID
  local bundle=$1 uid=$2
  mkdir -p "$bundle/rootfs/bin" "$bundle/rootfs/probe" "$bundle/rootfs/tmp"
  cp "$busybox" "$bundle/rootfs/bin/busybox"
  for applet in sh id ls cat; do ln -sf busybox "$bundle/rootfs/bin/$applet"; done
  cp "$probe" "$bundle/rootfs/probe/berth-escape-probe"
  chmod 0755 "$bundle/rootfs/probe/berth-escape-probe"
  chmod 1777 "$bundle/rootfs/tmp"
  (cd "$bundle" && "$crun_bin" spec)
  /usr/bin/python3 - "$bundle/config.json" "$uid" <<'PY'
import json, sys
path, uid = sys.argv[1], int(sys.argv[2])
config = json.load(open(path))
config["process"]["terminal"] = False
config["process"]["args"] = ["/probe/berth-escape-probe"]
config["process"]["user"] = {"uid": uid, "gid": uid}
json.dump(config, open(path, "w"), indent=1)
PY
}

say "crun: the probe in crun spec's config"
mkdir -p "$crun_root"
move_off_cgroup2
for user in root nobody; do
  uid=0
  [[ $user == nobody ]] && uid=65534
  make_bundle "$tmp/bundle-$user" "$uid"
  "${crun[@]}" run --bundle "$tmp/bundle-$user" "$container" \
    >"$tmp/table.crun.$user" 2>"$tmp/crun.$user.err" || true
  "${crun[@]}" delete -f "$container" >/dev/null 2>&1 || true
  if ! grep -q '^# berth-escape-probe:' "$tmp/table.crun.$user"; then
    say "crun ($user) did not run the probe: $(head -c 500 "$tmp/crun.$user.err")"
    ((keep_going)) || die "crun column missing (--keep_going prints the rest)"
  fi
done
restore_cgroup2

# --- berth -------------------------------------------------------------------
say "berth: the probe under a node's exec and sandbox drivers (escape_test.sh)"
mkdir -p "$tmp/berth"
ESCAPE_TABLES_DIR="$tmp/berth" bash "$root/services/node/e2e/escape_test.sh" \
  "${binaries[@]}" >"$tmp/escape_test.log" 2>&1 || true
for table in exec.root sandbox.root; do
  if [[ ! -s $tmp/berth/table.$table ]]; then
    say "no berth table $table; escape_test.sh said:"
    tail -n 30 "$tmp/escape_test.log" >&2
    ((keep_going)) || die "berth column missing (--keep_going prints the rest)"
  fi
done
grep -E '^(FAIL|\()' "$tmp/escape_test.log" | sed 's/^/  escape_test: /' >&2 || true

# --- the tables --------------------------------------------------------------
for user in root nobody; do
  echo "--- crun, $user (crun spec's config)"
  column -t -s '|' "$tmp/table.crun.$user" 2>/dev/null || cat "$tmp/table.crun.$user"
done
/usr/bin/python3 - "$tmp" <<'PY'
import os, sys
tmp = sys.argv[1]
def table(path):
    rows = {}
    order = []
    if os.path.exists(path):
        for line in open(path):
            parts = [p.strip() for p in line.split(" | ")]
            if len(parts) == 4 and not line.startswith("#"):
                rows[parts[0]] = parts[3]
                order.append(parts[0])
    return rows, order
for user in ("root", "nobody"):
    columns = [("crun", os.path.join(tmp, "table.crun." + user)),
               ("berth exec", os.path.join(tmp, "berth", "table.exec." + user)),
               ("berth sandbox", os.path.join(tmp, "berth", "table.sandbox." + user))]
    tables = [table(p) for _, p in columns]
    order = []
    for _, o in tables:
        order += [p for p in o if p not in order]
    rows = [["probe (%s)" % user] + [name for name, _ in columns]]
    rows += [[p] + [t.get(p, "-") for t, _ in tables] for p in order]
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    print()
    for r in rows:
        print(" | ".join(v.ljust(w) for v, w in zip(r, widths)).rstrip())
PY
