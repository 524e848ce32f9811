#include "services/node/log_reader.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <optional>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "base/unique_fd.h"

namespace berth::node {
namespace {

constexpr size_t kChunk = 32 * 1024;
constexpr int kMaxRotations = 1024;  // logs.max_files' largest

// The log directories and files are in a task's directory, which the task
// may be able to write to: each directory is opened without following a
// link at its path (O_NOFOLLOW; its parents are the node's), and every file
// is opened relative to it, one component, again O_NOFOLLOW, and read only
// when it is a regular file: `berth logs` never reads what a planted link
// points to, nor blocks on a planted FIFO.

// One stream's files, oldest first, and following its live file.
struct StreamReader {
  v1::LogStream stream;
  std::string name;   // NAME.log
  std::string path;   // <log_dir>/NAME.log, for messages
  base::UniqueFd fd;  // the live file being followed
  ino_t inode = 0;
};

// A log directory, held open.
struct LogDir {
  std::string path;
  base::UniqueFd fd;  // invalid while missing
  dev_t dev = 0;
  ino_t inode = 0;
};

// A file of a log directory to read.
struct KeptFile {
  int dir_fd;
  std::string name;
  std::string path;  // for messages
};

absl::Status ReadError(const std::string& path) {
  return absl::InternalError(
      absl::StrCat("cannot read ", path, ": ", std::strerror(errno)));
}

// The log directory `path`, O_NOFOLLOW (a link there is an error); its fd
// is invalid when it is missing.
absl::StatusOr<LogDir> OpenLogDir(const std::string& path) {
  LogDir dir;
  dir.path = path;
  dir.fd.reset(
      open(path.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  struct stat st;
  if (!dir.fd.valid()) {
    if (errno != ENOENT) return ReadError(path);
  } else if (fstat(dir.fd.get(), &st) == 0) {
    dir.dev = st.st_dev;
    dir.inode = st.st_ino;
  }
  return dir;
}

// `name` in `dir_fd`: invalid with errno ENOENT when missing, ELOOP for a
// link, EINVAL for anything but a regular file.
base::UniqueFd OpenLogFile(int dir_fd, const std::string& name) {
  if (dir_fd < 0) {
    errno = ENOENT;
    return base::UniqueFd();
  }
  base::UniqueFd fd(openat(dir_fd, name.c_str(),
                           O_RDONLY | O_NONBLOCK | O_NOFOLLOW | O_CLOEXEC));
  struct stat st;
  if (fd.valid() && (fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode))) {
    fd.reset();
    errno = EINVAL;
  }
  return fd;
}

// NAME.log.N ... NAME.log.1, NAME.log for `name` (NAME.log) in `dir_fd`:
// one scan of the directory.
std::vector<KeptFile> KeptFiles(const LogDir& dir, const std::string& name) {
  const int dir_fd = dir.fd.get();
  const std::string prefix = name + ".";
  std::vector<int> rotations;
  // A description of its own: a listing's position is not shared.
  const int listing_fd =
      dir_fd < 0 ? -1 : openat(dir_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (DIR* listing = listing_fd < 0 ? nullptr : fdopendir(listing_fd);
      listing != nullptr) {
    while (const dirent* entry = readdir(listing)) {
      absl::string_view entry_name = entry->d_name;
      int n = 0;
      if (absl::ConsumePrefix(&entry_name, prefix) &&
          absl::SimpleAtoi(entry_name, &n) && n >= 1 && n <= kMaxRotations) {
        rotations.push_back(n);
      }
    }
    closedir(listing);
  } else if (listing_fd >= 0) {
    close(listing_fd);
  }
  std::sort(rotations.rbegin(), rotations.rend());
  std::vector<KeptFile> files;
  for (int n : rotations) {
    const std::string rotated = absl::StrCat(name, ".", n);
    files.push_back({dir_fd, rotated, absl::StrCat(dir.path, "/", rotated)});
  }
  files.push_back({dir_fd, name, absl::StrCat(dir.path, "/", name)});
  return files;
}

// Sends [offset, end) of `fd`; returns false when `write` said stop.
bool SendRange(
    int fd, off_t offset, v1::LogStream stream,
    const std::function<bool(v1::LogStream, absl::string_view)>& write,
    off_t* end_offset) {
  char buffer[kChunk];
  while (true) {
    ssize_t n = pread(fd, buffer, sizeof(buffer), offset);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    offset += n;
    if (!write(stream, absl::string_view(buffer, n))) return false;
  }
  if (end_offset != nullptr) *end_offset = offset;
  return true;
}

// Where, across the files `fds` (oldest first, none for a missing one), the
// last `lines` lines begin: the index of the file and the offset in it. A
// newline that is the very last byte ends the last line; it starts none.
std::pair<size_t, off_t> TailStart(const std::vector<base::UniqueFd>& fds,
                                   uint64_t lines) {
  uint64_t newlines = 0;
  bool last_byte = true;
  char buffer[kChunk];
  for (size_t i = fds.size(); i-- > 0;) {
    if (!fds[i].valid()) continue;
    struct stat st;
    if (fstat(fds[i].get(), &st) != 0) continue;
    off_t end = st.st_size;
    while (end > 0) {
      off_t start =
          std::max<off_t>(0, end - static_cast<off_t>(sizeof(buffer)));
      ssize_t n = pread(fds[i].get(), buffer, end - start, start);
      if (n <= 0) break;
      for (ssize_t j = n - 1; j >= 0; --j) {
        const bool skip = last_byte;
        last_byte = false;
        if (buffer[j] != '\n' || skip) continue;
        if (++newlines == lines) return {i, start + j + 1};
      }
      end = start;
    }
  }
  return {0, 0};
}

}  // namespace

absl::Status ReadTaskLogs(
    const LogReadOptions& options,
    const std::function<bool(v1::LogStream, absl::string_view)>& write) {
  std::vector<v1::LogStream> wanted = options.streams;
  if (wanted.empty() || std::find(wanted.begin(), wanted.end(),
                                  v1::LOG_STREAM_UNSPECIFIED) != wanted.end()) {
    wanted = {v1::LOG_STREAM_STDOUT, v1::LOG_STREAM_STDERR};
  }
  absl::StatusOr<LogDir> log_dir = OpenLogDir(options.log_dir);
  if (!log_dir.ok()) return log_dir.status();
  std::vector<LogDir> earlier_dirs;
  for (const std::string& earlier : options.earlier_log_dirs) {
    absl::StatusOr<LogDir> dir = OpenLogDir(earlier);
    if (!dir.ok()) return dir.status();
    earlier_dirs.push_back(*std::move(dir));
  }
  std::vector<std::unique_ptr<StreamReader>> readers;
  for (v1::LogStream stream : wanted) {
    auto reader = std::make_unique<StreamReader>();
    reader->stream = stream;
    reader->name =
        stream == v1::LOG_STREAM_STDERR ? "stderr.log" : "stdout.log";
    reader->path = absl::StrCat(options.log_dir, "/", reader->name);
    readers.push_back(std::move(reader));
  }

  std::vector<off_t> live_offsets(readers.size(), 0);
  for (size_t r = 0; r < readers.size(); ++r) {
    StreamReader& reader = *readers[r];
    // Earlier runs' output first (oldest first), then the current run's; the
    // last file is the live one.
    std::vector<KeptFile> files;
    for (const LogDir& earlier : earlier_dirs) {
      for (KeptFile& file : KeptFiles(earlier, reader.name)) {
        files.push_back(std::move(file));
      }
    }
    for (KeptFile& file : KeptFiles(*log_dir, reader.name)) {
      files.push_back(std::move(file));
    }
    std::vector<base::UniqueFd> fds;
    for (const KeptFile& file : files) {
      base::UniqueFd fd = OpenLogFile(file.dir_fd, file.name);
      if (!fd.valid() && errno != ENOENT) return ReadError(file.path);
      fds.push_back(std::move(fd));
    }
    size_t first = 0;
    off_t first_offset = 0;
    if (options.tail_lines > 0) {
      std::tie(first, first_offset) = TailStart(fds, options.tail_lines);
    }
    bool go_on = true;
    for (size_t i = first; i < fds.size() && go_on; ++i) {
      if (!fds[i].valid()) continue;
      off_t end = 0;
      go_on = SendRange(fds[i].get(), i == first ? first_offset : 0,
                        reader.stream, write, &end);
      if (i == fds.size() - 1) live_offsets[r] = end;
    }
    // Keep the live file open to follow it; the earlier ones close here.
    reader.fd = std::move(fds.back());
    fds.clear();
    if (reader.fd.valid()) {
      struct stat st;
      if (fstat(reader.fd.get(), &st) == 0) reader.inode = st.st_ino;
    }
    if (!go_on) return absl::OkStatus();
  }
  if (!options.follow) return absl::OkStatus();

  while (true) {
    if (options.cancelled && options.cancelled()) return absl::OkStatus();
    // Read `running` before draining, so output written just before the
    // task ended is still read.
    const bool running = options.running ? options.running() : false;
    // The live directory is looked up again (O_NOFOLLOW): made late, or
    // replaced when a restarted task's run begins.
    if (absl::StatusOr<LogDir> now = OpenLogDir(options.log_dir);
        now.ok() && now->fd.valid() &&
        (!log_dir->fd.valid() || now->dev != log_dir->dev ||
         now->inode != log_dir->inode)) {
      *log_dir = *std::move(now);
    }
    for (size_t r = 0; r < readers.size(); ++r) {
      StreamReader& reader = *readers[r];
      if (reader.fd.valid()) {
        off_t end = live_offsets[r];
        if (!SendRange(reader.fd.get(), live_offsets[r], reader.stream, write,
                       &end)) {
          return absl::OkStatus();
        }
        live_offsets[r] = end;
      }
      // Rotated (or made for the first time): finish the old file above,
      // then move to the new one.
      struct stat st;
      if (log_dir->fd.valid() &&
          fstatat(log_dir->fd.get(), reader.name.c_str(), &st,
                  AT_SYMLINK_NOFOLLOW) == 0 &&
          (!reader.fd.valid() || st.st_ino != reader.inode)) {
        base::UniqueFd fd = OpenLogFile(log_dir->fd.get(), reader.name);
        if (fd.valid()) {
          if (reader.fd.valid()) {
            // Drain what was written to the old file after the last read.
            off_t end = live_offsets[r];
            SendRange(reader.fd.get(), live_offsets[r], reader.stream, write,
                      &end);
          }
          reader.fd = std::move(fd);
          reader.inode = st.st_ino;
          live_offsets[r] = 0;
          off_t end = 0;
          if (!SendRange(reader.fd.get(), 0, reader.stream, write, &end)) {
            return absl::OkStatus();
          }
          live_offsets[r] = end;
        }
      }
    }
    if (!running) return absl::OkStatus();
    if (options.wait) {
      options.wait(options.poll_interval);
    } else {
      absl::SleepFor(options.poll_interval);
    }
  }
}

}  // namespace berth::node
