#!/usr/bin/python3
"""Self-test of berth_python_driver.py: drives it the way a host would.

Run with Debian's Python (it needs python3-grpcio and python3-protobuf):

    /usr/bin/python3 plugins/examples/python_driver/selftest.py

It launches the driver with the handshake environment on a socket in a fresh
directory under /tmp, checks the handshake line and health, starts, waits
for, signals, execs into, measures and stops tasks, checks the driver
contract berth-node relies on (task directory handed over or made, output in
logs/ with rotation, work_dir, a network namespace to join, a task that exits
while the driver is down, a bounded number of calls, a broken stderr,
Shutdown with calls open), kills the driver with SIGKILL, launches it again
and recovers its tasks, shuts it down, and checks at the end that no process
it started is left. Prints one line per check and exits 0 when every check
passed, 1 otherwise. Checks it cannot run (joining a network namespace
needs root and `ip netns`) are printed as "skip" with the reason.
"""

import hashlib
import json
import os
import re
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
DRIVER = os.path.join(HERE, "berth_python_driver.py")
STUBS = os.path.normpath(os.path.join(HERE, "..", "..", "..", "api", "gen",
                                      "python"))
if STUBS not in sys.path:
    sys.path.append(STUBS)

import grpc  # noqa: E402
from google.protobuf import duration_pb2  # noqa: E402
from google.protobuf import struct_pb2  # noqa: E402

from berth.driver.v1 import driver_pb2, driver_pb2_grpc  # noqa: E402
from berth.plugin.v1 import plugin_pb2, plugin_pb2_grpc  # noqa: E402
from grpc_health.v1 import health_pb2, health_pb2_grpc  # noqa: E402

COOKIE_KEY = "BERTH_PLUGIN_MAGIC_COOKIE"
COOKIE = "5b3f0c2e8d7a4f61b9e2c7d4a1f08e3b6c5d9a2e7f4b1c8d3e6a9f2b5c8e1d4a"
HANDSHAKE = re.compile(r"^1\|1\|unix\|(/[^|]+)\|grpc\n$")

failures = []
checks = 0


def skip(name, reason):
    print("skip %s: %s" % (name, reason), flush=True)


def check(name, ok, detail=""):
    global checks
    checks += 1
    if ok:
        print("ok   %s" % name, flush=True)
    else:
        failures.append(name)
        print("FAIL %s%s" % (name, (": " + str(detail)) if detail else ""),
              flush=True)
    return ok


def expect_error(name, code, fn, must_name=None):
    """Calls fn and checks it fails with code, naming must_name."""
    try:
        fn()
    except grpc.RpcError as e:
        ok = e.code() == code and (must_name is None or
                                   must_name in e.details())
        return check(name, ok, "%s: %s" % (e.code(), e.details()))
    return check(name, False, "succeeded, want %s" % code)


def dur(seconds):
    d = duration_pb2.Duration()
    d.FromNanoseconds(int(seconds * 1e9))
    return d


def host_env(socket_dir, cookie=True):
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("BERTH_PLUGIN_")}
    env["PYTHONPATH"] = STUBS
    if cookie:
        env[COOKIE_KEY] = COOKIE
    if socket_dir is not None:
        env["BERTH_PLUGIN_SOCKET_DIR"] = socket_dir
    env["BERTH_PLUGIN_PROTOCOL_VERSIONS"] = "1"
    return env


class Driver:
    """One launch of the driver, as a host does it. With stderr_pipe its
    stderr is a pipe (proc.stderr) the caller reads or closes."""

    def __init__(self, socket_dir, log_path, extra_env=None,
                 stderr_pipe=False):
        self.log = open(log_path, "ab")
        env = host_env(socket_dir)
        env.update(extra_env or {})
        self.proc = subprocess.Popen(
            [DRIVER], env=env, stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE if stderr_pipe else self.log)
        self.line = self._read_line(15.0)
        m = HANDSHAKE.match(self.line)
        self.socket = m.group(1) if m else None
        self.channel = None
        if self.socket:
            self.channel = grpc.insecure_channel("unix:" + self.socket)
            grpc.channel_ready_future(self.channel).result(timeout=10)
            self.health = health_pb2_grpc.HealthStub(self.channel)
            self.plugin = plugin_pb2_grpc.PluginServiceStub(self.channel)
            self.driver = driver_pb2_grpc.DriverServiceStub(self.channel)

    def _read_line(self, timeout):
        result = []
        t = threading.Thread(
            target=lambda: result.append(self.proc.stdout.readline()),
            daemon=True)
        t.start()
        t.join(timeout)
        return result[0].decode() if result else ""

    def close(self):
        if self.channel is not None:
            self.channel.close()
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
        self.log.close()


def task_config(task_id, command, args=(), env=None, mark=None,
                task_dir="", work_dir=None):
    cfg = driver_pb2.TaskConfig(id=task_id, name=task_id,
                                allocation_id="alloc-selftest",
                                task_dir=task_dir)
    dc = {}
    if command is not None:
        dc["command"] = command
    if args:
        dc["args"] = list(args)
    if work_dir is not None:
        dc["work_dir"] = work_dir
    cfg.driver_config.update(dc)
    for k, v in (env or {}).items():
        cfg.env[k] = v
    if mark:
        cfg.env["SELFTEST_MARK"] = mark
    return cfg


def proc_alive(pid):
    try:
        with open("/proc/%d/stat" % pid) as f:
            state = f.read().rsplit(")", 1)[1].split()[0]
        return state not in ("Z", "X")
    except OSError:
        return False


def processes_marked(mark):
    """Live processes (other than this one) whose command line or
    environment mentions mark: the driver, its monitors, the tasks."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        pid = int(entry)
        if not proc_alive(pid):
            continue
        blob = b""
        for name in ("cmdline", "environ"):
            try:
                with open("/proc/%d/%s" % (pid, name), "rb") as f:
                    blob += f.read()
            except OSError:
                pass
        if mark.encode() in blob:
            found.append((pid, blob.split(b"\0")))
    return found


class Events:
    """Collects TaskEvents in the background."""

    def __init__(self, stub):
        self.call = stub.TaskEvents(driver_pb2.TaskEventsRequest())
        self.events = []
        self.error = None
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self):
        try:
            for ev in self.call:
                self.events.append(ev)
        except grpc.RpcError as e:
            if e.code() != grpc.StatusCode.CANCELLED:
                self.error = e

    def of(self, task_id):
        return [e for e in self.events if e.task_id == task_id]

    def cancel(self):
        self.call.cancel()
        self.thread.join(5)


def exec_stream(stub, task_id, command, frames=(), tty=False, size=None,
                timeout=60):
    """Runs ExecTaskStreaming; frames are requests sent after the setup."""
    def requests():
        setup = driver_pb2.ExecSetup(task_id=task_id, command=command,
                                     tty=tty)
        if size:
            setup.terminal_size.rows, setup.terminal_size.columns = size
        yield driver_pb2.ExecTaskStreamingRequest(setup=setup)
        for f in frames:
            if isinstance(f, (int, float)):
                time.sleep(f)
            else:
                yield f
    out, err, exit_result, order_ok = [], [], None, True
    for resp in stub.ExecTaskStreaming(requests(), timeout=timeout):
        kind = resp.WhichOneof("frame")
        if exit_result is not None:
            order_ok = False  # something after the exit frame
        if kind == "stdout":
            out.append(resp.stdout)
        elif kind == "stderr":
            err.append(resp.stderr)
        elif kind == "exit":
            exit_result = resp.exit
    return b"".join(out), b"".join(err), exit_result, order_ok


def main():
    tmp = tempfile.mkdtemp(prefix="bpd", dir="/tmp")  # short: socket path
    socket_dir = os.path.join(tmp, "run")
    state_dir = os.path.join(tmp, "state")
    log_path = os.path.join(tmp, "driver.log")
    print("selftest of %s in %s" % (DRIVER, tmp), flush=True)
    drivers = []
    try:
        run(tmp, socket_dir, state_dir, log_path, drivers)
    except Exception as e:  # report, then clean up
        import traceback
        traceback.print_exc()
        check("selftest ran to the end", False, repr(e))
    finally:
        for d in drivers:
            d.close()
        try:
            with open(log_path) as f:
                bad = [l for l in f if re.search(
                    r"ERROR|WARNING|Traceback|Exception", l)]
            check("the driver logged no errors or warnings (cancelled "
                  "streams are not errors)", not bad, bad[:5])
        except OSError as e:
            check("the driver wrote a log", False, e)
        left = processes_marked(tmp)
        check("no stray processes left (driver, monitors, tasks)", not left,
              [(pid, argv[:6]) for pid, argv in left])
        for pid, _ in left:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        if failures:
            try:
                with open(log_path) as f:
                    print("---- driver log ----\n" + f.read()[-6000:])
            except OSError:
                pass
        shutil.rmtree(tmp, ignore_errors=True)
    print("%d checks, %d failed%s" % (
        checks, len(failures), (": " + ", ".join(failures)) if failures
        else ""), flush=True)
    return 1 if failures else 0


def run(tmp, socket_dir, state_dir, log_path, drivers):
    mark = tmp
    os.makedirs(socket_dir, mode=0o750)

    # --- launch refusals ------------------------------------------------
    p = subprocess.run([DRIVER], env=host_env(socket_dir, cookie=False),
                       capture_output=True, timeout=30)
    check("without the cookie: exit 1, a message for a human",
          p.returncode == 1 and b"berth plugin" in p.stderr and
          b"berth-driver-conformance" in p.stderr and not p.stdout,
          (p.returncode, p.stderr))
    p = subprocess.run([DRIVER], env=host_env(None), capture_output=True,
                       timeout=30)
    check("without BERTH_PLUGIN_SOCKET_DIR: exit 1 naming it",
          p.returncode == 1 and b"BERTH_PLUGIN_SOCKET_DIR" in p.stderr and
          not p.stdout, (p.returncode, p.stderr))

    # --- launch and handshake -----------------------------------------------
    t0 = time.monotonic()
    d = Driver(socket_dir, log_path)
    drivers.append(d)
    sock = os.path.join(socket_dir, "python.sock")
    if not check("handshake line 1|1|unix|%s|grpc" % sock,
                 d.socket == sock, repr(d.line)):
        raise RuntimeError("no handshake")
    print("     (handshake after %.2fs)" % (time.monotonic() - t0))
    mode = stat.S_IMODE(os.stat(sock).st_mode)
    check("socket is 0600", mode == 0o600, oct(mode))
    for service in ("plugin", ""):
        r = d.health.Check(health_pb2.HealthCheckRequest(service=service),
                           timeout=5)
        check('health of "%s" is SERVING' % service,
              r.status == health_pb2.HealthCheckResponse.SERVING, r)
    expect_error("health of an unknown service is NOT_FOUND",
                 grpc.StatusCode.NOT_FOUND,
                 lambda: d.health.Check(
                     health_pb2.HealthCheckRequest(service="nope"), timeout=5))

    info = d.plugin.GetPluginInfo(plugin_pb2.GetPluginInfoRequest(), timeout=5)
    check("plugin info: python, a driver",
          info.name == "python" and
          info.type == plugin_pb2.PLUGIN_TYPE_DRIVER, info)
    caps = d.plugin.GetCapabilities(plugin_pb2.GetCapabilitiesRequest(),
                                    timeout=5)
    apis = {(a.package, a.revision) for a in caps.api_versions}
    check("plugin speaks berth.plugin.v1 and berth.driver.v1",
          {("berth.plugin.v1", 0), ("berth.driver.v1", 0)} <= apis, apis)
    schema = d.plugin.GetConfigSchema(plugin_pb2.GetConfigSchemaRequest(),
                                      timeout=5)
    fields = {f.name: f for f in schema.task_config.fields}
    check("task schema: command (required) and args",
          "command" in fields and fields["command"].required and
          "args" in fields, schema)
    node = plugin_pb2.NodeContext(node_id="selftest", runtime_dir=socket_dir,
                                  state_dir=state_dir)
    d.plugin.SetConfig(plugin_pb2.SetConfigRequest(node=node), timeout=5)
    bad = struct_pb2.Struct()
    bad.update({"no_such_field": 1})
    expect_error("SetConfig with an unknown field: INVALID_ARGUMENT naming it",
                 grpc.StatusCode.INVALID_ARGUMENT,
                 lambda: d.plugin.SetConfig(
                     plugin_pb2.SetConfigRequest(config=bad, node=node),
                     timeout=5), "no_such_field")
    dcaps = d.driver.GetCapabilities(driver_pb2.GetCapabilitiesRequest(),
                                     timeout=5).capabilities
    modes = [driver_pb2.NETWORK_ISOLATION_MODE_HOST]
    if os.geteuid() == 0:
        modes.append(driver_pb2.NETWORK_ISOLATION_MODE_GROUP)
    check("driver capabilities: signals, exec, recover, stats; no isolation; "
          "networks HOST%s" % (" and GROUP (root)" if len(modes) > 1 else
                               " only (not root)"),
          dcaps.send_signals and dcaps.exec and dcaps.recover and
          dcaps.stats and dcaps.fs_isolation == driver_pb2.FS_ISOLATION_NONE
          and list(dcaps.network_isolation_modes) == modes, dcaps)

    fp = d.driver.Fingerprint(driver_pb2.FingerprintRequest())
    first = next(fp)
    check("fingerprint: HEALTHY with the python version",
          first.health == driver_pb2.HEALTH_STATE_HEALTHY and
          "driver.python.version" in first.attributes, first)
    held = []

    def hold():
        try:
            held.append(next(fp, "ended"))
        except grpc.RpcError as e:
            if e.code() != grpc.StatusCode.CANCELLED:
                held.append(e)

    threading.Thread(target=hold, daemon=True).start()
    time.sleep(1.0)
    check("fingerprint stream stays open", not held, held)
    fp.cancel()

    events = Events(d.driver)
    time.sleep(0.2)

    # --- bad configurations -------------------------------------------------
    expect_error("StartTask without command: INVALID_ARGUMENT naming command",
                 grpc.StatusCode.INVALID_ARGUMENT,
                 lambda: d.driver.StartTask(driver_pb2.StartTaskRequest(
                     task=task_config("nocmd", None, mark=mark)), timeout=10),
                 "command")
    expect_error("StartTask of a missing program: INVALID_ARGUMENT",
                 grpc.StatusCode.INVALID_ARGUMENT,
                 lambda: d.driver.StartTask(driver_pb2.StartTaskRequest(
                     task=task_config("missing", "/no/such/program",
                                      mark=mark)), timeout=10),
                 "/no/such/program")
    tasks_dir = os.path.join(state_dir, "python", "tasks")
    check("failed starts leave no task directory",
          os.listdir(tasks_dir) == [], os.listdir(tasks_dir))

    contract_checks(d, tmp, tasks_dir, mark)

    # --- exit 3 ---------------------------------------------------------------
    t_exit = d.driver.StartTask(driver_pb2.StartTaskRequest(
        task=task_config("exit3", "/bin/sh", ["-c", "exit 3"], mark=mark)),
        timeout=10).handle
    for i in (1, 2):
        r = d.driver.WaitTask(driver_pb2.WaitTaskRequest(task_id="exit3"),
                              timeout=30).result
        check("WaitTask (call %d): exit_code 3" % i,
              r.exit_code == 3 and r.signal == 0, r)
    st = d.driver.InspectTask(driver_pb2.InspectTaskRequest(task_id="exit3"),
                              timeout=5).status
    check("InspectTask: EXITED with exit_code 3",
          st.state == driver_pb2.TASK_STATE_EXITED and
          st.exit_result.exit_code == 3, st)
    expect_error("StartTask of an existing id: ALREADY_EXISTS",
                 grpc.StatusCode.ALREADY_EXISTS,
                 lambda: d.driver.StartTask(driver_pb2.StartTaskRequest(
                     task=task_config("exit3", "/bin/true", mark=mark)),
                     timeout=10), "exit3")

    # --- a long task: env, exec, stats, signals ----------------------------
    t_sleep = d.driver.StartTask(driver_pb2.StartTaskRequest(
        task=task_config("sleeper", "sleep", ["300"], env={"FOO": "bar baz"},
                         mark=mark)), timeout=10).handle
    st = d.driver.InspectTask(driver_pb2.InspectTaskRequest(
        task_id="sleeper"), timeout=5).status
    check("sleep 300 is RUNNING", st.state == driver_pb2.TASK_STATE_RUNNING,
          st)
    sleeper_pid = int(st.driver_attributes["pid"])
    r = d.driver.ExecTask(driver_pb2.ExecTaskRequest(
        task_id="sleeper", command=["/bin/sh", "-c",
                                    'echo "$FOO"; echo oops >&2; exit 4']),
        timeout=30)
    check("ExecTask: output, task env and exit code",
          r.stdout == b"bar baz\n" and r.stderr == b"oops\n" and
          r.result.exit_code == 4, r)
    r = d.driver.ExecTask(driver_pb2.ExecTaskRequest(
        task_id="sleeper", command=["sleep", "30"], timeout=dur(0.5)),
        timeout=30)
    check("ExecTask timeout kills the command", r.result.signal == 9, r)
    with open("/proc/%d/environ" % sleeper_pid, "rb") as f:
        environ = f.read().split(b"\0")
    check("the task has TaskConfig.env and not the plugin cookie",
          b"FOO=bar baz" in environ and
          not any(e.startswith(COOKIE_KEY.encode()) for e in environ))

    samples = []
    stream = d.driver.TaskStats(driver_pb2.TaskStatsRequest(
        task_id="sleeper", interval=dur(0.2)))
    t0 = time.monotonic()
    for s in stream:
        samples.append((time.monotonic() - t0, s.usage))
        if len(samples) == 3:
            stream.cancel()
            break
    u0, u2 = samples[0][1], samples[2][1]
    check("TaskStats: first sample at once, with measured CPU and memory",
          samples[0][0] < 0.4 and list(u0.usage.cpu.measured) and
          list(u0.usage.memory.measured) and u0.usage.memory.rss > 0,
          samples[0])
    from berth.stats.v1 import stats_pb2
    check("TaskStats: no percent on the first sample, percent later",
          stats_pb2.CPU_FIELD_PERCENT not in u0.usage.cpu.measured and
          stats_pb2.CPU_FIELD_PERCENT in u2.usage.cpu.measured and
          u2.usage.cpu.HasField("user_mode"), u2)

    # SignalTask: a task that writes a line when it gets SIGUSR1.
    d.driver.StartTask(driver_pb2.StartTaskRequest(task=task_config(
        "trapper", "/bin/sh",
        ["-c", "trap 'echo got-usr1 >> sig.txt' USR1; "
               "while :; do sleep 0.1; done"], mark=mark)), timeout=10)
    time.sleep(0.5)
    d.driver.SignalTask(driver_pb2.SignalTaskRequest(task_id="trapper",
                                                     signal="SIGUSR1"),
                        timeout=5)
    got = b""
    for _ in range(30):
        got = d.driver.ExecTask(driver_pb2.ExecTaskRequest(
            task_id="trapper", command=["cat", "sig.txt"]), timeout=10).stdout
        if got:
            break
        time.sleep(0.1)
    check("SignalTask delivers SIGUSR1", got == b"got-usr1\n", got)
    expect_error("SignalTask with a bad signal: INVALID_ARGUMENT",
                 grpc.StatusCode.INVALID_ARGUMENT,
                 lambda: d.driver.SignalTask(driver_pb2.SignalTaskRequest(
                     task_id="trapper", signal="SIGNOPE"), timeout=5),
                 "SIGNOPE")

    # StopTask of a task that ignores SIGTERM: killed after the timeout.
    d.driver.StartTask(driver_pb2.StartTaskRequest(task=task_config(
        "stubborn", "/bin/sh", ["-c", "trap '' TERM; sleep 300"],
        mark=mark)), timeout=10)
    time.sleep(0.3)
    t0 = time.monotonic()
    d.driver.StopTask(driver_pb2.StopTaskRequest(
        task_id="stubborn", timeout=dur(0.5), signal="TERM"), timeout=30)
    took = time.monotonic() - t0
    r = d.driver.WaitTask(driver_pb2.WaitTaskRequest(task_id="stubborn"),
                          timeout=10).result
    check("StopTask of a task ignoring SIGTERM: signal 9 after the timeout",
          r.signal == 9 and r.exit_code == 0 and 0.4 < took < 5,
          (r, took))

    expect_error("DestroyTask of a running task: FAILED_PRECONDITION",
                 grpc.StatusCode.FAILED_PRECONDITION,
                 lambda: d.driver.DestroyTask(driver_pb2.DestroyTaskRequest(
                     task_id="sleeper"), timeout=5), "sleeper")

    # --- ExecTaskStreaming ------------------------------------------------
    R = driver_pb2.ExecTaskStreamingRequest
    out, err, ex, order = exec_stream(
        d.driver, "sleeper",
        ["/bin/sh", "-c", "echo out; echo err >&2; exit 43"])
    check("ExecTaskStreaming: stdout, stderr, exit 43, exit last",
          out == b"out\n" and err == b"err\n" and ex is not None and
          ex.exit_code == 43 and order, (out, err, ex))
    payload = os.urandom(1 << 20) * 16  # 16 MiB
    frames = [R(stdin=payload[i:i + 32768])
              for i in range(0, len(payload), 32768)]
    frames.append(R(stdin_close=driver_pb2.StdinClose()))
    t0 = time.monotonic()
    out, err, ex, order = exec_stream(d.driver, "sleeper", ["cat"], frames)
    took = time.monotonic() - t0
    check("ExecTaskStreaming: 16 MiB through cat, same SHA-256 (%.1fs)" %
          took,
          hashlib.sha256(out).digest() == hashlib.sha256(payload).digest()
          and ex is not None and ex.exit_code == 0 and order,
          (len(out), ex))
    out, err, ex, order = exec_stream(
        d.driver, "sleeper", ["/bin/sh", "-c", "read x; stty size"],
        [0.3, R(resize=driver_pb2.TerminalSize(rows=30, columns=100)), 0.2,
         R(stdin=b"go\n")], tty=True, size=(24, 80))
    check("ExecTaskStreaming with a tty: resize, stty size, \\r\\n lines",
          b"30 100\r\n" in out and ex is not None and ex.exit_code == 0,
          (out, ex))

    marker = "exec-cancel-%d" % os.getpid()
    call = d.driver.ExecTaskStreaming(iter([R(setup=driver_pb2.ExecSetup(
        task_id="sleeper", command=["/bin/sh", "-c",
                                    "sleep 100 # " + marker]))]))
    time.sleep(0.5)
    started = bool(processes_marked(marker))
    call.cancel()
    deadline = time.monotonic() + 5
    while processes_marked(marker) and time.monotonic() < deadline:
        time.sleep(0.05)
    check("ExecTaskStreaming cancelled by the caller: the command is killed",
          started and not processes_marked(marker), started)

    # --- unknown ids --------------------------------------------------------
    nf = grpc.StatusCode.NOT_FOUND
    ghost = "ghost-task-1234"
    calls = {
        "WaitTask": lambda: d.driver.WaitTask(
            driver_pb2.WaitTaskRequest(task_id=ghost), timeout=5),
        "StopTask": lambda: d.driver.StopTask(
            driver_pb2.StopTaskRequest(task_id=ghost), timeout=5),
        "DestroyTask": lambda: d.driver.DestroyTask(
            driver_pb2.DestroyTaskRequest(task_id=ghost), timeout=5),
        "InspectTask": lambda: d.driver.InspectTask(
            driver_pb2.InspectTaskRequest(task_id=ghost), timeout=5),
        "SignalTask": lambda: d.driver.SignalTask(
            driver_pb2.SignalTaskRequest(task_id=ghost, signal="HUP"),
            timeout=5),
        "TaskStats": lambda: next(d.driver.TaskStats(
            driver_pb2.TaskStatsRequest(task_id=ghost), timeout=5)),
        "ExecTask": lambda: d.driver.ExecTask(
            driver_pb2.ExecTaskRequest(task_id=ghost, command=["true"]),
            timeout=5),
        "ExecTaskStreaming": lambda: exec_stream(d.driver, ghost, ["true"],
                                                 timeout=5),
    }
    for name, fn in calls.items():
        expect_error("%s of an unknown id: NOT_FOUND naming it" % name, nf, fn,
                     ghost)

    check("TaskEvents: an event at start and at exit of exit3",
          any(e.annotations.get("state") == "running"
              for e in events.of("exit3")) and
          any(e.annotations.get("state") == "exited" and
              e.annotations.get("exit_code") == "3"
              for e in events.of("exit3")),
          [(e.message, dict(e.annotations)) for e in events.of("exit3")])
    events.cancel()
    check("TaskEvents ended without error", events.error is None,
          events.error)

    # --- kill the driver, launch it again, recover ----------------------------
    monitor_pid = int(st.driver_attributes["monitor_pid"])
    # A task that ends while the driver is down (the contract, point 5).
    t_down = d.driver.StartTask(driver_pb2.StartTaskRequest(
        task=task_config("downexit", "/bin/sh",
                         ["-c", "sleep 1; echo bye; exit 5"], mark=mark)),
        timeout=10).handle
    down_monitor = json.loads(t_down.driver_state)["monitor_pid"]
    d.proc.send_signal(signal.SIGKILL)
    d.proc.wait()
    d.close()
    drivers.remove(d)
    check("after the driver's SIGKILL the task and its monitor live on",
          proc_alive(sleeper_pid) and proc_alive(monitor_pid))
    deadline = time.monotonic() + 10
    while proc_alive(down_monitor) and time.monotonic() < deadline:
        time.sleep(0.05)
    check("a task ends while the driver is down (its monitor records it)",
          not proc_alive(down_monitor))

    d = Driver(socket_dir, log_path)
    drivers.append(d)
    check("relaunched driver: handshake (stale socket replaced)",
          d.socket == sock, repr(d.line))
    d.plugin.SetConfig(plugin_pb2.SetConfigRequest(node=node), timeout=5)
    expect_error("after restart the driver does not know the task yet",
                 nf, lambda: d.driver.InspectTask(
                     driver_pb2.InspectTaskRequest(task_id="sleeper"),
                     timeout=5), "sleeper")
    st = d.driver.RecoverTask(driver_pb2.RecoverTaskRequest(handle=t_sleep),
                              timeout=10).status
    check("RecoverTask(sleep 300): RUNNING, same pid",
          st.state == driver_pb2.TASK_STATE_RUNNING and
          st.driver_attributes.get("pid") == str(sleeper_pid), st)
    st = d.driver.RecoverTask(driver_pb2.RecoverTaskRequest(handle=t_exit),
                              timeout=10).status
    check("RecoverTask(exit 3): EXITED with exit_code 3",
          st.state == driver_pb2.TASK_STATE_EXITED and
          st.exit_result.exit_code == 3, st)
    st = d.driver.RecoverTask(driver_pb2.RecoverTaskRequest(handle=t_down),
                              timeout=10).status
    r = d.driver.WaitTask(driver_pb2.WaitTaskRequest(task_id="downexit"),
                          timeout=5).result
    out = read_text(os.path.join(st.driver_attributes.get("task_dir", ""),
                                 "logs", "stdout.log"))
    check("RecoverTask of a task that exited while the driver was down: "
          "EXITED, WaitTask gives its real exit code 5, its output kept",
          st.state == driver_pb2.TASK_STATE_EXITED and
          st.exit_result.exit_code == 5 and r.exit_code == 5 and
          out == "bye\n", (st, r, out))
    d.driver.DestroyTask(driver_pb2.DestroyTaskRequest(task_id="downexit"),
                         timeout=10)

    forged = driver_pb2.TaskHandle()
    forged.CopyFrom(t_sleep)
    forged.config.id = "forged"
    state = json.loads(forged.driver_state)
    state.update(task_id="forged", pid_start=state["pid_start"] + 1,
                 monitor_start=state["monitor_start"] + 1,
                 state_dir=os.path.join(tmp, "nonexistent"),
                 task_dir=os.path.join(tmp, "nonexistent"))
    forged.driver_state = json.dumps(state).encode()
    expect_error("RecoverTask with a reused pid: FAILED_PRECONDITION",
                 grpc.StatusCode.FAILED_PRECONDITION,
                 lambda: d.driver.RecoverTask(
                     driver_pb2.RecoverTaskRequest(handle=forged), timeout=10),
                 "reused")

    waited = []
    waiter = threading.Thread(target=lambda: waited.append(
        d.driver.WaitTask(driver_pb2.WaitTaskRequest(task_id="sleeper"),
                          timeout=60).result), daemon=True)
    waiter.start()
    time.sleep(0.3)
    d.driver.StopTask(driver_pb2.StopTaskRequest(task_id="sleeper",
                                                 timeout=dur(5)), timeout=30)
    waiter.join(30)
    r = waited[0] if waited else None
    check("StopTask of the recovered task: WaitTask sees signal 15 "
          "(the real status, from the monitor)",
          r is not None and r.signal == 15 and r.exit_code == 0, r)
    check("the recovered task's processes are gone",
          not proc_alive(sleeper_pid), sleeper_pid)

    # A task that must survive the plugin's Shutdown.
    survivor = d.driver.StartTask(driver_pb2.StartTaskRequest(
        task=task_config("survivor", "sleep", ["300"], mark=mark)),
        timeout=10).handle
    survivor_pid = json.loads(survivor.driver_state)["pid"]
    for tid in ("exit3", "sleeper"):
        d.driver.DestroyTask(driver_pb2.DestroyTaskRequest(task_id=tid),
                             timeout=10)
    expect_error("a destroyed task is NOT_FOUND", nf,
                 lambda: d.driver.WaitTask(
                     driver_pb2.WaitTaskRequest(task_id="sleeper"),
                     timeout=5), "sleeper")

    # --- Shutdown -------------------------------------------------------------
    in_flight = []
    execer = threading.Thread(target=lambda: in_flight.append(
        d.driver.ExecTask(driver_pb2.ExecTaskRequest(
            task_id="survivor", command=["sh", "-c", "sleep 1; echo done"]),
            timeout=30)), daemon=True)
    execer.start()
    time.sleep(0.3)
    t0 = time.monotonic()
    d.plugin.Shutdown(plugin_pb2.ShutdownRequest(grace_period=dur(5)),
                      timeout=10)
    rc = d.proc.wait(15)
    took = time.monotonic() - t0
    execer.join(5)
    check("Shutdown: the driver exits 0 once the call in flight finished "
          "(%.1fs)" % took, rc == 0 and 0.5 < took < 3, (rc, took))
    check("Shutdown: the call in flight finished",
          in_flight and in_flight[0].stdout == b"done\n", in_flight)
    check("Shutdown removed the socket", not os.path.exists(sock))
    check("Shutdown left the task running", proc_alive(survivor_pid))
    d.close()
    drivers.remove(d)

    limited_handles = limits_and_stderr(socket_dir, state_dir, log_path,
                                        drivers, node, mark)

    # --- a third launch: recover, SIGTERM shutdown, then clean up ---------
    d = Driver(socket_dir, log_path)
    drivers.append(d)
    d.plugin.SetConfig(plugin_pb2.SetConfigRequest(node=node), timeout=5)
    for h in limited_handles:
        d.driver.RecoverTask(driver_pb2.RecoverTaskRequest(handle=h),
                             timeout=10)
        d.driver.DestroyTask(driver_pb2.DestroyTaskRequest(
            task_id=h.config.id, force=True), timeout=15)
    st = d.driver.RecoverTask(driver_pb2.RecoverTaskRequest(handle=survivor),
                              timeout=10).status
    check("RecoverTask after Shutdown: RUNNING",
          st.state == driver_pb2.TASK_STATE_RUNNING, st)
    stats = d.driver.TaskStats(driver_pb2.TaskStatsRequest(
        task_id="survivor", interval=dur(0.1)))
    next(stats)
    d.driver.DestroyTask(driver_pb2.DestroyTaskRequest(task_id="survivor",
                                                       force=True),
                         timeout=15)
    check("DestroyTask(force) killed the task", not proc_alive(survivor_pid))
    try:
        for _ in stats:
            pass
        check("TaskStats ends OK when its task is destroyed", True)
    except grpc.RpcError as e:
        check("TaskStats ends OK when its task is destroyed", False, e)
    d.proc.send_signal(signal.SIGTERM)
    rc = d.proc.wait(15)
    check("SIGTERM: the driver exits 0", rc == 0, rc)
    d.close()
    drivers.remove(d)

    # The first driver's trapper and stubborn tasks were never recovered
    # (their handles were not kept): the stubborn one already ended; stop
    # the trapper the way a host that lost it would, by its monitor.
    for entry in os.listdir(tasks_dir):
        exit_file = os.path.join(tasks_dir, entry, "exit.json")
        if not os.path.exists(exit_file):
            for pid, argv in processes_marked(tmp):
                if b"--monitor" in argv and \
                        os.path.join(tasks_dir, entry).encode() in argv:
                    os.kill(pid, signal.SIGTERM)  # forwarded to the task
    deadline = time.monotonic() + 10
    while processes_marked(tmp) and time.monotonic() < deadline:
        time.sleep(0.1)
    exits = {}
    for entry in os.listdir(tasks_dir):
        try:
            with open(os.path.join(tasks_dir, entry, "exit.json")) as f:
                exits[entry.split(".")[0]] = json.load(f)
        except OSError:
            pass
    check("a monitor passes SIGTERM on and records the exit",
          exits.get("trapper", {}).get("signal") == 15, exits)


def read_text(path):
    try:
        with open(path) as f:
            return f.read()
    except OSError as e:
        return "<%s>" % e


def start_and_wait(d, cfg, timeout=30):
    """StartTask, then WaitTask: (handle, exit result, seconds waited)."""
    handle = d.driver.StartTask(driver_pb2.StartTaskRequest(task=cfg),
                                timeout=10).handle
    t0 = time.monotonic()
    result = d.driver.WaitTask(driver_pb2.WaitTaskRequest(task_id=cfg.id),
                               timeout=timeout).result
    return handle, result, time.monotonic() - t0


def destroy(d, task_id):
    d.driver.DestroyTask(driver_pb2.DestroyTaskRequest(task_id=task_id,
                                                       force=True),
                         timeout=15)


def contract_checks(d, tmp, tasks_dir, mark):
    """The driver contract berth-node relies on: the task directory, the
    output files and their rotation, work_dir, the end of a task's output,
    network namespaces."""
    node_tasks = os.path.join(tmp, "node", "tasks")
    os.makedirs(node_tasks)

    def node_dir(name):  # as berth-node makes it: empty, 0755
        path = os.path.join(node_tasks, name)
        os.mkdir(path, 0o755)
        return path

    # --- the task directory as the node hands it over; output in logs/ ----
    td = node_dir("out")
    _, r, _ = start_and_wait(d, task_config(
        "out", "/bin/sh", ["-c", "pwd; echo to-stderr >&2; : > ready"],
        mark=mark, task_dir=td))
    logs = os.path.join(td, "logs")
    out = read_text(os.path.join(logs, "stdout.log"))
    err = read_text(os.path.join(logs, "stderr.log"))
    check("an existing empty task directory is accepted and is the working "
          "directory; output in logs/stdout.log and logs/stderr.log",
          r.exit_code == 0 and out == td + "\n" and err == "to-stderr\n" and
          os.path.exists(os.path.join(td, "ready")), (r, out, err))
    check("logs/ is 0755", os.path.isdir(logs) and
          stat.S_IMODE(os.stat(logs).st_mode) == 0o755)
    st = d.driver.InspectTask(driver_pb2.InspectTaskRequest(task_id="out"),
                              timeout=5).status
    check("InspectTask names the task directory and the output files",
          st.driver_attributes.get("task_dir") == td and
          st.driver_attributes.get("stdout") ==
          os.path.join(logs, "stdout.log"), dict(st.driver_attributes))
    destroy(d, "out")
    check("DestroyTask removes logs/ and leaves the node's directory",
          os.path.isdir(td) and not os.path.exists(logs), os.listdir(td)
          if os.path.isdir(td) else "gone")

    # --- rotation -------------------------------------------------------
    expected = "".join("%09d\n" % i for i in range(45))  # 450 bytes
    td = node_dir("rot")
    cfg = task_config("rot", "/bin/sh",
                      ["-c", "for i in $(seq 0 44); do printf '%09d\\n' $i; "
                       "done"], mark=mark, task_dir=td)
    cfg.logs.max_file_bytes = 100
    cfg.logs.max_files = 2
    start_and_wait(d, cfg)
    logs = os.path.join(td, "logs")
    names = sorted(os.listdir(logs))
    parts = [read_text(os.path.join(logs, n)) for n in
             ("stdout.log.2", "stdout.log.1", "stdout.log")]
    check("rotation at max_file_bytes 100, max_files 2: stdout.log.2, .1 and "
          "stdout.log hold the last 250 bytes in order, none over 100",
          names == ["stderr.log", "stdout.log", "stdout.log.1",
                    "stdout.log.2"] and "".join(parts) == expected[200:] and
          all(len(p) <= 100 for p in parts), (names, parts))
    destroy(d, "rot")
    td = node_dir("rotdefault")
    cfg = task_config("rotdefault", "/bin/sh",
                      ["-c", "for i in $(seq 0 44); do printf '%09d\\n' $i; "
                       "done"], mark=mark, task_dir=td)
    cfg.logs.max_file_bytes = 10
    start_and_wait(d, cfg)
    names = sorted(n for n in os.listdir(os.path.join(td, "logs"))
                   if n.startswith("stdout"))
    check("max_files 0 keeps the default 4 rotated files",
          names == ["stdout.log", "stdout.log.1", "stdout.log.2",
                    "stdout.log.3", "stdout.log.4"], names)
    destroy(d, "rotdefault")

    # --- a missing task directory is made (and removed by DestroyTask) -----
    td = os.path.join(node_tasks, "made", "here")
    _, r, _ = start_and_wait(d, task_config("made", "/bin/sh", ["-c", "pwd"],
                                            mark=mark, task_dir=td))
    check("a missing task directory is made (mkdir -p), 0755",
          read_text(os.path.join(td, "logs", "stdout.log")) == td + "\n" and
          stat.S_IMODE(os.stat(td).st_mode) == 0o755)
    destroy(d, "made")
    check("DestroyTask removes the task directory it made",
          not os.path.exists(os.path.join(node_tasks, "made")))

    # --- work_dir ---------------------------------------------------------
    td = node_dir("wd")
    _, r, _ = start_and_wait(d, task_config(
        "wd", "/bin/sh", ["-c", "pwd"], mark=mark, task_dir=td,
        work_dir="sub/dir"))
    check("work_dir sub/dir: made, the task runs there",
          read_text(os.path.join(td, "logs", "stdout.log")) ==
          os.path.join(td, "sub", "dir") + "\n")
    destroy(d, "wd")
    check("DestroyTask removes the work_dir it made",
          sorted(os.listdir(td)) == [], os.listdir(td))
    _, r, _ = start_and_wait(d, task_config(
        "wdabs", "/bin/sh", ["-c", "pwd"], mark=mark, task_dir=td,
        work_dir=os.path.join(td, "abs")))
    check("work_dir: an absolute path inside the task directory",
          read_text(os.path.join(td, "logs", "stdout.log")) ==
          os.path.join(td, "abs") + "\n")
    destroy(d, "wdabs")
    before = sorted(os.listdir(tasks_dir))
    for bad in ("../escape", "/tmp", "a/../../escape"):
        expect_error("work_dir %s: INVALID_ARGUMENT naming "
                     "driver_config.work_dir" % bad,
                     grpc.StatusCode.INVALID_ARGUMENT,
                     lambda: d.driver.StartTask(driver_pb2.StartTaskRequest(
                         task=task_config("wdbad", "/bin/true", mark=mark,
                                          task_dir=td, work_dir=bad)),
                         timeout=10), "driver_config.work_dir")
    check("refused work_dirs leave nothing behind",
          os.listdir(td) == [] and sorted(os.listdir(tasks_dir)) == before
          and not os.path.exists(os.path.join(node_tasks, "escape")))

    # --- the end of a task's output --------------------------------------
    _, r, took = start_and_wait(d, task_config(
        "drain", "/bin/sh", ["-c", "echo main; (sleep 0.3; echo late) & "
                             "exit 0"], mark=mark))
    st = d.driver.InspectTask(driver_pb2.InspectTaskRequest(
        task_id="drain"), timeout=5).status
    out = read_text(st.driver_attributes["stdout"])
    check("output written just after the main process exited is kept "
          "(%.1fs)" % took, out == "main\nlate\n" and took < 2, out)
    destroy(d, "drain")
    _, r, took = start_and_wait(d, task_config(
        "held", "/bin/sh", ["-c", "echo main; sleep 30 & exit 4"],
        mark=mark))
    check("a child holding the output open delays the exit by about 1s "
          "only (%.1fs)" % took, r.exit_code == 4 and 0.8 < took < 3,
          (r, took))
    st = d.driver.InspectTask(driver_pb2.InspectTaskRequest(
        task_id="held"), timeout=5).status
    leftover = [p for p, argv in processes_marked(mark)
                if argv[:2] == [b"sleep", b"30"]]
    destroy(d, "held")
    time.sleep(0.2)
    check("DestroyTask kills what an exited task left in its group",
          leftover and not any(proc_alive(p) for p in leftover), leftover)

    network_checks(d, tmp, tasks_dir, mark)


def network_checks(d, tmp, tasks_dir, mark):
    """GROUP: the task (and commands run into it) in the namespace the node
    made; a path that is missing or not a network namespace refused."""
    GROUP = driver_pb2.NETWORK_ISOLATION_MODE_GROUP

    def group_config(task_id, path, command="/bin/sh", args=()):
        cfg = task_config(task_id, command, args, mark=mark)
        cfg.network.mode = GROUP
        cfg.network.namespace_path = path
        return cfg

    before = sorted(os.listdir(tasks_dir))
    if os.geteuid() != 0:
        expect_error("GROUP without root: INVALID_ARGUMENT naming "
                     "network.mode", grpc.StatusCode.INVALID_ARGUMENT,
                     lambda: d.driver.StartTask(driver_pb2.StartTaskRequest(
                         task=group_config("netns", "/proc/self/ns/net")),
                         timeout=10), "network.mode")
        skip("GROUP: the task runs in the namespace", "needs root (setns)")
        return
    for path, why in ((os.path.join(tmp, "no-such-netns"), "missing"),
                      ("/etc/hostname", "not a namespace"),
                      ("", "empty")):
        expect_error("GROUP with a namespace_path %s: INVALID_ARGUMENT naming "
                     "network.namespace_path" % why,
                     grpc.StatusCode.INVALID_ARGUMENT,
                     lambda: d.driver.StartTask(driver_pb2.StartTaskRequest(
                         task=group_config("netns", path)), timeout=10),
                     "network.namespace_path")
    check("refused namespaces leave nothing behind",
          sorted(os.listdir(tasks_dir)) == before)

    ip = shutil.which("ip") or "/usr/sbin/ip"
    name = "bpd-selftest-%d" % os.getpid()
    made = subprocess.run([ip, "netns", "add", name], capture_output=True)
    if made.returncode != 0:
        skip("GROUP: the task runs in the namespace",
             "cannot make a namespace with `ip netns add`: %s" %
             made.stderr.decode().strip())
        return
    try:
        path = "/var/run/netns/" + name
        want = "net:[%d]" % os.stat(path).st_ino
        cfg = group_config("netns", path, "/bin/sh",
                           ["-c", "readlink /proc/self/ns/net; "
                            "exec sleep 300"])
        d.driver.StartTask(driver_pb2.StartTaskRequest(task=cfg), timeout=10)
        st = d.driver.InspectTask(driver_pb2.InspectTaskRequest(
            task_id="netns"), timeout=5).status
        out = ""
        for _ in range(50):
            out = read_text(st.driver_attributes["stdout"])
            if out:
                break
            time.sleep(0.1)
        check("GROUP: the task runs in the namespace at namespace_path "
              "(ip netns add)", out == want + "\n", (out, want))
        r = d.driver.ExecTask(driver_pb2.ExecTaskRequest(
            task_id="netns", command=["readlink", "/proc/self/ns/net"]),
            timeout=10)
        check("GROUP: ExecTask runs in the task's namespace",
              r.stdout.decode() == want + "\n" and r.result.exit_code == 0,
              r)
        out, _, ex, _ = exec_stream(d.driver, "netns",
                                    ["readlink", "/proc/self/ns/net"])
        check("GROUP: ExecTaskStreaming runs in the task's namespace",
              out.decode() == want + "\n" and ex is not None and
              ex.exit_code == 0, (out, ex))
        destroy(d, "netns")
    finally:
        subprocess.run([ip, "netns", "del", name], capture_output=True)


def limits_and_stderr(socket_dir, state_dir, log_path, drivers, node, mark):
    """A launch with BERTH_PYTHON_DRIVER_MAX_CALLS=6 whose stderr pipe loses
    its reader: the driver logs to driver.log and keeps answering; calls
    beyond the limit get RESOURCE_EXHAUSTED at once; Shutdown with calls
    open exits 0 within the grace period. Returns the handles of the tasks
    left running, for the next launch to recover and destroy."""
    d = Driver(socket_dir, log_path,
               extra_env={"BERTH_PYTHON_DRIVER_MAX_CALLS": "6"},
               stderr_pipe=True)
    drivers.append(d)
    d.plugin.SetConfig(plugin_pb2.SetConfigRequest(node=node), timeout=5)
    d.proc.stderr.close()  # the host that read it is gone
    handles = [d.driver.StartTask(driver_pb2.StartTaskRequest(
        task=task_config("afterpipe", "sleep", ["300"], mark=mark)),
        timeout=10).handle]
    st = d.driver.InspectTask(driver_pb2.InspectTaskRequest(
        task_id="afterpipe"), timeout=5).status
    driver_log = read_text(os.path.join(state_dir, "python", "driver.log"))
    check("a broken stderr: the driver keeps answering and logs to "
          "<state_dir>/driver.log, saying so once",
          st.state == driver_pb2.TASK_STATE_RUNNING and
          driver_log.count("stderr is gone") == 1 and
          "task afterpipe started" in driver_log, driver_log[-500:])

    # Five long calls open, then the limit: a sixth is refused at once.
    results = {}

    def hold(name, call):
        try:
            for _ in call:
                pass
            results[name] = "OK"
        except grpc.RpcError as e:
            results[name] = e.code()

    calls = {
        "WaitTask": d.driver.WaitTask.future(driver_pb2.WaitTaskRequest(
            task_id="afterpipe")),
        "TaskEvents": d.driver.TaskEvents(driver_pb2.TaskEventsRequest()),
        "TaskStats": d.driver.TaskStats(driver_pb2.TaskStatsRequest(
            task_id="afterpipe", interval=dur(0.2))),
        "Fingerprint": d.driver.Fingerprint(driver_pb2.FingerprintRequest()),
    }
    threads = []
    for name, call in calls.items():
        if name == "WaitTask":
            def wait_one(call=call):
                try:
                    call.result()
                    results["WaitTask"] = "OK"
                except grpc.RpcError as e:
                    results["WaitTask"] = e.code()
            target = wait_one
        else:
            target = lambda name=name, call=call: hold(name, call)
        t = threading.Thread(target=target, daemon=True)
        t.start()
        threads.append(t)
    extra = d.driver.WaitTask.future(driver_pb2.WaitTaskRequest(
        task_id="afterpipe"))
    extra2 = d.driver.WaitTask.future(driver_pb2.WaitTaskRequest(
        task_id="afterpipe"))
    time.sleep(0.5)
    t0 = time.monotonic()
    expect_error("a call beyond BERTH_PYTHON_DRIVER_MAX_CALLS=6: "
                 "RESOURCE_EXHAUSTED at once",
                 grpc.StatusCode.RESOURCE_EXHAUSTED,
                 lambda: d.plugin.GetPluginInfo(
                     plugin_pb2.GetPluginInfoRequest(), timeout=5))
    refused_in = time.monotonic() - t0
    check("  ... within 0.5s (%.3fs)" % refused_in, refused_in < 0.5)
    extra.cancel()
    extra2.cancel()
    time.sleep(0.3)
    info = d.plugin.GetPluginInfo(plugin_pb2.GetPluginInfoRequest(),
                                  timeout=5)
    check("below the limit again: answered", info.name == "python")

    # Shutdown with WaitTask, TaskEvents, TaskStats and Fingerprint open.
    t0 = time.monotonic()
    d.plugin.Shutdown(plugin_pb2.ShutdownRequest(grace_period=dur(2)),
                      timeout=5)
    try:
        rc = d.proc.wait(10)
    except subprocess.TimeoutExpired:
        rc = None
    took = time.monotonic() - t0
    for t in threads:
        t.join(5)
    check("Shutdown with WaitTask, TaskEvents, TaskStats and Fingerprint "
          "open: exit 0 within the 2s grace (%.2fs)" % took,
          rc == 0 and took < 2.0, (rc, took))
    check("Shutdown ended the open calls (UNAVAILABLE)",
          len(results) == 4 and all(v == grpc.StatusCode.UNAVAILABLE
                                    for v in results.values()), results)
    d.close()
    drivers.remove(d)
    return handles


if __name__ == "__main__":
    sys.exit(main())
