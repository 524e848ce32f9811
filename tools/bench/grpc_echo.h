// The reference that isolates gRPC's own cost in the streaming figure: a bare
// DriverService whose ExecTaskStreaming echoes stdin back as stdout, with no
// driver, no plugin SDK, no process and no pipes behind it.
//
// Protocol, as a driver's `cat` would answer it: the first request must carry
// a setup (anything else ends the call with INVALID_ARGUMENT; its task id and
// command are not looked at); every later stdin frame comes back as one
// stdout frame of the same bytes, in order; at stdin_close, or at the
// caller's half-close when no stdin_close came, an exit frame (code 0)
// follows the last stdout frame and the call ends OK. Resize frames, and
// anything after stdin_close, are ignored. Every other RPC is UNIMPLEMENTED.
//
// Served with gRPC's callback API (a ServerBidiReactor per call, reads and
// writes chained from their completions), so that both directions flow at
// once without a thread per direction: a read is outstanding while stdout
// frames are written, as long as at most kEchoQueueBytes of stdin wait to be
// written back (what the SDK queues ahead of a driver, so that the echo holds
// a caller back by gRPC's flow control the same way). The callback API
// measured faster here than the sync API with a reader thread (about 620
// against 560 MB/s each way, tools/bench/README.md).

#ifndef TOOLS_BENCH_GRPC_ECHO_H_
#define TOOLS_BENCH_GRPC_ECHO_H_

#include <cstddef>

#include "berth/driver/v1/driver.grpc.pb.h"
#include "grpcpp/server_context.h"
#include "grpcpp/support/server_callback.h"

namespace berth::bench {

// Stdin bytes read and not yet written back before reading pauses.
inline constexpr size_t kEchoQueueBytes = 256 * 1024;

class EchoService : public driver::v1::DriverService::CallbackService {
 public:
  grpc::ServerBidiReactor<driver::v1::ExecTaskStreamingRequest,
                          driver::v1::ExecTaskStreamingResponse>*
  ExecTaskStreaming(grpc::CallbackServerContext* context) override;
};

}  // namespace berth::bench

#endif  // TOOLS_BENCH_GRPC_ECHO_H_
