#include "services/common/service_main.h"

#include <dirent.h>
#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/internal/parse.h"
#include "absl/flags/internal/usage.h"
#include "absl/flags/usage.h"
#include "absl/flags/usage_config.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"
#include "absl/synchronization/mutex.h"
#include "glog/logging.h"

// Not "v": glog (built with gflags) already defines FLAGS_v.
ABSL_FLAG(int, verbosity, 0,
          "Log VLOG(n) messages for every n up to this level (glog's -v).");

namespace berth {
namespace {

sigset_t ShutdownSignals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  return set;
}

// The threads of this process, from /proc/self/task; -1 if unknown.
int CountThreads() {
  DIR* dir = opendir("/proc/self/task");
  if (dir == nullptr) return -1;
  int threads = 0;
  while (const dirent* entry = readdir(dir)) {
    if (entry->d_name[0] != '.') ++threads;
  }
  closedir(dir);
  return threads;
}

// Flags that absl itself defines (--flagfile, --helpfull, ...), which --help
// leaves to --helpfull. Their file names look like "./absl/flags/parse.cc".
bool IsAbseilFile(absl::string_view filename) {
  absl::ConsumePrefix(&filename, "./");
  return absl::StartsWith(filename, "absl/") ||
         absl::StrContains(filename, "/absl/");
}

absl::string_view Basename(absl::string_view path) {
  const size_t slash = path.find_last_of('/');
  return slash == absl::string_view::npos ? path : path.substr(slash + 1);
}

// Length of the valid UTF-8 sequence at the start of `text` (2 to 4
// bytes), or 0 when it is none (a lone byte of 0x80 and above).
size_t Utf8SequenceLength(absl::string_view text) {
  const auto byte = [&](size_t i) {
    return static_cast<unsigned char>(text[i]);
  };
  const unsigned char lead = byte(0);
  size_t length;
  uint32_t code;
  if (lead >= 0xc2 && lead <= 0xdf) {
    length = 2;
    code = lead & 0x1f;
  } else if (lead >= 0xe0 && lead <= 0xef) {
    length = 3;
    code = lead & 0x0f;
  } else if (lead >= 0xf0 && lead <= 0xf4) {
    length = 4;
    code = lead & 0x07;
  } else {
    return 0;
  }
  if (text.size() < length) return 0;
  for (size_t i = 1; i < length; ++i) {
    if ((byte(i) & 0xc0) != 0x80) return 0;
    code = (code << 6) | (byte(i) & 0x3f);
  }
  // Overlong forms, surrogates and code points past U+10FFFF are not valid.
  if ((length == 3 && code < 0x800) || (length == 4 && code < 0x10000) ||
      (code >= 0xd800 && code <= 0xdfff) || code > 0x10ffff) {
    return 0;
  }
  return length;
}

// Writes each log line to stderr in glog's format, its message escaped
// (internal::EscapeControlCharacters), in one write(2).
class EscapingStderrSink final : public google::LogSink {
 public:
  void send(google::LogSeverity severity, const char* /*full_filename*/,
            const char* base_filename, int line,
            const google::LogMessageTime& time, const char* message,
            size_t message_len) override {
    const std::string escaped = internal::EscapeControlCharacters(
        absl::string_view(message, message_len));
    std::string text = google::LogSink::ToString(
        severity, base_filename, line, time, escaped.data(), escaped.size());
    text.push_back('\n');
    const char* data = text.data();
    size_t left = text.size();
    while (left > 0) {
      const ssize_t written = write(STDERR_FILENO, data, left);
      if (written < 0 && errno == EINTR) continue;
      if (written <= 0) return;  // nowhere else to say it
      data += written;
      left -= static_cast<size_t>(written);
    }
  }
};

}  // namespace

namespace internal {

std::string EscapeControlCharacters(absl::string_view text) {
  std::string escaped;
  escaped.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    if (c >= 0x20 && c < 0x7f) {
      escaped.push_back(static_cast<char>(c));
      ++i;
      continue;
    }
    switch (c) {
      case '\n':
        escaped.append("\\n");
        ++i;
        continue;
      case '\r':
        escaped.append("\\r");
        ++i;
        continue;
      case '\t':
        escaped.append("\\t");
        ++i;
        continue;
      default:
        break;
    }
    if (c >= 0x80) {
      const size_t length = Utf8SequenceLength(text.substr(i));
      // C1 controls (U+0080..U+009F: CSI is U+009B) as \u00XX.
      if (length == 2 && c == 0xc2 &&
          static_cast<unsigned char>(text[i + 1]) < 0xa0) {
        absl::StrAppendFormat(&escaped, "\\u%04x",
                              static_cast<unsigned char>(text[i + 1]));
        i += 2;
        continue;
      }
      if (length > 0) {
        escaped.append(text.data() + i, length);
        i += length;
        continue;
      }
    }
    // Other C0 controls (ESC, NUL, ...), DEL and bytes that are not UTF-8.
    absl::StrAppendFormat(&escaped, "\\x%02x", c);
    ++i;
  }
  return escaped;
}

std::vector<char*> NormalizeFlagSpellings(int argc, char** argv) {
  static char help[] = "--help";
  std::vector<char*> args(argv, argv + argc);
  for (int i = 1; i < argc; ++i) {
    char* arg = argv[i];
    // Positional arguments and "-" (stdin, by convention) stay as they are.
    if (arg == nullptr || arg[0] != '-' || arg[1] == '\0') continue;
    if (std::strcmp(arg, "--") == 0) break;  // the rest is positional
    if (std::strcmp(arg, "-h") == 0) {
      args[i] = help;
      continue;
    }
    for (char* c = arg + (arg[1] == '-' ? 2 : 1); *c != '\0' && *c != '=';
         ++c) {
      if (*c == '-') *c = '_';
    }
  }
  return args;
}

}  // namespace internal

std::vector<char*> InitService(int argc, char** argv, absl::string_view usage,
                               absl::string_view version) {
  // First, while this is (meant to be) the only thread.
  const sigset_t signals = ShutdownSignals();
  const int mask_error = pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  const int threads = CountThreads();

  // Abseil's deadlock detection (on in Debian's build) updates a lock graph
  // on every lock taken; tests keep it, the services' hot paths do not.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);

  const char* program = argc > 0 && argv[0] != nullptr ? argv[0] : "berth";
  absl::SetProgramUsageMessage(usage);
  absl::FlagsUsageConfig config;
  config.contains_help_flags = [](absl::string_view filename) {
    return !IsAbseilFile(filename);
  };
  config.version_string = [line = absl::StrCat(Basename(program), " ", version,
                                               "\n")] { return line; };
  absl::SetFlagsUsageConfig(config);

  // absl's ParseCommandLine handles the usage flags itself and exits 1 after
  // --help (0 after --version); we handle them after parsing and exit 0, like
  // other tools. That takes absl::flags_internal's ParseCommandLineImpl and
  // HandleUsageFlags (exported by Abseil 20220623; recheck on an upgrade).
  std::vector<char*> normalized = internal::NormalizeFlagSpellings(argc, argv);
  const int normalized_argc = static_cast<int>(normalized.size());
  normalized.push_back(nullptr);
  std::vector<char*> positional = absl::flags_internal::ParseCommandLineImpl(
      normalized_argc, normalized.data(),
      absl::flags_internal::ArgvListAction::kRemoveParsedArgs,
      absl::flags_internal::UsageFlagsAction::kIgnoreUsage,
      absl::flags_internal::OnUndefinedFlag::kAbortIfUndefined);
  if (absl::flags_internal::HandleUsageFlags(
          std::cout, absl::ProgramUsageMessage()) != -1) {
    std::cout.flush();
    std::exit(0);
  }

  // Every line goes to stderr through EscapingStderrSink only: glog's own
  // stderr output is off (no line is above its threshold) and so are its
  // log files (an empty destination), so that a value a client supplied (a
  // command, a task name, an environment value) can neither forge a log
  // line nor send a terminal escape.
  FLAGS_logtostderr = false;
  FLAGS_alsologtostderr = false;
  FLAGS_stderrthreshold = google::NUM_SEVERITIES;
  FLAGS_v = absl::GetFlag(FLAGS_verbosity);
  google::InitGoogleLogging(program);
  for (int severity = 0; severity < google::NUM_SEVERITIES; ++severity) {
    google::SetLogDestination(severity, "");
  }
  static EscapingStderrSink* const sink = new EscapingStderrSink();
  google::AddLogSink(sink);
  CHECK_EQ(mask_error, 0) << "cannot block SIGTERM and SIGINT: "
                          << std::strerror(mask_error);
  LOG_IF(WARNING, threads > 1)
      << "InitService was called with " << threads
      << " threads running; those do not have SIGTERM and SIGINT blocked";
  return positional;
}

int WaitForShutdownSignal() {
  const sigset_t signals = ShutdownSignals();
  sigset_t blocked;
  CHECK_EQ(pthread_sigmask(SIG_BLOCK, nullptr, &blocked), 0);
  CHECK(sigismember(&blocked, SIGTERM) == 1 &&
        sigismember(&blocked, SIGINT) == 1)
      << "WaitForShutdownSignal needs SIGTERM and SIGINT blocked: call "
         "InitService first in main()";
  int signal = 0;
  const int error = sigwait(&signals, &signal);
  CHECK_EQ(error, 0) << "sigwait: " << std::strerror(error);
  LOG(INFO) << "received " << (signal == SIGTERM ? "SIGTERM" : "SIGINT")
            << ", shutting down";
  return signal;
}

}  // namespace berth
