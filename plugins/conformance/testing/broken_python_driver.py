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
"""

import importlib.util
import os
import sys
import threading

import grpc

WRAPS_ENV = "BERTH_BROKEN_DRIVER_WRAPS"
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


def main():
    wrapped = os.environ.get(WRAPS_ENV, "")
    if not wrapped:
        sys.stderr.write("broken_python_driver: set %s to the path of "
                         "berth_python_driver.py\n" % WRAPS_ENV)
        return 1
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
    return module.main(sys.argv)


if __name__ == "__main__":
    sys.exit(main())
