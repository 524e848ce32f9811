#!/usr/bin/python3
"""berth-python-driver: a berth task driver plugin in plain Python 3.

This is what a third-party driver author writes without Bazel and without
berth's C++ plugin SDK: one file that

  * does the plugin launch handshake itself (see plugins/sdk/handshake.h),
  * serves berth.plugin.v1.PluginService, berth.driver.v1.DriverService and
    grpc.health.v1.Health on a Unix socket with Debian's python3-grpcio,
  * runs each task as an ordinary, unisolated host process in its own session
    (optionally in a network namespace the node made), through a small
    monitor process that outlives the driver, writes the task's output to
    rotated files in the task directory and records the task's real exit
    status, so that a restarted driver can recover the task and still learn
    how it ended.

Only the standard library, grpcio and protobuf are used, plus the stubs
generated from berth's .proto files (api/gen/python in the berth repository).
Run it under /usr/bin/python3. See README.md beside this file, and the driver
contract berth-node relies on (plugins/conformance/CONVENTIONS.md).

The same file has two helper modes, started by the driver itself and never
by a human (they do not import grpc):

  --monitor STATE_DIR  the per-task monitor: starts the task described by
                       STATE_DIR/spec.json, reports its pid, pumps its stdout
                       and stderr into TASK_DIR/logs/{stdout,stderr}.log
                       (rotated), waits for it and writes STATE_DIR/exit.json
                       atomically;
  --exec [--tty] [--netns PATH] [--creds UID:GID:G1,G2] -- CMD..
                       joins the network namespace PATH, takes the user's
                       credentials, makes its stdin (a pty) the controlling
                       terminal of its session with --tty, then execs CMD
                       (ExecTask and ExecTaskStreaming).
"""

import errno
import json
import os
import signal
import sys
import time

VERSION = "0.2.0"
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

# Encoding version of TaskHandle.driver_state (JSON, see driver_state()).
# Version 1 (driver 0.1) kept the output in the driver's own directory;
# RecoverTask still reads it.
HANDLE_VERSION = 2
EXIT_FILE = "exit.json"
SPEC_FILE = "spec.json"
MONITOR_LOG = "monitor.log"
DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

# The task's output (the driver contract, point 2): TASK_DIR/logs/NAME.log,
# rotated at max_file_bytes into NAME.log.1 .. NAME.log.<max_files>.
LOG_DIR = "logs"
DEFAULT_LOG_MAX_FILE_BYTES = 10 * 1024 * 1024
DEFAULT_LOG_MAX_FILES = 4
# After the task's main process exited, the monitor reads what is left in
# the output pipes until end-of-file, but no longer than this (a process the
# task left behind may hold them open), then writes the exit record.
OUTPUT_DRAIN_SECONDS = 1.0

CLONE_NEWNET = 0x40000000
NS_GET_NSTYPE = 0xb703  # ioctl on a namespace file: its CLONE_NEW* type

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


def libc():
    """The C library through ctypes (prctl, setns), loaded on first use."""
    global _libc
    if _libc is None:
        import ctypes
        _libc = ctypes.CDLL(None, use_errno=True)
    return _libc


_libc = None


def join_netns(path):
    """Moves the calling (single-threaded) process into the network
    namespace at PATH. Raises OSError."""
    import ctypes
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        if libc().setns(fd, CLONE_NEWNET) != 0:
            err = ctypes.get_errno()
            raise OSError(err, os.strerror(err), path)
    finally:
        os.close(fd)


def set_credentials(uid, gid, groups):
    """setgroups, setgid, setuid, in that order (as root)."""
    os.setgroups(groups)
    os.setgid(gid)
    os.setuid(uid)


# ---------------------------------------------------------------------------
# Helper mode --monitor: one per task, in its own session, outlives the driver.


FORWARDED_SIGNALS = (signal.SIGHUP, signal.SIGINT, signal.SIGTERM,
                     signal.SIGQUIT, signal.SIGUSR1, signal.SIGUSR2)


class RotatingLog:
    """NAME.log in a directory, rotated as the driver contract says.

    A file never grows past max_bytes (a write is split at the boundary);
    when NAME.log is full, NAME.log.(i) becomes NAME.log.(i+1) for
    i = max_files-1 .. 1 (NAME.log.<max_files> is dropped), NAME.log becomes
    NAME.log.1 and a new NAME.log starts; max_files 0 keeps no rotated file
    (NAME.log starts over). Reading NAME.log.N ... NAME.log.1, NAME.log gives
    the kept output in order. The same rules as berth-task-init's
    (services/driver/exec/init/rotating_log.cc).

    Every name is resolved against a descriptor of the directory opened once
    (and files are opened with O_NOFOLLOW), so a task that owns its task
    directory cannot redirect the monitor's writes by swapping logs/ or a
    file for a symbolic link.
    """

    def __init__(self, dir_fd, name, max_bytes, max_files):
        self.dir_fd = dir_fd
        self.name = name
        self.max_bytes = max(1, int(max_bytes))
        self.max_files = max(0, int(max_files))
        self.fd = None
        self.size = 0

    def path(self, index=0):
        return self.name + ".log" + (".%d" % index if index else "")

    def open(self, truncate=False):
        flags = (os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC |
                 os.O_NOFOLLOW | (os.O_TRUNC if truncate else 0))
        self.fd = os.open(self.path(), flags, 0o640, dir_fd=self.dir_fd)
        self.size = 0 if truncate else os.fstat(self.fd).st_size

    def _rotate(self):
        os.close(self.fd)
        self.fd = None
        for i in range(self.max_files, 0, -1):
            try:
                os.rename(self.path(i - 1), self.path(i),
                          src_dir_fd=self.dir_fd, dst_dir_fd=self.dir_fd)
            except FileNotFoundError:
                pass
        self.open(truncate=True)

    def write(self, data):
        """Writes all of data, rotating as needed. Raises OSError."""
        view = memoryview(data)
        while view:
            if self.fd is None:
                self.open()
            if self.size >= self.max_bytes:
                self._rotate()
            n = os.write(self.fd, view[:self.max_bytes - self.size])
            view = view[n:]
            self.size += n

    def close(self):
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None


class StartError(Exception):
    """The monitor could not start the task; field names what was wrong."""

    def __init__(self, field, err):
        super().__init__("%s: %s" % (field, err))
        self.field = field
        self.errno = getattr(err, "errno", None) or 0
        self.message = getattr(err, "strerror", None) or str(err)
        if getattr(err, "filename", None):
            self.message = "%s: %s" % (err.filename, self.message)


def spawn_task(spec, stdout_fd, stderr_fd, nofile):
    """Forks and execs the task in a session of its own, with stdin on
    /dev/null and stdout, stderr on the given descriptors. Returns its pid,
    or raises StartError naming the field at fault (the monitor is single
    threaded, so a plain fork is safe here)."""
    err_r, err_w = os.pipe()  # both close on exec (PEP 446)
    pid = os.fork()
    if pid == 0:
        stage = "task_dir"
        try:
            os.close(err_r)
            os.setsid()
            for sig in FORWARDED_SIGNALS + (signal.SIGCHLD, signal.SIGPIPE,
                                             signal.SIGXFSZ):
                signal.signal(sig, signal.SIG_DFL)
            signal.pthread_sigmask(signal.SIG_SETMASK, [])
            null = os.open(os.devnull, os.O_RDONLY)
            os.dup2(null, 0)
            os.dup2(stdout_fd, 1)
            os.dup2(stderr_fd, 2)
            os.closerange(3, err_w)  # nothing but 0, 1, 2 is passed on
            os.closerange(err_w + 1, os.sysconf("SC_OPEN_MAX"))
            if nofile is not None:  # the limit the driver was started with
                import resource
                resource.setrlimit(resource.RLIMIT_NOFILE, tuple(nofile))
            stage = spec.get("cwd_field") or "task_dir"
            os.chdir(spec["cwd"])
            if spec.get("uid") is not None:
                stage = "user"
                set_credentials(spec["uid"], spec["gid"], spec.get("groups", []))
            stage = "driver_config.command"
            os.execvpe(spec["argv"][0], spec["argv"], spec["env"])
        except BaseException as e:  # noqa: B036 - the child must never return
            try:
                os.write(err_w, json.dumps({
                    "field": stage, "errno": getattr(e, "errno", 0) or 0,
                    "error": getattr(e, "strerror", None) or repr(e),
                }).encode())
            finally:
                os._exit(127)
    os.close(err_w)
    data = b""
    while True:
        chunk = os.read(err_r, 4096)
        if not chunk:
            break
        data += chunk
    os.close(err_r)
    if data:
        os.waitpid(pid, 0)
        failure = json.loads(data)
        raise StartError(failure["field"],
                         OSError(failure["errno"], failure["error"]))
    return pid


def monitor_main(state_dir):
    """Starts the task described by STATE_DIR/spec.json and records its end.

    Protocol with the driver: stdout is a pipe to the driver; the monitor
    writes one JSON line, {"pid": N, "start": TICKS} once the task runs or
    {"error": "...", "errno": N, "field": "..."} if it could not be started
    (field names the part of the task's configuration at fault), then lets go
    of the pipe. The task's stdout and stderr are pipes the monitor copies
    into rotated files (spec["logs"]). When the task's main process ends, the
    monitor reads what is left in the pipes (until end-of-file, at most
    OUTPUT_DRAIN_SECONDS), writes STATE_DIR/exit.json (atomically) with the
    exit code, the signal and the task's rusage, and exits 0. Signals the
    monitor gets (TERM, INT, HUP, QUIT, USR1, USR2) are passed on to the
    task, so that the monitor stands for the task. The monitor's own
    messages go to its stderr (STATE_DIR/monitor.log).
    """
    import select
    task = {"pid": None, "pidfd": None, "pending": []}

    def forward(signum, _frame):
        if task["pidfd"] is None:
            task["pending"].append(signum)  # sent once the task runs
            return
        try:
            signal.pidfd_send_signal(task["pidfd"], signum)
        except OSError:
            pass

    for sig in FORWARDED_SIGNALS:
        signal.signal(sig, forward)

    def report(obj):
        try:
            os.write(1, (json.dumps(obj) + "\n").encode())
        except OSError:
            pass  # the driver is gone; the exit file is what counts
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, 1)
        os.close(devnull)

    def say(message):
        sys.stderr.write("monitor %d: %s\n" % (os.getpid(), message))
        sys.stderr.flush()

    # Become a child subreaper: what the task leaves behind when it forks
    # and exits stays below the monitor (and is reaped by it), not init.
    try:
        libc().prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER
    except (OSError, AttributeError):
        pass

    logs = {}
    try:
        try:
            with open(os.path.join(state_dir, SPEC_FILE)) as f:
                spec = json.load(f)
        except (OSError, ValueError) as e:
            raise StartError("spec", e) from None
        try:
            log_dir = spec["logs"]["dir"]
            dir_fd = os.open(log_dir, os.O_RDONLY | os.O_DIRECTORY |
                             os.O_NOFOLLOW | os.O_CLOEXEC)
            for name in ("stdout", "stderr"):
                logs[name] = RotatingLog(dir_fd, name,
                                         spec["logs"]["max_file_bytes"],
                                         spec["logs"]["max_files"])
                logs[name].open()
        except OSError as e:
            raise StartError("task_dir", e) from None
        if spec.get("netns"):
            try:
                join_netns(spec["netns"])
            except OSError as e:
                raise StartError("network.namespace_path", e) from None
        out_r, out_w = os.pipe()
        err_r, err_w = os.pipe()
        pid = spawn_task(spec, out_w, err_w, spec.get("rlimit_nofile"))
        os.close(out_w)
        os.close(err_w)
    except StartError as e:
        report({"error": e.message, "errno": e.errno, "field": e.field})
        return 1
    except Exception as e:  # a broken spec: say so rather than hang
        report({"error": repr(e), "errno": 0, "field": "spec"})
        return 1

    # Wake the loop below when a child ends (SIGCHLD), without polling.
    wake_r, wake_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
    signal.set_wakeup_fd(wake_w, warn_on_full_buffer=False)
    signal.signal(signal.SIGCHLD, lambda signum, frame: None)
    try:
        task["pidfd"] = os.pidfd_open(pid)
    except OSError:
        pass
    for signum in task["pending"]:
        forward(signum, None)
    report({"pid": pid, "start": proc_start_time(pid)})
    say("task pid %d started: %s" % (pid, spec["argv"]))
    try:  # give back what starting took: the monitor lives as long as the task
        libc().malloc_trim(0)
    except (OSError, AttributeError):
        pass

    poller = select.poll()
    pipes = {out_r: logs["stdout"], err_r: logs["stderr"]}
    for fd in pipes:
        poller.register(fd, select.POLLIN)
    poller.register(wake_r, select.POLLIN)
    status = rusage = None
    drain_until = None
    failed = set()
    while True:
        # Reap whatever ended: the task, or orphans of its tree.
        while status is None:
            try:
                child, child_status, child_rusage = os.wait4(-1, os.WNOHANG)
            except ChildProcessError:  # cannot happen while the task lives
                say("task pid %d: its exit status was lost" % pid)
                status = -1
                break
            if child == 0:
                break
            if child == pid:
                status, rusage = child_status, child_rusage
                drain_until = time.monotonic() + OUTPUT_DRAIN_SECONDS
        if status is not None and not pipes:
            break
        timeout = None
        if drain_until is not None:
            timeout = drain_until - time.monotonic()
            if timeout <= 0:
                say("output still open %.1fs after the task ended (a "
                    "process it left behind holds it): stopped reading" %
                    OUTPUT_DRAIN_SECONDS)
                break
            timeout = int(timeout * 1000) + 1
        for fd, _ in poller.poll(timeout):
            if fd == wake_r:
                try:
                    while os.read(wake_r, 512):
                        pass
                except BlockingIOError:
                    pass
                continue
            data = os.read(fd, 65536)
            if not data:
                poller.unregister(fd)
                os.close(fd)
                del pipes[fd]
                continue
            sink = pipes[fd]
            try:
                sink.write(data)
            except OSError as e:  # keep reading: never block the task
                if sink.name not in failed:
                    failed.add(sink.name)
                    say("cannot write %s.log: %s (its output is lost from "
                        "here on)" % (sink.name, e))
    for fd in pipes:
        os.close(fd)
    for sink in logs.values():
        sink.close()

    if status == -1:
        exit_code, signum = -1, 0
    elif os.WIFSIGNALED(status):
        exit_code, signum = 0, os.WTERMSIG(status)
    else:
        exit_code, signum = os.WEXITSTATUS(status), 0
    record = {
        "exit_code": exit_code,
        "signal": signum,
        "core_dumped": status != -1 and bool(os.WCOREDUMP(status)),
        "exited_at": time.time(),
    }
    if rusage is not None:
        record.update(utime=rusage.ru_utime, stime=rusage.ru_stime,
                      maxrss_kb=rusage.ru_maxrss)
    try:
        write_file_atomically(os.path.join(state_dir, EXIT_FILE),
                              json.dumps(record).encode(), 0o644)
    except OSError as e:
        say("cannot write %s: %s" % (EXIT_FILE, e))
        return 1
    say("task pid %d ended: exit_code=%d signal=%d" % (pid, exit_code,
                                                        signum))
    return 0


# ---------------------------------------------------------------------------
# Helper mode --exec: a command run into a task (ExecTask, ExecTaskStreaming)
# that must join the task's network namespace, or take a pty as its
# controlling terminal, before it runs.


def exec_main(argv):
    """--exec [--tty] [--netns PATH] [--creds UID:GID:G1,G2] -- CMD ARG..."""
    tty, netns, creds = False, None, None
    while argv and argv[0] != "--":
        if argv[0] == "--tty":
            tty, argv = True, argv[1:]
        elif argv[0] == "--netns" and len(argv) > 1:
            netns, argv = argv[1], argv[2:]
        elif argv[0] == "--creds" and len(argv) > 1:
            uid, gid, groups = argv[1].split(":")
            creds = (int(uid), int(gid),
                     [int(g) for g in groups.split(",") if g])
            argv = argv[2:]
        else:
            break
    if not argv or argv[0] != "--" or len(argv) < 2:
        os.write(2, b"usage: --exec [--tty] [--netns PATH] [--creds U:G:GS] "
                    b"-- CMD...\n")
        return 2
    command = argv[1:]
    nl = b"\r\n" if tty else b"\n"
    try:
        if netns:
            join_netns(netns)
        if creds:
            set_credentials(*creds)
    except OSError as e:
        os.write(2, ("cannot enter the task: %s" % e).encode() + nl)
        return 126
    if tty:
        import fcntl
        import termios
        try:
            fcntl.ioctl(0, termios.TIOCSCTTY, 0)
        except OSError as e:
            os.write(2, ("cannot make the pty the controlling terminal: %s" %
                         e).encode() + nl)
            return 126
    for sig in (signal.SIGPIPE, signal.SIGXFSZ):
        signal.signal(sig, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_SETMASK, [])
    try:
        os.execvp(command[0], command)
    except OSError as e:
        os.write(2, ("%s: %s" % (command[0], e.strerror)).encode() + nl)
        return 127 if e.errno == errno.ENOENT else 126


if __name__ == "__main__" and len(sys.argv) > 1:
    if sys.argv[1] == "--monitor" and len(sys.argv) == 3:
        sys.exit(monitor_main(sys.argv[2]))
    if sys.argv[1] == "--exec":
        sys.exit(exec_main(sys.argv[2:]))


# END OF THE HELPER MODES. A monitor or --exec helper compiles and runs only
# the part of this file above this line (see helper_argv()).
# ---------------------------------------------------------------------------
# The driver proper. grpc and the stubs are imported by load_api(), once the
# command line and the handshake environment have been checked.

import contextlib  # noqa: E402
import logging  # noqa: E402
import platform  # noqa: E402
import queue  # noqa: E402
import select  # noqa: E402
import shutil  # noqa: E402
import socket  # noqa: E402
import stat  # noqa: E402
import subprocess  # noqa: E402
import tempfile  # noqa: E402
import threading  # noqa: E402
from concurrent import futures  # noqa: E402

log = logging.getLogger("berth-python-driver")

# How many calls the driver serves at once (one thread each). berth-node
# holds a WaitTask open per running task for the life of the task, plus
# TaskEvents, Fingerprint, TaskStats and exec streams, and health-checks
# with a 2 s deadline: the pool must be larger than (running tasks + 16).
# The threads are made as calls come, so a large bound costs nothing
# until it is used; a call beyond it is refused at once with
# RESOURCE_EXHAUSTED (gRPC's maximum_concurrent_rpcs), never queued.
MAX_CALLS_ENV = "BERTH_PYTHON_DRIVER_MAX_CALLS"
MAX_CALLS = 4096

# How the driver starts this file's helper modes: Debian's interpreter,
# isolated (-I: no PYTHONPATH, no user site) and without site (-S), running
# only the helper part of this file, compiled alone. A monitor lives as long
# as its task, one per task: compiling the whole driver in each would cost
# it some 6 MB of memory for nothing.
HELPER_BOOTSTRAP = (
    "import sys;p=sys.argv[1];s=open(p).read();sys.argv=sys.argv[1:];"
    "exec(compile(s[:s.index('\\n# END OF THE HELPER MODES.')],p,'exec'),"
    "{'__name__':'__main__','__file__':p})")


def helper_argv(mode, *args):
    """The command line of a helper mode (--monitor, --exec) of SCRIPT."""
    return [sys.executable, "-I", "-S", "-c", HELPER_BOOTSTRAP, SCRIPT,
            mode] + list(args)

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
    for value in driver_pb2.NetworkIsolationMode.values():
        MODE_NAME[value] = driver_pb2.NetworkIsolationMode.Name(value)


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
    """One task: its configuration, its processes and how it ended.

    Two directories: `task_dir` is the task's own (TaskConfig.task_dir, or
    one the driver makes when the node gives none) with the task's output
    in logs/; `state_dir` is the driver's private directory for the task
    (spec.json, exit.json, monitor.log), under the driver's state directory.
    `made` lists what the driver made in the task directory, which
    DestroyTask removes again.
    """

    def __init__(self, config, state_dir, task_dir, cwd, env, creds):
        self.config = config  # driver_pb2.TaskConfig
        self.id = config.id
        self.state_dir = state_dir
        self.task_dir = task_dir
        self.cwd = cwd
        self.env = env
        self.creds = creds  # {} or {"uid", "gid", "groups", ...}
        self.netns = None  # the namespace path of a GROUP task
        self.made = []  # paths the driver made (removed by DestroyTask)
        self.log_dir = os.path.join(task_dir, LOG_DIR)
        self.pid = None
        self.pid_start = None
        self.pidfd = None
        self.monitor_pid = None
        self.monitor_start = None
        self.monitor_pidfd = None
        self.monitor_proc = None  # a Popen when this driver started it
        self.started_at = time.time()
        self.boot_id = boot_id()
        self.result = None  # the exit record (dict) once it ended
        self.recovered = False
        self.lock = threading.Lock()
        self.wakers = set()  # Events set when the task ends or is destroyed
        self.destroyed = threading.Event()

    def running(self):
        return self.result is None

    def set_result(self, result):
        with self.lock:
            if self.result is None:
                self.result = result
        self.wake()

    def wake(self):
        """Wakes every call waiting on this task (see Plugin.waker)."""
        with self.lock:
            wakers = list(self.wakers)
        for w in wakers:
            w.set()

    def wait_exit(self, timeout):
        """Waits up to timeout seconds for the task to end; whether it did.
        Woken by the exit itself, never by polling."""
        deadline = time.monotonic() + timeout
        w = threading.Event()
        with self.lock:
            self.wakers.add(w)
        try:
            while self.result is None and not self.destroyed.is_set():
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                w.wait(left)
                w.clear()
        finally:
            with self.lock:
                self.wakers.discard(w)
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
            "state_dir": self.state_dir,
            "task_dir": self.task_dir,
            "made": self.made,
            "cwd": self.cwd,
            "netns": self.netns,
            "creds": self.creds,
            "pid": self.pid,
            "pid_start": self.pid_start,
            "monitor_pid": self.monitor_pid,
            "monitor_start": self.monitor_start,
            "started_at": self.started_at,
            "boot_id": self.boot_id,
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
        attrs["task_dir"] = self.task_dir
        attrs["state_dir"] = self.state_dir
        attrs["cwd"] = self.cwd
        attrs["stdout"] = os.path.join(self.log_dir, "stdout.log")
        attrs["stderr"] = os.path.join(self.log_dir, "stderr.log")
        if self.netns:
            attrs["netns"] = self.netns
        attrs["recovered"] = "true" if self.recovered else "false"
        return st

    def signal_main(self, signum):
        """Signals the task's main process; False if it is gone."""
        if self.pidfd is None:
            return False
        try:
            signal.pidfd_send_signal(self.pidfd, signum)
            return True
        except (ProcessLookupError, OSError):
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

    def kill_leftovers(self):
        """Kills what the task left in its process group after its main
        process ended (a background child, say). The group's id is the main
        process's pid, and the kernel hands out no pid still in use as a
        process group id: so unless that pid now belongs to another process
        (then the group is empty anyway), the group holds the task's
        leftovers only."""
        if self.pid is None or self.boot_id != boot_id():
            return  # after a reboot no pid is the task's
        now = proc_start_time(self.pid)
        if now is not None and now != self.pid_start:
            return  # the pid was reused: the task's group is gone
        try:
            os.killpg(self.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass

    def close_fds(self, watcher=None):
        for name in ("pidfd", "monitor_pidfd"):
            fd = getattr(self, name)
            if fd is not None:
                setattr(self, name, None)
                if watcher is not None:
                    watcher.forget(fd)
                try:
                    os.close(fd)
                except OSError:
                    pass

    def remove_files(self):
        """Removes what the driver made for the task: its private directory,
        logs/ and what StartTask made in the task directory (the whole task
        directory when it was made here)."""
        for path in [os.path.join(self.task_dir, LOG_DIR)] + \
                list(reversed(self.made)) + [self.state_dir]:
            shutil.rmtree(path, ignore_errors=True)


class EventHub:
    """Fans TaskEvents out to every subscriber (bounded, drops the oldest).

    A subscriber's queue ends with None: when its call ends (close) or the
    driver shuts down (close_all), so that its reader blocks without a
    timeout."""

    def __init__(self):
        self._lock = threading.Lock()
        self._subscribers = set()
        self._closed = False

    def subscribe(self):
        q = queue.Queue(maxsize=1000)
        with self._lock:
            if self._closed:
                self._put(q, None)
            else:
                self._subscribers.add(q)
        return q

    def close(self, q):
        with self._lock:
            if q not in self._subscribers:
                return
            self._subscribers.discard(q)
        self._put(q, None)

    def close_all(self):
        with self._lock:
            self._closed = True
            subscribers, self._subscribers = self._subscribers, set()
        for q in subscribers:
            self._put(q, None)

    def publish(self, event):
        with self._lock:
            subscribers = list(self._subscribers)
        for q in subscribers:
            self._put(q, event)

    @staticmethod
    def _put(q, item):
        while True:
            try:
                q.put_nowait(item)
                return
            except queue.Full:
                try:
                    q.get_nowait()
                except queue.Empty:
                    pass


class ExitWatcher:
    """One thread that learns when any task (or its monitor) ends.

    Every watched process is a pidfd in one epoll set; the thread blocks in
    epoll_wait with no timeout and runs the pidfd's callback when it becomes
    readable (the process ended). Callbacks run on this thread, one at a
    time, and must not block. watch() and forget() may be called from any
    thread.
    """

    def __init__(self):
        self._epoll = select.epoll()
        self._lock = threading.Lock()
        self._callbacks = {}  # fd -> callable
        self._thread = threading.Thread(target=self._run, daemon=True,
                                        name="exit-watcher")
        self._thread.start()

    def watch(self, fd, callback):
        with self._lock:
            self._callbacks[fd] = callback
            self._epoll.register(fd, select.EPOLLIN)

    def forget(self, fd):
        with self._lock:
            if self._callbacks.pop(fd, None) is not None:
                try:
                    self._epoll.unregister(fd)
                except OSError:
                    pass

    def watched(self):
        with self._lock:
            return len(self._callbacks)

    def _run(self):
        while True:
            try:
                events = self._epoll.poll()
            except OSError as e:
                log.error("the exit watcher failed: %s", e)
                return
            for fd, _ in events:
                with self._lock:
                    callback = self._callbacks.get(fd)
                    if callback is None:
                        continue  # forgotten meanwhile
                    # The number may have been reused by a newer pidfd
                    # since the event: act only if that one ended too.
                    if not wait_fd_readable(fd, 0):
                        continue
                    del self._callbacks[fd]
                    self._epoll.unregister(fd)
                try:
                    callback()
                except Exception:
                    log.exception("exit watcher: a callback failed")


class ProcfsSampler:
    """CPU and memory of a task's processes from /proc, between samples.

    The task's processes are its monitor's descendants (the monitor is a
    child subreaper, so orphans of the task's tree stay below it), found
    through /proc/PID/task/TID/children without reading all of /proc; when
    the monitor is gone (or the kernel lacks that file), those in the task's
    session (the task is a session leader: its pid is the session id).
    Either way the children of a shell count.
    """

    def __init__(self, task, mhz):
        self.task = task
        self.mhz = mhz
        self.prev = None  # (monotonic time, user ticks, system ticks)

    @staticmethod
    def _children(pid):
        kids = []
        try:
            tids = os.listdir("/proc/%d/task" % pid)
        except OSError:
            return None
        for tid in tids:
            try:
                with open("/proc/%d/task/%s/children" % (pid, tid)) as f:
                    kids.extend(int(k) for k in f.read().split())
            except OSError:
                return None
        return kids

    def _candidates(self):
        task = self.task
        if task.monitor_pid and proc_is_live(task.monitor_pid,
                                             task.monitor_start):
            found, todo = [], self._children(task.monitor_pid)
            while todo is not None and todo:
                pid = todo.pop()
                found.append(pid)
                todo.extend(self._children(pid) or [])
            if todo is not None:
                return found, None
        try:
            entries = [int(e) for e in os.listdir("/proc") if e.isdigit()]
        except OSError:
            entries = []
        return entries, task.pid

    def _session_processes(self):
        found = {}
        pids, sid = self._candidates()
        for pid in pids:
            fields = proc_stat_fields(pid)
            if not fields or fields[0] == b"Z" or \
                    (sid is not None and int(fields[3]) != sid):
                continue
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
        self.watcher = ExitWatcher()
        self.wakers = set()  # Events of waiting calls, set at shutdown
        self.shutting_down = threading.Event()
        self.server = None
        self.mhz = cpu_core_mhz()
        self.can_join_netns = has_cap_sys_admin()
        self.rlimit_nofile = None  # the limit the driver was started with
        self.calls_in_flight = 0
        self.stopped_at = None  # when server.stop() was called
        self.exit_by = None  # monotonic time main() must have exited by

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

    # -- waiting without polling -------------------------------------------

    @contextlib.contextmanager
    def waker(self, context=None, task=None):
        """An Event for a call that waits: set when the call ends (cancelled
        or past its deadline), when the driver shuts down and, with a task,
        when the task ends or is destroyed. The waiter checks what it waits
        for after registering (here) and after every wake-up, then waits on
        the Event with no timeout of its own: nothing polls."""
        w = threading.Event()
        with self.lock:
            self.wakers.add(w)
        if task is not None:
            with task.lock:
                task.wakers.add(w)
        if context is not None and not context.add_callback(w.set):
            w.set()  # the call has already ended
        try:
            yield w
        finally:
            with self.lock:
                self.wakers.discard(w)
            if task is not None:
                with task.lock:
                    task.wakers.discard(w)

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
        """Learns when the task ends, on the one watcher thread: from its
        monitor's pidfd (then exit.json says how), or from the task's own
        pidfd when the monitor is gone."""
        if task.monitor_pidfd is not None:
            self.watcher.watch(task.monitor_pidfd,
                               lambda: self._monitor_ended(task))
        elif task.pidfd is not None:
            self.watcher.watch(task.pidfd, lambda: self._task_ended(task))
        else:
            self._task_ended(task)

    def _monitor_ended(self, task):
        if task.monitor_proc is not None:
            task.monitor_proc.wait()  # reap our own child (it has ended)
        result = self.read_exit_file(task)
        if result is None and task.pidfd is not None and \
                not wait_fd_readable(task.pidfd, 0):
            log.warning("task %s: its monitor (pid %d) died before the task; "
                        "waiting for the task's process %d itself, its exit "
                        "status will be unknown", task.id, task.monitor_pid,
                        task.pid)
            self.watcher.watch(task.pidfd, lambda: self._task_ended(task))
            return
        self._finish(task, result)

    def _task_ended(self, task):
        self._finish(task, self.read_exit_file(task))

    def _finish(self, task, result):
        if result is None:
            result = {"exit_code": -1, "signal": 0,
                      "exited_at": time.time(), "lost": True}
            log.warning("task %s: exit status lost (the monitor ended "
                        "without writing %s); reporting exit_code -1",
                        task.id, os.path.join(task.state_dir, EXIT_FILE))
        task.set_result(result)
        self._log_exit(task, result)

    def _log_exit(self, task, result):
        if result.get("signal"):
            how = "killed by signal %d" % result["signal"]
        else:
            how = "exited with code %d" % result["exit_code"]
        log.info("task %s %s", task.id, how)
        self.publish(task, "task " + how, state="exited",
                     exit_code=result["exit_code"], signal=result["signal"])

    @staticmethod
    def read_exit_file(task):
        """The exit record the task's monitor wrote, or None."""
        try:
            with open(os.path.join(task.state_dir, EXIT_FILE)) as f:
                return json.load(f)
        except (OSError, ValueError):
            return None

    # -- shutdown ---------------------------------------------------------

    def begin_shutdown(self, grace, after=None):
        """Stops serving: every waiting call and stream is woken and ends
        with UNAVAILABLE, calls still running get what is left of `grace`,
        and main() exits 0 before `grace` has passed, whatever is still
        open. Tasks keep running. `after` is an Event the Shutdown call sets
        once its own response went out, so that it is not counted as a call
        in flight."""
        if self.shutting_down.is_set():
            return
        started = time.monotonic()
        # Leave main() a moment to exit within the grace period.
        self.exit_by = started + max(grace - 0.25, min(grace, 0.1))
        self.shutting_down.set()
        log.info("shutting down (grace period %.1fs); tasks keep running",
                 grace)
        with self.lock:
            wakers = list(self.wakers)
        for w in wakers:
            w.set()
        self.events.close_all()

        def stop():
            if after is not None:
                after.wait(max(0.0, self.exit_by - time.monotonic()))
            self.stopped_at = time.monotonic()
            self.server.stop(max(0.0, self.exit_by - time.monotonic()))

        threading.Thread(target=stop, daemon=True, name="shutdown").start()


def has_cap_sys_admin():
    """Whether this process may join network namespaces (setns needs
    CAP_SYS_ADMIN)."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("CapEff:"):
                    return bool(int(line.split()[1], 16) & (1 << 21))
    except (OSError, ValueError):
        pass
    return os.geteuid() == 0


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
        # The status changes once at most (at shutdown): send it, then wait
        # for that or for the caller to go away, without polling.
        with self.plugin.waker(context) as woken:
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
                woken.wait()
                woken.clear()


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
                F(name="work_dir", type=plugin_pb2.CONFIG_FIELD_TYPE_STRING,
                  description="the task's working directory: a path "
                              "relative to the task directory (or an "
                              "absolute one inside it), made if missing; "
                              "default the task directory itself",
                  default_json='""'),
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


TASK_CONFIG_FIELDS = ("command", "args", "work_dir")
SHUTTING_DOWN = "the python driver is shutting down"
MODE_NAME = {}  # NetworkIsolationMode number -> name, filled by load_api()


def resolve_work_dir(task_dir, work_dir):
    """The working directory for driver_config.work_dir: task_dir itself
    when empty, a path relative to it, or an absolute path inside it.
    None when it lies outside the task directory (lexically: `..` cannot
    climb out)."""
    if not work_dir:
        return task_dir
    path = os.path.normpath(os.path.join(task_dir, work_dir))
    if path == task_dir or path.startswith(task_dir.rstrip("/") + "/"):
        return path
    return None


def make_dirs(path, mode, uid=None, gid=None):
    """mkdir -p PATH with MODE (past the umask), each directory made owned
    by uid:gid when given. Returns the topmost directory it made (to remove
    again), or None when PATH was there. Raises OSError."""
    missing = []
    p = path
    while not os.path.isdir(p):
        missing.append(p)
        parent = os.path.dirname(p)
        if parent == p:
            break
        p = parent
    for d in reversed(missing):
        try:
            os.mkdir(d, mode)
        except FileExistsError:
            if not os.path.isdir(d):
                raise
            continue
        os.chmod(d, mode)
        if uid is not None:
            os.chown(d, uid, gid)
    return missing[-1] if missing else None


class DriverServicer:

    def __init__(self, plugin):
        self.plugin = plugin

    # -- capabilities and fingerprint -------------------------------------

    def _network_modes(self):
        modes = [driver_pb2.NETWORK_ISOLATION_MODE_HOST]
        if self.plugin.can_join_netns:
            modes.append(driver_pb2.NETWORK_ISOLATION_MODE_GROUP)
        return modes

    def GetCapabilities(self, request, context):
        return driver_pb2.GetCapabilitiesResponse(
            capabilities=driver_pb2.DriverCapabilities(
                send_signals=True, exec=True, exec_streaming=True,
                exec_tty=True, fs_isolation=driver_pb2.FS_ISOLATION_NONE,
                network_isolation_modes=self._network_modes(),
                must_create_network=False, recover=True, stats=True))

    def Fingerprint(self, request, context):
        import google.protobuf
        attrs = {
            "driver.python.version": platform.python_version(),
            "driver.python.implementation": platform.python_implementation(),
            "driver.python.grpcio_version": grpc.__version__,
            "driver.python.protobuf_version": google.protobuf.__version__,
            "driver.version": VERSION,
            "driver.python.network_modes": ",".join(
                MODE_NAME.get(m, str(m)) for m in self._network_modes()),
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
        # the caller cancels it (or the plugin shuts down), without polling.
        with self.plugin.waker(context) as woken:
            while context.is_active() and \
                    not self.plugin.shutting_down.is_set():
                woken.wait()
                woken.clear()
        if self.plugin.shutting_down.is_set():
            context.abort(grpc.StatusCode.UNAVAILABLE, SHUTTING_DOWN)

    # -- starting ---------------------------------------------------------

    def _check_config(self, cfg):
        """Checks the task's configuration before anything is made.

        Returns (argv, creds, work_dir, netns): the command line, the
        credentials ({} for the driver's own), driver_config.work_dir as
        given ("" for the task directory) and the network namespace path to
        join (None for the host's network). Raises RpcError naming the
        field."""
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
        if cfg.task_dir:
            if not os.path.isabs(cfg.task_dir) or \
                    os.path.normpath(cfg.task_dir) == "/":
                raise invalid('task_dir "%s" must be an absolute path below /'
                              % cfg.task_dir)
            if os.path.lexists(cfg.task_dir) and \
                    not os.path.isdir(cfg.task_dir):
                raise invalid('task_dir "%s" is not a directory' %
                              cfg.task_dir)
        work_dir = dc.get("work_dir", "")
        if not isinstance(work_dir, str):
            raise invalid("driver_config.work_dir must be a string (a path "
                          "relative to the task directory)")
        if work_dir:
            if cfg.task_dir:
                root = os.path.normpath(cfg.task_dir)
            elif os.path.isabs(work_dir):
                raise invalid('driver_config.work_dir "%s": an absolute '
                              'work_dir needs TaskConfig.task_dir; give a '
                              'path relative to the task directory' %
                              work_dir)
            else:
                root = "/task_dir"  # made later: check the relative path
            if resolve_work_dir(root, work_dir) is None:
                raise invalid('driver_config.work_dir "%s" is outside the '
                              'task directory %s' %
                              (work_dir, cfg.task_dir or "(made by the "
                               "driver)"))
        netns = self._check_network(cfg)
        return [command] + args, self._credentials(cfg), work_dir, netns

    def _check_network(self, cfg):
        """The namespace path to join, None for the host's network, or
        INVALID_ARGUMENT naming network.mode or network.namespace_path."""
        net = cfg.network
        if net.mode in (driver_pb2.NETWORK_ISOLATION_MODE_UNSPECIFIED,
                        driver_pb2.NETWORK_ISOLATION_MODE_HOST):
            return None
        mode = MODE_NAME.get(net.mode, str(net.mode))
        if net.mode != driver_pb2.NETWORK_ISOLATION_MODE_GROUP:
            raise invalid("network.mode %s: the python driver runs tasks in "
                          "the host's network or in a namespace it is given "
                          "(NETWORK_ISOLATION_MODE_GROUP)" % mode)
        if not self.plugin.can_join_netns:
            raise invalid("network.mode %s: the python driver cannot join "
                          "network namespaces (it lacks CAP_SYS_ADMIN: run "
                          "it as root); it runs tasks in the host's network "
                          "only" % mode)
        path = net.namespace_path
        if not path:
            raise invalid("network.namespace_path is required with "
                          "network.mode %s" % mode)
        try:
            fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        except OSError as e:
            raise invalid('network.namespace_path "%s": cannot open it: %s' %
                          (path, e.strerror)) from None
        try:
            import fcntl
            nstype = fcntl.ioctl(fd, NS_GET_NSTYPE)
        except OSError:
            nstype = None
        finally:
            os.close(fd)
        if nstype != CLONE_NEWNET:
            raise invalid('network.namespace_path "%s" is not a network '
                          'namespace' % path)
        return path

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
        argv, creds, work_dir, netns = self._check_config(cfg)
        with plugin.lock:
            if cfg.id in plugin.tasks or cfg.id in plugin.starting:
                raise RpcError(grpc.StatusCode.ALREADY_EXISTS,
                               'task "%s" already exists' % cfg.id)
            plugin.starting.add(cfg.id)
        try:
            task = self._spawn(cfg, argv, creds, work_dir, netns)
            with plugin.lock:
                plugin.tasks[cfg.id] = task
        finally:
            with plugin.lock:
                plugin.starting.discard(cfg.id)
        log.info("task %s started: pid %d (monitor %d) running %s in %s%s",
                 task.id, task.pid, task.monitor_pid, argv, task.cwd,
                 " (network namespace %s)" % netns if netns else "")
        plugin.publish(task, "task started", state="running", pid=task.pid)
        plugin.watch(task)
        handle = driver_pb2.TaskHandle(version=HANDLE_VERSION, config=cfg,
                                       state=driver_pb2.TASK_STATE_RUNNING,
                                       driver_state=task.driver_state())
        return driver_pb2.StartTaskResponse(handle=handle)

    def _monitor_spec(self, cfg, argv, creds, task_dir, cwd, env, netns):
        """What the task's monitor is told to do (written to spec.json): the
        command line, environment and working directory, the credentials,
        where the output goes and how it is rotated (the driver contract,
        point 2), and the network namespace to join. Every rule the monitor
        follows comes from here, so a test can break one by overriding this
        method (plugins/conformance/testing/broken_python_driver.py)."""
        logs = cfg.logs
        spec = {
            "argv": argv,
            "env": env,
            "cwd": cwd,
            "cwd_field": ("driver_config.work_dir" if cwd != task_dir
                          else "task_dir"),
            "logs": {
                "dir": os.path.join(task_dir, LOG_DIR),
                "max_file_bytes": (logs.max_file_bytes or
                                   DEFAULT_LOG_MAX_FILE_BYTES),
                "max_files": logs.max_files or DEFAULT_LOG_MAX_FILES,
            },
            "netns": netns,
            "rlimit_nofile": self.plugin.rlimit_nofile,
        }
        if creds:
            spec.update(uid=creds["uid"], gid=creds["gid"],
                        groups=creds["groups"])
        return spec

    def _spawn(self, cfg, argv, creds, work_dir, netns):
        """Makes the task's directories and starts its monitor, which starts
        the task. On failure nothing is left behind: of the task directory,
        only what was made here is removed."""
        safe = "".join(c if c.isalnum() or c in "-_." else "_"
                       for c in cfg.id)[:64].lstrip(".") or "task"
        state_dir = tempfile.mkdtemp(prefix=safe + ".",
                                     dir=self.plugin.tasks_root())
        if cfg.task_dir:
            task_dir = os.path.normpath(cfg.task_dir)
        else:  # not under a node: the driver's own directory holds it
            task_dir = os.path.join(state_dir, "task")
            if creds:
                os.chmod(state_dir, 0o711)  # the user reaches task/ only
        cwd = resolve_work_dir(task_dir, work_dir)
        env = self._task_env(cfg, task_dir, creds)
        task = Task(cfg, state_dir, task_dir, cwd, env, creds)
        task.netns = netns
        uid, gid = (creds["uid"], creds["gid"]) if creds else (None, None)
        monitor = None
        try:
            try:
                made = make_dirs(task_dir, 0o755, uid, gid)
            except OSError as e:
                raise precondition('task_dir "%s": cannot make it: %s' %
                                   (task_dir, e.strerror)) from None
            if made:
                task.made.append(made)
            try:
                make_dirs(task.log_dir, 0o755)
            except OSError as e:
                raise precondition('task_dir "%s": cannot make %s/ in it: %s'
                                   % (task_dir, LOG_DIR, e.strerror)) from None
            try:
                made = make_dirs(cwd, 0o755, uid, gid)
            except OSError as e:
                raise invalid('driver_config.work_dir "%s": cannot make %s: '
                              '%s' % (work_dir, cwd, e.strerror)) from None
            if made:
                task.made.append(made)
            spec = self._monitor_spec(cfg, argv, creds, task_dir, cwd, env,
                                      netns)
            write_file_atomically(os.path.join(state_dir, SPEC_FILE),
                                  json.dumps(spec).encode(), 0o600)
            with open(os.path.join(state_dir, MONITOR_LOG), "ab") as mlog:
                monitor = subprocess.Popen(
                    helper_argv("--monitor", state_dir),
                    stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                    stderr=mlog, start_new_session=True, close_fds=True)
            task.monitor_proc = monitor
            task.monitor_pid = monitor.pid
            task.monitor_start = proc_start_time(monitor.pid)
            task.monitor_pidfd = os.pidfd_open(monitor.pid)
            report = self._read_report(monitor, state_dir)
            if "error" in report:
                monitor.wait()
                raise self._start_error(report, argv, task)
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
            task.close_fds()
            task.remove_files()
            raise

    @staticmethod
    def _start_error(report, argv, task):
        """The status for a monitor's report that it could not start the
        task, naming the field at fault."""
        field = report.get("field") or "driver_config.command"
        why = report["error"]
        err = report.get("errno")
        bad_input = err in (errno.ENOENT, errno.EACCES, errno.ENOEXEC,
                            errno.ENOTDIR, errno.EINVAL, errno.EBADF)
        code = (grpc.StatusCode.INVALID_ARGUMENT if bad_input
                else grpc.StatusCode.FAILED_PRECONDITION)
        if field == "driver_config.command":
            return RpcError(code, 'driver_config.command "%s": cannot start '
                            'it: %s' % (argv[0], why))
        if field == "network.namespace_path":
            return RpcError(code, 'network.namespace_path "%s": cannot join '
                            'it: %s' % (task.netns, why))
        if field in ("driver_config.work_dir", "task_dir"):
            return RpcError(code, '%s: cannot run the task in %s: %s' %
                            (field, task.cwd, why))
        if field == "user":
            return RpcError(code, 'user "%s": cannot take its credentials: %s'
                            % (task.config.user, why))
        return RpcError(grpc.StatusCode.INTERNAL,
                        "the task's monitor failed (%s): %s" % (field, why))

    @staticmethod
    def _read_report(monitor, state_dir, timeout=30.0):
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
                                os.path.join(state_dir, MONITOR_LOG)))
            chunk = os.read(fd, 4096)
            if not chunk:
                break
            data += chunk
        monitor.stdout.close()
        try:
            return json.loads(data)
        except ValueError:
            try:
                with open(os.path.join(state_dir, MONITOR_LOG)) as f:
                    why = f.read().strip()[-500:]
            except OSError:
                why = ""
            raise RpcError(grpc.StatusCode.INTERNAL,
                           "the task's monitor failed: %s" %
                           (why or "no report")) from None

    # -- waiting, stopping, destroying --------------------------------------

    @rpc_method
    def WaitTask(self, request, context):
        plugin = self.plugin
        task = plugin.task(request.task_id)
        # One thread per waiting call, asleep until the task ends, the call
        # ends or the driver shuts down: no periodic wake-up.
        with plugin.waker(context, task) as woken:
            while (task.running() and not task.destroyed.is_set() and
                   context.is_active() and
                   not plugin.shutting_down.is_set()):
                woken.wait()
                woken.clear()
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
        task.kill_leftovers()
        task.close_fds(plugin.watcher)
        task.remove_files()
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
        if handle.version not in (1, HANDLE_VERSION):
            raise invalid("handle.version %d: the python driver reads "
                          "versions 1 and %d" % (handle.version,
                                                  HANDLE_VERSION))
        try:
            st = json.loads(handle.driver_state)
            if handle.version == 1:  # output and state in one directory
                state_dir = task_dir = st["task_dir"]
            else:
                state_dir, task_dir = st["state_dir"], st["task_dir"]
            pid, pid_start = int(st["pid"]), st["pid_start"]
            mpid, mstart = int(st["monitor_pid"]), st["monitor_start"]
        except (ValueError, KeyError, TypeError):
            raise invalid("handle.driver_state is not a python driver "
                          "state") from None
        if st.get("task_id") != cfg.id:
            raise invalid('handle.driver_state belongs to task "%s", not '
                          'task "%s"' % (st.get("task_id"), cfg.id))
        creds = st.get("creds") or {}
        task = Task(cfg, state_dir, task_dir, st.get("cwd") or task_dir,
                    self._task_env(cfg, task_dir, creds), creds)
        if handle.version == 1:
            task.log_dir = task_dir
        task.made = list(st.get("made") or [])
        task.netns = st.get("netns")
        task.pid, task.pid_start = pid, pid_start
        task.monitor_pid, task.monitor_start = mpid, mstart
        task.started_at = st.get("started_at", task.started_at)
        task.boot_id = st.get("boot_id") or task.boot_id
        task.recovered = True

        result = Plugin.read_exit_file(task)
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
        result = Plugin.read_exit_file(task)
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
                           'exit status in %s' % (cfg.id, pid, state_dir))

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
        if not context.add_callback(lambda: plugin.events.close(q)):
            plugin.events.close(q)
        try:
            # First where every known task stands, so that a subscriber that
            # comes late still hears of every task; then events as they come
            # (the queue ends with None when the call or the driver ends).
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
            while True:
                event = q.get()
                if event is None:
                    break
                yield event
        finally:
            plugin.events.close(q)
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

        def go_on():
            return (context.is_active() and not task.destroyed.is_set() and
                    not plugin.shutting_down.is_set())

        with plugin.waker(context, task) as woken:
            while go_on():
                yield driver_pb2.TaskStatsResponse(usage=sampler.sample())
                next_at = time.monotonic() + interval
                while go_on():
                    left = next_at - time.monotonic()
                    if left <= 0:
                        break
                    woken.wait(left)
                    woken.clear()
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
    def _exec_argv(task, command, tty=False):
        """The command line and Popen credentials for a command run into
        the task. A command that must join the task's network namespace
        (which needs root) or take a pty as its controlling terminal is
        started through this file's --exec helper, which does that (and
        takes the task's credentials after joining) before it execs."""
        creds = task.creds
        if not tty and not task.netns:
            return command, DriverServicer._creds_kwargs(task)
        argv = helper_argv("--exec")
        if tty:
            argv.append("--tty")
        kwargs = DriverServicer._creds_kwargs(task)
        if task.netns:
            argv += ["--netns", task.netns]
            if creds:
                argv += ["--creds", "%d:%d:%s" % (
                    creds["uid"], creds["gid"],
                    ",".join(str(g) for g in creds.get("groups", [])))]
                kwargs = {}
        return argv + ["--"] + command, kwargs

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
        timeout = None
        if request.HasField("timeout"):
            timeout = duration_seconds(request.timeout)
        argv, creds = self._exec_argv(task, list(request.command))
        try:
            proc = subprocess.Popen(
                argv, env=task.env, cwd=task.cwd,
                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                stderr=subprocess.PIPE, start_new_session=True,
                close_fds=True, **creds)
        except OSError as e:
            code = 127 if e.errno == errno.ENOENT else 126
            return driver_pb2.ExecTaskResponse(
                stderr=("%s: %s\n" % (request.command[0],
                                      e.strerror)).encode(),
                result=driver_pb2.ExitResult(exit_code=code,
                                             exited_at=timestamp(time.time())))

        def kill():
            if proc.returncode is None:
                try:
                    os.killpg(proc.pid, signal.SIGKILL)
                except OSError:
                    pass

        # The caller going away kills the command (the callback runs on
        # gRPC's thread); the timeout is communicate()'s own.
        if not context.add_callback(kill):
            kill()
        try:
            out, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            kill()
            out, err = proc.communicate()
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

    def AttachTask(self, request_iterator, context):
        context.abort(grpc.StatusCode.UNIMPLEMENTED,
                      "the python driver does not attach to tasks "
                      "(attach is false)")

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
        argv, creds = DriverServicer._exec_argv(self.task, command, self.tty)
        kwargs = dict(env=env, cwd=self.task.cwd,
                      start_new_session=True, close_fds=True, **creds)
        try:
            if self.tty:
                import pty
                master, slave = pty.openpty()
                self.master = master
                try:
                    if self.setup.HasField("terminal_size"):
                        self._resize(master, self.setup.terminal_size)
                    self.proc = subprocess.Popen(
                        argv, stdin=slave, stdout=slave, stderr=slave,
                        **kwargs)
                finally:
                    os.close(slave)
                self.stdin_fd = master
                self.out_fds = {master: "stdout"}
            else:
                self.proc = subprocess.Popen(
                    argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
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
# The driver's log: stderr, which the host forwards, until stderr breaks.


DRIVER_LOG = "driver.log"


class StderrLogHandler(logging.Handler):
    """Writes log lines to stderr (fd 2) without ever blocking on it or
    failing because of it.

    The host forwards the plugin's stderr, a pipe. When berth-node restarts
    it reattaches to the running plugin, and the old pipe has no reader any
    more: a write gives EPIPE (Python ignores SIGPIPE). On the first such
    error the handler makes fd 2 itself append to DRIVER_LOG in the driver's
    state directory (so that grpc's own messages and tracebacks go there
    too) and logs there from then on; if even that fails, lines are dropped
    silently. A pipe that is open but full (a host that does not read) is
    never waited for: a line that does not fit at once goes to DRIVER_LOG.
    """

    def __init__(self, plugin_dir):
        super().__init__()
        self.plugin_dir = plugin_dir  # a callable: the driver's state dir
        self.broken = False
        self.fallback = None  # fd of DRIVER_LOG for lines stderr refused

    def _file_fd(self):
        if self.fallback is None:
            try:
                directory = self.plugin_dir()
                os.makedirs(directory, mode=0o711, exist_ok=True)
                self.fallback = os.open(
                    os.path.join(directory, DRIVER_LOG),
                    os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC,
                    0o640)
            except OSError:
                return None
        return self.fallback

    def _switch_to_file(self, reason):
        self.broken = True
        fd = self._file_fd()
        if fd is None:
            return
        try:
            os.dup2(fd, 2, inheritable=False)
        except OSError:
            return
        self._write_file(("%s berth-python-driver: stderr is gone (%s): "
                          "logging to this file from now on\n" %
                          (time.strftime("%Y-%m-%d %H:%M:%S"),
                           reason)).encode())

    def _write_file(self, data):
        fd = self._file_fd()
        if fd is not None:
            try:
                os.write(fd, data)
            except OSError:
                pass

    def emit(self, record):
        try:
            data = (self.format(record) + "\n").encode(errors="replace")
        except Exception:
            return
        if self.broken:
            self._write_file(data)
            return
        poller = select.poll()
        poller.register(2, select.POLLOUT)
        view = memoryview(data)
        while view:
            try:
                ready = poller.poll(0)
                if ready and ready[0][1] & (select.POLLERR | select.POLLHUP |
                                            select.POLLNVAL):
                    raise BrokenPipeError(errno.EPIPE, "no reader")
                if not ready:  # full: never block the driver on it
                    self._write_file(bytes(view))
                    return
                view = view[os.write(2, view[:4096]):]
            except BlockingIOError:
                self._write_file(bytes(view))
                return
            except OSError as e:
                self._switch_to_file(e.strerror or str(e))
                self._write_file(bytes(view))
                return


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


def raise_nofile_limit():
    """Raises this process's soft limit on open files to the hard limit, at
    most 2^20 (it holds two pidfds per task, and the usual soft limit is
    1024). Returns the limits it was started with, which the monitors give
    back to the tasks, or None if nothing changed."""
    import resource
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = 1 << 20 if hard == resource.RLIM_INFINITY else min(hard, 1 << 20)
    if soft >= want:
        return None
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
    except (ValueError, OSError):
        return None
    return [soft, hard]


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

    holder = {}
    handler = StderrLogHandler(
        lambda: holder["plugin"].state_dir if "plugin" in holder
        else os.path.join(socket_dir, "python-state"))
    handler.setFormatter(logging.Formatter(
        "%(asctime)s %(levelname)s berth-python-driver: %(message)s"))
    logging.basicConfig(level=logging.INFO, handlers=[handler])
    load_api()
    max_calls = MAX_CALLS
    if os.environ.get(MAX_CALLS_ENV):
        try:
            max_calls = int(os.environ[MAX_CALLS_ENV])
            if max_calls < 1:
                raise ValueError
        except ValueError:
            die("%s=%s: want a positive number of calls" %
                (MAX_CALLS_ENV, os.environ[MAX_CALLS_ENV]))

    socket_path = prepare_socket(socket_dir)
    plugin = Plugin(socket_dir, socket_path)
    holder["plugin"] = plugin
    plugin.rlimit_nofile = raise_nofile_limit()
    server = grpc.server(
        futures.ThreadPoolExecutor(max_workers=max_calls,
                                   thread_name_prefix="rpc"),
        options=[("grpc.max_receive_message_length", 64 * 1024 * 1024),
                 ("grpc.max_send_message_length", -1)],
        maximum_concurrent_rpcs=max_calls)
    plugin.server = server
    health_pb2_grpc.add_HealthServicer_to_server(
        plugin.count_calls(HealthServicer(plugin)), server)
    plugin_pb2_grpc.add_PluginServiceServicer_to_server(
        plugin.count_calls(PluginServicer(plugin)), server)
    driver_pb2_grpc.add_DriverServiceServicer_to_server(
        plugin.count_calls(DriverServicer(plugin)), server)
    # The socket is born 0600: root's and this driver's uid's (berth-node's)
    # only, like every berth plugin socket. (grpcio cannot check a caller's
    # SO_PEERCRED as the C++ SDK does: the mode and the 0750 socket
    # directory do it.)
    old_umask = os.umask(0o177)
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
    os.chmod(socket_path, 0o600)
    st = os.stat(socket_path)
    socket_id = (st.st_dev, st.st_ino)

    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda signum, _: plugin.begin_shutdown(2.0))

    sys.stdout.write("%d|%d|unix|%s|grpc\n" % (
        CORE_PROTOCOL_VERSION, APP_PROTOCOL_VERSION, socket_path))
    sys.stdout.flush()
    log.info("serving on %s (pid %d, up to %d calls at once); state in %s",
             socket_path, os.getpid(), max_calls, plugin.state_dir)

    # The server terminates once its clients closed their connections, or
    # the grace period is over. Exit as soon as no call is in flight any
    # more (a host need not hang up first), and in any case before the
    # grace period Shutdown gave has passed.
    while server.wait_for_termination(0.05):
        if plugin.stopped_at is not None and plugin.idle():
            break
        if plugin.exit_by is not None and time.monotonic() >= plugin.exit_by:
            with plugin.lock:
                open_calls = plugin.calls_in_flight
            if open_calls:
                log.info("grace period over: exiting with %d calls still "
                         "open", open_calls)
            break
    try:
        st = os.stat(socket_path)
        if (st.st_dev, st.st_ino) == socket_id:
            os.unlink(socket_path)
    except OSError:
        pass
    log.info("stopped")
    try:
        logging.shutdown()
        sys.stderr.flush()
    except Exception:
        pass  # a broken stderr must not change the exit status
    # Do not wait for the watcher or the calls still open: they hold no
    # state (the monitors keep the tasks').
    os._exit(0)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
