// Throughput of DriverService.ExecTaskStreaming (stdout, server to client)
// through the SDK's exec adapters, next to a plain generated gRPC service
// sending the same bytes in 32 KiB frames, in the same run and the same
// process layout:
//
//   exec_stream/plain_service/N          the reference: PlainExecService
//   exec_stream/sdk_high_level/N         HighLevelWriterDriver (1 MiB writes)
//                                        behind the SDK's high-level adapter
//   exec_stream/sdk_raw/N                RawSenderDriver (32 KiB Sends)
//                                        behind the SDK's raw adapter
//   exec_stream/sdk_high_level_host_client/N
//                                        the high-level driver again, read
//                                        through the host's DriverClient
//                                        (ExecStream) instead of the stub
//   exec_stream/plain_service_reader_thread/N
//                                        diagnostic, no target: the plain
//                                        service with a second thread reading
//                                        the requests while it writes, as the
//                                        SDK's adapters do
//   exec_stream/callback_service/N       diagnostic, no target: the same
//                                        bytes from gRPC's callback API with
//                                        a read pending all along
//
// N is the stdout bytes of one call (one iteration): the setup, N bytes, the
// exit frame, the caller's half-close and the end of the call. The first
// three read with the same generated-stub client code, so that their ratios
// compare only the server side.
//
// Process layout: every server runs in one helper process (exec_bench_server,
// see exec_bench_drivers.h), the client in this one: server and client are
// never in the same process, as in production (host and plugin), and gRPC's
// default epoll1 poller is used on both sides. (In one process gRPC 1.51
// sometimes stalls such transfers for 10 s under epoll1; see
// //plugins/sdk:exec_adapter_test.)
//
// Target: each SDK variant at least 0.8x the reference's bytes/s.

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "benchmark/benchmark.h"
#include "berth/driver/v1/driver.grpc.pb.h"
#include "glog/logging.h"
#include "grpcpp/channel.h"
#include "grpcpp/client_context.h"
#include "grpcpp/support/sync_stream.h"
#include "plugins/benchmarks/bench_util.h"
#include "plugins/benchmarks/exec_bench_drivers.h"
#include "plugins/host/driver_client.h"
#include "plugins/host/plugin_lifetime.h"
#include "services/common/dial.h"

namespace berth::plugin::benchmarks {
namespace {

using driver::v1::DriverService;
using driver::v1::ExecTaskStreamingRequest;
using driver::v1::ExecTaskStreamingResponse;

constexpr char kServer[] = "plugins/benchmarks/exec_bench_server";

ExecTaskStreamingRequest Setup(uint64_t bytes) {
  ExecTaskStreamingRequest request;
  request.mutable_setup()->set_task_id(kExecTaskId);
  for (const std::string& arg : WriteCommand(bytes)) {
    request.mutable_setup()->add_command(arg);
  }
  return request;
}

// What one call received, checked at its end.
class Received {
 public:
  explicit Received(uint64_t expected) : expected_(expected) {}

  // Takes one response; sets *exited at the exit frame.
  void Take(const ExecTaskStreamingResponse& response, bool* exited) {
    switch (response.frame_case()) {
      case ExecTaskStreamingResponse::kStdout:
        bytes_ += response.stdout().size();
        break;
      case ExecTaskStreamingResponse::kStderr:
        stderr_bytes_ += response.stderr().size();
        break;
      case ExecTaskStreamingResponse::kExit:
        exit_code_ = response.exit().exit_code();
        *exited = true;
        break;
      default:
        break;
    }
  }

  absl::Status Check() const {
    if (!exit_code_.has_value()) {
      return absl::DataLossError("the call ended without an exit frame");
    }
    if (*exit_code_ != 0) {
      return absl::DataLossError(absl::StrCat("exit code ", *exit_code_));
    }
    if (bytes_ != expected_ || stderr_bytes_ != 0) {
      return absl::DataLossError(
          absl::StrCat("received ", bytes_, " stdout and ", stderr_bytes_,
                       " stderr bytes; expected ", expected_, " stdout bytes"));
    }
    return absl::OkStatus();
  }

 private:
  const uint64_t expected_;
  uint64_t bytes_ = 0;
  uint64_t stderr_bytes_ = 0;
  std::optional<int> exit_code_;
};

// One whole call through a generated stub.
absl::Status ExecThroughStub(DriverService::Stub& stub, uint64_t bytes) {
  grpc::ClientContext context;
  std::unique_ptr<grpc::ClientReaderWriter<ExecTaskStreamingRequest,
                                           ExecTaskStreamingResponse>>
      stream = stub.ExecTaskStreaming(&context);
  Received received(bytes);
  if (stream->Write(Setup(bytes))) {
    ExecTaskStreamingResponse response;
    while (stream->Read(&response)) {
      bool exited = false;
      received.Take(response, &exited);
      if (exited) stream->WritesDone();
    }
  }
  const grpc::Status status = stream->Finish();
  if (!status.ok()) {
    return absl::UnknownError(absl::StrCat("ExecTaskStreaming: code ",
                                           status.error_code(), ": ",
                                           status.error_message()));
  }
  return received.Check();
}

// One whole call through the host's DriverClient.
absl::Status ExecThroughClient(host::DriverClient& client, uint64_t bytes) {
  absl::StatusOr<std::unique_ptr<host::ExecStream>> stream =
      client.ExecTaskStreaming();
  if (!stream.ok()) return stream.status();
  if (absl::Status written = (*stream)->Write(Setup(bytes)); !written.ok()) {
    return written;
  }
  Received received(bytes);
  while (true) {
    absl::StatusOr<std::optional<ExecTaskStreamingResponse>> response =
        (*stream)->Read();
    if (!response.ok()) return response.status();
    if (!response->has_value()) break;
    bool exited = false;
    received.Take(**response, &exited);
    if (exited) {
      if (absl::Status done = (*stream)->WritesDone(); !done.ok()) return done;
    }
  }
  return received.Check();
}

template <typename Call>
void RunCalls(benchmark::State& state, uint64_t bytes, Call call) {
  for (auto _ : state) {
    if (absl::Status status = call(); !status.ok()) {
      state.SkipWithError(status.ToString().c_str());
      break;
    }
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * bytes));
}

}  // namespace
}  // namespace berth::plugin::benchmarks

int main(int argc, char** argv) {
  namespace bench = ::berth::plugin::benchmarks;
  namespace host = ::berth::plugin::host;
  using ::berth::driver::v1::DriverService;
  bench::InitBenchmarkMain(&argc, argv);

  bench::TempDir dir;
  absl::StatusOr<std::unique_ptr<bench::Child>> server =
      bench::Child::Start({bench::RunfilePath(bench::kServer),
                           absl::StrCat("--socket_dir=", dir.path())});
  if (!server.ok()) {
    LOG(ERROR) << server.status();
    return 1;
  }
  absl::StatusOr<std::string> ready = (*server)->ReadLine(absl::Seconds(30));
  if (!ready.ok() || *ready != "ready") {
    LOG(ERROR) << "exec_bench_server did not get ready: "
               << (ready.ok() ? *ready : ready.status().ToString());
    return 1;
  }
  // One channel (one connection) and stub per server socket.
  std::map<std::string, std::shared_ptr<grpc::Channel>> channels;
  std::map<std::string, std::unique_ptr<DriverService::Stub>> stubs;
  for (const char* socket :
       {bench::kPlainSocket, bench::kPlainReaderSocket, bench::kCallbackSocket,
        bench::kHighLevelSocket, bench::kRawSocket}) {
    absl::StatusOr<std::shared_ptr<grpc::Channel>> channel =
        berth::DialUnix(dir.Join(socket), absl::Seconds(10));
    if (!channel.ok()) {
      LOG(ERROR) << channel.status();
      return 1;
    }
    channels[socket] = *channel;
    stubs[socket] = DriverService::NewStub(*channel);
  }
  host::DriverClient::Options client_options;
  client_options.socket_path = dir.Join(bench::kHighLevelSocket);
  auto client = std::make_shared<host::DriverClient>(
      channels[bench::kHighLevelSocket],
      std::make_shared<host::PluginLifetime>("exec-bench"), client_options);

  std::vector<bench::RatioSpec> ratios;
  for (const uint64_t mib : {1, 64}) {
    const uint64_t bytes = mib << 20;
    const std::string size = absl::StrCat(mib, "MiB");
    const std::string reference =
        absl::StrCat("exec_stream/plain_service/", size);
    // Registers `name`, and its ratio to the reference (with the target
    // unless `diagnostic`).
    auto add = [&](const std::string& variant, bool diagnostic, auto call) {
      const std::string name = absl::StrCat("exec_stream/", variant, "/", size);
      benchmark::RegisterBenchmark(name.c_str(),
                                   [bytes, call](benchmark::State& state) {
                                     bench::RunCalls(state, bytes, call);
                                   })
          ->UseRealTime()
          ->Unit(benchmark::kMillisecond);
      if (name == reference) return;
      bench::RatioSpec ratio{name, reference,
                             bench::RatioSpec::Metric::kBytesPerSecond};
      if (!diagnostic) ratio.min_ratio = 0.8;
      ratios.push_back(ratio);
    };
    auto stub_call = [&](const char* socket) {
      DriverService::Stub* stub = stubs[socket].get();
      return [stub, bytes] { return bench::ExecThroughStub(*stub, bytes); };
    };
    host::DriverClient* driver_client = client.get();
    add("plain_service", false, stub_call(bench::kPlainSocket));
    add("sdk_high_level", false, stub_call(bench::kHighLevelSocket));
    add("sdk_raw", false, stub_call(bench::kRawSocket));
    add("sdk_high_level_host_client", false, [driver_client, bytes] {
      return bench::ExecThroughClient(*driver_client, bytes);
    });
    add("plain_service_reader_thread", true,
        stub_call(bench::kPlainReaderSocket));
    add("callback_service", true, stub_call(bench::kCallbackSocket));
  }
  const int code = bench::RunBenchmarksAndReportRatios(ratios);
  client.reset();
  return code;
}
