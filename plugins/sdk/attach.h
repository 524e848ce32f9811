// AttachTask for drivers (driver.proto, DriverService.AttachTask): a
// driver whose capabilities say attach overrides Driver::AttachTask and
// serves one call's stream, which the SDK gives it already set up.
//
//   absl::Status MyDriver::AttachTask(AttachTaskStream* stream) {
//     // stream->setup(): task_id (checked non-empty), stdin, terminal_size
//     // Send stdout/stderr responses until the task's output ends, reading
//     // stdin, stdin_close and resize requests with Recv meanwhile (from a
//     // thread of its own), then return OkStatus().
//   }
//
// Contract (plugins/DRIVERS.md): output from the moment of the call, the
// first attach of a run first getting what the task wrote before it (up to
// its latest 1 MiB); NOT_FOUND for an unknown task; FAILED_PRECONDITION
// naming the task when stdin is asked of a task started without
// TaskConfig.stdin_open; OK when the task's output ends (an exit frame is
// optional: the node adds one from WaitTask); the caller cancelling leaves
// the task running. The SDK ends the call once AttachTask returns, even
// with a Recv of the caller's requests still pending.

#ifndef PLUGINS_SDK_ATTACH_H_
#define PLUGINS_SDK_ATTACH_H_

#include "berth/driver/v1/driver.pb.h"
#include "plugins/sdk/cancel.h"

namespace berth::plugin {

// The stream of one AttachTask call.
class AttachTaskStream {
 public:
  virtual ~AttachTaskStream() = default;

  // The call's first request (the SDK checked that it names a task).
  virtual const driver::v1::AttachSetup& setup() const = 0;

  // The next request after the setup (stdin, stdin_close, resize), in the
  // caller's order; blocks until one comes. False when there are no more:
  // the caller half-closed or cancelled the stream (then cancel() is
  // cancelled), or CloseRecv() was called. One reader at a time.
  virtual bool Recv(driver::v1::AttachTaskRequest* request) = 0;

  // Recv returns false from now on (one blocked in another thread returns
  // at once). From any thread.
  virtual void CloseRecv() = 0;

  // Sends one response, blocking while the caller does not read (flow
  // control); false when the stream is gone. Thread-safe. stdout and
  // stderr frames of at most 32 KiB.
  virtual bool Send(const driver::v1::AttachTaskResponse& response) = 0;

  // Cancelled when the caller cancels the call (or it ends).
  virtual const CancelToken& cancel() const = 0;
};

}  // namespace berth::plugin

#endif  // PLUGINS_SDK_ATTACH_H_
