#include "services/proxy/state_store.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <sstream>

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "base/unique_fd.h"
#include "glog/logging.h"

namespace berth {
namespace proxy {
namespace {

// mkdir -p, 0700.
absl::Status MakeDir(const std::string& path) {
  for (size_t slash = path.find('/', 1); slash != std::string::npos;
       slash = path.find('/', slash + 1)) {
    mkdir(path.substr(0, slash).c_str(), 0700);
  }
  if (mkdir(path.c_str(), 0700) != 0 && errno != EEXIST) {
    return absl::InternalError(absl::StrCat("cannot create state directory ",
                                            path, ": ", std::strerror(errno)));
  }
  return absl::OkStatus();
}

// Names a file by any id: its hex, so that no id can escape the directory.
std::string FileName(const std::string& id) {
  return absl::BytesToHexString(id);
}

absl::Status WriteAtomically(const std::string& path,
                             const std::vector<std::string>& fields) {
  std::vector<std::string> lines;
  for (const std::string& field : fields) lines.push_back(absl::CEscape(field));
  std::string content = absl::StrCat(absl::StrJoin(lines, "\n"), "\n");
  std::string tmp = absl::StrCat(path, ".tmp");
  base::UniqueFd fd(
      open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600));
  if (!fd.valid()) {
    return absl::InternalError(
        absl::StrCat("cannot write ", tmp, ": ", std::strerror(errno)));
  }
  size_t done = 0;
  while (done < content.size()) {
    ssize_t n = write(fd.get(), content.data() + done, content.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      int e = errno;
      fd.reset();
      unlink(tmp.c_str());
      return absl::InternalError(
          absl::StrCat("cannot write ", tmp, ": ", std::strerror(e)));
    }
    done += static_cast<size_t>(n);
  }
  // close(2) by hand, on a descriptor released from its owner: its error is
  // a failed write too.
  if (fsync(fd.get()) != 0 || close(fd.release()) != 0 ||
      rename(tmp.c_str(), path.c_str())) {
    int e = errno;
    unlink(tmp.c_str());
    return absl::InternalError(
        absl::StrCat("cannot write ", path, ": ", std::strerror(e)));
  }
  return absl::OkStatus();
}

// The fields of a record file, or empty when unreadable. Every field ends
// with a newline; an empty field is an empty line.
std::vector<std::string> ReadFields(const std::string& path) {
  std::ifstream in(path);
  std::stringstream buffer;
  buffer << in.rdbuf();
  const std::string content = buffer.str();
  absl::string_view text = content;
  if (!absl::ConsumeSuffix(&text, "\n")) return {};
  std::vector<std::string> fields;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    std::string field;
    if (!absl::CUnescape(line, &field)) return {};
    fields.push_back(std::move(field));
  }
  return fields;
}

std::vector<std::string> Records(const std::string& dir) {
  std::vector<std::string> paths;
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) return paths;
  while (struct dirent* entry = readdir(d)) {
    std::string name = entry->d_name;
    if (name == "." || name == ".." || absl::EndsWith(name, ".tmp")) continue;
    paths.push_back(absl::StrCat(dir, "/", name));
  }
  closedir(d);
  return paths;
}

}  // namespace

absl::StatusOr<StateStore> StateStore::Open(const std::string& dir) {
  for (const std::string& path :
       {dir, absl::StrCat(dir, "/sandboxes"), absl::StrCat(dir, "/sessions")}) {
    if (absl::Status status = MakeDir(path); !status.ok()) return status;
  }
  // A record a killed proxy was writing (WriteAtomically's "<name>.tmp",
  // never renamed): Load skips it, and nothing else would remove it.
  for (const std::string& sub :
       {absl::StrCat(dir, "/sandboxes"), absl::StrCat(dir, "/sessions")}) {
    DIR* d = opendir(sub.c_str());
    if (d == nullptr) continue;
    while (struct dirent* entry = readdir(d)) {
      if (absl::EndsWith(entry->d_name, ".tmp")) {
        unlinkat(dirfd(d), entry->d_name, 0);
      }
    }
    closedir(d);
  }
  return StateStore(dir);
}

absl::Status StateStore::PutSandbox(const SandboxRecord& record) const {
  return WriteAtomically(
      absl::StrCat(dir_, "/sandboxes/", FileName(record.sandbox_id)),
      {record.sandbox_id, record.target});
}

void StateStore::RemoveSandbox(const std::string& sandbox_id) const {
  unlink(absl::StrCat(dir_, "/sandboxes/", FileName(sandbox_id)).c_str());
}

absl::Status StateStore::PutSession(const SessionRecord& record) const {
  return WriteAtomically(
      absl::StrCat(dir_, "/sessions/", FileName(record.process_id)),
      {record.token, record.sandbox_id, record.container_id,
       record.process_id});
}

void StateStore::RemoveSession(const std::string& process_id) const {
  unlink(absl::StrCat(dir_, "/sessions/", FileName(process_id)).c_str());
}

StateStore::State StateStore::Load() const {
  State state;
  for (const std::string& path : Records(absl::StrCat(dir_, "/sandboxes"))) {
    std::vector<std::string> f = ReadFields(path);
    if (f.size() != 2) {
      LOG(WARNING) << "skipping unreadable sandbox record " << path;
      continue;
    }
    state.sandboxes.push_back(SandboxRecord{f[0], f[1]});
  }
  for (const std::string& path : Records(absl::StrCat(dir_, "/sessions"))) {
    std::vector<std::string> f = ReadFields(path);
    if (f.size() != 4) {
      LOG(WARNING) << "skipping unreadable session record " << path;
      continue;
    }
    state.sessions.push_back(SessionRecord{f[0], f[1], f[2], f[3]});
  }
  return state;
}

}  // namespace proxy
}  // namespace berth
