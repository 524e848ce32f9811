#!/usr/bin/python3
"""berth's chaos soak: task lifecycles while kill -9 hits random services.

A whole node runs on this machine only, in a directory of its own
(/tmp/berth-chaos-*: its runtime and state directories, its bridge b<tag>,
its subnet, namespaces berth-<tag>-*, cgroups /berth-<tag>*), from copies of
the binaries (so that their processes are recognised by path). Through the
`berth` command line it runs --lifecycles task lifecycles, --concurrency at a
time, across both drivers (exec, sandbox), the busybox test image and
imageless tasks, bridge and none networks: each task appends a line to a
marker file on a bind mount (one line per run), prints output derived from
the seed, and either exits with a code derived from the seed or sleeps until
the soak stops it. Meanwhile a thread kills (SIGKILL) a random service at
random moments: berth-node, berth-netns, berth-stats, berth-images,
berth-proxy (each started again with the same flags after a short pause,
as systemd would), a driver plugin (berth-node relaunches it) or a task's
berth-shim (nobody restarts it: its process gets SIGHUP, see
ARCHITECTURE.md's Recovery).

Afterwards, for each lifecycle: the task's recorded end (state, exit code or
signal) is the one planned, it ran exactly once (marker lines), `berth logs`
gives its stdout and stderr byte for byte, and `berth rm` removed it. A start
the node refused while a service was down must be recorded as never started
(no marker line) and is retried under a new name. Then the services are
stopped (SIGTERM) and the host is compared with the snapshot taken after the
same services had been started and stopped once before the soak: processes,
cgroups, network namespaces, veths, iptables rules, mounts, snapshots,
sockets and files. The plan (task kinds, outputs, exit codes, kill times and
targets) comes from --seed; the interleaving with the services is timing.

Prints the counts; exits 1 on any mismatch or leak (each described: task,
expected, found), 2 on a usage or setup error.
"""

import argparse
import collections
import json
import os
import random
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

BINARIES = {
    # flag: file name in the soak's bin directory
    "node": "berth-node",
    "cli": "berth",
    "exec_driver": "berth-driver-exec",
    "netns": "berth-netns",
    "stats": "berth-stats",
    "proxy": "berth-proxy",
    "sandbox_driver": "berth-driver-sandbox",
    "agent": "berth-agent",
    "agent_boot": "berth-agent-boot",
    "shim": "berth-shim",
    "init": "berth-task-init",
    "images": "berth-images",
}

# What the kill thread may hit.
TARGETS = ["berth-node", "berth-netns", "berth-stats", "berth-images",
           "berth-proxy", "exec-driver", "sandbox-driver", "shim"]
PLUGIN_TARGETS = {"exec-driver": "berth-driver-exec",
                  "sandbox-driver": "berth-driver-sandbox"}

FINISHED = ("TASK_STATE_EXITED", "TASK_STATE_FAILED")


def log(msg):
    sys.stdout.write("chaos: %s\n" % msg)
    sys.stdout.flush()


class Setup(Exception):
    pass


# ---------------------------------------------------------------- the plan


class Lifecycle:
    """One planned task: everything about it derives from the seed."""

    def __init__(self, index, rng):
        self.index = index
        self.driver = rng.choice(["exec", "sandbox"])
        self.image = rng.choice(["busybox", "none"])
        self.net = rng.choice(["bridge", "none"])
        # "exit": prints, sleeps a little, exits with self.code; "stop":
        # prints, then sleeps until the soak stops it (SIGTERM).
        self.kind = "stop" if rng.random() < 0.15 else "exit"
        self.token = "%016x" % rng.getrandbits(64)
        big = rng.random() < 0.1
        self.lines = rng.randint(500, 3000) if big else rng.randint(1, 40)
        self.err_lines = rng.randint(0, 5)
        self.sleep = rng.choice([0, 0, 1, 1, 2, 3])
        self.code = 0 if rng.random() < 0.35 else rng.randint(1, 125)
        # Filled in by the run.
        self.attempts = []  # (name, task id or "", outcome)
        self.shim_killed = False
        self.result = None  # "ok", "mismatch"
        self.t_start = 0.0
        self.notes = []

    def script(self, marker, inject=()):
        """The task's /bin/sh -c script (dash on the host, busybox's sh in
        the image: both print the same bytes). `inject` (--inject, for the
        soak's own test) makes it deviate from what expected_* say."""
        s = ["echo run >>/chaos/%s" % marker,
             "i=0",
             "while [ $i -lt %d ]; do printf 'chaos %d %%d %s\\n' $i; "
             "i=$((i+1)); done" % (self.lines, self.index, self.token),
             "printf 'bytes \\001\\177\\377 %s\\n'" % self.token]
        for k in range(self.err_lines):
            s.append("printf 'chaos-err %d %d %s\\n' >&2" %
                     (self.index, k, self.token))
        if "twice" in inject:
            s.append("echo run >>/chaos/%s" % marker)
        if "output" in inject:
            s.append("printf x")
        if self.kind == "stop":
            s.append("echo ready >/chaos/%s.ready" % marker)
            s.append("exec sleep 1000")
        else:
            if self.sleep:
                s.append("sleep %d" % self.sleep)
            s.append("exit %d" % ((self.code + 1) % 126 if "code" in inject else self.code))
        return "; ".join(s)

    def expected_stdout(self):
        out = b"".join(b"chaos %d %d %s\n" % (self.index, k, self.token.encode())
                       for k in range(self.lines))
        return out + b"bytes \x01\x7f\xff " + self.token.encode() + b"\n"

    def expected_stderr(self):
        return b"".join(b"chaos-err %d %d %s\n" % (self.index, k, self.token.encode())
                        for k in range(self.err_lines))

    def expected_end(self):
        return ("signal", 15) if self.kind == "stop" else ("code", self.code)

    def describe(self):
        return "%s/%s/%s/%s" % (self.driver, self.image, self.net, self.kind)


# ---------------------------------------------------------------- services


class Service:
    """A top-level service: started, killed and started again with the same
    flags."""

    def __init__(self, soak, name, argv, sock):
        self.soak = soak
        self.name = name
        self.argv = argv
        self.sock = sock
        self.proc = None
        self.log = open(os.path.join(soak.dir, name + ".log"), "ab")
        self.starts = 0

    def start(self, wait=30.0):
        self.proc = subprocess.Popen(self.argv, stdout=self.log, stderr=self.log,
                                     stdin=subprocess.DEVNULL, env=self.soak.env)
        self.starts += 1
        end = time.monotonic() + wait
        while time.monotonic() < end:
            if self.proc.poll() is not None:
                return "exited with %s" % self.proc.returncode
            if answers(self.sock):
                return None
            time.sleep(0.05)
        return "its socket %s did not answer within %.0f s" % (self.sock, wait)

    def kill9(self):
        if self.proc is None or self.proc.poll() is not None:
            return False
        os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait()
        return True

    def stop(self, grace=20.0):
        """SIGTERM; SIGKILL after grace. Returns a problem or None."""
        if self.proc is None or self.proc.poll() is not None:
            return None
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(grace)
            return None
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            return "%s did not stop within %.0f s of SIGTERM" % (self.name, grace)


def answers(path):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(1.0)
    try:
        s.connect(path)
        return True
    except OSError:
        return False
    finally:
        s.close()


# ---------------------------------------------------------------- the soak


class Soak:

    def __init__(self, args):
        self.args = args
        self.rng = random.Random(args.seed)
        self.kill_rng = random.Random(args.seed * 7919 + 1)
        pid_rng = random.Random()
        self.tag = "k%04d" % pid_rng.randrange(10000)
        self.subnet_prefix = "10.217.%d." % pid_rng.randrange(20, 220)
        self.dir = tempfile.mkdtemp(prefix="berth-chaos-", dir="/tmp")
        os.chmod(self.dir, 0o755)
        self.bin = os.path.join(self.dir, "bin")
        self.run = os.path.join(self.dir, "run")
        self.state = os.path.join(self.dir, "state")
        self.marks = os.path.join(self.dir, "marks")
        self.tmp = os.path.join(self.dir, "tmp")
        for d in (self.bin, self.run, self.state, self.marks, self.tmp,
                  os.path.join(self.dir, "netns"), os.path.join(self.dir, "cni")):
            os.makedirs(d, exist_ok=True)
        os.chmod(self.marks, 0o777)
        # Services refuse a runtime directory open to others.
        os.chmod(self.run, 0o700)
        self.env = dict(os.environ, TMPDIR=self.tmp)
        self.env["PATH"] = "/usr/sbin:/sbin:/usr/bin:/bin"
        self.lock = threading.Lock()
        self.mismatches = []  # strings
        self.leaks = []
        self.problems = []  # service-level findings (did not come back, ...)
        self.kills = collections.Counter()
        self.restarts = collections.Counter()  # by the soak
        self.relaunches = collections.Counter()  # plugins, by berth-node
        self.skipped_kills = collections.Counter()
        self.refused = collections.Counter()
        self.done = threading.Event()
        self.services = []
        self.lifecycles = []
        self.shim_tasks = {}  # task id -> lifecycle, for shim kills
        self.ids = {}  # task id -> lifecycle
        self.shim_killed_ids = set()
        self.t0 = time.monotonic()
        self.events = []  # (seconds since t0, what): kills and restarts
        self.events_log = open(os.path.join(self.dir, "events.log"), "a")

    def event(self, what):
        with self.lock:
            t = time.monotonic() - self.t0
            self.events.append((t, what))
            self.events_log.write("%8.2f %s\n" % (t, what))
            self.events_log.flush()

    def events_between(self, start, end):
        with self.lock:
            return ["+%.1fs %s" % (t, w) for t, w in self.events if start - 0.5 <= t <= end]

    # -- setup

    def copy_binaries(self):
        for flag, name in BINARIES.items():
            src = getattr(self.args, flag)
            if not src or not os.path.isfile(src):
                raise Setup("--%s: no binary at '%s'" % (flag, src))
            shutil.copy(src, os.path.join(self.bin, name))
            os.chmod(os.path.join(self.bin, name), 0o755)
        self.busybox = os.path.join(self.args.testimages, "busybox-oci.tar")
        if not os.path.isfile(self.busybox):
            raise Setup("--testimages: no busybox-oci.tar in '%s'" % self.args.testimages)

    def b(self, name):
        return os.path.join(self.bin, name)

    def make_services(self):
        st, run, tag = self.state, self.run, self.tag
        with open(os.path.join(self.dir, "plugins.json"), "w") as f:
            json.dump({"plugins": [
                {"name": "exec", "binary": self.b("berth-driver-exec"),
                 "args": ["--cgroup_parent=/berth-%s" % tag, "--state_dir=%s/exec" % st]},
                {"name": "sandbox", "binary": self.b("berth-driver-sandbox"),
                 "args": ["--cgroup_parent=/berth-%s-sandbox" % tag,
                          "--state_dir=%s/sandbox" % st]}]}, f)
        with open(os.path.join(self.dir, "registries.json"), "w") as f:
            f.write("{}")
        rt = "--runtime_dir=" + run
        self.services = [
            Service(self, "berth-stats", [self.b("berth-stats"), rt],
                    run + "/stats.sock"),
            Service(self, "berth-proxy", [self.b("berth-proxy"), rt, "--state_dir=" + st],
                    run + "/proxy.sock"),
            Service(self, "berth-images",
                    [self.b("berth-images"), rt, "--state_dir=" + st,
                     "--registries_config=%s/registries.json" % self.dir],
                    run + "/images.sock"),
            Service(self, "berth-netns",
                    [self.b("berth-netns"), rt, "--state_dir=" + st,
                     "--netns_dir=%s/netns" % self.dir,
                     "--namespace_prefix=berth-%s-" % tag,
                     "--cni_config_dir=%s/cni" % self.dir,
                     "--bridge_network=berth-%s" % tag, "--bridge_name=b%s" % tag,
                     "--bridge_subnet=%s0/24" % self.subnet_prefix],
                    run + "/netns.sock"),
            Service(self, "berth-node",
                    [self.b("berth-node"), rt, "--state_dir=" + st,
                     "--plugin_config=%s/plugins.json" % self.dir],
                    run + "/node.sock"),
        ]
        self.by_name = {s.name: s for s in self.services}

    def start_all(self):
        for s in self.services:
            problem = s.start()
            if problem:
                raise Setup("%s did not start: %s; see %s/%s.log" %
                            (s.name, problem, self.dir, s.name))
        if not self.wait_healthy(60):
            raise Setup("the node is not healthy after 60 s: %s"
                        % self.cli("node", "status")[2].decode(errors="replace"))

    def stop_all(self):
        for s in reversed(self.services):
            problem = s.stop()
            if problem:
                self.problems.append(problem)

    def wait_healthy(self, seconds):
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            if self.cli("node", "status", timeout=10)[0] == 0:
                return True
            time.sleep(0.3)
        return False

    # -- the command line

    def cli(self, *args, timeout=60):
        argv = [self.b("berth"), "--socket=%s/node.sock" % self.run] + list(args)
        try:
            p = subprocess.run(argv, capture_output=True, timeout=timeout,
                               stdin=subprocess.DEVNULL, env=self.env)
            return p.returncode, p.stdout, p.stderr
        except subprocess.TimeoutExpired:
            return -1, b"", b"timed out after %d s" % timeout

    def inspect(self, name):
        """(task dict, None) | (None, "not found") | (None, error)."""
        rc, out, err = self.cli("inspect", name, timeout=30)
        if rc == 0:
            try:
                t = json.loads(out)
                if isinstance(t, list):
                    t = t[0]
                return t, None
            except (ValueError, IndexError):
                return None, "unparsable inspect output: %r" % out[:200]
        text = err.decode(errors="replace")
        if re.search(r"not found|no such task|no task", text, re.I):
            return None, "not found"
        return None, text.strip() or "exit %d" % rc

    # -- one lifecycle

    def mismatch(self, lc, what):
        now = time.monotonic() - self.t0
        during = self.events_between(lc.t_start, now)
        with self.lock:
            self.mismatches.append(
                "lifecycle %d (%s, task %s, +%.1fs..+%.1fs): %s; meanwhile: %s" % (
                    lc.index, lc.describe(), lc.attempts[-1][1] if lc.attempts else "-",
                    lc.t_start, now, what, "; ".join(during) or "no kill"))
        lc.result = "mismatch"

    def run_lifecycle(self, lc):
        try:
            self._run_lifecycle(lc)
        except Exception as e:  # a bug of the soak: report, do not hang
            self.mismatch(lc, "the soak failed: %r" % e)

    def _run_lifecycle(self, lc):
        lc.t_start = time.monotonic() - self.t0
        deadline = time.monotonic() + self.args.lifecycle_timeout
        attempt = 0
        while True:
            task = None
            while task is None:
                if time.monotonic() > deadline:
                    self.mismatch(lc, "no start within %d s: %s" % (
                        self.args.lifecycle_timeout, lc.notes[-3:]))
                    return
                name = "chaos-%s-%d" % (self.tag, lc.index) + ("-r%d" % attempt if attempt else "")
                marker = "%d-%d" % (lc.index, attempt)
                argv = ["run", "-d", "--name", name, "--driver", lc.driver, "--net", lc.net,
                        "-v", "%s:/chaos" % self.marks]
                argv += ["busybox"] if lc.image == "busybox" else ["--"]
                inject = [k for k, i in self.args.inject.items() if i == lc.index]
                argv += ["/bin/sh", "-c", lc.script(marker, inject), "chaos-" + self.tag]
                rc, out, err = self.cli(*argv)
                if rc == 0:
                    task_id = out.decode().strip()
                    lc.attempts.append((name, task_id, marker))
                    task = name
                    break
                lc.notes.append("run %s: exit %d: %s" % (name, rc, err.decode(errors="replace").strip()[:300]))
                # Did the node make the task anyway?
                while True:
                    t, problem = self.inspect(name)
                    if t is not None or problem == "not found":
                        break
                    if time.monotonic() > deadline:
                        self.mismatch(lc, "inspect %s never answered: %s" % (name, problem))
                        return
                    time.sleep(0.5)
                if t is None:
                    self.count_refused(err)
                    time.sleep(0.3)
                    continue
                lc.attempts.append((name, t.get("id", ""), marker))
                if t.get("state") in FINISHED and not t.get("startedAt"):
                    # Refused and recorded as never started: it must not have run.
                    self.count_refused(err)
                    if not self.settle_refused(lc, t, name, marker, deadline):
                        return
                    attempt += 1
                    continue
                task = name
            name, task_id, marker = lc.attempts[-1]
            with self.lock:
                self.ids[task_id] = lc
            t = self.wait_end(lc, name, marker, deadline)
            if t is None:
                return
            if t.get("state") in FINISHED and not t.get("startedAt"):
                # Accepted (berth run -d returned), then its start failed in
                # the node while a service was down: a refused start as well,
                # which must not have run.
                self.count_refused(t.get("error", "").encode())
                if not self.settle_refused(lc, t, name, marker, deadline):
                    return
                attempt += 1
                continue
            break
        self.check_end(lc, t, name, marker)
        if self.args.inject.get("keep") == lc.index:
            return
        self.remove(lc, name, deadline)

    def count_refused(self, err):
        text = err.decode(errors="replace")
        m = re.search(r"(plugin \w+|netns|images|proxy|node\.sock|connect|unavailable|"
                      r"deadline|timed out)", text, re.I)
        with self.lock:
            self.refused[m.group(1).lower() if m else "other"] += 1

    def settle_refused(self, lc, t, name, marker, deadline):
        runs = self.marker_runs(marker)
        if runs:
            self.mismatch(lc, "%s is recorded %s without a start (error: %s) but ran %d time(s)"
                          % (name, t.get("state"), t.get("error", ""), runs))
            self.remove(lc, name, deadline)
            return False
        lc.notes.append("refused: %s: %s" % (name, t.get("error", "")))
        return self.remove(lc, name, deadline)

    def marker_runs(self, marker):
        try:
            with open(os.path.join(self.marks, marker)) as f:
                return sum(1 for _ in f)
        except FileNotFoundError:
            return 0

    def wait_end(self, lc, name, marker, deadline):
        stopped = False
        last = "never inspected"
        end = deadline + lc.sleep
        while time.monotonic() < end:
            t, problem = self.inspect(name)
            if t is None:
                if problem == "not found":
                    self.mismatch(lc, "%s vanished: inspect says not found (last seen: %s)"
                                  % (name, last))
                    return None
                last = "inspect failed: " + problem[:200]
                time.sleep(0.5)
                continue
            last = t.get("state", "?")
            if last in FINISHED:
                return t
            if (lc.kind == "stop" and not stopped and last == "TASK_STATE_RUNNING"
                    and os.path.exists(os.path.join(self.marks, marker + ".ready"))):
                rc, _, err = self.cli("stop", name)
                stopped = rc == 0
                if not stopped:
                    lc.notes.append("stop %s: %s" % (name, err.decode(errors="replace")[:200]))
            time.sleep(0.3)
        self.mismatch(lc, "%s did not end within %d s; last state: %s; notes: %s"
                      % (name, self.args.lifecycle_timeout, last, lc.notes[-3:]))
        return None

    def check_end(self, lc, t, name, marker):
        problems = []
        runs = self.marker_runs(marker)
        shim = lc.shim_killed = self.shim_killed(lc)
        if runs != 1:
            problems.append("ran %d times (marker lines), expected exactly 1" % runs)
        if t.get("restarts"):
            problems.append("recorded %s restarts, expected 0" % t["restarts"])
        state = t.get("state")
        er = t.get("exitResult", {})
        found = ("signal", er["signal"]) if "signal" in er else ("code", er.get("exitCode", 0))
        want = lc.expected_end()
        if state != "TASK_STATE_EXITED":
            problems.append("recorded %s (error: %s), expected exited with %s %d"
                            % (state, t.get("error", ""), want[0], want[1]))
        elif found != want and not (shim and found in (("signal", 1), ("code", 255))):
            problems.append("recorded exit %s %d, expected %s %d%s"
                            % (found[0], found[1], want[0], want[1],
                               " (or SIGHUP/255: its shim was killed)" if shim else ""))
        cut = shim and found != want
        end = time.monotonic() + 90
        while True:
            rc, out, err = self.cli("logs", name, timeout=120)
            # The node (or its driver) being down is not the task's fault.
            if rc == 0 or time.monotonic() > end or not re.search(
                    rb"cannot reach|unavailable|shut down|connect|socket closed", err, re.I):
                break
            time.sleep(0.5)
        if rc != 0:
            problems.append("berth logs failed: exit %d: %s" % (rc, err.decode(errors="replace")[:200]))
        else:
            for stream, got, exp in (("stdout", out, lc.expected_stdout()),
                                     ("stderr", err, lc.expected_stderr())):
                if got == exp or (cut and exp.startswith(got)):
                    continue
                problems.append("%s differs: %s" % (stream, first_difference(exp, got)))
        if problems:
            self.mismatch(lc, "; ".join(problems))
        else:
            lc.result = "ok"

    def remove(self, lc, name, deadline):
        while True:
            rc, _, err = self.cli("rm", "-f", name)
            if rc == 0:
                break
            text = err.decode(errors="replace")
            # An earlier rm whose reply a node kill cut off may have removed
            # it: the inspect below checks that it is gone.
            if re.search(r"not found|no such task|no task", text, re.I):
                break
            if time.monotonic() > deadline + 60:
                self.mismatch(lc, "berth rm -f %s kept failing: %s" % (name, text[:300]))
                return False
            time.sleep(0.5)
        t, problem = self.inspect(name)
        if t is not None:
            self.mismatch(lc, "%s still listed after berth rm (state %s)" % (name, t.get("state")))
            return False
        return True

    # -- the kill thread

    def pids_of(self, binary):
        want = self.b(binary)
        pids = []
        for p in os.listdir("/proc"):
            if not p.isdigit():
                continue
            try:
                exe = os.readlink("/proc/%s/exe" % p)
            except OSError:
                continue
            if exe == want or exe == want + " (deleted)":
                pids.append(int(p))
        return sorted(pids)

    def chaos(self):
        rng = self.kill_rng
        if not self.args.targets:
            return
        while not self.done.wait(rng.uniform(self.args.kill_min, self.args.kill_max)):
            target = rng.choice(self.args.targets)
            pause = rng.uniform(0.1, 1.5)
            pick = rng.random()
            try:
                self.kill_one(target, pause, pick)
            except Exception as e:
                with self.lock:
                    self.problems.append("the kill thread failed on %s: %r" % (target, e))

    def kill_one(self, target, pause, pick):
        if target in self.by_name:
            s = self.by_name[target]
            if not s.kill9():
                self.skipped_kills[target] += 1
                return
            self.kills[target] += 1
            self.event("kill -9 %s" % target)
            time.sleep(pause)
            for attempt in range(3):
                problem = s.start()
                if problem is None:
                    self.restarts[target] += 1
                    self.event("%s started again" % target)
                    return
                with self.lock:
                    self.problems.append("%s did not come back after kill -9 (start %d): %s"
                                         % (target, attempt + 1, problem))
                s.kill9()
                time.sleep(1)
            return
        if target in PLUGIN_TARGETS:
            binary = PLUGIN_TARGETS[target]
            pids = self.pids_of(binary)
            if not pids:
                self.skipped_kills[target] += 1
                return
            victim = pids[int(pick * len(pids))]
            try:
                os.kill(victim, signal.SIGKILL)
            except ProcessLookupError:
                self.skipped_kills[target] += 1
                return
            self.kills[target] += 1
            self.event("kill -9 %s (pid %d)" % (binary, victim))
            end = time.monotonic() + 60
            while time.monotonic() < end and not self.done.is_set():
                if [p for p in self.pids_of(binary) if p != victim]:
                    self.relaunches[target] += 1
                    self.event("%s relaunched by berth-node" % binary)
                    return
                time.sleep(0.2)
            if not self.done.is_set():
                with self.lock:
                    self.problems.append("%s was not relaunched by berth-node within 60 s of "
                                         "kill -9 of pid %d" % (binary, victim))
            return
        # A shim: its task is the lifecycle whose id its command line or its
        # directory names.
        pids = self.pids_of("berth-shim")
        if not pids:
            self.skipped_kills[target] += 1
            return
        victim = pids[int(pick * len(pids))]
        task_ids = self.task_ids_of(victim)
        try:
            os.kill(victim, signal.SIGKILL)
        except ProcessLookupError:
            self.skipped_kills[target] += 1
            return
        self.kills[target] += 1
        with self.lock:
            # The task may still be starting (its id not known yet): the
            # lifecycle looks its id up here when it checks the end.
            self.shim_killed_ids.update(task_ids)
        self.event("kill -9 berth-shim (pid %d) of task %s" % (
            victim, ",".join(task_ids) or "?"))
        if not task_ids:
            with self.lock:
                self.problems.append("killed berth-shim pid %d, which names no task" % victim)

    def shim_killed(self, lc):
        with self.lock:
            return any(a[1] in self.shim_killed_ids for a in lc.attempts)

    def task_ids_of(self, pid):
        text = ""
        for f in ("cmdline", "environ"):
            try:
                with open("/proc/%d/%s" % (pid, f), "rb") as fh:
                    text += fh.read().decode(errors="replace")
            except OSError:
                pass
        try:
            text += os.readlink("/proc/%d/cwd" % pid)
        except OSError:
            pass
        return sorted(set(re.findall(r"[0-9a-f]{32}", text)))

    # -- the host's state

    def snapshot(self):
        snap = {}
        procs = set()
        me = os.getpid()
        for p in os.listdir("/proc"):
            if not p.isdigit() or int(p) == me:
                continue
            try:
                exe = os.readlink("/proc/%s/exe" % p)
            except OSError:
                exe = ""
            try:
                with open("/proc/%s/cmdline" % p, "rb") as f:
                    cmd = f.read().replace(b"\0", b" ").decode(errors="replace").strip()
                with open("/proc/%s/cgroup" % p) as f:
                    cg = f.read()
            except OSError:
                continue
            if (exe.startswith(self.dir) or self.dir in cmd or ("chaos-" + self.tag) in cmd
                    or ("/berth-%s" % self.tag) in cg):
                procs.add("pid %s: %s" % (p, cmd[:200] or exe))
        snap["process"] = procs
        cgroups = set()
        for root, dirs, _ in os.walk("/sys/fs/cgroup"):
            rel = root[len("/sys/fs/cgroup"):]
            depth = rel.count("/")
            if depth >= 2 and ("/berth-%s" % self.tag) not in rel:
                dirs[:] = []
                continue
            if ("/berth-%s" % self.tag) in rel:
                # The drivers' parents (/berth-<tag>, /berth-<tag>-sandbox)
                # are theirs to keep, as tools/dev down removes them; what
                # is below them belongs to tasks.
                parts = rel.strip("/").split("/")
                if len(parts) > 2:
                    cgroups.add(root)
        snap["cgroup"] = cgroups
        ns = set()
        for d in (os.path.join(self.dir, "netns"), "/run/netns"):
            try:
                for e in os.listdir(d):
                    if d != "/run/netns" or e.startswith("berth-%s-" % self.tag):
                        ns.add(os.path.join(d, e))
            except OSError:
                pass
        snap["network namespace"] = ns
        links = set()
        out = run_out(["ip", "-o", "link", "show", "master", "b" + self.tag])
        for line in out.splitlines():
            m = re.match(r"\d+: ([^:@]+)", line)
            if m:
                links.add("veth %s on bridge b%s" % (m.group(1), self.tag))
        snap["veth"] = links
        rules = set()
        for table in ("filter", "nat", "mangle"):
            for line in run_out(["iptables-save", "-t", table]).splitlines():
                if (self.subnet_prefix in line or ("berth-%s" % self.tag) in line
                        or ("b%s " % self.tag) in line + " "):
                    rules.add("%s: %s" % (table, line))
        snap["iptables rule"] = rules
        mounts = set()
        with open("/proc/self/mountinfo") as f:
            for line in f:
                fields = line.split()
                if fields[4].startswith(self.dir + "/") or self.dir + "/" in line:
                    mounts.add("%s (%s)" % (fields[4], fields[3]))
        snap["mount"] = mounts
        files = set()
        snapshots = set()
        sockets = set()
        skip = {self.bin, self.marks}
        for root, dirs, names in os.walk(self.dir):
            dirs[:] = [d for d in dirs if os.path.join(root, d) not in skip
                       and not os.path.ismount(os.path.join(root, d))]
            for n in dirs + names:
                path = os.path.join(root, n)
                if root == self.dir and n.endswith(".log"):
                    continue
                if "/images/snapshots/" in path + "/" and path.count("/") <= \
                        os.path.join(self.state, "images/snapshots/x").count("/"):
                    snapshots.add(path)
                try:
                    st = os.lstat(path)
                except OSError:
                    continue
                if (st.st_mode & 0o170000) == 0o140000:
                    sockets.add(path)
                else:
                    files.add(path)
        snap["snapshot"] = snapshots
        snap["socket"] = sockets
        snap["file"] = files
        return snap

    def compare(self, before, after):
        for kind, items in after.items():
            for item in sorted(items - before.get(kind, set())):
                if kind == "file" and IGNORED_FILE.search(item):
                    continue
                self.leaks.append("%s left: %s" % (kind, item))

    # -- cleanup

    def cleanup(self):
        for s in self.services:
            if s.proc and s.proc.poll() is None:
                s.kill9()
        for binary in BINARIES.values():
            for p in self.pids_of(binary):
                try:
                    os.kill(p, signal.SIGKILL)
                except OSError:
                    pass
        # Task processes (by cgroup) and whatever names the directory.
        for line in self.snapshot()["process"]:
            try:
                os.kill(int(line.split()[1].rstrip(":")), signal.SIGKILL)
            except (OSError, ValueError):
                pass
        time.sleep(0.5)
        with open("/proc/self/mountinfo") as f:
            points = [l.split()[4] for l in f if l.split()[4].startswith(self.dir + "/")]
        for m in sorted(points, reverse=True):
            subprocess.run(["umount", "-l", m], capture_output=True)
        for table in ("filter", "nat"):
            for line in run_out(["iptables-save", "-t", table]).splitlines():
                if line.startswith("-A ") and (self.subnet_prefix in line
                                               or ("berth-%s" % self.tag) in line):
                    subprocess.run(["iptables", "-t", table, "-D"] + split_rule(line[3:]),
                                   capture_output=True)
        subprocess.run(["ip", "link", "del", "b" + self.tag], capture_output=True)
        for c in glob_cgroups(self.tag):
            for root, dirs, _ in os.walk(c, topdown=False):
                try:
                    os.rmdir(root)
                except OSError:
                    pass
        if self.args.keep:
            log("kept %s" % self.dir)
        else:
            shutil.rmtree(self.dir, ignore_errors=True)


IGNORED_FILE = re.compile(r"(state\.db-(wal|shm|journal)$)")


def inject_leaks(soak):
    """--inject leak=0: what a buggy service could leave behind."""
    leaked = os.path.join(soak.state, "node", "leaked")
    os.makedirs(leaked, exist_ok=True)
    with open(os.path.join(leaked, "tmpfile"), "w") as f:
        f.write("x")
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.bind(os.path.join(leaked, "sock"))
    s.close()
    os.makedirs(os.path.join(leaked, "mnt"))
    subprocess.run(["mount", "-t", "tmpfs", "leak", os.path.join(leaked, "mnt")], check=True)
    # A shell of short sleeps: killing it leaves no long-lived child.
    subprocess.Popen(["/bin/sh", "-c", "while :; do sleep 1; done", "chaos-" + soak.tag],
                     start_new_session=True, stdin=subprocess.DEVNULL,
                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def glob_cgroups(tag):
    out = []
    for h in os.listdir("/sys/fs/cgroup"):
        base = os.path.join("/sys/fs/cgroup", h)
        try:
            for e in os.listdir(base):
                if e.startswith("berth-" + tag):
                    out.append(os.path.join(base, e))
        except OSError:
            pass
    return out


def split_rule(text):
    import shlex
    return shlex.split(text)


def run_out(argv):
    try:
        return subprocess.run(argv, capture_output=True, timeout=30).stdout.decode(errors="replace")
    except (OSError, subprocess.TimeoutExpired):
        return ""


def first_difference(expected, got):
    n = 0
    while n < min(len(expected), len(got)) and expected[n] == got[n]:
        n += 1
    return ("%d bytes expected, %d found; first difference at byte %d: expected %r, found %r"
            % (len(expected), len(got), n, expected[n:n + 40], got[n:n + 40]))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    for flag in BINARIES:
        ap.add_argument("--" + flag, required=True, help="path of " + BINARIES[flag])
    ap.add_argument("--testimages", required=True,
                    help="the //tools/testimages:images directory (busybox-oci.tar)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--lifecycles", type=int, default=500)
    ap.add_argument("--max_seconds", type=float, default=3600,
                    help="no new lifecycle starts after this; then the soak ends")
    ap.add_argument("--concurrency", type=int, default=8)
    ap.add_argument("--kill_min", type=float, default=2.0, help="seconds between kills, at least")
    ap.add_argument("--kill_max", type=float, default=6.0, help="seconds between kills, at most")
    ap.add_argument("--targets", default=",".join(TARGETS),
                    help="what may be killed (comma-separated): " + ",".join(TARGETS))
    ap.add_argument("--drivers", default="exec,sandbox")
    ap.add_argument("--lifecycle_timeout", type=int, default=240,
                    help="seconds a lifecycle may take before it counts as lost")
    ap.add_argument("--keep", action="store_true", help="keep the soak's directory")
    ap.add_argument("--inject", default="",
                    help="for the soak's own test: faults it must report, comma-separated "
                    "KIND=LIFECYCLE: twice (the task appends its marker twice), output (an "
                    "extra byte of stdout), code (another exit code), keep (the task is not "
                    "removed), leak=0 (a mount, a file, a socket and a process left in the "
                    "soak's directory)")
    args = ap.parse_args()
    args.inject = dict((kv.split("=", 1)[0], int(kv.split("=", 1)[1]))
                       for kv in args.inject.split(",") if kv)
    for k in args.inject:
        if k not in ("twice", "output", "code", "keep", "leak"):
            ap.error("--inject: unknown fault '%s'" % k)
    args.targets = [t for t in args.targets.split(",") if t]
    for t in args.targets:
        if t not in TARGETS:
            ap.error("--targets: unknown target '%s' (known: %s)" % (t, ",".join(TARGETS)))
    drivers = [d for d in args.drivers.split(",") if d]
    for d in drivers:
        if d not in ("exec", "sandbox"):
            ap.error("--drivers: unknown driver '%s'" % d)
    if os.geteuid() != 0:
        print("SKIPPED: the chaos soak needs root (namespaces, cgroups, mounts)")
        return 0
    soak = Soak(args)
    try:
        return soak_main(soak, args, drivers)
    except Setup as e:
        log("setup failed: %s" % e)
        return 2
    finally:
        soak.cleanup()


def soak_main(soak, args, drivers):
    started = time.monotonic()
    log("seed %d, %d lifecycles, concurrency %d, directory %s, tag %s"
        % (args.seed, args.lifecycles, args.concurrency, soak.dir, soak.tag))
    soak.copy_binaries()
    soak.make_services()
    # The baseline: the services started, the image imported, one task of
    # each kind run and removed, the services stopped.
    soak.start_all()
    rc, _, err = soak.cli("image", "import", "--name", "busybox", soak.busybox, timeout=120)
    if rc != 0:
        raise Setup("importing %s: %s" % (soak.busybox, err.decode(errors="replace")))
    for driver in drivers:
        for image in ("busybox", "none"):
            for net in ("bridge", "none"):
                argv = ["run", "--rm", "--driver", driver, "--net", net]
                argv += ["busybox"] if image == "busybox" else ["--"]
                rc, out, err = soak.cli(*(argv + ["/bin/echo", "warm"]))
                if rc != 0 or out != b"warm\n":
                    raise Setup("without any kill, a %s/%s/%s task failed: exit %d, %r %r"
                                % (driver, image, net, rc, out, err))
    soak.stop_all()
    time.sleep(1)
    before = soak.snapshot()
    soak.start_all()

    plan = []
    for i in range(args.lifecycles):
        lc = Lifecycle(i, soak.rng)
        if lc.driver not in drivers:
            lc.driver = drivers[i % len(drivers)]
        plan.append(lc)
    killer = threading.Thread(target=soak.chaos, daemon=True)
    killer.start()
    sem = threading.Semaphore(args.concurrency)
    workers = []
    for lc in plan:
        sem.acquire()
        if time.monotonic() - started > args.max_seconds:
            sem.release()
            log("--max_seconds reached: %d of %d lifecycles started" % (len(workers), len(plan)))
            break
        soak.lifecycles.append(lc)

        def work(lc=lc):
            try:
                soak.run_lifecycle(lc)
            finally:
                sem.release()
        w = threading.Thread(target=work, daemon=True)
        w.start()
        workers.append(w)
        if len(workers) % 50 == 0:
            log("%d lifecycles started, %d mismatches so far, %.0f s"
                % (len(workers), len(soak.mismatches), time.monotonic() - started))
    for w in workers:
        w.join()
    soak.done.set()
    killer.join()

    # Every service must be up again; then nothing of the soak may remain.
    for s in soak.services:
        if s.proc.poll() is not None:
            soak.problems.append("%s was not running at the end (exit %s)"
                                 % (s.name, s.proc.returncode))
            s.start()
    if not soak.wait_healthy(60):
        soak.problems.append("the node was not healthy at the end: %s"
                             % soak.cli("node", "status")[2].decode(errors="replace")[:300])
    rc, out, _ = soak.cli("ps", "-a", "--format", "{{.Names}}")
    for name in out.decode().split():
        if name.startswith("chaos-" + soak.tag):
            soak.leaks.append("task left in berth ps -a: %s" % name)
            soak.cli("rm", "-f", name)
    for lc in soak.lifecycles:
        for name, task_id, marker in lc.attempts:
            runs = soak.marker_runs(marker)
            final = marker == lc.attempts[-1][2]
            if (final and lc.result == "ok" and runs != 1) or (not final and runs):
                soak.mismatch(lc, "%s (task %s) ran %d time(s) by the end of the soak, "
                              "after its end was checked" % (name, task_id, runs))
    if "leak" in args.inject:
        inject_leaks(soak)
    soak.stop_all()
    time.sleep(1)
    after = soak.snapshot()
    soak.compare(before, after)
    return report(soak, time.monotonic() - started)


def report(soak, seconds):
    lcs = soak.lifecycles
    c = collections.Counter()
    for lc in lcs:
        c["driver " + lc.driver] += 1
        c["network " + lc.net] += 1
        c["image " + lc.image] += 1
        c["kind " + lc.kind] += 1
        c["result " + str(lc.result)] += 1
        if soak.shim_killed(lc):
            c["shim killed"] += 1
        c["attempts"] += len(lc.attempts)
    print("chaos: seed %d: %d lifecycles in %.0f s (%d ended as planned, %d mismatched)"
          % (soak.args.seed, len(lcs), seconds, c["result ok"], len(soak.mismatches)))
    print("  by driver: exec %d, sandbox %d; by network: bridge %d, none %d; "
          "by image: busybox %d, none (host binaries) %d; stopped by the soak: %d"
          % (c["driver exec"], c["driver sandbox"], c["network bridge"], c["network none"],
             c["image busybox"], c["image none"], c["kind stop"]))
    print("  kills (kill -9): %s; total %d" % (
        ", ".join("%s %d" % (t, soak.kills[t]) for t in TARGETS if t in soak.args.targets),
        sum(soak.kills.values())))
    print("  restarts: by the soak %d (%s); plugins relaunched by berth-node %d"
          % (sum(soak.restarts.values()),
             ", ".join("%s %d" % kv for kv in sorted(soak.restarts.items())) or "-",
             sum(soak.relaunches.values())))
    print("  starts refused while a service was down (recorded as never started, retried): %d%s"
          % (sum(soak.refused.values()),
             " (%s)" % ", ".join("%s %d" % kv for kv in sorted(soak.refused.items()))
             if soak.refused else ""))
    print("  tasks whose shim was killed: %d; kills skipped (nothing to kill): %d"
          % (c["shim killed"], sum(soak.skipped_kills.values())))
    print("  mismatches: %d; leaks: %d; service problems: %d"
          % (len(soak.mismatches), len(soak.leaks), len(soak.problems)))
    for m in soak.mismatches:
        print("MISMATCH " + m)
    for l in soak.leaks:
        print("LEAK " + l)
    for p in soak.problems:
        print("PROBLEM " + p)
    return 1 if soak.mismatches or soak.leaks or soak.problems else 0


if __name__ == "__main__":
    sys.exit(main())
