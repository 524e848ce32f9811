// The server side of exec_stream_benchmark: three servers of
// DriverService.ExecTaskStreaming that send the same bytes to stdout, so that
// only how they are served differs.
//
// - HighLevelWriterDriver: an SDK driver on the high-level interface
//   (ExecStreamingDriver) that writes the bytes in large writes
//   (kHighLevelWriteBytes); the SDK frames them (32 KiB) and sends them.
// - RawSenderDriver: an SDK driver on the raw interface
//   (RawExecStreamingDriver) that Sends stdout responses of 32 KiB, as a
//   driver handing on a backend's frames would.
// - PlainExecService: the reference, a plain generated
//   DriverService::Service whose ExecTaskStreaming writes stdout responses of
//   32 KiB itself on the gRPC stream.
// - PlainExecService with a reader thread: the same, but, as the SDK's
//   adapters do, another thread reads the requests (waiting for the
//   half-close) while the handler writes. Not a target: it tells how much of
//   the SDK's cost is this concurrent Read rather than the SDK's own code.
// - CallbackExecService: the same bytes from gRPC's callback API
//   (ServerBidiReactor), with a read pending all along as the SDK keeps one.
//   Not a target either: it tells whether that design would keep a
//   concurrent read without the cost.
//
// Each answers the same protocol: the setup names task kExecTaskId and the
// command {"write", "<bytes>"}; the server sends <bytes> bytes of stdout,
// then an exit frame with code 0, then waits for the caller to half-close
// and ends the call OK.

#ifndef PLUGINS_BENCHMARKS_EXEC_BENCH_DRIVERS_H_
#define PLUGINS_BENCHMARKS_EXEC_BENCH_DRIVERS_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "berth/driver/v1/driver.grpc.pb.h"
#include "grpcpp/server_context.h"
#include "grpcpp/support/server_callback.h"
#include "grpcpp/support/sync_stream.h"
#include "plugins/sdk/driver.h"
#include "plugins/sdk/exec.h"

namespace berth::plugin::benchmarks {

// The one task the servers know (InspectTask says it runs).
inline constexpr char kExecTaskId[] = "exec-bench-task";
// Socket names in the server's socket directory.
inline constexpr char kHighLevelSocket[] = "high_level.sock";
inline constexpr char kRawSocket[] = "raw.sock";
inline constexpr char kPlainSocket[] = "plain.sock";
inline constexpr char kPlainReaderSocket[] = "plain_reader.sock";
inline constexpr char kCallbackSocket[] = "callback.sock";
// The size of HighLevelWriterDriver's writes.
inline constexpr size_t kHighLevelWriteBytes = 1024 * 1024;

// The command that makes a server send `bytes` bytes of stdout.
std::vector<std::string> WriteCommand(uint64_t bytes);

// The byte count of a WriteCommand; INVALID_ARGUMENT naming the command when
// it is not one.
absl::StatusOr<uint64_t> ParseWriteCommand(
    const std::vector<std::string>& command);

// What both SDK drivers share: task kExecTaskId runs; everything else but
// exec is UNIMPLEMENTED.
class BenchDriverBase : public Driver {
 public:
  DriverInfo Info() const override;
  v1::ConfigSchema TaskConfigSchema() const override;
  driver::v1::DriverCapabilities Capabilities() const override;
  absl::StatusOr<driver::v1::StartTaskResponse> StartTask(
      const driver::v1::TaskConfig& task) override;
  absl::StatusOr<driver::v1::ExitResult> WaitTask(
      const std::string& task_id, const CancelToken& cancel) override;
  absl::Status StopTask(const std::string& task_id, absl::Duration timeout,
                        int signal) override;
  absl::Status DestroyTask(const std::string& task_id, bool force) override;
  absl::StatusOr<driver::v1::TaskStatus> InspectTask(
      const std::string& task_id) override;
};

class HighLevelWriterDriver : public BenchDriverBase,
                              public ExecStreamingDriver {
 public:
  HighLevelWriterDriver();
  absl::StatusOr<ExitStatus> ExecTaskStreaming(
      const ExecOptions& options) override;

 private:
  const std::string block_;  // kHighLevelWriteBytes
};

class RawSenderDriver : public BenchDriverBase, public RawExecStreamingDriver {
 public:
  absl::Status ExecTaskStreamingRaw(ExecTaskStream* stream) override;
};

class PlainExecService : public driver::v1::DriverService::Service {
 public:
  // `reader_thread`: read the requests in a thread of their own while
  // writing (see above).
  explicit PlainExecService(bool reader_thread = false)
      : reader_thread_(reader_thread) {}

  grpc::Status ExecTaskStreaming(
      grpc::ServerContext* context,
      grpc::ServerReaderWriter<driver::v1::ExecTaskStreamingResponse,
                               driver::v1::ExecTaskStreamingRequest>* stream)
      override;

 private:
  const bool reader_thread_;
};

class CallbackExecService : public driver::v1::DriverService::CallbackService {
 public:
  grpc::ServerBidiReactor<driver::v1::ExecTaskStreamingRequest,
                          driver::v1::ExecTaskStreamingResponse>*
  ExecTaskStreaming(grpc::CallbackServerContext* context) override;
};

}  // namespace berth::plugin::benchmarks

#endif  // PLUGINS_BENCHMARKS_EXEC_BENCH_DRIVERS_H_
