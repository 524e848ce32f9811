#!/usr/bin/env bash
# The checked-in Python stubs load with Debian's python3-grpcio and
# python3-protobuf (/usr/bin/python3, as a driver author without Bazel has
# them) and make messages and stubs of every service.
set -eu
export PYTHONPATH=$PWD/api/gen/python
exec /usr/bin/python3 - <<'PY'
import importlib
import grpc
from google.protobuf import json_format

concerns = ["agent", "driver", "image", "network", "node", "plugin", "proxy", "stats"]
channel = grpc.insecure_channel("unix:/nonexistent/berth-python-stubs-test.sock")
for concern in concerns:
    pb2 = importlib.import_module(f"berth.{concern}.v1.{concern}_pb2")
    pb2_grpc = importlib.import_module(f"berth.{concern}.v1.{concern}_pb2_grpc")
    services = pb2.DESCRIPTOR.services_by_name
    assert services, f"berth.{concern}.v1 defines no service"
    for name in services:
        stub = getattr(pb2_grpc, name + "Stub")(channel)
        for method in services[name].methods:
            assert hasattr(stub, method.name), f"{name}Stub lacks {method.name}"
        getattr(pb2_grpc, name + "Servicer")
    print(f"ok: berth.{concern}.v1: {', '.join(services)}")

from grpc_health.v1 import health_pb2, health_pb2_grpc
health_pb2_grpc.HealthStub(channel)
assert health_pb2.DESCRIPTOR.package == "grpc.health.v1"
print("ok: grpc.health.v1 as grpc_health.v1 (does not shadow grpc)")

from berth.driver.v1 import driver_pb2
request = driver_pb2.ExecTaskStreamingRequest(stdin=b"hello")
assert request.WhichOneof("frame") == "stdin"
config = json_format.ParseDict(
    {"task": {"id": "t1", "driverConfig": {"command": "/bin/true"}}},
    driver_pb2.StartTaskRequest())
assert config.task.driver_config["command"] == "/bin/true"
again = driver_pb2.StartTaskRequest.FromString(config.SerializeToString())
assert again == config
print(f"python stubs work with grpcio {grpc.__version__}")
PY
