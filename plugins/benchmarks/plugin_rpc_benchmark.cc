// A unary RPC to a driver plugin through the host's DriverClient, next to the
// same RPC as a plain generated-stub call on the same channel (one Unix
// socket connection) to the same plugin process, in the same run:
//
//   rpc/InspectTask/driver_client    DriverClient::InspectTask of a running
//                                    task of the mock driver
//   rpc/InspectTask/raw_stub         DriverService::Stub::InspectTask, the
//                                    same request
//   rpc/GetCapabilities/driver_client, rpc/GetCapabilities/raw_stub
//                                    the same for the smallest RPC
//
// The mock driver runs as a separate process launched by
// host::PluginProcess::Launch, as berth-node runs it; the benchmark process
// is only a client (so gRPC's default epoll1 poller is used on both sides).
// Target: DriverClient at most 1.2x the raw stub.

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "benchmark/benchmark.h"
#include "berth/driver/v1/driver.grpc.pb.h"
#include "glog/logging.h"
#include "google/protobuf/struct.pb.h"
#include "grpcpp/client_context.h"
#include "plugins/benchmarks/bench_util.h"
#include "plugins/host/driver_client.h"
#include "plugins/host/plugin_process.h"

namespace berth::plugin::benchmarks {
namespace {

using driver::v1::DriverService;

constexpr char kMockDriver[] = "plugins/examples/mock_driver/mock_driver";
constexpr char kTaskId[] = "rpc-bench-task";

// What every benchmark calls; set up by main() before they run.
struct Target {
  std::shared_ptr<host::DriverClient> client;
  std::unique_ptr<DriverService::Stub> stub;
};
Target* target = nullptr;

void BM_InspectTaskDriverClient(benchmark::State& state) {
  driver::v1::InspectTaskRequest request;
  request.set_task_id(kTaskId);
  for (auto _ : state) {
    absl::StatusOr<driver::v1::InspectTaskResponse> response =
        target->client->InspectTask(request);
    if (!response.ok() ||
        response->status().state() != driver::v1::TASK_STATE_RUNNING) {
      state.SkipWithError(
          absl::StrCat("InspectTask: ", response.status().ToString(),
                       response.ok() ? " but the task is not running" : "")
              .c_str());
      break;
    }
  }
}

void BM_InspectTaskRawStub(benchmark::State& state) {
  driver::v1::InspectTaskRequest request;
  request.set_task_id(kTaskId);
  for (auto _ : state) {
    grpc::ClientContext context;
    driver::v1::InspectTaskResponse response;
    const grpc::Status status =
        target->stub->InspectTask(&context, request, &response);
    if (!status.ok() ||
        response.status().state() != driver::v1::TASK_STATE_RUNNING) {
      state.SkipWithError(
          absl::StrCat("InspectTask: ", status.error_message(),
                       status.ok() ? " but the task is not running" : "")
              .c_str());
      break;
    }
  }
}

void BM_GetCapabilitiesDriverClient(benchmark::State& state) {
  for (auto _ : state) {
    absl::StatusOr<driver::v1::GetCapabilitiesResponse> response =
        target->client->GetCapabilities();
    if (!response.ok()) {
      state.SkipWithError(response.status().ToString().c_str());
      break;
    }
  }
}

void BM_GetCapabilitiesRawStub(benchmark::State& state) {
  const driver::v1::GetCapabilitiesRequest request;
  for (auto _ : state) {
    grpc::ClientContext context;
    driver::v1::GetCapabilitiesResponse response;
    const grpc::Status status =
        target->stub->GetCapabilities(&context, request, &response);
    if (!status.ok()) {
      state.SkipWithError(status.error_message().c_str());
      break;
    }
  }
}

// Starts `sleep 600` as task kTaskId.
absl::Status StartTask(host::DriverClient& client) {
  driver::v1::StartTaskRequest request;
  request.mutable_task()->set_id(kTaskId);
  request.mutable_task()->set_name(kTaskId);
  auto& fields =
      *request.mutable_task()->mutable_driver_config()->mutable_fields();
  fields["command"].set_string_value("sleep");
  fields["args"].mutable_list_value()->add_values()->set_string_value("600");
  return client.StartTask(request).status();
}

void RemoveTask(host::DriverClient& client) {
  driver::v1::StopTaskRequest stop;
  stop.set_task_id(kTaskId);
  stop.mutable_timeout()->set_seconds(1);
  absl::Status stopped = client.StopTask(stop).status();
  LOG_IF(ERROR, !stopped.ok()) << stopped;
  driver::v1::DestroyTaskRequest destroy;
  destroy.set_task_id(kTaskId);
  destroy.set_force(true);
  absl::Status destroyed = client.DestroyTask(destroy).status();
  LOG_IF(ERROR, !destroyed.ok()) << destroyed;
}

}  // namespace
}  // namespace berth::plugin::benchmarks

int main(int argc, char** argv) {
  namespace bench = ::berth::plugin::benchmarks;
  namespace host = ::berth::plugin::host;
  bench::InitBenchmarkMain(&argc, argv);

  bench::TempDir dir;
  host::LaunchOptions options;
  options.name = "mock";
  options.binary = bench::RunfilePath(bench::kMockDriver);
  options.socket_dir = dir.Join("plugins");
  absl::StatusOr<std::unique_ptr<host::PluginProcess>> plugin =
      host::PluginProcess::Launch(options);
  if (!plugin.ok()) {
    LOG(ERROR) << plugin.status();
    return 1;
  }
  bench::Target target;
  target.client = (*plugin)->client();
  target.stub = berth::driver::v1::DriverService::NewStub((*plugin)->channel());
  bench::target = &target;
  if (absl::Status started = bench::StartTask(*target.client); !started.ok()) {
    LOG(ERROR) << started;
    return 1;
  }

  for (const auto& [name, function] :
       {std::make_pair("rpc/InspectTask/driver_client",
                       bench::BM_InspectTaskDriverClient),
        std::make_pair("rpc/InspectTask/raw_stub",
                       bench::BM_InspectTaskRawStub),
        std::make_pair("rpc/GetCapabilities/driver_client",
                       bench::BM_GetCapabilitiesDriverClient),
        std::make_pair("rpc/GetCapabilities/raw_stub",
                       bench::BM_GetCapabilitiesRawStub)}) {
    benchmark::RegisterBenchmark(name, function)
        ->UseRealTime()
        ->Unit(benchmark::kMicrosecond);
  }
  const int code = bench::RunBenchmarksAndReportRatios({
      {"rpc/InspectTask/driver_client", "rpc/InspectTask/raw_stub",
       bench::RatioSpec::Metric::kRealTime, /*max_ratio=*/1.2},
      {"rpc/GetCapabilities/driver_client", "rpc/GetCapabilities/raw_stub",
       bench::RatioSpec::Metric::kRealTime, /*max_ratio=*/1.2},
  });

  bench::RemoveTask(*target.client);
  bench::target = nullptr;
  target.stub.reset();
  target.client.reset();
  (*plugin)->Stop();
  return code;
}
