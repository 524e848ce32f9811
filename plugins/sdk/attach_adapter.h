// Internal to the SDK: serves DriverService.AttachTask on Driver::AttachTask
// (attach.h) with gRPC's callback API (one ServerBidiReactor per call), so
// that the call can end as soon as the driver returns, whatever read of the
// caller's requests is still pending.

#ifndef PLUGINS_SDK_ATTACH_ADAPTER_H_
#define PLUGINS_SDK_ATTACH_ADAPTER_H_

#include <functional>

#include "berth/driver/v1/driver.pb.h"
#include "grpcpp/server_context.h"
#include "grpcpp/support/server_callback.h"
#include "grpcpp/support/status.h"
#include "plugins/sdk/driver.h"

namespace berth::plugin::internal {

using AttachReactor = grpc::ServerBidiReactor<driver::v1::AttachTaskRequest,
                                              driver::v1::AttachTaskResponse>;

// Called once per call, just before the reactor finishes it, with the call's
// status and whether the caller cancelled it.
using AttachEnd =
    std::function<void(const grpc::Status& status, bool caller_cancelled)>;

// The reactor of one AttachTask call: reads and checks the setup (a task
// id), then runs Driver::AttachTask on a thread of its own and finishes the
// call with what it returns (CANCELLED when the caller cancelled). Requests
// after the setup are read ahead into a bounded queue. The reactor deletes
// itself once the call is done and the thread is through.
AttachReactor* NewAttachTaskReactor(Driver& driver,
                                    grpc::CallbackServerContext* context,
                                    AttachEnd on_end);

}  // namespace berth::plugin::internal

#endif  // PLUGINS_SDK_ATTACH_ADAPTER_H_
