// Internal to the SDK: serves DriverService.ExecTaskStreaming on a driver's
// ExecStreamingDriver or RawExecStreamingDriver interface (exec.h).

#ifndef PLUGINS_SDK_EXEC_ADAPTER_H_
#define PLUGINS_SDK_EXEC_ADAPTER_H_

#include "absl/time/time.h"
#include "berth/driver/v1/driver.pb.h"
#include "grpcpp/server_context.h"
#include "grpcpp/support/sync_stream.h"
#include "plugins/sdk/call_watcher.h"
#include "plugins/sdk/driver.h"

namespace berth::plugin::internal {

using ExecServerStream =
    grpc::ServerReaderWriterInterface<driver::v1::ExecTaskStreamingResponse,
                                      driver::v1::ExecTaskStreamingRequest>;

// Whether `driver` implements an exec interface of exec.h.
bool SupportsExecStreaming(Driver& driver);

// How long the SDK waits, after the driver returned, for the caller to
// half-close the stream before it cancels the call.
inline constexpr absl::Duration kHalfCloseGrace = absl::Seconds(5);

// The whole of one ExecTaskStreaming call: reads and checks the setup, asks
// the driver (InspectTask) that the task exists and runs, then serves the
// stream on the driver's interface. Returns the call's status (CANCELLED when
// the caller cancelled). Does not log the call's end.
grpc::Status ServeExecTaskStreaming(Driver& driver,
                                    grpc::ServerContext* context,
                                    ExecServerStream* stream,
                                    CallWatcher& watcher);

}  // namespace berth::plugin::internal

#endif  // PLUGINS_SDK_EXEC_ADAPTER_H_
