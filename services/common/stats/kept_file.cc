#include "services/common/stats/kept_file.h"

#include <fcntl.h>
#include <linux/magic.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"

namespace berth {
namespace stats {
namespace {

constexpr size_t kInitialBuffer = 4096;

absl::Status ErrnoStatus(int error, absl::string_view what,
                         absl::string_view path) {
  const std::string message =
      absl::StrCat("cannot ", what, " ", path, ": ", std::strerror(error));
  switch (error) {
    case ENOENT:
    case ENODEV:
    case ESRCH:
      return absl::NotFoundError(message);
    case EACCES:
    case EPERM:
      return absl::PermissionDeniedError(message);
    default:
      return absl::InternalError(message);
  }
}

// Parses the unsigned number at the start of `text` (after blanks); false if
// there is none or it overflows.
bool ParseLeadingNumber(absl::string_view text, uint64_t* value) {
  size_t i = 0;
  while (i < text.size() && (text[i] == ' ' || text[i] == '\t')) ++i;
  if (i == text.size() || !absl::ascii_isdigit(text[i])) return false;
  uint64_t result = 0;
  for (; i < text.size() && absl::ascii_isdigit(text[i]); ++i) {
    const uint64_t digit = static_cast<uint64_t>(text[i] - '0');
    if (result > (UINT64_MAX - digit) / 10) return false;
    result = result * 10 + digit;
  }
  *value = result;
  return true;
}

}  // namespace

absl::StatusOr<KeptFile> KeptFile::Open(std::string path) {
  base::UniqueFd fd(open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd.valid()) return ErrnoStatus(errno, "open", path);
  return KeptFile(std::move(fd), std::move(path));
}

absl::StatusOr<absl::string_view> KeptFile::Read() {
  if (!fd_.valid()) {
    return absl::FailedPreconditionError(
        absl::StrCat("file ", path_, " is not open"));
  }
  thread_local std::string buffer(kInitialBuffer, '\0');
  size_t filled = 0;
  while (true) {
    const ssize_t n = pread(fd_.get(), buffer.data() + filled,
                            buffer.size() - filled, static_cast<off_t>(filled));
    if (n < 0) {
      if (errno == EINTR) continue;
      return ErrnoStatus(errno, "read", path_);
    }
    filled += static_cast<size_t>(n);
    if (n == 0 || filled < buffer.size()) break;
    // The buffer was filled: the file may be longer. Grow and read on.
    buffer.resize(buffer.size() * 2);
  }
  return absl::string_view(buffer.data(), filled);
}

absl::StatusOr<KeptFile> OpenIfPresent(std::string path) {
  absl::StatusOr<KeptFile> file = KeptFile::Open(std::move(path));
  if (absl::IsNotFound(file.status())) return KeptFile();
  return file;
}

absl::StatusOr<DirWatch> DirWatch::Open(const std::string& path) {
  DirWatch watch;
  watch.fd_.reset(open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!watch.fd_.valid()) return ErrnoStatus(errno, "open directory", path);
  struct statfs fs;
  if (fstatfs(watch.fd_.get(), &fs) != 0)
    return ErrnoStatus(errno, "statfs", path);
  watch.needs_check_ = fs.f_type != CGROUP_SUPER_MAGIC &&
                       fs.f_type != CGROUP2_SUPER_MAGIC &&
                       fs.f_type != PROC_SUPER_MAGIC;
  return watch;
}

bool DirWatch::Gone() const {
  if (!needs_check_ || !fd_.valid()) return false;
  struct stat st;
  if (fstat(fd_.get(), &st) != 0) return true;
  return st.st_nlink == 0;
}

absl::StatusOr<uint64_t> ParseSingleNumber(absl::string_view content,
                                           absl::string_view what) {
  uint64_t value = 0;
  const absl::string_view trimmed = absl::StripAsciiWhitespace(content);
  if (!ParseLeadingNumber(trimmed, &value) ||
      trimmed.find_first_not_of("0123456789") != absl::string_view::npos) {
    return absl::InvalidArgumentError(absl::StrCat(
        what, ": expected a number, got \"", trimmed.substr(0, 64), "\""));
  }
  return value;
}

absl::Status ReadSingleNumber(KeptFile& file, std::optional<uint64_t>* value) {
  if (!file.is_open()) return absl::OkStatus();
  absl::StatusOr<absl::string_view> content = file.Read();
  if (!content.ok()) return content.status();
  absl::StatusOr<uint64_t> number = ParseSingleNumber(*content, file.path());
  if (!number.ok()) return number.status();
  *value = *number;
  return absl::OkStatus();
}

absl::Status ReadLimit(KeptFile& file, std::optional<uint64_t>* value) {
  if (!file.is_open()) return absl::OkStatus();
  absl::StatusOr<absl::string_view> content = file.Read();
  if (!content.ok()) return content.status();
  if (absl::StripAsciiWhitespace(*content) == "max") return absl::OkStatus();
  absl::StatusOr<uint64_t> number = ParseSingleNumber(*content, file.path());
  if (!number.ok()) return number.status();
  *value = *number;
  return absl::OkStatus();
}

void ParseFlatKeyed(absl::string_view content,
                    absl::Span<const KeyedField> fields) {
  size_t remaining = fields.size();
  const char* p = content.data();
  const char* const end = p + content.size();
  while (p < end && remaining > 0) {
    const char* newline =
        static_cast<const char*>(memchr(p, '\n', static_cast<size_t>(end - p)));
    if (newline == nullptr) newline = end;
    const char* blank = p;
    while (blank < newline && *blank != ' ' && *blank != '\t') ++blank;
    if (blank < newline) {
      const absl::string_view key(p, static_cast<size_t>(blank - p));
      for (const KeyedField& field : fields) {
        if (field.key.size() != key.size() || field.key != key) continue;
        uint64_t value = 0;
        if (ParseLeadingNumber(
                absl::string_view(blank, static_cast<size_t>(newline - blank)),
                &value)) {
          if (!field.value->has_value()) --remaining;
          *field.value = value;
        }
        break;
      }
    }
    p = newline + 1;
  }
}

}  // namespace stats
}  // namespace berth
