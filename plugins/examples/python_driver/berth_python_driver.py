#!/usr/bin/python3
"""berth-python-driver: a berth task driver plugin in plain Python 3.

This is what a third-party driver author writes without Bazel and without
berth's C++ plugin SDK: one file that

  * does the plugin launch handshake itself (see plugins/sdk/handshake.h),
  * serves berth.plugin.v1.PluginService, berth.driver.v1.DriverService and
    grpc.health.v1.Health on a Unix socket with Debian's python3-grpcio,
  * runs each task as an ordinary, unisolated host process in its own session,
    through a small monitor process that outlives the driver and records the
    task's real exit status in the task's directory, so that a restarted
    driver can recover the task and still learn how it ended.

Only the standard library, grpcio and protobuf are used, plus the stubs
generated from berth's .proto files (api/gen/python in the berth repository).
Run it under /usr/bin/python3. See README.md beside this file.

The same file has two helper modes, started by the driver itself and never
by a human (they do not import grpc):

  --monitor TASK_DIR   the per-task monitor: starts the task, reports its pid,
                       waits for it and writes TASK_DIR/exit.json atomically;
  --tty-exec -- CMD..  makes its stdin (a pty) the controlling terminal of
                       its session, then execs CMD (ExecTaskStreaming, tty).
"""

import errno
import json
import os
import signal
import subprocess
import sys
import time

VERSION = "0.1.0"
PLUGIN_NAME = "python"

# The launch handshake (plugins/sdk/handshake.h).
MAGIC_COOKIE_KEY = "BERTH_PLUGIN_MAGIC_COOKIE"
MAGIC_COOKIE_VALUE = (
    "5b3f0c2e8d7a4f61b9e2c7d4a1f08e3b6c5d9a2e7f4b1c8d3e6a9f2b5c8e1d4a")
SOCKET_DIR_ENV = "BERTH_PLUGIN_SOCKET_DIR"
PROTOCOL_VERSIONS_ENV = "BERTH_PLUGIN_PROTOCOL_VERSIONS"
CORE_PROTOCOL_VERSION = 1
APP_PROTOCOL_VERSION = 1
HEALTH_SERVICE_NAME = "plugin"
SOCKET_NAME = PLUGIN_NAME + ".sock"
MAX_SOCKET_PATH_LENGTH = 107  # sockaddr_un.sun_path minus the NUL

# Encoding version of TaskHandle.driver_state (JSON, see _driver_state()).
HANDLE_VERSION = 1
EXIT_FILE = "exit.json"
SPEC_FILE = "spec.json"
DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

SCRIPT = os.path.abspath(__file__)


# ---------------------------------------------------------------------------
# procfs helpers (shared by the driver and the monitor).


def proc_stat_fields(pid):
    """Fields 3.. of /proc/PID/stat (state first), or None if there is none.

    The command name (field 2) may hold spaces and parentheses, so the line is
    split after its last ')'. Index i of the result is field i + 3 of proc(5).
    """
    try:
        with open("/proc/%d/stat" % pid, "rb") as f:
            data = f.read()
    except OSError:
        return None
    return data[data.rfind(b")") + 2:].split()


def proc_start_time(pid):
    """Start time of PID in clock ticks since boot (field 22), or None."""
    fields = proc_stat_fields(pid)
    return int(fields[19]) if fields else None


def proc_is_live(pid, start_time):
    """Whether PID is a running (not zombie) process started at start_time."""
    fields = proc_stat_fields(pid)
    if not fields or fields[0] in (b"Z", b"X", b"x"):
        return False
    return start_time is None or int(fields[19]) == start_time


def boot_id():
    try:
        with open("/proc/sys/kernel/random/boot_id") as f:
            return f.read().strip()
    except OSError:
        return ""


def write_file_atomically(path, data, mode=0o600):
    tmp = "%s.tmp.%d" % (path, os.getpid())
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC,
                 mode)
    try:
        os.write(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)
    os.rename(tmp, path)
    dfd = os.open(os.path.dirname(path), os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(dfd)
    finally:
        os.close(dfd)


# ---------------------------------------------------------------------------
# Helper mode --monitor: one per task, in its own session, outlives the driver.


FORWARDED_SIGNALS = (signal.SIGHUP, signal.SIGINT, signal.SIGTERM,
                     signal.SIGQUIT, signal.SIGUSR1, signal.SIGUSR2)


def monitor_main(task_dir):
    """Starts the task described by TASK_DIR/spec.json and records its end.

    Protocol with the driver: stdout is a pipe to the driver; the monitor
    writes one JSON line, {"pid": N, "start": TICKS} once the task runs or
    {"error": "...", "errno": N} if it could not be started, then lets go of
    the pipe. When the task ends it writes TASK_DIR/exit.json (atomically)
    with the exit code, the signal and the task's rusage, and exits 0.
    Signals the monitor gets (TERM, INT, HUP, QUIT, USR1, USR2) are passed on
    to the task, so that the monitor stands for the task.
    """
    # Ignored signals are inherited across exec: make sure the task gets the
    # default dispositions whatever the driver was started with. (Forwarding
    # handlers are installed once the task runs; handlers reset on exec.)
    for sig in FORWARDED_SIGNALS:
        signal.signal(sig, signal.SIG_DFL)

    def report(obj):
        try:
            os.write(1, (json.dumps(obj) + "\n").encode())
        except OSError:
            pass  # the driver is gone; the exit file is what counts
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, 1)
        os.close(devnull)

    # Become a child subreaper: what the task leaves behind when it forks
    # and exits stays below the monitor (and is reaped by it), not init.
    try:
        import ctypes
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER
    except (OSError, AttributeError):
        pass

    try:
        with open(os.path.join(task_dir, SPEC_FILE)) as f:
            spec = json.load(f)
        stdout = open(os.path.join(task_dir, "stdout.log"), "ab")
        stderr = open(os.path.join(task_dir, "stderr.log"), "ab")
        creds = {}
        if spec.get("uid") is not None:
            creds = dict(user=spec["uid"], group=spec["gid"],
                         extra_groups=spec.get("groups", []))
        proc = subprocess.Popen(
            spec["argv"], env=spec["env"], cwd=spec["cwd"],
            stdin=subprocess.DEVNULL, stdout=stdout, stderr=stderr,
            start_new_session=True, close_fds=True, **creds)
    except OSError as e:
        report({"error": e.strerror or str(e), "errno": e.errno or 0})
        return 1
    except Exception as e:  # a broken spec: say so rather than hang
        report({"error": repr(e), "errno": 0})
        return 1
    stdout.close()
    stderr.close()

    pidfd = None
    try:
        pidfd = os.pidfd_open(proc.pid)
    except OSError:
        pass

    def forward(signum, _frame):
        if pidfd is not None:
            try:
                signal.pidfd_send_signal(pidfd, signum)
            except OSError:
                pass

    for sig in FORWARDED_SIGNALS:
        signal.signal(sig, forward)
    report({"pid": proc.pid, "start": proc_start_time(proc.pid)})
    print("monitor %d: task pid %d started: %s" % (os.getpid(), proc.pid,
                                                   spec["argv"]),
          file=sys.stderr, flush=True)

    # Reap orphans of the task's tree as they come, until the task itself
    # ends (PEP 475: wait4 is retried after a forwarded signal).
    while True:
        try:
            pid, status, rusage = os.wait4(-1, 0)
        except ChildProcessError:  # cannot happen while the task lives
            status, rusage = None, None
            break
        if pid == proc.pid:
            break
    proc.returncode = -1  # so that Popen never tries to reap it again
    if status is None:
        exit_code, signum = -1, 0
    elif os.WIFSIGNALED(status):
        exit_code, signum = 0, os.WTERMSIG(status)
    else:
        exit_code, signum = os.WEXITSTATUS(status), 0
    record = {
        "exit_code": exit_code,
        "signal": signum,
        "core_dumped": bool(status and os.WCOREDUMP(status)),
        "exited_at": time.time(),
    }
    if rusage is not None:
        record.update(utime=rusage.ru_utime, stime=rusage.ru_stime,
                      maxrss_kb=rusage.ru_maxrss)
    try:
        write_file_atomically(os.path.join(task_dir, EXIT_FILE),
                              json.dumps(record).encode(), 0o644)
    except OSError as e:
        print("monitor %d: cannot write %s: %s" % (os.getpid(), EXIT_FILE, e),
              file=sys.stderr, flush=True)
        return 1
    print("monitor %d: task pid %d ended: exit_code=%d signal=%d" %
          (os.getpid(), proc.pid, exit_code, signum), file=sys.stderr,
          flush=True)
    return 0


# ---------------------------------------------------------------------------
# Helper mode --tty-exec: a session leader that takes its stdin as its
# controlling terminal and execs the command.


def tty_exec_main(argv):
    import fcntl
    import termios
    try:
        fcntl.ioctl(0, termios.TIOCSCTTY, 0)
    except OSError as e:
        os.write(2, ("cannot make the pty the controlling terminal: %s\r\n" %
                     e).encode())
        return 126
    try:
        os.execvp(argv[0], argv)
    except OSError as e:
        os.write(2, ("%s: %s\r\n" % (argv[0], e.strerror)).encode())
        return 127 if e.errno == errno.ENOENT else 126


if __name__ == "__main__" and len(sys.argv) > 1:
    if sys.argv[1] == "--monitor" and len(sys.argv) == 3:
        sys.exit(monitor_main(sys.argv[2]))
    if sys.argv[1] == "--tty-exec" and len(sys.argv) > 3 and \
            sys.argv[2] == "--":
        sys.exit(tty_exec_main(sys.argv[3:]))


# ---------------------------------------------------------------------------
# The driver proper. grpc and the stubs are imported by load_api(), once the
# command line and the handshake environment have been checked.

import logging  # noqa: E402
import platform  # noqa: E402
import queue  # noqa: E402
import select  # noqa: E402
import shutil  # noqa: E402
import socket  # noqa: E402
import stat  # noqa: E402
import tempfile  # noqa: E402
import threading  # noqa: E402
from concurrent import futures  # noqa: E402

log = logging.getLogger("berth-python-driver")

grpc = None
json_format = None
duration_pb2 = timestamp_pb2 = None
plugin_pb2 = plugin_pb2_grpc = None
driver_pb2 = driver_pb2_grpc = None
stats_pb2 = health_pb2 = health_pb2_grpc = None


def load_api():
    """Imports grpcio, protobuf and berth's generated stubs.

    The stubs are found on PYTHONPATH first; failing that, in the berth
    checkout this file lives in (api/gen/python, three levels up), following
    a symlink to this file too.
    """
    here = os.path.dirname(os.path.abspath(__file__))
    for base in (here, os.path.dirname(os.path.realpath(__file__))):
        candidate = os.path.normpath(
            os.path.join(base, "..", "..", "..", "api", "gen", "python"))
        if os.path.isdir(candidate) and candidate not in sys.path:
            sys.path.append(candidate)  # after PYTHONPATH: that one wins
    global grpc, json_format, duration_pb2, timestamp_pb2
    global plugin_pb2, plugin_pb2_grpc, driver_pb2, driver_pb2_grpc
    global stats_pb2, health_pb2, health_pb2_grpc
    try:
        import grpc as _grpc
        from google.protobuf import duration_pb2 as _duration_pb2
        from google.protobuf import json_format as _json_format
        from google.protobuf import timestamp_pb2 as _timestamp_pb2
    except ImportError as e:
        sys.exit("berth-python-driver: %s: run it with Debian's "
                 "/usr/bin/python3 and the python3-grpcio and python3-protobuf "
                 "packages" % e)
    try:
        from berth.driver.v1 import driver_pb2 as _driver_pb2
        from berth.driver.v1 import driver_pb2_grpc as _driver_pb2_grpc
        from berth.plugin.v1 import plugin_pb2 as _plugin_pb2
        from berth.plugin.v1 import plugin_pb2_grpc as _plugin_pb2_grpc
        from berth.stats.v1 import stats_pb2 as _stats_pb2
        from grpc_health.v1 import health_pb2 as _health_pb2
        from grpc_health.v1 import health_pb2_grpc as _health_pb2_grpc
    except ImportError as e:
        sys.exit("berth-python-driver: %s: cannot find berth's generated "
                 "Python stubs; set PYTHONPATH to the api/gen/python directory "
                 "of a berth checkout" % e)
    grpc, json_format = _grpc, _json_format
    duration_pb2, timestamp_pb2 = _duration_pb2, _timestamp_pb2
    plugin_pb2, plugin_pb2_grpc = _plugin_pb2, _plugin_pb2_grpc
    driver_pb2, driver_pb2_grpc = _driver_pb2, _driver_pb2_grpc
    stats_pb2 = _stats_pb2
    health_pb2, health_pb2_grpc = _health_pb2, _health_pb2_grpc


class RpcError(Exception):
    """A gRPC status to end a call with; see rpc_method()."""

    def __init__(self, code, message):
        super().__init__(message)
        self.code = code
        self.message = message


def not_found(task_id):
    return RpcError(grpc.StatusCode.NOT_FOUND,
                    'task "%s" not found' % task_id)


def invalid(message):
    return RpcError(grpc.StatusCode.INVALID_ARGUMENT, message)


def precondition(message):
    return RpcError(grpc.StatusCode.FAILED_PRECONDITION, message)


def rpc_method(fn):
    """Turns RpcError into a status, and logs unexpected exceptions once."""

    def wrapper(self, request, context):
        try:
            return fn(self, request, context)
        except RpcError as e:
            context.abort(e.code, e.message)

    wrapper.__name__ = fn.__name__
    wrapper.__doc__ = fn.__doc__
    return wrapper


def rpc_stream(fn):
    """rpc_method for server-streaming methods (generators).

    A stream its caller cancelled simply stops: the generator is closed, its
    finally blocks run, and nothing is logged as an error.
    """

    def wrapper(self, request, context):
        try:
            yield from fn(self, request, context)
        except RpcError as e:
            context.abort(e.code, e.message)

    wrapper.__name__ = fn.__name__
    wrapper.__doc__ = fn.__doc__
    return wrapper


def timestamp(seconds):
    ts = timestamp_pb2.Timestamp()
    ts.FromNanoseconds(int(seconds * 1e9))
    return ts


def duration(seconds):
    d = duration_pb2.Duration()
    d.FromNanoseconds(int(seconds * 1e9))
    return d


def duration_seconds(d):
    return d.seconds + d.nanos / 1e9


def parse_signal(text, field="signal"):
    """A signal by name ("SIGTERM", "TERM", "sigterm") or number ("15")."""
    text = text.strip()
    if text.lstrip("-").isdigit():
        num = int(text)
        if 1 <= num <= signal.SIGRTMAX:
            return num
        raise invalid('%s "%s": not a signal number (1..%d)' %
                      (field, text, signal.SIGRTMAX))
    name = text.upper()
    if not name.startswith("SIG"):
        name = "SIG" + name
    try:
        return int(signal.Signals[name])
    except KeyError:
        raise invalid('%s "%s": no such signal (give a name such as SIGTERM '
                      'or a number)' % (field, text)) from None


def parse_duration_json(text, field):
    """google.protobuf.Duration's JSON form, e.g. "1.5s"."""
    if not isinstance(text, str) or not text.endswith("s"):
        raise invalid('%s: want a duration such as "1.5s", got %s' %
                      (field, json.dumps(text)))
    try:
        value = float(text[:-1])
    except ValueError:
        raise invalid('%s: want a duration such as "1.5s", got %s' %
                      (field, json.dumps(text))) from None
    if value < 0:
        raise invalid("%s: must not be negative" % field)
    return value


def cpu_core_mhz():
    """MHz of one of the host's cores, for total_ticks (0 if unknown)."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.lower().startswith("cpu mhz"):
                    return float(line.split(":", 1)[1])
    except (OSError, ValueError):
        pass
    try:
        with open("/sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq") as f:
            return int(f.read()) / 1000.0
    except (OSError, ValueError):
        return 0.0


CLK_TCK = os.sysconf("SC_CLK_TCK")
PAGE_SIZE = os.sysconf("SC_PAGE_SIZE")


def wait_fd_readable(fd, timeout=None):
    """Waits until FD (a pidfd: the process ended) is readable."""
    poller = select.poll()
    poller.register(fd, select.POLLIN)
    return bool(poller.poll(None if timeout is None else int(timeout * 1000)))


def open_pidfd(pid, start_time):
    """A pidfd for PID if it still is the process started at start_time."""
    try:
        fd = os.pidfd_open(pid)
    except OSError:
        return None
    # Checked after opening: the pidfd pins the process, so a match now
    # means the pidfd refers to the right one and never to a reused pid.
    if start_time is not None and proc_start_time(pid) != start_time:
        os.close(fd)
        return None
    return fd


# ---------------------------------------------------------------------------
# Tasks.


class Task:
    """One task: its configuration, its processes and how it ended."""

    def __init__(self, config, task_dir, cwd, env, creds):
        self.config = config  # driver_pb2.TaskConfig
        self.id = config.id
        self.dir = task_dir
        self.cwd = cwd
        self.env = env
        self.creds = creds  # {} or {"uid", "gid", "groups"}
        self.pid = None
        self.pid_start = None
        self.pidfd = None
        self.monitor_pid = None
        self.monitor_start = None
        self.monitor_pidfd = None
        self.monitor_proc = None  # a Popen when this driver started it
        self.started_at = time.time()
        self.result = None  # the exit record (dict) once it ended
        self.recovered = False
        self.cond = threading.Condition()
        self.destroyed = threading.Event()

    def running(self):
        return self.result is None

    def set_result(self, result):
        with self.cond:
            if self.result is None:
                self.result = result
            self.cond.notify_all()

    def wake(self):
        with self.cond:
            self.cond.notify_all()

    def wait_exit(self, timeout, cancelled=lambda: False):
        """Waits up to timeout (None: forever) for the task to end."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self.cond:
            while self.result is None and not self.destroyed.is_set():
                if cancelled():
                    return False
                left = 1.0 if deadline is None else min(
                    1.0, deadline - time.monotonic())
                if left <= 0:
                    return False
                self.cond.wait(left)
            return self.result is not None

    def exit_result(self):
        r = self.result
        return driver_pb2.ExitResult(exit_code=r["exit_code"],
                                     signal=r["signal"],
                                     exited_at=timestamp(r["exited_at"]))

    def driver_state(self):
        """TaskHandle.driver_state: what RecoverTask needs, as JSON."""
        return json.dumps({
            "task_id": self.id,
            "task_dir": self.dir,
            "cwd": self.cwd,
            "creds": self.creds,
            "pid": self.pid,
            "pid_start": self.pid_start,
            "monitor_pid": self.monitor_pid,
            "monitor_start": self.monitor_start,
            "started_at": self.started_at,
            "boot_id": boot_id(),
        }, sort_keys=True).encode()

    def status(self):
        st = driver_pb2.TaskStatus(
            id=self.id, name=self.config.name,
            state=(driver_pb2.TASK_STATE_RUNNING if self.running()
                   else driver_pb2.TASK_STATE_EXITED),
            started_at=timestamp(self.started_at))
        if not self.running():
            st.completed_at.CopyFrom(timestamp(self.result["exited_at"]))
            st.exit_result.CopyFrom(self.exit_result())
        attrs = st.driver_attributes
        if self.pid:
            attrs["pid"] = str(self.pid)
            attrs["pgid"] = str(self.pid)
        if self.monitor_pid:
            attrs["monitor_pid"] = str(self.monitor_pid)
        attrs["task_dir"] = self.dir
        attrs["cwd"] = self.cwd
        attrs["stdout"] = os.path.join(self.dir, "stdout.log")
        attrs["stderr"] = os.path.join(self.dir, "stderr.log")
        attrs["recovered"] = "true" if self.recovered else "false"
        return st

    def signal_main(self, signum):
        """Signals the task's main process; False if it is gone."""
        if self.pidfd is None:
            return False
        try:
            signal.pidfd_send_signal(self.pidfd, signum)
            return True
        except ProcessLookupError:
            return False

    def kill_group(self, signum=signal.SIGKILL):
        """Signals every process left in the task's process group."""
        if self.pid is None:
            return
        self.signal_main(signum)
        try:
            os.killpg(self.pid, signum)
        except (ProcessLookupError, PermissionError):
            pass

    def close_fds(self):
        for name in ("pidfd", "monitor_pidfd"):
            fd = getattr(self, name)
            if fd is not None:
                setattr(self, name, None)
                try:
                    os.close(fd)
                except OSError:
                    pass


class EventHub:
    """Fans TaskEvents out to every subscriber (bounded, drops the oldest)."""

    def __init__(self):
        self._lock = threading.Lock()
        self._subscribers = set()

    def subscribe(self):
        q = queue.Queue(maxsize=1000)
        with self._lock:
            self._subscribers.add(q)
        return q

    def unsubscribe(self, q):
        with self._lock:
            self._subscribers.discard(q)

    def publish(self, event):
        with self._lock:
            subscribers = list(self._subscribers)
        for q in subscribers:
            while True:
                try:
                    q.put_nowait(event)
                    break
                except queue.Full:
                    try:
                        q.get_nowait()
                    except queue.Empty:
                        pass


class ProcfsSampler:
    """CPU and memory of a task's processes from /proc, between samples.

    The task's processes are those in its session (the task is a session
    leader: its pid is the session id), so the children of a shell count.
    """

    def __init__(self, task, mhz):
        self.task = task
        self.mhz = mhz
        self.prev = None  # (monotonic time, user ticks, system ticks)

    def _session_processes(self):
        sid = self.task.pid
        found = {}
        try:
            entries = os.listdir("/proc")
        except OSError:
            return found
        for entry in entries:
            if not entry.isdigit():
                continue
            fields = proc_stat_fields(int(entry))
            if not fields or int(fields[3]) != sid or fields[0] == b"Z":
                continue
            pid = int(entry)
            rss = swap = None
            try:
                with open("/proc/%d/status" % pid) as f:
                    for line in f:
                        if line.startswith("VmRSS:"):
                            rss = int(line.split()[1]) * 1024
                        elif line.startswith("VmSwap:"):
                            swap = int(line.split()[1]) * 1024
            except (OSError, ValueError):
                continue
            found[pid] = (int(fields[11]), int(fields[12]), rss, swap)
        return found

    def sample(self):
        task = self.task
        now_wall = time.time()
        usage = stats_pb2.TaskResourceUsage(task_id=task.id,
                                            timestamp=timestamp(now_wall),
                                            backend=stats_pb2.BACKEND_PROCFS)
        cpu = usage.usage.cpu
        mem = usage.usage.memory
        if not task.running():
            # The task has ended: what is left is its final rusage, which the
            # monitor recorded (it includes the children it waited for).
            r = task.result
            if "utime" in r:
                cpu.user_mode.CopyFrom(duration(r["utime"]))
                cpu.system_mode.CopyFrom(duration(r["stime"]))
                cpu.usage.CopyFrom(duration(r["utime"] + r["stime"]))
                cpu.measured.extend([stats_pb2.CPU_FIELD_SYSTEM_MODE,
                                     stats_pb2.CPU_FIELD_USER_MODE,
                                     stats_pb2.CPU_FIELD_USAGE])
                mem.max_usage = int(r.get("maxrss_kb", 0)) * 1024
                mem.measured.append(stats_pb2.MEMORY_FIELD_MAX_USAGE)
            cpu.total_ticks = 0.0
            return usage

        now = time.monotonic()
        procs = self._session_processes()
        if not procs:  # it is just ending; the next sample says how
            cpu.total_ticks = 0.0
            return usage
        utime = sum(p[0] for p in procs.values())
        stime = sum(p[1] for p in procs.values())
        cpu.user_mode.CopyFrom(duration(utime / CLK_TCK))
        cpu.system_mode.CopyFrom(duration(stime / CLK_TCK))
        cpu.usage.CopyFrom(duration((utime + stime) / CLK_TCK))
        cpu.measured.extend([stats_pb2.CPU_FIELD_SYSTEM_MODE,
                             stats_pb2.CPU_FIELD_USER_MODE,
                             stats_pb2.CPU_FIELD_USAGE])
        if self.prev is not None and now > self.prev[0]:
            wall = now - self.prev[0]
            # Processes that ended take their ticks with them: never < 0.
            du = max(0, utime - self.prev[1]) / CLK_TCK
            ds = max(0, stime - self.prev[2]) / CLK_TCK
            cpu.user_mode_percent = du / wall * 100.0
            cpu.system_mode_percent = ds / wall * 100.0
            cpu.percent = cpu.user_mode_percent + cpu.system_mode_percent
            cpu.measured.extend([stats_pb2.CPU_FIELD_PERCENT,
                                 stats_pb2.CPU_FIELD_SYSTEM_MODE_PERCENT,
                                 stats_pb2.CPU_FIELD_USER_MODE_PERCENT])
        cpu.total_ticks = cpu.percent / 100.0 * self.mhz
        self.prev = (now, utime, stime)

        rss = [p[2] for p in procs.values() if p[2] is not None]
        swap = [p[3] for p in procs.values() if p[3] is not None]
        if rss:
            mem.rss = sum(rss)
            mem.measured.append(stats_pb2.MEMORY_FIELD_RSS)
        if swap:
            mem.swap = sum(swap)
            mem.measured.append(stats_pb2.MEMORY_FIELD_SWAP)

        for pid, (u, s, prss, pswap) in procs.items():
            pu = usage.processes[pid]
            pu.cpu.user_mode.CopyFrom(duration(u / CLK_TCK))
            pu.cpu.system_mode.CopyFrom(duration(s / CLK_TCK))
            pu.cpu.usage.CopyFrom(duration((u + s) / CLK_TCK))
            pu.cpu.measured.extend([stats_pb2.CPU_FIELD_SYSTEM_MODE,
                                    stats_pb2.CPU_FIELD_USER_MODE,
                                    stats_pb2.CPU_FIELD_USAGE])
            if prss is not None:
                pu.memory.rss = prss
                pu.memory.measured.append(stats_pb2.MEMORY_FIELD_RSS)
            if pswap is not None:
                pu.memory.swap = pswap
                pu.memory.measured.append(stats_pb2.MEMORY_FIELD_SWAP)
        return usage


# ---------------------------------------------------------------------------
# The plugin: state shared by the three services.


class Plugin:

    def __init__(self, socket_dir, socket_path):
        self.socket_dir = socket_dir
        self.socket_path = socket_path
        self.state_dir = os.path.join(socket_dir, "python-state")
        self.default_stop_timeout = 5.0
        self.lock = threading.Lock()
        self.tasks = {}  # id -> Task
        self.starting = set()  # ids whose StartTask/RecoverTask is running
        self.events = EventHub()
        self.shutting_down = threading.Event()
        self.server = None
        self.mhz = cpu_core_mhz()
        self.calls_in_flight = 0
        self.stopped_at = None  # when server.stop() was called

    # -- calls in flight, for Shutdown --------------------------------------

    def count_calls(self, servicer):
        """Wraps the RPC methods of servicer so that calls_in_flight counts
        the calls not yet finished (status sent, or cancelled)."""
        for name in dir(type(servicer)):
            if name[:1].isupper():
                setattr(servicer, name,
                        self._counted(getattr(servicer, name)))
        return servicer

    def _counted(self, method):
        def call(request, context):
            with self.lock:
                self.calls_in_flight += 1
            if not context.add_callback(self._call_done):
                self._call_done()
            return method(request, context)

        call.__name__ = method.__name__
        return call

    def _call_done(self):
        with self.lock:
            self.calls_in_flight -= 1

    def idle(self):
        with self.lock:
            return self.calls_in_flight == 0

    # -- lookups ----------------------------------------------------------

    def task(self, task_id, field="task_id"):
        if not task_id:
            raise invalid("%s is required" % field)
        with self.lock:
            task = self.tasks.get(task_id)
        if task is None:
            raise not_found(task_id)
        return task

    def tasks_root(self):
        root = os.path.join(self.state_dir, "tasks")
        try:
            os.makedirs(root, mode=0o711, exist_ok=True)
        except OSError as e:
            raise RpcError(grpc.StatusCode.FAILED_PRECONDITION,
                           "cannot create the state directory %s: %s" %
                           (root, e.strerror)) from None
        return root

    # -- events -----------------------------------------------------------

    def publish(self, task, message, **annotations):
        ev = driver_pb2.TaskEventsResponse(
            task_id=task.id, allocation_id=task.config.allocation_id,
            timestamp=timestamp(time.time()), message=message)
        for k, v in annotations.items():
            ev.annotations[k] = str(v)
        self.events.publish(ev)

    # -- watching a task end ----------------------------------------------

    def watch(self, task):
        threading.Thread(target=self._watch, args=(task,), daemon=True,
                         name="watch-" + task.id).start()

    def _watch(self, task):
        """Waits for the monitor (or, failing that, the task) to end."""
        try:
            result = None
            if task.monitor_pidfd is not None:
                wait_fd_readable(task.monitor_pidfd)
                if task.monitor_proc is not None:
                    task.monitor_proc.wait()  # reap our own child
                result = self._read_exit_file(task)
                if result is None and task.pidfd is not None:
                    log.warning("task %s: its monitor (pid %d) died before "
                                "the task; waiting for the task's process %d "
                                "itself, its exit status will be unknown",
                                task.id, task.monitor_pid, task.pid)
                    wait_fd_readable(task.pidfd)
                    result = self._read_exit_file(task)
            elif task.pidfd is not None:
                wait_fd_readable(task.pidfd)
                result = self._read_exit_file(task)
            if result is None:
                result = {"exit_code": -1, "signal": 0,
                          "exited_at": time.time(), "lost": True}
                log.warning("task %s: exit status lost (the monitor ended "
                            "without writing %s); reporting exit_code -1",
                            task.id, os.path.join(task.dir, EXIT_FILE))
            task.set_result(result)
            self._log_exit(task, result)
        except Exception:
            log.exception("task %s: watching it failed", task.id)

    def _log_exit(self, task, result):
        if result.get("signal"):
            how = "killed by signal %d" % result["signal"]
        else:
            how = "exited with code %d" % result["exit_code"]
        log.info("task %s %s", task.id, how)
        self.publish(task, "task " + how, state="exited",
                     exit_code=result["exit_code"], signal=result["signal"])

    @staticmethod
    def _read_exit_file(task):
        try:
            with open(os.path.join(task.dir, EXIT_FILE)) as f:
                return json.load(f)
        except (OSError, ValueError):
            return None

    # -- shutdown ---------------------------------------------------------

    def begin_shutdown(self, grace, after=None):
        """Stops serving: calls in flight get `grace` seconds, then are
        cancelled; main() then exits 0. Tasks keep running. `after` is an
        Event the Shutdown call sets once its own response went out, so that
        it is not counted as a call in flight."""
        if self.shutting_down.is_set():
            return
        self.shutting_down.set()
        log.info("shutting down (grace period %.1fs); tasks keep running",
                 grace)
        with self.lock:
            tasks = list(self.tasks.values())
        for task in tasks:
            task.wake()

        def stop():
            if after is not None:
                after.wait(grace)
            self.stopped_at = time.monotonic()
            self.server.stop(grace)

        threading.Thread(target=stop, daemon=True, name="shutdown").start()


# ---------------------------------------------------------------------------
# grpc.health.v1.Health


class HealthServicer:

    def __init__(self, plugin):
        self.plugin = plugin

    def _status(self, service):
        if service not in ("", HEALTH_SERVICE_NAME):
            return None
        if self.plugin.shutting_down.is_set():
            return health_pb2.HealthCheckResponse.NOT_SERVING
        return health_pb2.HealthCheckResponse.SERVING

    def Check(self, request, context):
        status = self._status(request.service)
        if status is None:
            context.abort(grpc.StatusCode.NOT_FOUND,
                          'unknown service "%s" (this plugin answers for '
                          '"%s" and "")' % (request.service,
                                            HEALTH_SERVICE_NAME))
        return health_pb2.HealthCheckResponse(status=status)

    def Watch(self, request, context):
        last = None
        while context.is_active():
            status = self._status(request.service)
            if status is None:
                status = health_pb2.HealthCheckResponse.SERVICE_UNKNOWN
            if status != last:
                yield health_pb2.HealthCheckResponse(status=status)
                last = status
            if status == health_pb2.HealthCheckResponse.NOT_SERVING:
                return  # shutting down: nothing will change any more
            self.plugin.shutting_down.wait(0.5)


# ---------------------------------------------------------------------------
# berth.plugin.v1.PluginService


class PluginServicer:

    def __init__(self, plugin):
        self.plugin = plugin

    def GetPluginInfo(self, request, context):
        return plugin_pb2.GetPluginInfoResponse(
            name=PLUGIN_NAME, type=plugin_pb2.PLUGIN_TYPE_DRIVER,
            plugin_version=VERSION,
            description="runs tasks as plain host processes (example driver "
                        "in Python, no isolation)")

    def GetCapabilities(self, request, context):
        return plugin_pb2.GetCapabilitiesResponse(api_versions=[
            plugin_pb2.ApiVersion(package="berth.plugin.v1", revision=0),
            plugin_pb2.ApiVersion(package="berth.driver.v1", revision=0),
        ])

    def GetConfigSchema(self, request, context):
        F = plugin_pb2.ConfigField
        return plugin_pb2.GetConfigSchemaResponse(
            plugin_config=plugin_pb2.ConfigSchema(fields=[
                F(name="default_stop_timeout",
                  type=plugin_pb2.CONFIG_FIELD_TYPE_DURATION,
                  description="how long StopTask waits after the signal "
                              "before it kills, when the call gives no "
                              "timeout",
                  default_json='"5s"'),
            ]),
            task_config=plugin_pb2.ConfigSchema(fields=[
                F(name="command", type=plugin_pb2.CONFIG_FIELD_TYPE_STRING,
                  required=True,
                  description="the program to run, an absolute path or a "
                              "name looked up on the task's PATH"),
                F(name="args", type=plugin_pb2.CONFIG_FIELD_TYPE_STRING_LIST,
                  description="its arguments", default_json="[]"),
            ]))

    @rpc_method
    def SetConfig(self, request, context):
        config = json_format.MessageToDict(request.config)
        stop_timeout = self.plugin.default_stop_timeout
        for key, value in config.items():
            if key == "default_stop_timeout":
                stop_timeout = parse_duration_json(
                    value, "config.default_stop_timeout")
            else:
                raise invalid('config: unknown field "%s" (this plugin '
                              'accepts: default_stop_timeout)' % key)
        self.plugin.default_stop_timeout = stop_timeout
        if request.node.state_dir:
            if not os.path.isabs(request.node.state_dir):
                raise invalid('node.state_dir "%s" is not an absolute path' %
                              request.node.state_dir)
            self.plugin.state_dir = os.path.join(request.node.state_dir,
                                                 PLUGIN_NAME)
        log.info("configured: state directory %s, default stop timeout "
                 "%.1fs", self.plugin.state_dir, stop_timeout)
        return plugin_pb2.SetConfigResponse()

    def Shutdown(self, request, context):
        grace = 2.0
        if request.HasField("grace_period"):
            grace = max(0.0, duration_seconds(request.grace_period))
        sent = threading.Event()
        context.add_callback(sent.set)
        self.plugin.begin_shutdown(grace, after=sent)
        return plugin_pb2.ShutdownResponse()


# ---------------------------------------------------------------------------
# berth.driver.v1.DriverService


TASK_CONFIG_FIELDS = ("command", "args")
SHUTTING_DOWN = "the python driver is shutting down"


class DriverServicer:

    def __init__(self, plugin):
        self.plugin = plugin

    # -- capabilities and fingerprint -------------------------------------

    def GetCapabilities(self, request, context):
        return driver_pb2.GetCapabilitiesResponse(
            capabilities=driver_pb2.DriverCapabilities(
                send_signals=True, exec=True, exec_streaming=True,
                exec_tty=True, fs_isolation=driver_pb2.FS_ISOLATION_NONE,
                network_isolation_modes=[
                    driver_pb2.NETWORK_ISOLATION_MODE_HOST],
                must_create_network=False, recover=True, stats=True))

    def Fingerprint(self, request, context):
        import google.protobuf
        attrs = {
            "driver.python.version": platform.python_version(),
            "driver.python.implementation": platform.python_implementation(),
            "driver.python.grpcio_version": grpc.__version__,
            "driver.python.protobuf_version": google.protobuf.__version__,
            "driver.version": VERSION,
            "kernel.name": platform.system().lower(),
            "kernel.version": platform.release(),
            "cpu.arch": platform.machine(),
            "cpu.numcores": str(os.cpu_count() or 0),
            "cpu.core_mhz": "%.0f" % self.plugin.mhz,
        }
        yield driver_pb2.FingerprintResponse(
            health=driver_pb2.HEALTH_STATE_HEALTHY,
            health_description="ready: tasks run as host processes",
            attributes=attrs)
        # Nothing the driver depends on changes: hold the stream open until
        # the caller cancels it (or the plugin shuts down).
        while context.is_active() and not self.plugin.shutting_down.is_set():
            self.plugin.shutting_down.wait(1.0)
        if self.plugin.shutting_down.is_set():
            context.abort(grpc.StatusCode.UNAVAILABLE, SHUTTING_DOWN)

    # -- starting ---------------------------------------------------------

    def _check_config(self, cfg):
        if not cfg.id:
            raise invalid("task.id is required")
        dc = json_format.MessageToDict(cfg.driver_config)
        for key in dc:
            if key not in TASK_CONFIG_FIELDS:
                raise invalid('driver_config: unknown field "%s" (the python '
                              'driver accepts: %s)' %
                              (key, ", ".join(TASK_CONFIG_FIELDS)))
        command = dc.get("command")
        if not isinstance(command, str) or not command:
            raise invalid('driver_config.command is required: the program to '
                          'run, e.g. {"command": "/bin/sh", "args": ["-c", '
                          '"echo hi"]}')
        args = dc.get("args", [])
        if not isinstance(args, list) or \
                not all(isinstance(a, str) for a in args):
            raise invalid("driver_config.args must be a list of strings")
        mode = cfg.network.mode
        if mode not in (driver_pb2.NETWORK_ISOLATION_MODE_UNSPECIFIED,
                        driver_pb2.NETWORK_ISOLATION_MODE_HOST):
            raise invalid("network.mode %s: the python driver runs tasks in "
                          "the host's network only" %
                          driver_pb2.NetworkIsolationMode.Name(mode))
        if cfg.task_dir and not os.path.isdir(cfg.task_dir):
            raise invalid('task_dir "%s" is not a directory' % cfg.task_dir)
        return [command] + args, self._credentials(cfg)

    @staticmethod
    def _credentials(cfg):
        if not cfg.user and not cfg.group:
            return {}
        import grp
        import pwd
        creds = {"uid": os.getuid(), "gid": os.getgid(), "groups": [],
                 "home": None, "name": None}
        if cfg.user:
            try:
                pw = (pwd.getpwuid(int(cfg.user)) if cfg.user.isdigit()
                      else pwd.getpwnam(cfg.user))
            except (KeyError, ValueError):
                raise invalid('user "%s": no such user' % cfg.user) from None
            creds.update(uid=pw.pw_uid, gid=pw.pw_gid, home=pw.pw_dir,
                         name=pw.pw_name,
                         groups=os.getgrouplist(pw.pw_name, pw.pw_gid))
        if cfg.group:
            try:
                gr = (grp.getgrgid(int(cfg.group)) if cfg.group.isdigit()
                      else grp.getgrnam(cfg.group))
            except (KeyError, ValueError):
                raise invalid('group "%s": no such group' % cfg.group) from None
            creds["gid"] = gr.gr_gid
        if os.getuid() != 0 and creds["uid"] != os.getuid():
            raise invalid('user "%s": the driver does not run as root and '
                          'cannot run tasks as another user' % cfg.user)
        return creds

    @staticmethod
    def _task_env(cfg, task_dir, creds):
        """The task's environment: a default PATH, TaskConfig.env, and the
        BERTH_TASK_* facts. Nothing of the driver's own environment (which
        holds the plugin cookie) is passed on."""
        env = {"PATH": DEFAULT_PATH}
        if creds.get("home"):
            env["HOME"] = creds["home"]
            env["USER"] = env["LOGNAME"] = creds["name"]
        env.update(cfg.env)
        env.setdefault("BERTH_TASK_ID", cfg.id)
        env.setdefault("BERTH_TASK_NAME", cfg.name)
        env.setdefault("BERTH_ALLOC_ID", cfg.allocation_id)
        env.setdefault("BERTH_TASK_DIR", task_dir)
        return env

    @rpc_method
    def StartTask(self, request, context):
        plugin = self.plugin
        cfg = request.task
        argv, creds = self._check_config(cfg)
        with plugin.lock:
            if cfg.id in plugin.tasks or cfg.id in plugin.starting:
                raise RpcError(grpc.StatusCode.ALREADY_EXISTS,
                               'task "%s" already exists' % cfg.id)
            plugin.starting.add(cfg.id)
        try:
            task = self._spawn(cfg, argv, creds)
            with plugin.lock:
                plugin.tasks[cfg.id] = task
        finally:
            with plugin.lock:
                plugin.starting.discard(cfg.id)
        log.info("task %s started: pid %d (monitor %d) running %s", task.id,
                 task.pid, task.monitor_pid, argv)
        plugin.publish(task, "task started", state="running", pid=task.pid)
        plugin.watch(task)
        handle = driver_pb2.TaskHandle(version=HANDLE_VERSION, config=cfg,
                                       state=driver_pb2.TASK_STATE_RUNNING,
                                       driver_state=task.driver_state())
        return driver_pb2.StartTaskResponse(handle=handle)

    def _spawn(self, cfg, argv, creds):
        """Makes the task's directory and starts its monitor, which starts
        the task. On failure nothing is left behind."""
        safe = "".join(c if c.isalnum() or c in "-_." else "_"
                       for c in cfg.id)[:64].lstrip(".") or "task"
        task_dir = tempfile.mkdtemp(prefix=safe + ".",
                                    dir=self.plugin.tasks_root())
        monitor = task = None
        try:
            work = os.path.join(task_dir, "work")
            os.mkdir(work, 0o755)
            if creds:
                os.chmod(task_dir, 0o711)  # the user reaches work/ only
                os.chown(work, creds["uid"], creds["gid"])
            cwd = cfg.task_dir or work
            env = self._task_env(cfg, task_dir, creds)
            spec = {"argv": argv, "env": env, "cwd": cwd}
            if creds:
                spec.update(uid=creds["uid"], gid=creds["gid"],
                            groups=creds["groups"])
            write_file_atomically(os.path.join(task_dir, SPEC_FILE),
                                  json.dumps(spec).encode(), 0o600)
            task = Task(cfg, task_dir, cwd, env, creds)
            with open(os.path.join(task_dir, "monitor.log"), "ab") as mlog:
                monitor = subprocess.Popen(
                    [sys.executable, "-I", SCRIPT, "--monitor", task_dir],
                    stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                    stderr=mlog, start_new_session=True, close_fds=True)
            task.monitor_proc = monitor
            task.monitor_pid = monitor.pid
            task.monitor_start = proc_start_time(monitor.pid)
            task.monitor_pidfd = os.pidfd_open(monitor.pid)
            report = self._read_report(monitor, task_dir)
            if "error" in report:
                monitor.wait()
                code = grpc.StatusCode.INVALID_ARGUMENT
                if report.get("errno") not in (errno.ENOENT, errno.EACCES,
                                               errno.ENOEXEC, errno.ENOTDIR):
                    code = grpc.StatusCode.FAILED_PRECONDITION
                raise RpcError(code, 'driver_config.command "%s": cannot '
                               'start it: %s' % (argv[0], report["error"]))
            task.pid = report["pid"]
            task.pid_start = report["start"]
            task.pidfd = open_pidfd(task.pid, task.pid_start)
            return task
        except BaseException:
            if monitor is not None and monitor.poll() is None:
                try:
                    os.killpg(monitor.pid, signal.SIGKILL)
                except OSError:
                    pass
                monitor.wait()
            if task is not None:
                task.close_fds()
            shutil.rmtree(task_dir, ignore_errors=True)
            raise

    @staticmethod
    def _read_report(monitor, task_dir, timeout=30.0):
        fd = monitor.stdout.fileno()
        data = b""
        deadline = time.monotonic() + timeout
        while not data.endswith(b"\n"):
            left = deadline - time.monotonic()
            if left <= 0 or not wait_fd_readable(fd, left):
                raise RpcError(grpc.StatusCode.DEADLINE_EXCEEDED,
                               "the task's monitor (pid %d) did not report "
                               "within %.0fs; see %s" %
                               (monitor.pid, timeout,
                                os.path.join(task_dir, "monitor.log")))
            chunk = os.read(fd, 4096)
            if not chunk:
                break
            data += chunk
        monitor.stdout.close()
        try:
            return json.loads(data)
        except ValueError:
            try:
                with open(os.path.join(task_dir, "monitor.log")) as f:
                    why = f.read().strip()[-500:]
            except OSError:
                why = ""
            raise RpcError(grpc.StatusCode.INTERNAL,
                           "the task's monitor failed: %s" %
                           (why or "no report")) from None

    # -- waiting, stopping, destroying --------------------------------------

    @rpc_method
    def WaitTask(self, request, context):
        task = self.plugin.task(request.task_id)
        context.add_callback(task.wake)
        plugin = self.plugin
        task.wait_exit(None, lambda: not context.is_active() or
                       plugin.shutting_down.is_set())
        if task.running():
            if plugin.shutting_down.is_set():
                raise RpcError(grpc.StatusCode.UNAVAILABLE,
                               '%s; task "%s" keeps running' %
                               (SHUTTING_DOWN, task.id))
            if task.destroyed.is_set():
                raise not_found(task.id)
            return driver_pb2.WaitTaskResponse()  # cancelled: nobody reads it
        return driver_pb2.WaitTaskResponse(result=task.exit_result())

    @rpc_method
    def StopTask(self, request, context):
        task = self.plugin.task(request.task_id)
        signum = parse_signal(request.signal or "SIGTERM")
        timeout = self.plugin.default_stop_timeout
        if request.HasField("timeout"):
            timeout = max(0.0, duration_seconds(request.timeout))
        if not task.running():
            return driver_pb2.StopTaskResponse()
        log.info("task %s: stopping with signal %d, killing after %.1fs",
                 task.id, signum, timeout)
        task.signal_main(signum)
        if not task.wait_exit(timeout):
            log.info("task %s did not stop within %.1fs: killing it", task.id,
                     timeout)
            task.kill_group(signal.SIGKILL)
            if not task.wait_exit(10.0):
                raise RpcError(grpc.StatusCode.DEADLINE_EXCEEDED,
                               'task "%s" did not end 10s after SIGKILL' %
                               task.id)
        else:
            # The main process ended: kill what it left in its group.
            try:
                os.killpg(task.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError, TypeError):
                pass
        return driver_pb2.StopTaskResponse()

    @rpc_method
    def DestroyTask(self, request, context):
        plugin = self.plugin
        task = plugin.task(request.task_id)
        if task.running():
            if not request.force:
                raise precondition('task "%s" is running: stop it first, or '
                                   'destroy it with force' % task.id)
            task.kill_group(signal.SIGKILL)
            if not task.wait_exit(10.0):
                raise RpcError(grpc.StatusCode.DEADLINE_EXCEEDED,
                               'task "%s" did not end 10s after SIGKILL' %
                               task.id)
        with plugin.lock:
            if plugin.tasks.get(task.id) is not task:
                raise not_found(task.id)
            del plugin.tasks[task.id]
        task.destroyed.set()
        task.wake()
        task.close_fds()
        shutil.rmtree(task.dir, ignore_errors=True)
        log.info("task %s destroyed", task.id)
        plugin.publish(task, "task destroyed", state="destroyed")
        return driver_pb2.DestroyTaskResponse()

    @rpc_method
    def InspectTask(self, request, context):
        task = self.plugin.task(request.task_id)
        return driver_pb2.InspectTaskResponse(status=task.status())

    # -- recovery ----------------------------------------------------------

    @rpc_method
    def RecoverTask(self, request, context):
        plugin = self.plugin
        handle = request.handle
        cfg = handle.config
        if not cfg.id:
            raise invalid("handle.config.id is required")
        with plugin.lock:
            known = plugin.tasks.get(cfg.id)
            if known is None:
                if cfg.id in plugin.starting:
                    raise RpcError(grpc.StatusCode.ABORTED,
                                   'task "%s" is being started or recovered '
                                   'right now' % cfg.id)
                plugin.starting.add(cfg.id)
        if known is not None:  # already ours: nothing to re-adopt
            return driver_pb2.RecoverTaskResponse(status=known.status())
        try:
            task = self._recover(handle)
            with plugin.lock:
                plugin.tasks[cfg.id] = task
        finally:
            with plugin.lock:
                plugin.starting.discard(cfg.id)
        if task.running():
            log.info("task %s recovered: pid %d still runs", task.id, task.pid)
            plugin.publish(task, "task recovered", state="running",
                           pid=task.pid)
            plugin.watch(task)
        else:
            log.info("task %s recovered: it ended while the driver was away",
                     task.id)
            plugin.publish(task, "task recovered after it ended",
                           state="exited", exit_code=task.result["exit_code"],
                           signal=task.result["signal"])
        return driver_pb2.RecoverTaskResponse(status=task.status())

    def _recover(self, handle):
        cfg = handle.config
        if handle.version != HANDLE_VERSION:
            raise invalid("handle.version %d: the python driver reads "
                          "version %d" % (handle.version, HANDLE_VERSION))
        try:
            st = json.loads(handle.driver_state)
            task_dir = st["task_dir"]
            pid, pid_start = int(st["pid"]), st["pid_start"]
            mpid, mstart = int(st["monitor_pid"]), st["monitor_start"]
        except (ValueError, KeyError, TypeError):
            raise invalid("handle.driver_state is not a python driver "
                          "state") from None
        if st.get("task_id") != cfg.id:
            raise invalid('handle.driver_state belongs to task "%s", not '
                          'task "%s"' % (st.get("task_id"), cfg.id))
        task = Task(cfg, task_dir, st.get("cwd") or task_dir, None,
                    st.get("creds") or {})
        task.env = self._task_env(cfg, task_dir, task.creds)
        task.pid, task.pid_start = pid, pid_start
        task.monitor_pid, task.monitor_start = mpid, mstart
        task.started_at = st.get("started_at", task.started_at)
        task.recovered = True

        result = Plugin._read_exit_file(task)
        if result is not None:
            task.set_result(result)
            return task
        same_boot = st.get("boot_id") in (None, "", boot_id())
        if same_boot:
            task.monitor_pidfd = open_pidfd(mpid, mstart)
            if task.monitor_pidfd is not None and \
                    not proc_is_live(mpid, mstart):
                os.close(task.monitor_pidfd)
                task.monitor_pidfd = None
            task.pidfd = open_pidfd(pid, pid_start)
            if task.pidfd is not None and not proc_is_live(pid, pid_start):
                os.close(task.pidfd)
                task.pidfd = None
        # The monitor may have finished between the first look and now.
        result = Plugin._read_exit_file(task)
        if result is not None:
            task.close_fds()
            task.set_result(result)
            return task
        if task.monitor_pidfd is not None or task.pidfd is not None:
            return task
        if not same_boot:
            raise precondition('task "%s": the node rebooted since it '
                               'started; its process %d is gone and left no '
                               'exit status' % (cfg.id, pid))
        now = proc_start_time(pid)
        if now is not None and now != pid_start:
            raise precondition('task "%s": pid %d was reused by another '
                               'process (start time %d, the task\'s was %s); '
                               'the task is gone and left no exit status' %
                               (cfg.id, pid, now, pid_start))
        raise precondition('task "%s": its process %d is gone and left no '
                           'exit status in %s' % (cfg.id, pid, task_dir))

    # -- signals, events, stats --------------------------------------------

    @rpc_method
    def SignalTask(self, request, context):
        task = self.plugin.task(request.task_id)
        if not request.signal:
            raise invalid("signal is required (a name such as SIGHUP or a "
                          "number)")
        signum = parse_signal(request.signal)
        if not task.running() or not task.signal_main(signum):
            raise precondition('task "%s" has exited; there is nothing to '
                               'signal' % task.id)
        log.info("task %s: sent signal %d", task.id, signum)
        return driver_pb2.SignalTaskResponse()

    def TaskEvents(self, request, context):
        plugin = self.plugin
        q = plugin.events.subscribe()
        try:
            # First where every known task stands, so that a subscriber that
            # comes late still hears of every task; then events as they come.
            with plugin.lock:
                tasks = list(plugin.tasks.values())
            for task in tasks:
                if task.running():
                    msg, state = "task is running", "running"
                else:
                    msg, state = "task has exited", "exited"
                yield driver_pb2.TaskEventsResponse(
                    task_id=task.id, allocation_id=task.config.allocation_id,
                    timestamp=timestamp(time.time()), message=msg,
                    annotations={"state": state, "snapshot": "true"})
            while context.is_active() and not plugin.shutting_down.is_set():
                try:
                    yield q.get(timeout=0.5)
                except queue.Empty:
                    pass
        finally:
            plugin.events.unsubscribe(q)
        if plugin.shutting_down.is_set():
            context.abort(grpc.StatusCode.UNAVAILABLE, SHUTTING_DOWN)

    @rpc_stream
    def TaskStats(self, request, context):
        plugin = self.plugin
        task = plugin.task(request.task_id)
        interval = 1.0
        if request.HasField("interval"):
            interval = duration_seconds(request.interval)
            if interval < 0:
                raise invalid("interval must not be negative")
            if interval == 0:
                interval = 1.0
            interval = max(interval, 0.01)
        sampler = ProcfsSampler(task, plugin.mhz)
        while (context.is_active() and not task.destroyed.is_set() and
               not plugin.shutting_down.is_set()):
            yield driver_pb2.TaskStatsResponse(usage=sampler.sample())
            task.destroyed.wait(interval)
        # Destroyed: the stream ends OK. Cancelled: nobody is listening.
        if plugin.shutting_down.is_set() and not task.destroyed.is_set():
            raise RpcError(grpc.StatusCode.UNAVAILABLE, SHUTTING_DOWN)

    # -- exec ----------------------------------------------------------------

    def _exec_task(self, task_id, command, field):
        task = self.plugin.task(task_id, field)
        if not command:
            raise invalid("command is required: the program and its arguments")
        if not task.running():
            raise precondition('task "%s" has exited; cannot exec into it' %
                               task.id)
        return task

    @staticmethod
    def _creds_kwargs(task):
        if not task.creds:
            return {}
        return dict(user=task.creds["uid"], group=task.creds["gid"],
                    extra_groups=task.creds.get("groups", []))

    @rpc_method
    def ExecTask(self, request, context):
        task = self._exec_task(request.task_id, list(request.command),
                               "task_id")
        deadline = None
        if request.HasField("timeout"):
            deadline = time.monotonic() + duration_seconds(request.timeout)
        try:
            proc = subprocess.Popen(
                list(request.command), env=task.env, cwd=task.cwd,
                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                stderr=subprocess.PIPE, start_new_session=True,
                close_fds=True, **self._creds_kwargs(task))
        except OSError as e:
            code = 127 if e.errno == errno.ENOENT else 126
            return driver_pb2.ExecTaskResponse(
                stderr=("%s: %s\n" % (request.command[0],
                                      e.strerror)).encode(),
                result=driver_pb2.ExitResult(exit_code=code,
                                             exited_at=timestamp(time.time())))
        killed = False
        while True:
            try:
                out, err = proc.communicate(timeout=0.25)
                break
            except subprocess.TimeoutExpired:
                if killed:
                    continue
                if (not context.is_active() or
                        (deadline is not None and
                         time.monotonic() >= deadline)):
                    killed = True
                    try:
                        os.killpg(proc.pid, signal.SIGKILL)
                    except OSError:
                        pass
        rc = proc.returncode
        result = driver_pb2.ExitResult(exited_at=timestamp(time.time()))
        if rc < 0:
            result.signal = -rc
        else:
            result.exit_code = rc
        return driver_pb2.ExecTaskResponse(stdout=out, stderr=err,
                                           result=result)

    def ExecTaskStreaming(self, request_iterator, context):
        try:
            first = next(request_iterator)
        except StopIteration:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT,
                          "setup: the first request must carry the setup")
        if first.WhichOneof("frame") != "setup":
            context.abort(grpc.StatusCode.INVALID_ARGUMENT,
                          "setup: the first request must carry the setup, "
                          "not %s" % first.WhichOneof("frame"))
        setup = first.setup
        try:
            task = self._exec_task(setup.task_id, list(setup.command),
                                   "setup.task_id")
        except RpcError as e:
            context.abort(e.code, e.message)
        session = ExecSession(self, task, setup, request_iterator, context)
        try:
            session.start()
        except RpcError as e:
            context.abort(e.code, e.message)
        yield from session.responses()

    # -- networks --------------------------------------------------------------

    def CreateNetwork(self, request, context):
        context.abort(grpc.StatusCode.UNIMPLEMENTED,
                      "the python driver does not create networks "
                      "(must_create_network is false)")

    def DestroyNetwork(self, request, context):
        context.abort(grpc.StatusCode.UNIMPLEMENTED,
                      "the python driver does not create networks "
                      "(must_create_network is false)")


CHUNK = 32 * 1024


class ExecSession:
    """One ExecTaskStreaming call: a command with pipes or a pty.

    One thread feeds the request stream (stdin, stdin close, resize) to the
    command; one thread reads its output into a bounded queue, which the
    response generator drains, so a slow caller slows the command (gRPC flow
    control) and nothing piles up. The exit frame is sent only after both
    outputs reached end-of-file.
    """

    def __init__(self, servicer, task, setup, requests, context):
        self.servicer = servicer
        self.task = task
        self.setup = setup
        self.requests = requests
        self.context = context
        self.tty = setup.tty
        self.proc = None
        self.stdin_fd = None
        self.out_fds = {}  # fd -> "stdout" | "stderr"
        self.master = None
        self.out = queue.Queue(maxsize=16)
        self.done = threading.Event()
        self.stdin_lock = threading.Lock()
        self.users = 2  # the two pumps, see _release()

    def start(self):
        command = list(self.setup.command)
        env = dict(self.task.env)
        if self.tty:
            env.setdefault("TERM", "xterm")
        kwargs = dict(env=env, cwd=self.task.cwd,
                      start_new_session=True, close_fds=True,
                      **DriverServicer._creds_kwargs(self.task))
        try:
            if self.tty:
                import pty
                master, slave = pty.openpty()
                try:
                    if self.setup.HasField("terminal_size"):
                        self._resize(master, self.setup.terminal_size)
                    self.proc = subprocess.Popen(
                        [sys.executable, "-I", SCRIPT, "--tty-exec", "--"] +
                        command, stdin=slave, stdout=slave, stderr=slave,
                        **kwargs)
                finally:
                    os.close(slave)
                self.master = master
                self.stdin_fd = master
                self.out_fds = {master: "stdout"}
            else:
                self.proc = subprocess.Popen(
                    command, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE, **kwargs)
                self.stdin_fd = self.proc.stdin.fileno()
                self.out_fds = {self.proc.stdout.fileno(): "stdout",
                                self.proc.stderr.fileno(): "stderr"}
        except OSError as e:
            if self.master is not None:
                os.close(self.master)
            self.proc = None
            self.start_error = e
        else:
            self.start_error = None
            self.context.add_callback(self._on_rpc_done)
            threading.Thread(target=self._pump_in, daemon=True,
                             name="exec-in").start()
            threading.Thread(target=self._pump_out, daemon=True,
                             name="exec-out").start()

    def responses(self):
        R = driver_pb2.ExecTaskStreamingResponse
        if self.start_error is not None:
            e = self.start_error
            yield R(stderr=("%s: %s\n" % (self.setup.command[0],
                                          e.strerror)).encode())
            yield R(exit=driver_pb2.ExitResult(
                exit_code=127 if e.errno == errno.ENOENT else 126,
                exited_at=timestamp(time.time())))
            return
        try:
            while True:
                item = self.out.get()
                if item is None:
                    break
                yield item
            rc = self.proc.wait()
            result = driver_pb2.ExitResult(exited_at=timestamp(time.time()))
            if rc < 0:
                result.signal = -rc
            else:
                result.exit_code = rc
            yield R(exit=result)
        finally:
            self._kill()  # cancelled (or done): never leave the command

    def _on_rpc_done(self):
        self.done.set()
        self._kill()
        # Unblock the output thread if it waits for room in the queue.
        try:
            while True:
                self.out.get_nowait()
        except queue.Empty:
            pass

    def _kill(self):
        if self.proc is not None and self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except OSError:
                pass

    @staticmethod
    def _resize(fd, size):
        import fcntl
        import struct
        import termios
        fcntl.ioctl(fd, termios.TIOCSWINSZ,
                    struct.pack("HHHH", size.rows, size.columns, 0, 0))

    def _close_stdin(self, last_byte):
        with self.stdin_lock:
            if self.stdin_fd is None:
                return
            if self.tty:
                # A terminal has no end of its input: send the EOF character
                # (twice if a partial line is pending, as a user would).
                eof = b"\x04" if last_byte in (b"", b"\n") else b"\x04\x04"
                try:
                    os.write(self.master, eof)
                except OSError:
                    pass
            else:
                try:
                    self.proc.stdin.close()
                except OSError:
                    pass
            self.stdin_fd = None

    def _pump_in(self):
        last = b""
        try:
            for req in self.requests:
                frame = req.WhichOneof("frame")
                if frame == "stdin":
                    data = req.stdin
                    with self.stdin_lock:
                        fd = self.stdin_fd
                    if fd is None or not data:
                        continue
                    try:
                        view = memoryview(data)
                        while view:
                            n = os.write(fd, view)
                            view = view[n:]
                        last = data[-1:]
                    except OSError:
                        # The command closed its stdin or ended: drop the
                        # rest, but keep reading for resizes and the end.
                        self._close_stdin(b"\n")
                elif frame == "stdin_close":
                    self._close_stdin(last)
                elif frame == "resize":
                    if self.tty:
                        try:  # the kernel sends SIGWINCH to the command
                            self._resize(self.master, req.resize)
                        except OSError:
                            pass
                elif frame == "setup":
                    log.warning("exec into task %s: a second setup was "
                                "ignored", self.task.id)
        except Exception:
            pass  # the call ended (cancelled or failed): _on_rpc_done kills
        finally:
            self._close_stdin(last)  # the caller half-closed, or is gone
            self._release()

    def _release(self):
        """Called by each pump when it ends; the last one closes the pty."""
        with self.stdin_lock:
            self.users -= 1
            last = self.users == 0
        if last and self.master is not None:
            try:
                os.close(self.master)
            except OSError:
                pass

    def _pump_out(self):
        R = driver_pb2.ExecTaskStreamingResponse
        fds = dict(self.out_fds)
        poller = select.poll()
        for fd in fds:
            poller.register(fd, select.POLLIN | select.POLLHUP)
        idle_since_exit = None
        try:
            while fds and not self.done.is_set():
                events = poller.poll(200)
                if not events:
                    # Output still open after the command ended (a child
                    # holds it): give up after 2s of silence.
                    if self.proc.poll() is not None:
                        idle_since_exit = idle_since_exit or time.monotonic()
                        if time.monotonic() - idle_since_exit > 2.0:
                            break
                    continue
                idle_since_exit = None
                for fd, _ in events:
                    if fd not in fds:
                        continue
                    try:
                        data = os.read(fd, CHUNK)
                    except OSError as e:
                        if e.errno != errno.EIO:  # EIO: pty closed
                            raise
                        data = b""
                    if not data:
                        poller.unregister(fd)
                        del fds[fd]
                        continue
                    frame = R(**{fds[fd]: data})
                    while not self.done.is_set():
                        try:
                            self.out.put(frame, timeout=0.5)
                            break
                        except queue.Full:
                            pass
        except Exception:
            log.exception("exec into task %s: reading output failed",
                          self.task.id)
            self._kill()
        finally:
            for f in (self.proc.stdout, self.proc.stderr):
                if f is not None:
                    f.close()
            self._release()
            if self.done.is_set():  # the call ended: the command was killed
                try:
                    self.proc.wait(10)  # reap it
                except subprocess.TimeoutExpired:
                    pass
            else:
                self.proc.wait()
                while True:
                    try:
                        self.out.put(None, timeout=0.5)
                        break
                    except queue.Full:
                        if self.done.is_set():
                            break


# ---------------------------------------------------------------------------
# Start-up: the handshake.

USAGE = """\
usage: berth_python_driver.py [--help] [--version]

A berth task driver plugin in Python: berth-node starts it and talks to it
over a Unix socket (the plugin launch handshake); it is not run by hand.

The host sets in its environment:
  %s   the magic cookie that marks a launch by a host
  %s     the directory to put the socket %s in
  %s  app protocol versions the host speaks (must include %d)

The plugin then prints one line on stdout, CORE|APP|unix|SOCKET|grpc, and
logs on stderr. To test it, run the driver conformance suite:
  berth-driver-conformance --plugin=%s
""" % (MAGIC_COOKIE_KEY, SOCKET_DIR_ENV, SOCKET_NAME, PROTOCOL_VERSIONS_ENV,
       APP_PROTOCOL_VERSION, SCRIPT)


def not_launched_by_host_message(binary):
    return ("%s is a berth plugin: berth-node starts it and talks to it over "
            "a Unix socket. Running it by hand does nothing. To test a "
            "driver, run berth-driver-conformance --plugin=%s\n" %
            (binary, binary))


def prepare_socket(socket_dir):
    """Checks the socket directory and path; removes a stale socket.

    Returns the socket path, or exits 1 with a message naming what is wrong.
    """
    path = os.path.join(socket_dir, SOCKET_NAME)
    if len(path.encode()) > MAX_SOCKET_PATH_LENGTH:
        die("socket path %s is %d bytes, longer than a Unix socket allows "
            "(%d); set %s to a shorter directory" %
            (path, len(path.encode()), MAX_SOCKET_PATH_LENGTH, SOCKET_DIR_ENV))
    if not os.path.isdir(socket_dir):
        try:
            os.makedirs(socket_dir, mode=0o750)
            os.chmod(socket_dir, 0o750)
        except OSError as e:
            die("%s=%s: cannot create the directory: %s" %
                (SOCKET_DIR_ENV, socket_dir, e.strerror))
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return path
    except OSError as e:
        die("cannot check socket %s: %s" % (path, e.strerror))
    if not stat.S_ISSOCK(st.st_mode):
        die("%s exists and is not a socket; not touching it" % path)
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    probe.settimeout(1.0)
    try:
        probe.connect(path)
    except (ConnectionRefusedError, FileNotFoundError):
        log.info("removing stale socket %s (nobody listens on it)", path)
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass
        return path
    except OSError as e:
        if e.errno != errno.EAGAIN:
            die("cannot probe socket %s: %s" % (path, e.strerror))
    finally:
        probe.close()
    die("socket %s is in use by another process; not taking it over" % path)


def die(message):
    sys.stderr.write("berth-python-driver: %s\n" % message)
    sys.stderr.flush()
    sys.exit(1)


def main(argv):
    if len(argv) > 1:
        if argv[1] in ("-h", "--help"):
            sys.stdout.write(USAGE)
            return 0
        if argv[1] == "--version":
            print("berth-python-driver %s (berth plugin protocol %d|%d)" %
                  (VERSION, CORE_PROTOCOL_VERSION, APP_PROTOCOL_VERSION))
            return 0
        sys.stderr.write("berth-python-driver: unknown argument %s\n\n%s" %
                         (argv[1], USAGE))
        return 2

    if os.environ.get(MAGIC_COOKIE_KEY) != MAGIC_COOKIE_VALUE:
        sys.stderr.write(not_launched_by_host_message(SCRIPT))
        return 1
    socket_dir = os.environ.get(SOCKET_DIR_ENV, "")
    if not socket_dir:
        die("%s is not set: the host must say which directory to put the "
            "plugin's socket in (there is no default)" % SOCKET_DIR_ENV)
    socket_dir = os.path.abspath(socket_dir)
    versions = os.environ.get(PROTOCOL_VERSIONS_ENV, "")
    if versions and str(APP_PROTOCOL_VERSION) not in \
            [v.strip() for v in versions.split(",")]:
        die("%s=%s: this plugin speaks app protocol version %d only" %
            (PROTOCOL_VERSIONS_ENV, versions, APP_PROTOCOL_VERSION))

    logging.basicConfig(
        stream=sys.stderr, level=logging.INFO,
        format="%(asctime)s %(levelname)s berth-python-driver: %(message)s")
    load_api()

    socket_path = prepare_socket(socket_dir)
    plugin = Plugin(socket_dir, socket_path)
    server = grpc.server(
        futures.ThreadPoolExecutor(max_workers=64,
                                   thread_name_prefix="rpc"),
        options=[("grpc.max_receive_message_length", 64 * 1024 * 1024),
                 ("grpc.max_send_message_length", -1)])
    plugin.server = server
    health_pb2_grpc.add_HealthServicer_to_server(
        plugin.count_calls(HealthServicer(plugin)), server)
    plugin_pb2_grpc.add_PluginServiceServicer_to_server(
        plugin.count_calls(PluginServicer(plugin)), server)
    driver_pb2_grpc.add_DriverServiceServicer_to_server(
        plugin.count_calls(DriverServicer(plugin)), server)
    old_umask = os.umask(0o117)  # the socket is born 0660
    try:
        port = server.add_insecure_port("unix:" + socket_path)
    except RuntimeError as e:
        port = 0
        log.error("%s", e)
    finally:
        os.umask(old_umask)
    if not port:
        die("cannot serve on unix:%s" % socket_path)
    server.start()
    os.chmod(socket_path, 0o660)
    st = os.stat(socket_path)
    socket_id = (st.st_dev, st.st_ino)

    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda signum, _: plugin.begin_shutdown(2.0))

    sys.stdout.write("%d|%d|unix|%s|grpc\n" % (
        CORE_PROTOCOL_VERSION, APP_PROTOCOL_VERSION, socket_path))
    sys.stdout.flush()
    log.info("serving on %s (pid %d); state in %s", socket_path, os.getpid(),
             plugin.state_dir)

    # The server terminates once its clients closed their connections, or
    # the grace period is over. Exit as soon as no call is in flight any
    # more: a host need not hang up first.
    while server.wait_for_termination(0.05):
        if plugin.stopped_at is not None and plugin.idle():
            break
    try:
        st = os.stat(socket_path)
        if (st.st_dev, st.st_ino) == socket_id:
            os.unlink(socket_path)
    except OSError:
        pass
    log.info("stopped")
    logging.shutdown()
    sys.stderr.flush()
    # Do not wait for the watcher threads: they hold no state.
    os._exit(0)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
