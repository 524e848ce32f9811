// Stdout throughput through berth-proxy (issue 7.9), next to a raw relay in
// the same run:
//   BM_ProxyStdout: a fake agent (in this process) → the berth-proxy binary
//     (its own process) → a shim (a gRPC client in this process), 64 KiB
//     chunks with offsets (the fake agent fills each chunk with its
//     pattern, a cost counted against the proxy here).
//   BM_RawRelay: a pipe → a relay thread → a Unix socket → a reader, the
//     floor of any stdio relay.
// Run: bazel run -c opt //services/proxy:proxy_benchmark

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/unique_fd.h"
#include "benchmark/benchmark.h"
#include "berth/proxy/v1/proxy.grpc.pb.h"
#include "grpcpp/grpcpp.h"
#include "services/common/dial.h"
#include "services/common/grpc_server.h"
#include "services/common/test_util.h"
#include "services/proxy/fake_agent.h"

extern char** environ;

namespace berth {
namespace proxy {
namespace {

namespace pb = ::berth::proxy::v1;

constexpr int64_t kBytes = 64 << 20;
constexpr size_t kChunk = 64 * 1024;

// The proxy binary and the fake agent, for the whole run.
struct Setup {
  Setup() {
    UnixGrpcServer::Options agent_options;
    agent_options.socket_path = dir.Join("agent.sock");
    agent_options.services = {&agent};
    agent_server = std::move(*UnixGrpcServer::Start(agent_options));
    std::string binary =
        berth::testing::RunfilePath("services/proxy/berth-proxy");
    std::vector<std::string> args = {binary, "--runtime_dir=" + dir.Join("run"),
                                     "--state_dir=" + dir.Join("state")};
    std::vector<char*> argv;
    for (std::string& arg : args) argv.push_back(arg.data());
    argv.push_back(nullptr);
    posix_spawn(&pid, binary.c_str(), nullptr, nullptr, argv.data(), environ);
    stub = pb::ProxyService::NewStub(
        *DialUnix(dir.Join("run/proxy.sock"), absl::Seconds(30)));
    grpc::ClientContext context;
    pb::RegisterSandboxRequest request;
    request.set_sandbox_id("sb");
    request.set_agent_address(dir.Join("agent.sock"));
    pb::RegisterSandboxResponse response;
    grpc::Status status = stub->RegisterSandbox(&context, request, &response);
    if (!status.ok()) abort();
  }
  ~Setup() {
    stub.reset();
    kill(pid, SIGTERM);
    waitpid(pid, nullptr, 0);
    agent_server->Shutdown(absl::Seconds(1));
  }

  berth::testing::ShortTempDir dir;
  testing::FakeAgent agent;
  std::unique_ptr<UnixGrpcServer> agent_server;
  pid_t pid = -1;
  std::unique_ptr<pb::ProxyService::Stub> stub;
};

// Made by the first run of BM_ProxyStdout, ended by main.
Setup* setup = nullptr;

void BM_ProxyStdout(benchmark::State& state) {
  if (setup == nullptr) setup = new Setup();
  for (auto _ : state) {
    std::string token;
    {
      grpc::ClientContext context;
      pb::AllocateTokenRequest request;
      request.set_sandbox_id("sb");
      pb::AllocateTokenResponse response;
      setup->stub->AllocateToken(&context, request, &response);
      token = response.token();
    }
    grpc::ClientContext shim_context;
    auto shim = setup->stub->Connect(&shim_context);
    pb::ConnectRequest hello;
    hello.mutable_hello()->set_token(token);
    shim->Write(hello);
    {
      grpc::ClientContext context;
      pb::NewContainerRequest request;
      request.set_token(token);
      request.set_container_id("c");
      request.mutable_process()->add_args("bulk");
      request.mutable_process()->add_args(absl::StrCat(kBytes));
      pb::NewContainerResponse response;
      setup->stub->NewContainer(&context, request, &response);
    }
    int64_t got = 0;
    pb::ConnectResponse down;
    while (shim->Read(&down)) {
      if (down.has_stdout()) got += down.stdout().data().size();
    }
    shim->Finish();
    if (got != kBytes) state.SkipWithError("short output");
  }
  state.SetBytesProcessed(state.iterations() * kBytes);
}
BENCHMARK(BM_ProxyStdout)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_RawRelay(benchmark::State& state) {
  for (auto _ : state) {
    int pipe_fds[2] = {-1, -1};
    int sock_fds[2] = {-1, -1};
    const bool made = pipe(pipe_fds) == 0 &&
                      socketpair(AF_UNIX, SOCK_STREAM, 0, sock_fds) == 0;
    base::UniqueFd pipe_read(pipe_fds[0]);
    base::UniqueFd pipe_write(pipe_fds[1]);
    base::UniqueFd relay_end(sock_fds[0]);
    base::UniqueFd reader_end(sock_fds[1]);
    if (!made) {
      state.SkipWithError("pipe/socketpair");
      break;
    }
    std::thread writer([fd = std::move(pipe_write)]() mutable {
      std::string chunk(kChunk, 'x');
      for (int64_t sent = 0; sent < kBytes; sent += kChunk) {
        for (size_t done = 0; done < kChunk;) {
          ssize_t n = write(fd.get(), chunk.data() + done, kChunk - done);
          if (n <= 0) return;
          done += n;
        }
      }
      fd.reset();  // the relay's end of file
    });
    std::thread relay([in = pipe_read.get(), out = relay_end.get()] {
      std::vector<char> buffer(kChunk);
      ssize_t n;
      while ((n = read(in, buffer.data(), buffer.size())) > 0) {
        for (ssize_t done = 0; done < n;) {
          ssize_t w = write(out, buffer.data() + done, n - done);
          if (w <= 0) return;
          done += w;
        }
      }
      shutdown(out, SHUT_WR);
    });
    std::vector<char> buffer(kChunk);
    int64_t got = 0;
    ssize_t n;
    while ((n = read(reader_end.get(), buffer.data(), buffer.size())) > 0) {
      got += n;
    }
    writer.join();
    relay.join();
    if (got != kBytes) state.SkipWithError("short relay");
  }
  state.SetBytesProcessed(state.iterations() * kBytes);
}
BENCHMARK(BM_RawRelay)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace
}  // namespace proxy
}  // namespace berth

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  // Stops the proxy binary and the fake agent.
  delete berth::proxy::setup;
  return 0;
}
