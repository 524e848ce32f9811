// exec_bench_server: the server process of exec_stream_benchmark. Serves, in
// this one process, on sockets in --socket_dir:
//   high_level.sock  HighLevelWriterDriver through the SDK (PluginServer)
//   raw.sock         RawSenderDriver through the SDK (PluginServer)
//   plain.sock       PlainExecService on a plain gRPC server (UnixGrpcServer,
//                    the server PluginServer itself uses)
//   plain_reader.sock
//                    the same with a reader thread (diagnostic)
//   callback.sock    CallbackExecService, gRPC's callback API (diagnostic)
// prints "ready" on stdout once all three take calls, and serves until its
// stdin ends (the benchmark closes it, or exits), then shuts down.

#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <string>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "glog/logging.h"
#include "plugins/benchmarks/exec_bench_drivers.h"
#include "plugins/sdk/plugin_server.h"
#include "services/common/grpc_server.h"

ABSL_FLAG(std::string, socket_dir, "",
          "The directory of the sockets (required; short enough for a "
          "socket path).");

int main(int argc, char** argv) {
  namespace bench = ::berth::plugin::benchmarks;
  absl::ParseCommandLine(argc, argv);
  FLAGS_logtostderr = true;
  if (std::getenv("GLOG_minloglevel") == nullptr) {
    FLAGS_minloglevel = google::GLOG_WARNING;
  }
  google::InitGoogleLogging(argv[0]);
  signal(SIGPIPE, SIG_IGN);
  const std::string dir = absl::GetFlag(FLAGS_socket_dir);
  if (dir.empty()) {
    LOG(ERROR) << "--socket_dir is required";
    return 2;
  }

  bench::HighLevelWriterDriver high_level;
  bench::RawSenderDriver raw;
  bench::PlainExecService plain;
  bench::PlainExecService plain_reader(/*reader_thread=*/true);
  bench::CallbackExecService callback;

  berth::plugin::PluginServer::Options high_level_options;
  high_level_options.socket_path =
      absl::StrCat(dir, "/", bench::kHighLevelSocket);
  absl::StatusOr<std::unique_ptr<berth::plugin::PluginServer>>
      high_level_server =
          berth::plugin::PluginServer::Start(high_level, high_level_options);
  if (!high_level_server.ok()) {
    LOG(ERROR) << high_level_server.status();
    return 1;
  }
  berth::plugin::PluginServer::Options raw_options;
  raw_options.socket_path = absl::StrCat(dir, "/", bench::kRawSocket);
  absl::StatusOr<std::unique_ptr<berth::plugin::PluginServer>> raw_server =
      berth::plugin::PluginServer::Start(raw, raw_options);
  if (!raw_server.ok()) {
    LOG(ERROR) << raw_server.status();
    return 1;
  }
  berth::UnixGrpcServer::Options plain_options;
  plain_options.socket_path = absl::StrCat(dir, "/", bench::kPlainSocket);
  plain_options.services = {&plain};
  absl::StatusOr<std::unique_ptr<berth::UnixGrpcServer>> plain_server =
      berth::UnixGrpcServer::Start(plain_options);
  if (!plain_server.ok()) {
    LOG(ERROR) << plain_server.status();
    return 1;
  }

  berth::UnixGrpcServer::Options plain_reader_options;
  plain_reader_options.socket_path =
      absl::StrCat(dir, "/", bench::kPlainReaderSocket);
  plain_reader_options.services = {&plain_reader};
  absl::StatusOr<std::unique_ptr<berth::UnixGrpcServer>> plain_reader_server =
      berth::UnixGrpcServer::Start(plain_reader_options);
  if (!plain_reader_server.ok()) {
    LOG(ERROR) << plain_reader_server.status();
    return 1;
  }

  berth::UnixGrpcServer::Options callback_options;
  callback_options.socket_path = absl::StrCat(dir, "/", bench::kCallbackSocket);
  callback_options.services = {&callback};
  absl::StatusOr<std::unique_ptr<berth::UnixGrpcServer>> callback_server =
      berth::UnixGrpcServer::Start(callback_options);
  if (!callback_server.ok()) {
    LOG(ERROR) << callback_server.status();
    return 1;
  }

  std::cout << "ready" << std::endl;
  char byte;
  while (true) {
    const ssize_t n = read(STDIN_FILENO, &byte, 1);
    if (n == 0 || (n < 0 && errno != EINTR)) break;
  }

  // The benchmark has finished its calls: no grace period.
  (*high_level_server)->Shutdown(absl::ZeroDuration());
  (*raw_server)->Shutdown(absl::ZeroDuration());
  (*plain_server)->Shutdown(absl::ZeroDuration());
  (*plain_reader_server)->Shutdown(absl::ZeroDuration());
  (*callback_server)->Shutdown(absl::ZeroDuration());
  // Everything is stopped and the sockets removed. Exit without running the
  // destructors: after calls were served here, the last grpc::Server's
  // destructor (grpc_shutdown) waits up to 10 s for a gRPC executor thread
  // blocked in epoll_wait with a 10 s timeout (gRPC 1.51; seen with gdb).
  std::fflush(stdout);
  std::fflush(stderr);
  std::_Exit(0);
}
