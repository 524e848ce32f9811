// A task's stdout or stderr kept in files of bounded size, where berth-node
// reads them (the driver contract): <task_dir>/logs/stdout.log and
// <task_dir>/logs/stderr.log, rotated per TaskConfig.logs.
//
// NAME.log is written until it would pass max_bytes, then NAME.log.1 ...
// NAME.log.N shift up by one (NAME.log.N is dropped), NAME.log becomes
// NAME.log.1 and a new NAME.log starts. The newest bytes are always in
// NAME.log; reading NAME.log.N ... NAME.log.1, NAME.log in that order gives
// the kept output in order. A file is never larger than max_bytes: a write
// is split at the boundary.
//
// A driver that pumps a task's output pipes:
//
//   const LogLimits limits = ResolveLogLimits(task.logs().max_file_bytes(),
//                                             task.logs().max_files());
//   mkdir(TaskLogDir(task_dir).c_str(), 0755);
//   RotatingLog out(TaskLogDir(task_dir), kStdoutLogName,
//                   limits.max_file_bytes, limits.max_files);
//   if (!out.Open()) ...;                // errno says why
//   out.Write(buffer, n);                // for each read from the pipe
//
// Every open, rename and truncation is relative to one descriptor of the
// log directory, taken once (O_NOFOLLOW) and kept: a writer that may be root
// never follows a symbolic link that whoever can write in or above the
// directory planted (at NAME.log, NAME.log.N, or the directory itself after
// renaming it away), and keeps writing into the same directory even when
// the path no longer leads there (berth-task-init opens the host's log
// directory before it pivots into the task's root).
//
// libc and libstdc++ only (berth-task-init, a static binary, links it).
// Only the constructors allocate: Open, Write and the destructor make only
// async-signal-safe calls, so a RotatingLog constructed before fork(2) may be
// used in the child of a threaded process (a monitor that outlives the
// driver). One object per file, used by one thread at a time.

#ifndef PLUGINS_SDK_ROTATING_LOG_H_
#define PLUGINS_SDK_ROTATING_LOG_H_

#include <cstddef>
#include <cstdint>
#include <string>

namespace berth::plugin {

// The directory of a task's output files, below its task directory.
inline constexpr char kLogDirName[] = "logs";
// The NAME of the output files: <task_dir>/logs/stdout.log, stderr.log.
inline constexpr char kStdoutLogName[] = "stdout";
inline constexpr char kStderrLogName[] = "stderr";
// What TaskConfig.logs' zeros mean.
inline constexpr uint64_t kDefaultLogFileBytes = 10 << 20;  // 10 MiB
inline constexpr uint32_t kDefaultLogFiles = 4;

// <task_dir>/logs.
std::string TaskLogDir(const std::string& task_dir);

struct LogLimits {
  uint64_t max_file_bytes = kDefaultLogFileBytes;
  uint32_t max_files = kDefaultLogFiles;
};

// TaskConfig.logs' max_file_bytes and max_files with the defaults for 0.
LogLimits ResolveLogLimits(uint64_t max_file_bytes, uint32_t max_files);

class RotatingLog {
 public:
  // `max_rotated` files NAME.log.1 ... are kept besides NAME.log (0 keeps
  // none: NAME.log is truncated when full). max_bytes 0 means 1. `name` is
  // one path component (no '/'; Open fails with EINVAL otherwise).
  //
  // The directory `dir` is opened (O_DIRECTORY | O_NOFOLLOW) by the first
  // Open and that descriptor is used from then on.
  RotatingLog(const std::string& dir, const std::string& name,
              uint64_t max_bytes, uint32_t max_rotated);
  // The directory is `dir_fd`, which is duplicated (close-on-exec): the
  // object owns its copy, the caller keeps and closes its own. An invalid
  // `dir_fd` (or a failed dup) makes Open fail with EBADF.
  RotatingLog(int dir_fd, const std::string& name, uint64_t max_bytes,
              uint32_t max_rotated);
  ~RotatingLog();
  RotatingLog(const RotatingLog&) = delete;
  RotatingLog& operator=(const RotatingLog&) = delete;

  // Opens (appending to) NAME.log. False with errno set on failure.
  bool Open();

  // Writes all of `data`, rotating as needed (opening NAME.log first if it
  // is not open). False with errno set when a write, rename or open failed
  // (the bytes not written are lost).
  bool Write(const char* data, size_t size);

  // NAME.log's path, for messages: "DIR/NAME.log", or "NAME.log" (relative
  // to the descriptor) for an object made from a directory descriptor.
  const std::string& CurrentPath() const { return current_path_; }

 private:
  RotatingLog(const std::string& dir, int dir_fd, const std::string& name,
              uint64_t max_bytes, uint32_t max_rotated);
  bool Rotate();
  // openat(2) of NAME.log in the directory for writing, `flags` besides.
  int OpenCurrent(int flags) const;
  // NAME.log.<index>, in one of the two buffers below.
  const char* RotatedName(std::string* buffer, uint32_t index);

  // The directory to open (path constructor) until dir_fd_ is valid.
  const std::string dir_path_;
  // NAME.log, relative to dir_fd_.
  const std::string current_name_;
  const std::string current_path_;
  const uint64_t max_bytes_;
  const uint32_t max_rotated_;
  // Room for NAME.log.<any uint32>, made by the constructor so that
  // rotating does not allocate.
  std::string from_name_;
  std::string to_name_;
  int dir_fd_ = -1;
  int fd_ = -1;
  uint64_t size_ = 0;
};

}  // namespace berth::plugin

#endif  // PLUGINS_SDK_ROTATING_LOG_H_
