#include "base/process.h"

#include <fcntl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "base/io.h"
#include "base/unique_fd.h"

namespace berth::base {

absl::StatusOr<ProcStat> ParseProcStat(absl::string_view content) {
  // "PID (COMM) STATE PPID ...": COMM may hold anything, so the fields after
  // it start after the last ')'.
  const size_t paren = content.rfind(')');
  const auto malformed = [&] {
    return absl::InvalidArgumentError(absl::StrCat(
        "malformed /proc stat line \"", content.substr(0, 200), "\""));
  };
  if (paren == absl::string_view::npos) return malformed();
  const std::vector<absl::string_view> fields = absl::StrSplit(
      content.substr(paren + 1), absl::ByAnyChar(" \n"), absl::SkipEmpty());
  // fields[0] is field 3 (state): field N is fields[N - 3].
  ProcStat stat;
  if (fields.size() < 20 || fields[0].size() != 1 ||
      !absl::SimpleAtoi(fields[4 - 3], &stat.parent) ||
      !absl::SimpleAtoi(fields[5 - 3], &stat.pgrp) ||
      !absl::SimpleAtoi(fields[14 - 3], &stat.utime_ticks) ||
      !absl::SimpleAtoi(fields[15 - 3], &stat.stime_ticks) ||
      !absl::SimpleAtoi(fields[22 - 3], &stat.start_time)) {
    return malformed();
  }
  stat.state = fields[0][0];
  return stat;
}

absl::StatusOr<ProcStat> ReadProcStat(pid_t pid, const std::string& proc_root) {
  const std::string path = absl::StrCat(proc_root, "/", pid, "/stat");
  UniqueFd fd(open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd) {
    if (errno == ENOENT || errno == ESRCH) {
      return absl::NotFoundError(absl::StrCat("no process ", pid));
    }
    return absl::ErrnoToStatus(errno, absl::StrCat("opening ", path));
  }
  absl::StatusOr<std::string> content = ReadAll(fd.get(), path, 64 * 1024);
  if (!content.ok()) {
    // A process that went between open and read gives ESRCH (NOT_FOUND).
    if (absl::IsNotFound(content.status())) {
      return absl::NotFoundError(absl::StrCat("no process ", pid));
    }
    return content.status();
  }
  return ParseProcStat(*content);
}

absl::StatusOr<ProcessIdentity> ProcessIdentity::Of(pid_t pid) {
  absl::StatusOr<ProcStat> stat = ReadProcStat(pid);
  if (!stat.ok()) return stat.status();
  if (stat->state == 'Z' || stat->state == 'X') {
    return absl::NotFoundError(absl::StrCat("process ", pid, " has ended"));
  }
  return ProcessIdentity{pid, stat->start_time};
}

bool ProcessIdentity::IsAlive() const {
  if (pid <= 0 || start_time == 0) return false;
  absl::StatusOr<ProcStat> stat = ReadProcStat(pid);
  return stat.ok() && stat->start_time == start_time && stat->state != 'Z' &&
         stat->state != 'X';
}

int PidfdOpen(pid_t pid) {
  return static_cast<int>(syscall(SYS_pidfd_open, pid, 0));
}

int PidfdSendSignal(int pidfd, int signal) {
  return static_cast<int>(
      syscall(SYS_pidfd_send_signal, pidfd, signal, nullptr, 0));
}

std::string DescribeWaitStatus(int wait_status) {
  if (WIFEXITED(wait_status)) {
    return absl::StrCat("exited with code ", WEXITSTATUS(wait_status));
  }
  if (WIFSIGNALED(wait_status)) {
    const int signal = WTERMSIG(wait_status);
    const char* name = strsignal(signal);
    return absl::StrCat("was killed by signal ", signal, " (",
                        name != nullptr ? name : "unknown", ")");
  }
  return absl::StrCat("ended with wait status ", wait_status);
}

std::vector<char*> CStrings(std::vector<std::string>& strings) {
  std::vector<char*> result;
  result.reserve(strings.size() + 1);
  for (std::string& s : strings) result.push_back(s.data());
  result.push_back(nullptr);
  return result;
}

}  // namespace berth::base
