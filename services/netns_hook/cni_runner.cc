#include "services/netns_hook/cni_runner.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "base/subprocess.h"
#include "glog/logging.h"
#include "services/netns_hook/cni_config.h"

namespace berth {
namespace netns_hook {
namespace {

using json = nlohmann::json;

// What is kept of a plugin's output; more is read and dropped.
constexpr size_t kMaxStdout = 16 << 20;
constexpr size_t kMaxStderr = 64 << 10;
// How much of a plugin's stderr or stray stdout an error message quotes.
constexpr size_t kMaxQuoted = 2000;

// `text` trimmed, C-escaped, cut at kMaxQuoted bytes and in double quotes.
std::string Quote(absl::string_view text) {
  text = absl::StripAsciiWhitespace(text);
  const bool cut = text.size() > kMaxQuoted;
  if (cut) text = text.substr(0, kMaxQuoted);
  return absl::StrCat("\"", absl::CHexEscape(text), cut ? "...\"" : "\"");
}

}  // namespace

// --- The runner.

CniRunner::CniRunner(std::vector<std::string> plugin_dirs,
                     absl::Duration timeout)
    : plugin_dirs_(std::move(plugin_dirs)), timeout_(timeout) {}

absl::StatusOr<std::string> CniRunner::FindPlugin(
    const std::string& type) const {
  if (type.empty() || absl::StrContains(type, '/') ||
      absl::StrContains(type, '\0')) {
    return absl::InvalidArgumentError(absl::StrCat(
        "CNI plugin type \"", absl::CHexEscape(type), "\" is not a file name"));
  }
  for (const std::string& dir : plugin_dirs_) {
    const std::string path =
        absl::StrCat(dir, absl::EndsWith(dir, "/") ? "" : "/", type);
    struct stat st;
    if (stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) &&
        access(path.c_str(), X_OK) == 0) {
      return path;
    }
  }
  return absl::FailedPreconditionError(
      absl::StrCat("CNI plugin \"", type, "\" not found in ",
                   plugin_dirs_.empty() ? "(no plugin directories)"
                                        : absl::StrJoin(plugin_dirs_, ", ")));
}

absl::StatusOr<std::string> CniRunner::RunPlugin(
    const char* command_name, const CniNetwork& network, int index,
    const CniRuntime& runtime, const json* prev_result) const {
  const std::string type =
      network.conflist["plugins"][index]["type"].get<std::string>();
  const std::string what = absl::StrCat(
      "CNI ", command_name, " of network \"", network.name, "\" for container ",
      runtime.container_id, ": plugin \"", type, "\"");
  absl::StatusOr<std::string> path = FindPlugin(type);
  if (!path.ok()) {
    return absl::Status(
        path.status().code(),
        absl::StrCat("CNI ", command_name, " of network \"", network.name,
                     "\": ", path.status().message()));
  }
  std::vector<std::string> env = {
      absl::StrCat("CNI_COMMAND=", command_name),
      absl::StrCat("CNI_CONTAINERID=", runtime.container_id),
      absl::StrCat("CNI_NETNS=", runtime.netns_path),
      absl::StrCat("CNI_IFNAME=", runtime.ifname),
      absl::StrCat("CNI_ARGS=",
                   absl::StrJoin(runtime.args, ";", absl::PairFormatter("="))),
      absl::StrCat("CNI_PATH=", absl::StrJoin(plugin_dirs_, ":")),
      absl::StrCat("PATH=", kCniPluginPathEnv),
  };
  const std::string input =
      DumpJson(PluginConfig(network, index, runtime, prev_result));
  VLOG(1) << "CNI " << command_name << " " << type << " (" << *path << ") for "
          << runtime.container_id << " in network " << network.name;

  base::SubprocessOptions run;
  run.env = std::move(env);
  run.stdin_data = input;
  run.timeout = timeout_;
  run.max_stdout = kMaxStdout;
  run.max_stderr = kMaxStderr;
  // A plugin being installed (or whose write fd another thread's child
  // inherited) fails with ETXTBSY for a moment: tried 4 more times.
  run.etxtbsy_retries = 4;
  absl::StatusOr<base::SubprocessResult> outcome =
      base::RunSubprocess(*path, run);
  if (!outcome.ok()) {
    return absl::FailedPreconditionError(
        absl::StrCat(what, ": ", outcome.status().message()));
  }
  if (outcome->timed_out) {
    return absl::DeadlineExceededError(
        absl::StrCat(what, " (", *path, ") did not finish within ",
                     absl::FormatDuration(timeout_), " and was killed"));
  }
  const std::string stderr_part =
      outcome->stderr_data.empty()
          ? ""
          : absl::StrCat("; stderr: ", Quote(outcome->stderr_data));
  if (outcome->exit_code() != 0) {
    if (const std::string error = CniErrorOf(outcome->stdout_data);
        !error.empty()) {
      return absl::FailedPreconditionError(
          absl::StrCat(what, " failed: ", error, stderr_part));
    }
    std::string printed;
    if (!outcome->stdout_data.empty()) {
      absl::StrAppend(&printed, ", stdout: ", Quote(outcome->stdout_data));
    }
    if (!outcome->stderr_data.empty()) {
      absl::StrAppend(&printed, ", stderr: ", Quote(outcome->stderr_data));
    }
    if (printed.empty()) printed = " and printed nothing";
    return absl::FailedPreconditionError(
        absl::StrCat(what, " ", outcome->Describe(), printed));
  }
  if (outcome->stdout_truncated) {
    return absl::FailedPreconditionError(absl::StrCat(
        what, " printed more than ", kMaxStdout, " bytes on stdout"));
  }
  if (!outcome->stderr_data.empty()) {
    VLOG(1) << what << " succeeded and printed on stderr: "
            << Quote(outcome->stderr_data);
  }
  return std::move(outcome->stdout_data);
}

absl::StatusOr<CniResult> CniRunner::Add(const CniNetwork& network,
                                         const CniRuntime& runtime) const {
  if (absl::Status status =
          CheckConflist(network.conflist, NetworkOrigin(network));
      !status.ok()) {
    return status;
  }
  if (absl::Status status = CheckRuntime(runtime, /*needs_netns=*/true);
      !status.ok()) {
    return status;
  }
  const json& plugins = network.conflist["plugins"];
  json result;
  bool have_result = false;
  for (size_t i = 0; i < plugins.size(); ++i) {
    absl::StatusOr<std::string> out =
        RunPlugin("ADD", network, static_cast<int>(i), runtime,
                  have_result ? &result : nullptr);
    if (!out.ok()) return out.status();
    const std::string what =
        absl::StrCat("CNI ADD of network \"", network.name, "\" for container ",
                     runtime.container_id, ": plugin \"",
                     plugins[i]["type"].get<std::string>(), "\"");
    if (absl::StripAsciiWhitespace(*out).empty()) {
      return absl::FailedPreconditionError(
          absl::StrCat(what, " succeeded but printed no result"));
    }
    try {
      result = json::parse(*out);
    } catch (const json::exception& e) {
      return absl::FailedPreconditionError(
          absl::StrCat(what, " printed a result that is not JSON (", e.what(),
                       "): ", Quote(*out)));
    }
    if (!result.is_object()) {
      return absl::FailedPreconditionError(absl::StrCat(
          what, " printed a result that is not a JSON object: ", Quote(*out)));
    }
    have_result = true;
  }
  absl::StatusOr<CniResult> parsed = ParseResult(result, runtime.ifname);
  if (!parsed.ok()) {
    return absl::FailedPreconditionError(
        absl::StrCat("CNI ADD of network \"", network.name, "\" for container ",
                     runtime.container_id, ": the result of plugin \"",
                     plugins.back()["type"].get<std::string>(),
                     "\" cannot be read: ", parsed.status().message()));
  }
  return parsed;
}

absl::Status CniRunner::Check(const CniNetwork& network,
                              const CniRuntime& runtime,
                              const json& prev_result) const {
  if (absl::Status status =
          CheckConflist(network.conflist, NetworkOrigin(network));
      !status.ok()) {
    return status;
  }
  if (ChecksDisabled(network.conflist)) return absl::OkStatus();
  if (!HasCheckAndDelPrevResult(network.cni_version)) {
    return absl::UnimplementedError(absl::StrCat(
        "CNI network \"", network.name, "\" has cniVersion ",
        network.cni_version, ", which has no CHECK (0.4.0 and later have)"));
  }
  if (absl::Status status = CheckRuntime(runtime, /*needs_netns=*/true);
      !status.ok()) {
    return status;
  }
  const size_t count = network.conflist["plugins"].size();
  for (size_t i = 0; i < count; ++i) {
    absl::StatusOr<std::string> out =
        RunPlugin("CHECK", network, static_cast<int>(i), runtime, &prev_result);
    if (!out.ok()) return out.status();
  }
  return absl::OkStatus();
}

absl::Status CniRunner::Del(const CniNetwork& network,
                            const CniRuntime& runtime,
                            const json* prev_result) const {
  if (absl::Status status =
          CheckConflist(network.conflist, NetworkOrigin(network));
      !status.ok()) {
    return status;
  }
  if (absl::Status status = CheckRuntime(runtime, /*needs_netns=*/false);
      !status.ok()) {
    return status;
  }
  if (!HasCheckAndDelPrevResult(network.cni_version)) prev_result = nullptr;
  absl::Status first;
  const int count = static_cast<int>(network.conflist["plugins"].size());
  for (int i = count - 1; i >= 0; --i) {
    absl::StatusOr<std::string> out =
        RunPlugin("DEL", network, i, runtime, prev_result);
    if (out.ok()) continue;
    LOG(WARNING) << out.status().message();
    if (first.ok()) first = out.status();
  }
  return first;
}

}  // namespace netns_hook
}  // namespace berth
