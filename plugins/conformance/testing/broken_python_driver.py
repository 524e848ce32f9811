#!/usr/bin/python3
"""A deliberately broken berth task driver, for the test that shows the
conformance suite failing when it should (//plugins/conformance:
conformance_broken_driver_test).

It is the example Python driver (plugins/examples/python_driver), loaded as
a module from the path in $BERTH_BROKEN_DRIVER_WRAPS, served with a gRPC
server interceptor (grpcio's public API only) that breaks it:
- WaitTask reports a task that exited with code N as exiting with N + 1
  (a task killed by a signal is reported as it is);
- ExecTaskStreaming never sends the exit frame;
- DriverService.GetCapabilities does not report exec_tty;
- Fingerprint never sends a message: the stream hangs until cancelled.
Everything else is the example driver's own behaviour.

With BERTH_BROKEN_DRIVER_BREAKS=RULE[,RULE...] it breaks only the rules named
instead, one rule of the contract berth-node relies on each (the test that
shows each check of plugins/conformance/node_contract_checks.cc failing when
it should, //plugins/conformance:conformance_broken_contract_test):
- own_cwd: tasks run in the driver's own directory, not the task directory;
- logs_elsewhere: output goes to <task_dir>/output, not <task_dir>/logs;
- no_rotation: the output files are never rotated;
- ignore_work_dir: driver_config.work_dir is accepted but not used;
- ignore_netns: GROUP tasks run in the host's network namespace;
- exit_lost_while_down: a recovered task's exit record is not read (its exit
  status does not survive the driver);
- small_pool: 64 calls at once, as the first version of the example driver;
- slow_shutdown: Shutdown waits 3 s past its grace before stopping;
- claims_isolation: GetCapabilities claims every part of
  DriverCapabilities.isolation but image_rootfs (own_root, mounts,
  capabilities, no_new_privileges, seccomp, user_namespaces, masked_paths)
  while the driver enforces none of them (the isolation_* checks);
- foreign_inspect_handle: InspectTask gives a handle whose config names
  another task (the example driver gives none);
- unrecoverable_inspect_handle: InspectTask gives a handle of the task whose
  driver_state RecoverTask refuses.
"""

import importlib.util
import os
import sys
import threading

import grpc

WRAPS_ENV = "BERTH_BROKEN_DRIVER_WRAPS"
BREAKS_ENV = "BERTH_BROKEN_DRIVER_BREAKS"
RULES = {"own_cwd", "logs_elsewhere", "no_rotation", "ignore_work_dir",
         "ignore_netns", "exit_lost_while_down", "small_pool",
         "slow_shutdown", "claims_isolation", "foreign_inspect_handle",
         "unrecoverable_inspect_handle"}
DRIVER_SERVICE = "/berth.driver.v1.DriverService/"


def _unary(handler, behaviour):
    return grpc.unary_unary_rpc_method_handler(
        behaviour,
        request_deserializer=handler.request_deserializer,
        response_serializer=handler.response_serializer)


class Breaker(grpc.ServerInterceptor):
    """Breaks WaitTask, GetCapabilities, Fingerprint and ExecTaskStreaming."""

    def intercept_service(self, continuation, handler_call_details):
        handler = continuation(handler_call_details)
        if handler is None:
            return None
        method = handler_call_details.method

        if method == DRIVER_SERVICE + "WaitTask":
            wait = handler.unary_unary

            def wrong_exit_code(request, context):
                response = wait(request, context)
                if response.result.signal == 0:
                    response.result.exit_code += 1
                return response

            return _unary(handler, wrong_exit_code)

        if method == DRIVER_SERVICE + "GetCapabilities":
            get = handler.unary_unary

            def without_tty(request, context):
                response = get(request, context)
                response.capabilities.exec_tty = False
                return response

            return _unary(handler, without_tty)

        if method == DRIVER_SERVICE + "Fingerprint":

            def hang(request, context):
                cancelled = threading.Event()
                context.add_callback(cancelled.set)
                cancelled.wait()
                return
                yield  # a generator that yields nothing

            return grpc.unary_stream_rpc_method_handler(
                hang,
                request_deserializer=handler.request_deserializer,
                response_serializer=handler.response_serializer)

        if method == DRIVER_SERVICE + "ExecTaskStreaming":
            serve = handler.stream_stream

            def without_exit_frame(request_iterator, context):
                for response in serve(request_iterator, context):
                    if response.WhichOneof("frame") != "exit":
                        yield response

            return grpc.stream_stream_rpc_method_handler(
                without_exit_frame,
                request_deserializer=handler.request_deserializer,
                response_serializer=handler.response_serializer)

        return handler


def break_rules(module, rules):
    """Patches the loaded example driver so that it breaks `rules`."""
    servicer = module.DriverServicer
    monitor_spec = servicer._monitor_spec

    def broken_monitor_spec(self, cfg, argv, creds, task_dir, cwd, env,
                            netns):
        if "ignore_work_dir" in rules:
            cwd = task_dir
        if "ignore_netns" in rules:
            netns = None
        spec = monitor_spec(self, cfg, argv, creds, task_dir, cwd, env, netns)
        if "own_cwd" in rules:
            spec["cwd"] = self.plugin.state_dir
        if "logs_elsewhere" in rules:
            spec["logs"]["dir"] = os.path.join(task_dir, "output")
            os.makedirs(spec["logs"]["dir"], exist_ok=True)
        if "no_rotation" in rules:
            spec["logs"]["max_file_bytes"] = 1 << 40
        return spec

    servicer._monitor_spec = broken_monitor_spec

    if "exit_lost_while_down" in rules:
        read_exit_file = module.Plugin.read_exit_file

        def forgetful(task):
            return None if task.recovered else read_exit_file(task)

        module.Plugin.read_exit_file = staticmethod(forgetful)

    if "small_pool" in rules:
        module.MAX_CALLS = 64

    if "claims_isolation" in rules:
        get_capabilities = servicer.GetCapabilities

        def lying(self, request, context):
            response = get_capabilities(self, request, context)
            claimed = response.capabilities.isolation
            for claim in ("own_root", "mounts", "capabilities",
                          "no_new_privileges", "seccomp", "user_namespaces",
                          "masked_paths"):
                setattr(claimed, claim, True)
            return response

        servicer.GetCapabilities = lying

    if rules & {"foreign_inspect_handle", "unrecoverable_inspect_handle"}:
        inspect = servicer.InspectTask

        def with_bad_handle(self, request, context):
            response = inspect(self, request, context)
            handle = response.handle
            handle.version = module.HANDLE_VERSION
            handle.config.CopyFrom(self.plugin.task(request.task_id).config)
            handle.state = response.status.state
            handle.driver_state = b"{}"
            if "foreign_inspect_handle" in rules:
                handle.config.id = request.task_id + "-other"
            return response

        servicer.InspectTask = with_bad_handle

    if "slow_shutdown" in rules:
        begin_shutdown = module.Plugin.begin_shutdown

        def slow(self, grace, after=None):
            threading.Timer(grace + 3.0, begin_shutdown,
                            args=(self, grace, after)).start()

        module.Plugin.begin_shutdown = slow


def main():
    wrapped = os.environ.get(WRAPS_ENV, "")
    if not wrapped:
        sys.stderr.write("broken_python_driver: set %s to the path of "
                         "berth_python_driver.py\n" % WRAPS_ENV)
        return 1
    rules = {r for r in os.environ.get(BREAKS_ENV, "").split(",") if r}
    unknown = rules - RULES
    if unknown:
        sys.stderr.write("broken_python_driver: unknown rule(s) %s in %s "
                         "(known: %s)\n" % (", ".join(sorted(unknown)),
                                            BREAKS_ENV,
                                            ", ".join(sorted(RULES))))
        return 1
    if not rules:
        real_server = grpc.server

        def server(*args, **kwargs):
            kwargs["interceptors"] = list(kwargs.get("interceptors") or []) + [
                Breaker()]
            return real_server(*args, **kwargs)

        grpc.server = server
    spec = importlib.util.spec_from_file_location("berth_python_driver",
                                                  wrapped)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    if rules:
        break_rules(module, rules)
    return module.main(sys.argv)


if __name__ == "__main__":
    sys.exit(main())
