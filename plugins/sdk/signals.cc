#include "plugins/sdk/signals.h"

#include <signal.h>

#include <string>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace berth::plugin {
namespace {

struct NamedSignal {
  const char* name;  // without "SIG"
  int number;
};

constexpr NamedSignal kSignals[] = {
    {"HUP", SIGHUP},   {"INT", SIGINT},       {"QUIT", SIGQUIT},
    {"ILL", SIGILL},   {"TRAP", SIGTRAP},     {"ABRT", SIGABRT},
    {"IOT", SIGIOT},   {"BUS", SIGBUS},       {"FPE", SIGFPE},
    {"KILL", SIGKILL}, {"USR1", SIGUSR1},     {"SEGV", SIGSEGV},
    {"USR2", SIGUSR2}, {"PIPE", SIGPIPE},     {"ALRM", SIGALRM},
    {"TERM", SIGTERM}, {"STKFLT", SIGSTKFLT}, {"CHLD", SIGCHLD},
    {"CONT", SIGCONT}, {"STOP", SIGSTOP},     {"TSTP", SIGTSTP},
    {"TTIN", SIGTTIN}, {"TTOU", SIGTTOU},     {"URG", SIGURG},
    {"XCPU", SIGXCPU}, {"XFSZ", SIGXFSZ},     {"VTALRM", SIGVTALRM},
    {"PROF", SIGPROF}, {"WINCH", SIGWINCH},   {"IO", SIGIO},
    {"POLL", SIGPOLL}, {"PWR", SIGPWR},       {"SYS", SIGSYS},
};

}  // namespace

absl::StatusOr<int> ParseSignal(absl::string_view signal,
                                absl::string_view field) {
  const std::string trimmed(absl::StripAsciiWhitespace(signal));
  if (trimmed.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(field, " is empty"));
  }
  int number = 0;
  if (absl::SimpleAtoi(trimmed, &number)) {
    if (number < 1 || number > SIGRTMAX) {
      return absl::InvalidArgumentError(
          absl::StrCat(field, ": signal number ", number,
                       " is out of range (1 to ", SIGRTMAX, ")"));
    }
    return number;
  }
  absl::string_view name = trimmed;
  if (absl::StartsWithIgnoreCase(name, "SIG")) name.remove_prefix(3);
  for (const NamedSignal& known : kSignals) {
    if (absl::EqualsIgnoreCase(name, known.name)) return known.number;
  }
  return absl::InvalidArgumentError(
      absl::StrCat(field, ": unknown signal \"", signal, "\""));
}

std::string SignalName(int signal) {
  for (const NamedSignal& known : kSignals) {
    if (known.number == signal) return absl::StrCat("SIG", known.name);
  }
  return absl::StrCat("SIG", signal);
}

}  // namespace berth::plugin
