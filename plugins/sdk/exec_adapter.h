// Internal to SDK: serves DriverService.ExecTaskStreaming on a driver's
// ExecStreamingDriver or RawExecStreamingDriver interface (exec.h), with
// gRPC's callback API (one ServerBidiReactor per call).

#ifndef PLUGINS_SDK_EXEC_ADAPTER_H_
#define PLUGINS_SDK_EXEC_ADAPTER_H_

#include <functional>

#include "berth/driver/v1/driver.pb.h"
#include "grpcpp/server_context.h"
#include "grpcpp/support/server_callback.h"
#include "grpcpp/support/status.h"
#include "plugins/sdk/driver.h"

namespace berth::plugin::internal {

using ExecReactor =
    grpc::ServerBidiReactor<driver::v1::ExecTaskStreamingRequest,
                            driver::v1::ExecTaskStreamingResponse>;

// Whether `driver` implements an exec interface of exec.h.
bool SupportsExecStreaming(Driver& driver);

// Called once per call, just before the reactor finishes it, with the call's
// status and whether the caller cancelled it.
using ExecEnd =
    std::function<void(const grpc::Status& status, bool caller_cancelled)>;

// The reactor of one ExecTaskStreaming call: reads and checks the setup, asks
// the driver (InspectTask, on a thread of its own) that the task exists and
// runs, then serves the stream on the driver's interface, which runs on that
// thread too. The call's status is CANCELLED when the caller cancelled. The
// reactor deletes itself once the call is done.
ExecReactor* NewExecTaskStreamingReactor(Driver& driver,
                                         grpc::CallbackServerContext* context,
                                         ExecEnd on_end);

}  // namespace berth::plugin::internal

#endif  // PLUGINS_SDK_EXEC_ADAPTER_H_
