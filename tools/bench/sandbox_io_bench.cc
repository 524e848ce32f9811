// sandbox_io_bench: the real berth-agent, berth-proxy and berth-shim together
// (issue 7, point 9), the agent as a plain process:
//
//   sandbox_io_bench --agent=PATH --proxy=PATH --shim=PATH
//                    [--bytes=1073741824] [--repetitions=3] [--sandboxes=10]
//
// Figures (tools/bench/figures.h):
// - sandbox_stdout MB/s: a process writing --bytes of /dev/zero to stdout,
//   agent -> proxy -> shim, the shim's stdout a pipe this program counts;
//   timed from NewContainer to the end of the shim's stdout.
// - first_byte ms: NewContainer (shim already connected) to the first byte
//   on the shim's stdout, for `echo x`.
// - proxy_pss kB: the proxy's PSS (/proc/PID/smaps_rollup) with its
//   sandboxes; proxy_private_per_sandbox kB: its private memory (clean +
//   dirty; PSS moves as other processes come and go) after --sandboxes more
//   RegisterSandbox, less before, divided.
// - shim_pss, shim_private, shim_rss kB: one connected shim whose process
//   sleeps (the only shim: PSS counts its shared libraries whole).
// Any error: a line on stderr, exit code 1.

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "base/unique_fd.h"
#include "berth/agent/v1/agent.pb.h"
#include "berth/proxy/v1/proxy.grpc.pb.h"
#include "grpcpp/grpcpp.h"
#include "services/common/dial.h"
#include "tools/bench/figures.h"

ABSL_FLAG(std::string, agent, "", "berth-agent binary.");
ABSL_FLAG(std::string, proxy, "", "berth-proxy binary.");
ABSL_FLAG(std::string, shim, "", "berth-shim binary.");
ABSL_FLAG(int64_t, bytes, int64_t{1} << 30, "Bytes of stdout per repetition.");
ABSL_FLAG(int, repetitions, 3, "Timed repetitions.");
ABSL_FLAG(int, sandboxes, 100, "Extra sandboxes for the proxy's memory.");

extern char** environ;

namespace berth::bench {
namespace {

namespace pb = ::berth::proxy::v1;

[[noreturn]] void Fail(const std::string& message) {
  fprintf(stderr, "sandbox_io_bench: %s\n", message.c_str());
  exit(1);
}

pid_t Spawn(std::vector<std::string> args, std::vector<std::string> env,
            int stdout_fd, const std::string& log) {
  std::vector<char*> argv, envp;
  for (std::string& arg : args) argv.push_back(arg.data());
  argv.push_back(nullptr);
  for (std::string& var : env) envp.push_back(var.data());
  envp.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&actions, 2, log.c_str(),
                                   O_WRONLY | O_CREAT | O_APPEND, 0644);
  if (stdout_fd >= 0) {
    posix_spawn_file_actions_adddup2(&actions, stdout_fd, 1);
  } else {
    posix_spawn_file_actions_adddup2(&actions, 2, 1);
  }
  pid_t pid = -1;
  const int error = posix_spawn(&pid, argv[0], &actions, nullptr, argv.data(),
                                env.empty() ? environ : envp.data());
  posix_spawn_file_actions_destroy(&actions);
  if (error != 0) Fail(absl::StrCat("cannot start ", args[0]));
  return pid;
}

// PSS, RSS and private (clean + dirty) memory in kB of `pid`.
struct Mem {
  int64_t pss = -1, rss = -1, priv = 0;
};
Mem PssRss(pid_t pid) {
  FILE* file = fopen(absl::StrCat("/proc/", pid, "/smaps_rollup").c_str(), "r");
  if (file == nullptr) Fail("cannot read smaps_rollup");
  char line[256];
  Mem mem;
  while (fgets(line, sizeof(line), file) != nullptr) {
    std::vector<absl::string_view> fields =
        absl::StrSplit(line, absl::ByAnyChar(" \t\n"), absl::SkipEmpty());
    if (fields.size() < 2) continue;
    int64_t kb = 0;
    if (!absl::SimpleAtoi(fields[1], &kb)) continue;
    if (fields[0] == "Pss:") mem.pss = kb;
    if (fields[0] == "Rss:") mem.rss = kb;
    if (fields[0] == "Private_Clean:" || fields[0] == "Private_Dirty:") {
      mem.priv += kb;
    }
  }
  fclose(file);
  return mem;
}

class Bench {
 public:
  Bench() {
    char dir[] = "/tmp/berth-XXXXXX";
    if (mkdtemp(dir) == nullptr) Fail("mkdtemp");
    dir_ = dir;
  }
  ~Bench() {
    for (pid_t pid : {proxy_pid_, agent_pid_}) {
      if (pid > 0) {
        kill(pid, SIGTERM);
        int status;
        waitpid(pid, &status, 0);
      }
    }
    std::error_code error;
    std::filesystem::remove_all(dir_, error);
  }

  void Start() {
    agent_pid_ = Spawn({absl::GetFlag(FLAGS_agent),
                        "--socket=" + dir_ + "/agent.sock", "--sandbox_id=sb"},
                       {}, -1, dir_ + "/agent.log");
    proxy_pid_ =
        Spawn({absl::GetFlag(FLAGS_proxy), "--runtime_dir=" + dir_ + "/run",
               "--state_dir=" + dir_ + "/state"},
              {}, -1, dir_ + "/proxy.log");
    absl::StatusOr<std::shared_ptr<grpc::Channel>> channel =
        DialUnix(dir_ + "/run/proxy.sock", absl::Seconds(30));
    if (!channel.ok()) Fail(channel.status().ToString());
    stub_ = pb::ProxyService::NewStub(*channel);
    const absl::Time deadline = absl::Now() + absl::Seconds(30);
    while (!Register("sb")) {
      if (absl::Now() > deadline) Fail("the agent did not answer");
      absl::SleepFor(absl::Milliseconds(50));
    }
  }

  bool Register(const std::string& id) {
    grpc::ClientContext context;
    context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(30)));
    pb::RegisterSandboxRequest request;
    request.set_sandbox_id(id);
    request.set_agent_address("unix:" + dir_ + "/agent.sock");
    pb::RegisterSandboxResponse response;
    return stub_->RegisterSandbox(&context, request, &response).ok();
  }

  std::string Token() {
    grpc::ClientContext context;
    context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(30)));
    pb::AllocateTokenRequest request;
    request.set_sandbox_id("sb");
    pb::AllocateTokenResponse response;
    const grpc::Status status =
        stub_->AllocateToken(&context, request, &response);
    if (!status.ok()) Fail("AllocateToken: " + status.error_message());
    return response.token();
  }

  // One shim whose stdout this counts; `script` run by /bin/sh -c.
  struct Run {
    pid_t shim = -1;
    std::thread reader;
    std::atomic<int64_t> bytes{0};
    absl::Time first_byte = absl::InfiniteFuture();
    absl::Time end;
  };

  void StartShim(Run* run, const std::string& token) {
    int out[2];
    if (pipe2(out, O_CLOEXEC) != 0) Fail("pipe");
    base::UniqueFd out_read(out[0]);
    base::UniqueFd out_write(out[1]);
    run->shim = Spawn({absl::GetFlag(FLAGS_shim),
                       "--proxy_socket=" + dir_ + "/run/proxy.sock"},
                      {"BERTH_SHIM_TOKEN=" + token, "PATH=/usr/bin:/bin"},
                      out_write.get(), dir_ + "/shim.log");
    out_write.reset();  // the reader's end of file is the shim's exit
    run->reader = std::thread([run, fd = std::move(out_read)]() mutable {
      static char buffer[1 << 17];
      ssize_t n;
      while ((n = read(fd.get(), buffer, sizeof(buffer))) > 0) {
        if (run->bytes == 0) run->first_byte = absl::Now();
        run->bytes += n;
      }
      run->end = absl::Now();
      fd.reset();
    });
  }

  void NewContainer(const std::string& token, const std::string& script) {
    grpc::ClientContext context;
    context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(60)));
    pb::NewContainerRequest request;
    request.set_token(token);
    request.set_container_id(absl::StrCat("c", ++containers_));
    request.mutable_process()->add_args("/bin/sh");
    request.mutable_process()->add_args("-c");
    request.mutable_process()->add_args(script);
    request.mutable_process()->add_env("PATH=/usr/bin:/bin");
    pb::NewContainerResponse response;
    const grpc::Status status =
        stub_->NewContainer(&context, request, &response);
    if (!status.ok()) Fail("NewContainer: " + status.error_message());
  }

  static int Finish(Run* run) {
    int status = 0;
    waitpid(run->shim, &status, 0);
    run->reader.join();
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  }

  // Waits until the proxy logged that `token`'s shim connected.
  void WaitConnected(const std::string& token) {
    const std::string line =
        "shim with token " + token.substr(0, 8) + " connected";
    const absl::Time deadline = absl::Now() + absl::Seconds(30);
    while (ReadLog("proxy.log").find(line) == std::string::npos) {
      if (absl::Now() > deadline) Fail("the shim did not connect");
      absl::SleepFor(absl::Milliseconds(5));
    }
  }

  std::string ReadLog(const std::string& name) {
    std::string text;
    FILE* file = fopen((dir_ + "/" + name).c_str(), "r");
    if (file == nullptr) return text;
    char buffer[4096];
    size_t n;
    while ((n = fread(buffer, 1, sizeof(buffer), file)) > 0)
      text.append(buffer, n);
    fclose(file);
    return text;
  }

  void Throughput(Figure* figure) {
    const int64_t bytes = absl::GetFlag(FLAGS_bytes);
    Run run;
    const std::string token = Token();
    StartShim(&run, token);
    const absl::Time start = absl::Now();
    NewContainer(token, absl::StrCat("head -c ", bytes, " /dev/zero"));
    const int code = Finish(&run);
    if (code != 0 || run.bytes != bytes) {
      Fail(absl::StrCat("shim exit ", code, ", ", run.bytes.load(),
                        " bytes of ", bytes, ": ", ReadLog("shim.log")));
    }
    figure->Add(bytes / 1e6 / absl::ToDoubleSeconds(run.end - start));
  }

  void FirstByte(Figure* figure) {
    Run run;
    const std::string token = Token();
    StartShim(&run, token);
    WaitConnected(token);
    const absl::Time start = absl::Now();
    NewContainer(token, "echo x");
    if (Finish(&run) != 0 || run.bytes != 2)
      Fail("echo x: " + ReadLog("shim.log"));
    figure->Add(absl::ToDoubleMilliseconds(run.first_byte - start));
  }

  void Memory(Figure* proxy_pss, Figure* proxy_per_sandbox, Figure* shim_pss,
              Figure* shim_private, Figure* shim_rss) {
    Run run;
    const std::string token = Token();
    StartShim(&run, token);
    NewContainer(token, "echo ready; sleep 1000");
    while (run.bytes == 0) absl::SleepFor(absl::Milliseconds(5));
    absl::SleepFor(absl::Milliseconds(200));
    const Mem shim = PssRss(run.shim);
    shim_pss->Add(shim.pss);
    shim_private->Add(shim.priv);
    shim_rss->Add(shim.rss);
    kill(run.shim, SIGTERM);  // forwarded: the sleep ends
    Finish(&run);
    const int n = absl::GetFlag(FLAGS_sandboxes);
    const Mem before = PssRss(proxy_pid_);
    proxy_pss->Add(before.pss);
    for (int i = 0; i < n; ++i) {
      if (!Register(absl::StrCat("sb", ++registered_))) Fail("RegisterSandbox");
    }
    absl::SleepFor(absl::Milliseconds(200));
    proxy_per_sandbox->Add(double(PssRss(proxy_pid_).priv - before.priv) / n);
  }

  std::string dir_;
  pid_t agent_pid_ = -1, proxy_pid_ = -1;
  std::unique_ptr<pb::ProxyService::Stub> stub_;
  int containers_ = 0;
  int registered_ = 0;
};

}  // namespace
}  // namespace berth::bench

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  signal(SIGPIPE, SIG_IGN);
  using berth::bench::Figure;
  berth::bench::Bench bench;
  bench.Start();
  Figure throughput("sandbox_stdout", "MB/s"), first_byte("first_byte", "ms"),
      proxy_pss("proxy_pss", "kB"), proxy("proxy_private_per_sandbox", "kB"),
      shim_pss("shim_pss", "kB"), shim_private("shim_private", "kB"),
      shim_rss("shim_rss", "kB");
  {
    Figure warmup("warmup", "MB/s");
    bench.Throughput(&warmup);
  }
  for (int i = 0; i < absl::GetFlag(FLAGS_repetitions); ++i) {
    bench.Throughput(&throughput);
  }
  for (int i = 0; i < 10; ++i) bench.FirstByte(&first_byte);
  for (int i = 0; i < 3; ++i) {
    bench.Memory(&proxy_pss, &proxy, &shim_pss, &shim_private, &shim_rss);
  }
  for (const Figure* figure : {&throughput, &first_byte, &proxy_pss, &proxy,
                               &shim_pss, &shim_private, &shim_rss}) {
    printf("%s\n", figure->MedianLine().c_str());
  }
  return 0;
}
