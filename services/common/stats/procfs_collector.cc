// The procfs backend of NewProcfsCollector (collector.h).

#include <dirent.h>
#include <unistd.h>

#include <deque>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/container/node_hash_map.h"
#include "absl/memory/memory.h"
#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "base/process.h"
#include "services/common/stats/collector.h"
#include "services/common/stats/kept_file.h"

namespace berth {
namespace stats {
namespace {

namespace pb = ::berth::stats::v1;

constexpr uint64_t kBytesPerKiB = 1024;

using ::berth::base::ProcStat;

// base::ParseProcStat into `out`; false when the line is malformed.
bool ParseProcStat(absl::string_view content, ProcStat* out) {
  absl::StatusOr<ProcStat> stat = base::ParseProcStat(content);
  if (!stat.ok()) return false;
  *out = *stat;
  return true;
}

// The contents of a small file read once (not kept: it is per thread, and
// threads come and go), or "" if it cannot be read.
std::string ReadWhole(const std::string& path) {
  absl::StatusOr<KeptFile> file = KeptFile::Open(path);
  if (!file.ok()) return "";
  absl::StatusOr<absl::string_view> content = file->Read();
  return content.ok() ? std::string(*content) : "";
}

// The numeric entries of a directory (pids, tids).
std::vector<int> NumericEntries(const std::string& dir) {
  std::vector<int> out;
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) return out;
  while (const dirent* entry = readdir(d)) {
    int id = 0;
    if (absl::ascii_isdigit(entry->d_name[0]) &&
        absl::SimpleAtoi(entry->d_name, &id)) {
      out.push_back(id);
    }
  }
  closedir(d);
  return out;
}

class ProcfsCollector : public Collector {
 public:
  static absl::StatusOr<std::unique_ptr<Collector>> Create(
      const std::string& proc_root, int root_pid,
      const CollectorOptions& options) {
    if (root_pid <= 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("root_pid must be positive, got ", root_pid));
    }
    auto collector =
        absl::WrapUnique(new ProcfsCollector(proc_root, root_pid, options));
    const std::string dir = absl::StrCat(proc_root, "/", root_pid);
    absl::StatusOr<DirWatch> watch = DirWatch::Open(dir);
    if (absl::IsNotFound(watch.status())) {
      return absl::NotFoundError(absl::StrCat(
          "process ", root_pid, " not found: ", dir, " does not exist"));
    }
    if (!watch.ok()) return watch.status();
    collector->root_watch_ = *std::move(watch);
    absl::StatusOr<Process*> root = collector->OpenProcess(root_pid);
    if (!root.ok()) {
      if (absl::IsNotFound(root.status())) {
        return absl::NotFoundError(absl::StrCat(
            "process ", root_pid, " not found: ", root.status().message()));
      }
      return root.status();
    }
    collector->root_start_time_ = (*root)->start_time;
    collector->use_children_files_ =
        access(absl::StrCat(dir, "/task/", root_pid, "/children").c_str(),
               R_OK) == 0;
    return collector;
  }

  pb::Backend backend() const override { return pb::BACKEND_PROCFS; }
  const std::string& target() const override { return target_; }

  absl::Status Sample(pb::TaskResourceUsage* usage) override {
    const int64_t now_ns = options_.monotonic_ns();
    const absl::Time timestamp = options_.now();

    std::vector<int> tree = Tree();
    Counters total;
    total.cpu_user_ns = 0;
    total.cpu_system_ns = 0;
    total.cpu_usage_ns = 0;
    uint64_t delta_user_ns = 0;
    uint64_t delta_system_ns = 0;
    absl::flat_hash_set<int> alive;
    usage->clear_processes();
    for (int pid : tree) {
      const bool is_root = pid == root_pid_;
      absl::StatusOr<Reading> reading = ReadProcess(pid);
      if (!reading.ok()) {
        if (is_root) {
          return absl::IsNotFound(reading.status())
                     ? Gone(reading.status().message())
                     : reading.status();
        }
        // A child that exited since the tree was listed is no longer part
        // of it; other errors are.
        if (absl::IsNotFound(reading.status())) continue;
        return reading.status();
      }
      if (is_root &&
          (reading->stat.start_time != root_start_time_ ||
           reading->stat.state == 'Z' || reading->stat.state == 'X')) {
        return Gone(absl::StrCat("process ", pid, " exited"));
      }
      if (reading->stat.state == 'Z' || reading->stat.state == 'X') continue;
      alive.insert(pid);
      Process& process = *reading->process;
      const uint64_t user_ns = reading->stat.utime_ticks * ns_per_tick_;
      const uint64_t system_ns = reading->stat.stime_ticks * ns_per_tick_;
      // CPU used since the previous sample; all of it for a process that
      // joined the tree since (it was forked in the meantime).
      if (process.seen) {
        delta_user_ns +=
            user_ns >= process.user_ns ? user_ns - process.user_ns : 0;
        delta_system_ns +=
            system_ns >= process.system_ns ? system_ns - process.system_ns : 0;
      } else {
        delta_user_ns += user_ns;
        delta_system_ns += system_ns;
      }
      process.seen = true;
      process.user_ns = user_ns;
      process.system_ns = system_ns;

      Counters own;
      own.cpu_user_ns = user_ns;
      own.cpu_system_ns = system_ns;
      own.cpu_usage_ns = user_ns + system_ns;
      own.rss = reading->rss;
      own.swap = reading->swap;
      own.pids_current = reading->threads;
      *total.cpu_user_ns += user_ns;
      *total.cpu_system_ns += system_ns;
      *total.cpu_usage_ns += user_ns + system_ns;
      if (reading->rss) total.rss = total.rss.value_or(0) + *reading->rss;
      if (reading->swap) total.swap = total.swap.value_or(0) + *reading->swap;
      if (reading->threads) {
        total.pids_current = total.pids_current.value_or(0) + *reading->threads;
      }
      const CpuRate::Percent percent = process.rate.Update(
          now_ns, own.cpu_usage_ns, own.cpu_user_ns, own.cpu_system_ns);
      FillResourceUsage(own, percent, options_.cpu_mhz,
                        &(*usage->mutable_processes())[pid]);
    }
    if (root_watch_.Gone()) {
      usage->clear_processes();
      return Gone(absl::StrCat(proc_root_, "/", root_pid_, " was removed"));
    }
    // Forget processes that left the tree (their descriptors close).
    for (auto it = processes_.begin(); it != processes_.end();) {
      if (alive.contains(it->first)) {
        ++it;
      } else {
        processes_.erase(it++);
      }
    }

    if (first_sample_) {
      // The task's monotonic CPU counters start at what the tree holds now.
      accumulated_user_ns_ = *total.cpu_user_ns;
      accumulated_system_ns_ = *total.cpu_system_ns;
      first_sample_ = false;
    } else {
      accumulated_user_ns_ += delta_user_ns;
      accumulated_system_ns_ += delta_system_ns;
    }
    const CpuRate::Percent percent =
        rate_.Update(now_ns, accumulated_user_ns_ + accumulated_system_ns_,
                     accumulated_user_ns_, accumulated_system_ns_);
    usage->set_backend(pb::BACKEND_PROCFS);
    SetTimestamp(timestamp, usage->mutable_timestamp());
    FillResourceUsage(total, percent, options_.cpu_mhz, usage->mutable_usage());
    return absl::OkStatus();
  }

 private:
  struct Process {
    uint64_t start_time = 0;
    KeptFile stat;
    KeptFile status;
    bool seen = false;  // user_ns and system_ns are from an earlier sample
    uint64_t user_ns = 0;
    uint64_t system_ns = 0;
    CpuRate rate;
  };

  struct Reading {
    Process* process = nullptr;
    ProcStat stat;
    std::optional<uint64_t> rss;
    std::optional<uint64_t> swap;
    std::optional<uint64_t> threads;
  };

  ProcfsCollector(std::string proc_root, int root_pid,
                  const CollectorOptions& options)
      : proc_root_(std::move(proc_root)),
        root_pid_(root_pid),
        target_(absl::StrCat("process tree of pid ", root_pid)),
        options_(options) {
    const int64_t hz = options.clock_ticks_per_second > 0
                           ? options.clock_ticks_per_second
                           : sysconf(_SC_CLK_TCK);
    ns_per_tick_ = hz > 0 ? 1000000000 / hz : 10000000;
  }

  absl::Status Gone(absl::string_view why) const {
    return absl::NotFoundError(absl::StrCat(target_, " is gone (", why, ")"));
  }

  // Opens the files of `pid` (replacing an entry of an earlier process that
  // had the same pid) and reads its stat once.
  absl::StatusOr<Process*> OpenProcess(int pid) {
    const std::string dir = absl::StrCat(proc_root_, "/", pid);
    Process process;
    absl::StatusOr<KeptFile> stat = KeptFile::Open(dir + "/stat");
    if (!stat.ok()) return stat.status();
    process.stat = *std::move(stat);
    absl::StatusOr<KeptFile> status = OpenIfPresent(dir + "/status");
    if (!status.ok()) return status.status();
    process.status = *std::move(status);
    absl::StatusOr<absl::string_view> content = process.stat.Read();
    if (!content.ok()) return content.status();
    ProcStat parsed;
    if (!ParseProcStat(*content, &parsed)) {
      return absl::InternalError(
          absl::StrCat("cannot parse ", process.stat.path()));
    }
    process.start_time = parsed.start_time;
    Process& slot = processes_[pid];
    slot = std::move(process);
    return &slot;
  }

  absl::StatusOr<Reading> ReadProcess(int pid) {
    Reading reading;
    auto it = processes_.find(pid);
    if (it == processes_.end()) {
      absl::StatusOr<Process*> opened = OpenProcess(pid);
      if (!opened.ok()) return opened.status();
      reading.process = *opened;
    } else {
      reading.process = &it->second;
    }
    absl::StatusOr<absl::string_view> content = reading.process->stat.Read();
    if (!content.ok()) return content.status();
    if (!ParseProcStat(*content, &reading.stat)) {
      return absl::InternalError(
          absl::StrCat("cannot parse ", reading.process->stat.path()));
    }
    if (reading.stat.start_time != reading.process->start_time) {
      // The pid was reused by another process: start over with it.
      absl::StatusOr<Process*> opened = OpenProcess(pid);
      if (!opened.ok()) return opened.status();
      reading.process = *opened;
      content = reading.process->stat.Read();
      if (!content.ok()) return content.status();
      if (!ParseProcStat(*content, &reading.stat)) {
        return absl::InternalError(
            absl::StrCat("cannot parse ", reading.process->stat.path()));
      }
    }
    if (reading.process->status.is_open()) {
      absl::StatusOr<absl::string_view> status = reading.process->status.Read();
      if (!status.ok()) return status.status();
      const KeyedField fields[] = {{"VmRSS:", &reading.rss},
                                   {"VmSwap:", &reading.swap},
                                   {"Threads:", &reading.threads}};
      ParseFlatKeyed(*status, fields);
      if (reading.rss) *reading.rss *= kBytesPerKiB;
      if (reading.swap) *reading.swap *= kBytesPerKiB;
    }
    return reading;
  }

  // The pids of the tree, root first, breadth first.
  std::vector<int> Tree() const {
    absl::flat_hash_map<int, std::vector<int>> scanned;
    if (!use_children_files_) {
      for (int pid : NumericEntries(proc_root_)) {
        ProcStat stat;
        if (ParseProcStat(
                ReadWhole(absl::StrCat(proc_root_, "/", pid, "/stat")),
                &stat)) {
          scanned[stat.parent].push_back(pid);
        }
      }
    }
    std::vector<int> tree = {root_pid_};
    absl::flat_hash_set<int> seen = {root_pid_};
    for (size_t i = 0; i < tree.size(); ++i) {
      const int pid = tree[i];
      std::vector<int> children;
      if (use_children_files_) {
        const std::string task_dir =
            absl::StrCat(proc_root_, "/", pid, "/task");
        for (int tid : NumericEntries(task_dir)) {
          for (absl::string_view child : absl::StrSplit(
                   ReadWhole(absl::StrCat(task_dir, "/", tid, "/children")),
                   absl::ByAnyChar(" \n"), absl::SkipEmpty())) {
            int child_pid = 0;
            if (absl::SimpleAtoi(child, &child_pid)) {
              children.push_back(child_pid);
            }
          }
        }
      } else if (auto it = scanned.find(pid); it != scanned.end()) {
        children = it->second;
      }
      for (int child : children) {
        if (seen.insert(child).second) tree.push_back(child);
      }
    }
    return tree;
  }

  const std::string proc_root_;
  const int root_pid_;
  const std::string target_;
  const CollectorOptions options_;
  uint64_t ns_per_tick_ = 0;
  uint64_t root_start_time_ = 0;
  bool use_children_files_ = false;
  DirWatch root_watch_;
  // By pid. A node map: Reading holds a pointer into it.
  absl::node_hash_map<int, Process> processes_;
  bool first_sample_ = true;
  uint64_t accumulated_user_ns_ = 0;
  uint64_t accumulated_system_ns_ = 0;
  CpuRate rate_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Collector>> NewProcfsCollector(
    const std::string& proc_root, int root_pid,
    const CollectorOptions& options) {
  return ProcfsCollector::Create(proc_root, root_pid, options);
}

}  // namespace stats
}  // namespace berth
