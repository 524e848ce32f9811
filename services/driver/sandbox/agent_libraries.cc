#include "services/driver/sandbox/agent_libraries.h"

#include <elf.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <set>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "base/path.h"
#include "base/subprocess.h"
#include "base/unique_fd.h"

namespace berth::sandbox_driver {
namespace {

// Reads exactly `size` bytes at `offset`; false when the file is shorter.
bool ReadAt(int fd, void* data, size_t size, off_t offset) {
  char* bytes = static_cast<char*>(data);
  size_t got = 0;
  while (got < size) {
    const ssize_t n =
        pread(fd, bytes + got, size - got, offset + static_cast<off_t>(got));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    got += static_cast<size_t>(n);
  }
  return true;
}

absl::StatusOr<std::string> RealPath(const std::string& path) {
  char* real = realpath(path.c_str(), nullptr);
  if (real == nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat("resolving ", path, ": ", std::strerror(errno)));
  }
  std::string result = real;
  free(real);
  return result;
}

}  // namespace

absl::StatusOr<std::string> ElfInterpreter(const std::string& path) {
  const base::UniqueFd fd(open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd.valid()) {
    return absl::ErrnoToStatus(errno, absl::StrCat("opening ", path));
  }
  auto invalid = [&path](absl::string_view why) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, " is not a 64-bit ELF file: ", why));
  };
  Elf64_Ehdr header;
  if (!ReadAt(fd.get(), &header, sizeof(header), 0)) {
    return invalid("shorter than its header");
  }
  if (std::memcmp(header.e_ident, ELFMAG, SELFMAG) != 0) {
    return invalid("no ELF magic");
  }
  if (header.e_ident[EI_CLASS] != ELFCLASS64) return invalid("not ELFCLASS64");
  if (header.e_phentsize != sizeof(Elf64_Phdr)) {
    return invalid("unexpected program header size");
  }
  for (int i = 0; i < header.e_phnum; ++i) {
    Elf64_Phdr program;
    if (!ReadAt(fd.get(), &program, sizeof(program),
                static_cast<off_t>(header.e_phoff + i * sizeof(Elf64_Phdr)))) {
      return invalid("program headers cut short");
    }
    if (program.p_type != PT_INTERP) continue;
    if (program.p_filesz == 0 || program.p_filesz > PATH_MAX) {
      return invalid("a PT_INTERP of unexpected size");
    }
    std::string interpreter(program.p_filesz, '\0');
    if (!ReadAt(fd.get(), interpreter.data(), interpreter.size(),
                static_cast<off_t>(program.p_offset))) {
      return invalid("PT_INTERP cut short");
    }
    interpreter.resize(std::strlen(interpreter.c_str()));
    if (interpreter.empty() || interpreter[0] != '/') {
      return invalid(absl::StrCat("PT_INTERP \"", interpreter,
                                  "\" is not an absolute path"));
    }
    return interpreter;
  }
  return std::string();
}

absl::StatusOr<std::vector<AgentLibraries::Dir>> ParseLoaderListing(
    const std::string& listing) {
  std::vector<AgentLibraries::Dir> dirs;
  std::set<std::string> seen;
  for (absl::string_view line : absl::StrSplit(listing, '\n')) {
    line = absl::StripAsciiWhitespace(line);
    const size_t arrow = line.find(" => ");
    // The vDSO and the interpreter itself: no "=>".
    if (arrow == absl::string_view::npos) continue;
    const absl::string_view name = line.substr(0, arrow);
    absl::string_view found = line.substr(arrow + 4);
    if (absl::StartsWith(found, "not found")) {
      return absl::FailedPreconditionError(
          absl::StrCat("the loader does not find ", name));
    }
    if (const size_t address = found.rfind(" (");
        address != 0 && address != absl::string_view::npos) {
      found = found.substr(0, address);
    }
    if (found.empty() || found[0] != '/') {
      return absl::FailedPreconditionError(absl::StrCat(
          "the loader lists ", name, " at \"", found, "\", not a path"));
    }
    std::string dir = base::Dirname(found);
    if (seen.insert(dir).second) dirs.push_back({std::move(dir), ""});
  }
  return dirs;
}

absl::StatusOr<AgentLibraries> FindAgentLibraries(
    const std::string& agent_path) {
  AgentLibraries libraries;
  absl::StatusOr<std::string> interpreter = ElfInterpreter(agent_path);
  if (!interpreter.ok()) {
    return absl::FailedPreconditionError(interpreter.status().message());
  }
  if (interpreter->empty()) return libraries;
  libraries.interpreter = *interpreter;
  absl::StatusOr<std::string> interpreter_host = RealPath(*interpreter);
  if (!interpreter_host.ok()) return interpreter_host.status();
  libraries.interpreter_host_path = *interpreter_host;

  base::SubprocessOptions options;
  options.args = {"--list", agent_path};
  options.timeout = absl::Seconds(10);
  absl::StatusOr<base::SubprocessResult> listed =
      base::RunSubprocess(*interpreter_host, options);
  if (!listed.ok()) {
    return absl::FailedPreconditionError(listed.status().message());
  }
  // Parsed first: a library not found is named there, whatever the exit.
  absl::StatusOr<std::vector<AgentLibraries::Dir>> dirs =
      ParseLoaderListing(listed->stdout_data);
  if (!dirs.ok()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "the libraries of ", agent_path, ": ", dirs.status().message()));
  }
  if (listed->exit_code() != 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("listing the libraries of ", agent_path, " (",
                     *interpreter_host, " --list): it ", listed->Describe(),
                     ": ", absl::StripAsciiWhitespace(listed->stderr_data)));
  }
  for (AgentLibraries::Dir& dir : *dirs) {
    absl::StatusOr<std::string> host = RealPath(dir.path);
    if (!host.ok()) return host.status();
    dir.host_path = *host;
  }
  libraries.dirs = std::move(*dirs);
  return libraries;
}

}  // namespace berth::sandbox_driver
