// CPU of berth-stats (the real binary, run as a child process) while it
// streams N registered cgroups at an interval to one subscriber, in percent
// of one core: of the whole process (the sum of its threads' schedstat, in
// ns; /proc/PID/stat ticks as a cross-check) and of its sampler thread
// ("berth-sampler") alone. The target of issue #4: ≤ 2 % of one core for 1000
// tasks at 1 Hz.
//
// Uses real, empty cgroups (/sys/fs/cgroup/{cpu,cpuacct,memory}/
// berth-bench-PID/tN) when it can make them (root, outside Bazel's sandbox);
// else a fixture v1 tree in /tmp (--cgroup_layout=v1). Removes what it made.

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "berth/stats/v1/stats.grpc.pb.h"
#include "grpcpp/client_context.h"
#include "services/common/dial.h"
#include "services/common/stats/test_util.h"

ABSL_FLAG(std::string, berth_stats, "",
          "Path of the berth-stats binary (default: from the runfiles).");
ABSL_FLAG(int, tasks, 1000, "Cgroups to register.");
ABSL_FLAG(absl::Duration, duration, absl::Seconds(10),
          "How long to measure (after one interval of warm-up).");
ABSL_FLAG(absl::Duration, interval, absl::Seconds(1), "Stream interval.");
ABSL_FLAG(bool, real, true,
          "Use real cgroups when possible (else always a fixture tree).");

extern char** environ;

namespace berth {
namespace stats {
namespace {

namespace pb = ::berth::stats::v1;

// utime + stime of /proc/<pid>[/task/<tid>]/stat, in clock ticks.
uint64_t CpuTicks(const std::string& stat_path) {
  FILE* f = fopen(stat_path.c_str(), "r");
  if (f == nullptr) return 0;
  char buffer[1024];
  const size_t n = fread(buffer, 1, sizeof(buffer) - 1, f);
  fclose(f);
  buffer[n] = '\0';
  absl::string_view text(buffer, n);
  const size_t paren = text.rfind(')');
  if (paren == absl::string_view::npos) return 0;
  std::vector<absl::string_view> fields =
      absl::StrSplit(text.substr(paren + 2), ' ');
  uint64_t utime = 0, stime = 0;
  if (fields.size() < 13 || !absl::SimpleAtoi(fields[11], &utime) ||
      !absl::SimpleAtoi(fields[12], &stime)) {
    return 0;
  }
  return utime + stime;
}

// On-CPU time of one thread in ns: the first field of its schedstat.
uint64_t ThreadCpuNanos(const std::string& schedstat_path) {
  FILE* f = fopen(schedstat_path.c_str(), "r");
  if (f == nullptr) return 0;
  unsigned long long ns = 0;
  if (fscanf(f, "%llu", &ns) != 1) ns = 0;
  fclose(f);
  return ns;
}

// On-CPU time in ns of the threads `pid` has now (schedstat, ns precision;
// threads that exited are not counted, which /proc/PID/stat does count).
uint64_t ProcessCpuNanos(pid_t pid) {
  const std::string task_dir = absl::StrCat("/proc/", pid, "/task");
  DIR* dir = opendir(task_dir.c_str());
  if (dir == nullptr) return 0;
  uint64_t total = 0;
  while (const dirent* entry = readdir(dir)) {
    if (entry->d_name[0] == '.') continue;
    total += ThreadCpuNanos(
        absl::StrCat(task_dir, "/", entry->d_name, "/schedstat"));
  }
  closedir(dir);
  return total;
}

// The /proc directory of the thread named berth-sampler in `pid`, or "".
std::string SamplerThreadDir(pid_t pid) {
  const std::string task_dir = absl::StrCat("/proc/", pid, "/task");
  DIR* dir = opendir(task_dir.c_str());
  if (dir == nullptr) return "";
  std::string found;
  while (const dirent* entry = readdir(dir)) {
    if (entry->d_name[0] == '.') continue;
    const std::string thread = absl::StrCat(task_dir, "/", entry->d_name);
    FILE* comm = fopen((thread + "/comm").c_str(), "r");
    if (comm == nullptr) continue;
    char name[64] = {0};
    if (fgets(name, sizeof(name), comm) == nullptr) name[0] = '\0';
    fclose(comm);
    if (absl::string_view(name).substr(0, 13) == "berth-sampler") {
      found = thread;
      break;
    }
  }
  closedir(dir);
  return found;
}

struct Cgroups {
  std::string root;               // --cgroup_root
  std::string layout;             // --cgroup_layout
  std::string prefix;             // cgroup path of task i: prefix + i
  std::vector<std::string> made;  // real directories, parents first
  std::unique_ptr<testing::ShortTempDir> fixture;
  std::string what;
};

bool MakeReal(int tasks, Cgroups* cgroups) {
  if (geteuid() != 0) return false;
  const std::string name = absl::StrCat("berth-bench-", getpid());
  for (const char* controller : {"cpu", "cpuacct", "memory"}) {
    const std::string parent =
        absl::StrCat("/sys/fs/cgroup/", controller, "/", name);
    if (mkdir(parent.c_str(), 0755) != 0) return false;
    cgroups->made.push_back(parent);
    for (int i = 0; i < tasks; ++i) {
      const std::string dir = absl::StrCat(parent, "/t", i);
      if (mkdir(dir.c_str(), 0755) != 0) return false;
      cgroups->made.push_back(dir);
    }
  }
  cgroups->root = "/sys/fs/cgroup";
  cgroups->layout = "auto";
  cgroups->prefix = absl::StrCat("/", name, "/t");
  cgroups->what = "real empty cgroups (v1)";
  return true;
}

void MakeFixture(int tasks, Cgroups* cgroups) {
  cgroups->fixture = std::make_unique<testing::ShortTempDir>();
  const std::string root = cgroups->fixture->Join("cg");
  for (int i = 0; i < tasks; ++i) {
    const std::string t = absl::StrCat("/berth/t", i);
    testing::WriteFile(root + "/cpuacct" + t + "/cpuacct.usage", "123456789\n");
    testing::WriteFile(root + "/cpuacct" + t + "/cpuacct.stat",
                       "user 100\nsystem 20\n");
    testing::WriteFile(root + "/cpu" + t + "/cpu.stat",
                       "nr_periods 0\nnr_throttled 0\nthrottled_time 0\n");
    testing::WriteFile(root + "/memory" + t + "/memory.stat",
                       "cache 1\nrss 2\nmapped_file 3\nswap 0\ntotal_cache 1\n"
                       "total_rss 2\ntotal_mapped_file 3\ntotal_swap 0\n");
    testing::WriteFile(root + "/memory" + t + "/memory.usage_in_bytes",
                       "4096\n");
    testing::WriteFile(root + "/memory" + t + "/memory.max_usage_in_bytes",
                       "8192\n");
  }
  cgroups->root = root;
  cgroups->layout = "v1";
  cgroups->prefix = "/berth/t";
  cgroups->what = "fixture v1 tree in /tmp";
}

void RemoveReal(Cgroups* cgroups) {
  for (auto it = cgroups->made.rbegin(); it != cgroups->made.rend(); ++it) {
    if (rmdir(it->c_str()) != 0) {
      std::cerr << "cannot remove " << *it << ": " << std::strerror(errno)
                << "\n";
    }
  }
  cgroups->made.clear();
}

int Run() {
  const int tasks = absl::GetFlag(FLAGS_tasks);
  const absl::Duration interval = absl::GetFlag(FLAGS_interval);
  std::string binary = absl::GetFlag(FLAGS_berth_stats);
  if (binary.empty()) binary = testing::Runfile("services/stats/berth-stats");

  Cgroups cgroups;
  if (!absl::GetFlag(FLAGS_real) || !MakeReal(tasks, &cgroups)) {
    RemoveReal(&cgroups);
    MakeFixture(tasks, &cgroups);
  }
  testing::ShortTempDir runtime;
  const std::string socket = runtime.Join("stats.sock");

  std::vector<std::string> args = {binary, "--runtime_dir=" + runtime.path(),
                                   "--cgroup_root=" + cgroups.root,
                                   "--cgroup_layout=" + cgroups.layout};
  std::vector<char*> argv;
  for (std::string& arg : args) argv.push_back(arg.data());
  argv.push_back(nullptr);
  const std::string log = runtime.Join("berth-stats.log");
  // fork + exec rather than posix_spawn: the child gets SIGKILL should this
  // process die first, so that no berth-stats outlives a failed run.
  const pid_t pid = fork();
  if (pid == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    const int fd = open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (fd >= 0) dup2(fd, 2);
    execve(argv[0], argv.data(), environ);
    _exit(127);
  }
  if (pid < 0) {
    std::cerr << "cannot start " << binary << ": " << std::strerror(errno)
              << "\n";
    RemoveReal(&cgroups);
    return 1;
  }

  int exit_code = 0;
  {
    absl::StatusOr<std::shared_ptr<grpc::Channel>> channel =
        DialUnix(socket, absl::Seconds(30));
    if (!channel.ok()) {
      std::cerr << channel.status() << "\n";
      kill(pid, SIGKILL);
      waitpid(pid, nullptr, 0);
      RemoveReal(&cgroups);
      return 1;
    }
    std::unique_ptr<pb::StatsService::Stub> stub =
        pb::StatsService::NewStub(*channel);
    for (int i = 0; i < tasks; ++i) {
      grpc::ClientContext context;
      pb::RegisterTaskRequest request;
      request.set_task_id(absl::StrCat("t", i));
      request.set_cgroup_path(absl::StrCat(cgroups.prefix, i));
      pb::RegisterTaskResponse response;
      grpc::Status status = stub->RegisterTask(&context, request, &response);
      if (!status.ok()) {
        std::cerr << "RegisterTask t" << i << ": " << status.error_message()
                  << "\n";
        exit_code = 1;
        break;
      }
    }

    grpc::ClientContext context;
    pb::StreamTaskStatsRequest request;
    request.mutable_interval()->set_seconds(absl::ToInt64Seconds(interval));
    request.mutable_interval()->set_nanos(
        static_cast<int32_t>(absl::ToInt64Nanoseconds(interval) % 1000000000));
    std::atomic<uint64_t> received{0};
    std::atomic<uint64_t> dropped{0};
    std::unique_ptr<grpc::ClientReader<pb::StreamTaskStatsResponse>> reader;
    std::thread reading;
    if (exit_code == 0) {
      reader = stub->StreamTaskStats(&context, request);
      reading = std::thread([&] {
        pb::StreamTaskStatsResponse response;
        while (reader->Read(&response)) {
          ++received;
          dropped = response.dropped_samples();
        }
      });
      // Warm-up: the first tick's samples.
      const absl::Time deadline = absl::Now() + absl::Seconds(60);
      while (received < static_cast<uint64_t>(tasks) &&
             absl::Now() < deadline) {
        absl::SleepFor(absl::Milliseconds(10));
      }
      const std::string process_stat = absl::StrCat("/proc/", pid, "/stat");
      const std::string sampler = SamplerThreadDir(pid);
      const uint64_t ticks_before = CpuTicks(process_stat);
      const uint64_t process_before = ProcessCpuNanos(pid);
      const uint64_t sampler_before =
          sampler.empty() ? 0 : ThreadCpuNanos(sampler + "/schedstat");
      const uint64_t received_before = received;
      const int64_t start = absl::GetCurrentTimeNanos();
      absl::SleepFor(absl::GetFlag(FLAGS_duration));  // the measurement window
      const double wall_s = (absl::GetCurrentTimeNanos() - start) / 1e9;
      const double process_cpu_s =
          (ProcessCpuNanos(pid) - process_before) / 1e9;
      const double ticks_cpu_s = (CpuTicks(process_stat) - ticks_before) /
                                 static_cast<double>(sysconf(_SC_CLK_TCK));
      const double sampler_cpu_s =
          sampler.empty()
              ? -1
              : (ThreadCpuNanos(sampler + "/schedstat") - sampler_before) / 1e9;
      const uint64_t samples = received - received_before;
      const double process_percent = process_cpu_s / wall_s * 100;
      printf("berth-stats sampling %d tasks every %s over %.1f s (%s)\n", tasks,
             absl::FormatDuration(interval).c_str(), wall_s,
             cgroups.what.c_str());
      printf("  samples received: %llu (%.0f/s), dropped: %llu\n",
             static_cast<unsigned long long>(samples), samples / wall_s,
             static_cast<unsigned long long>(dropped.load()));
      printf("  whole process CPU: %.4f s = %.3f %% of one core", process_cpu_s,
             process_percent);
      if (samples > 0) {
        printf(" (%.2f us per sample)", process_cpu_s * 1e6 / samples);
      }
      printf("; by /proc/PID/stat ticks: %.2f s = %.2f %%\n", ticks_cpu_s,
             ticks_cpu_s / wall_s * 100);
      if (sampler_cpu_s >= 0) {
        printf("  sampler thread CPU: %.4f s = %.3f %% of one core",
               sampler_cpu_s, sampler_cpu_s / wall_s * 100);
        if (samples > 0) {
          printf(" (%.2f us per sample)", sampler_cpu_s * 1e6 / samples);
        }
        printf("\n");
      }
      printf("  target <= 2 %% of one core for 1000 tasks at 1 Hz: %s\n",
             tasks == 1000 && interval == absl::Seconds(1)
                 ? (process_percent <= 2 ? "met" : "NOT met")
                 : "n/a (other parameters)");
      if (samples == 0) exit_code = 1;
      context.TryCancel();
      reading.join();
      reader->Finish();
    }
  }
  kill(pid, SIGTERM);
  int status = 0;
  waitpid(pid, &status, 0);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    std::cerr << "berth-stats did not exit 0 after SIGTERM\n";
    exit_code = 1;
  }
  RemoveReal(&cgroups);
  return exit_code;
}

}  // namespace
}  // namespace stats
}  // namespace berth

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  return berth::stats::Run();
}
