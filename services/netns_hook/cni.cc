#include "services/netns_hook/cni.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "glog/logging.h"
#include "plugins/host/process_util.h"

namespace berth {
namespace netns_hook {
namespace {

using json = nlohmann::json;
namespace nv1 = ::berth::network::v1;

// What is kept of a plugin's output; more is read and dropped.
constexpr size_t kMaxStdout = 16 << 20;
constexpr size_t kMaxStderr = 64 << 10;
// How much of a plugin's stderr or stray stdout an error message quotes.
constexpr size_t kMaxQuoted = 2000;

// --- Small helpers.

// Serializes without ever throwing (invalid UTF-8 is replaced).
std::string Dump(const json& value) {
  return value.dump(-1, ' ', false, json::error_handler_t::replace);
}

// `text` trimmed, C-escaped, cut at kMaxQuoted bytes and in double quotes.
std::string Quote(absl::string_view text) {
  text = absl::StripAsciiWhitespace(text);
  const bool cut = text.size() > kMaxQuoted;
  if (cut) text = text.substr(0, kMaxQuoted);
  return absl::StrCat("\"", absl::CHexEscape(text), cut ? "...\"" : "\"");
}

// A CNI semantic version "X.Y.Z" as a comparable tuple.
using Version = std::tuple<int, int, int>;

bool ParseVersion(absl::string_view text, Version* version) {
  const std::vector<absl::string_view> parts = absl::StrSplit(text, '.');
  if (parts.size() != 3) return false;
  int numbers[3];
  for (int i = 0; i < 3; ++i) {
    if (parts[i].empty() || !absl::ascii_isdigit(parts[i][0]) ||
        !absl::SimpleAtoi(parts[i], &numbers[i])) {
      return false;
    }
  }
  *version = {numbers[0], numbers[1], numbers[2]};
  return true;
}

// Whether `cni_version` (already checked) is at least 0.4.0: CHECK, and
// prevResult on DEL, came with it.
bool HasCheckAndDelPrevResult(const std::string& cni_version) {
  Version version;
  return ParseVersion(cni_version, &version) && version >= Version{0, 4, 0};
}

// libcni's rule for network names and container ids: a letter or digit,
// then letters, digits, '_', '.' and '-'.
bool IsValidCniName(absl::string_view name) {
  if (name.empty() || !absl::ascii_isalnum(name[0])) return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return absl::ascii_isalnum(c) || c == '_' || c == '.' || c == '-';
  });
}

bool IsValidIp(const std::string& text) {
  unsigned char buffer[sizeof(struct in6_addr)];
  return inet_pton(AF_INET, text.c_str(), buffer) == 1 ||
         inet_pton(AF_INET6, text.c_str(), buffer) == 1;
}

// "10.1.2.3/24", "fd00::5/64".
bool IsValidCidr(const std::string& text) {
  const size_t slash = text.find('/');
  if (slash == std::string::npos) return false;
  const std::string ip = text.substr(0, slash);
  int prefix = 0;
  if (!absl::SimpleAtoi(text.substr(slash + 1), &prefix) || prefix < 0) {
    return false;
  }
  unsigned char buffer[sizeof(struct in6_addr)];
  if (inet_pton(AF_INET, ip.c_str(), buffer) == 1) return prefix <= 32;
  if (inet_pton(AF_INET6, ip.c_str(), buffer) == 1) return prefix <= 128;
  return false;
}

bool IsString(const json& object, const char* key) {
  auto it = object.find(key);
  return it != object.end() && it->is_string();
}

std::string StringOr(const json& object, const char* key,
                     const std::string& fallback = "") {
  auto it = object.find(key);
  return it != object.end() && it->is_string() ? it->get<std::string>()
                                               : fallback;
}

// --- The configuration list.

// Checks a list ({"name", "cniVersion", "plugins": [...]}) for what the
// runner relies on; INVALID_ARGUMENT "<origin>: <fault>".
absl::Status CheckConflist(const json& list, const std::string& origin) {
  auto invalid = [&origin](absl::string_view fault) {
    return absl::InvalidArgumentError(absl::StrCat(origin, ": ", fault));
  };
  if (!list.is_object()) return invalid("not a JSON object");
  if (!IsString(list, "name")) return invalid("\"name\" is missing");
  const std::string name = list["name"].get<std::string>();
  if (!IsValidCniName(name)) {
    return invalid(absl::StrCat(
        "network name \"", name,
        "\" is not a letter or digit followed by letters, digits, '_', '.' "
        "and '-'"));
  }
  if (!IsString(list, "cniVersion")) {
    return invalid("\"cniVersion\" is missing");
  }
  Version version;
  const std::string cni_version = list["cniVersion"].get<std::string>();
  if (!ParseVersion(cni_version, &version)) {
    return invalid(absl::StrCat("\"cniVersion\" \"", cni_version,
                                "\" is not a version X.Y.Z"));
  }
  if (auto it = list.find("disableCheck");
      it != list.end() && !it->is_boolean() &&
      !(it->is_string() && (*it == "true" || *it == "false"))) {
    return invalid("\"disableCheck\" is not true or false");
  }
  auto plugins = list.find("plugins");
  if (plugins == list.end() || !plugins->is_array() || plugins->empty()) {
    return invalid("\"plugins\" is missing or not a non-empty array");
  }
  for (size_t i = 0; i < plugins->size(); ++i) {
    const json& plugin = (*plugins)[i];
    const std::string where = absl::StrCat("plugins[", i, "]");
    if (!plugin.is_object()) {
      return invalid(absl::StrCat(where, " is not a JSON object"));
    }
    if (!IsString(plugin, "type") ||
        plugin["type"].get<std::string>().empty()) {
      return invalid(absl::StrCat(where, ".type is missing"));
    }
    if (auto caps = plugin.find("capabilities");
        caps != plugin.end() && !caps->is_object()) {
      return invalid(absl::StrCat(where, ".capabilities is not an object"));
    }
  }
  return absl::OkStatus();
}

// What names a network in errors about its list: its file, else its name.
std::string Origin(const CniNetwork& network) {
  return network.path.empty()
             ? absl::StrCat("CNI network \"", network.name, "\"")
             : network.path;
}

bool DisableCheck(const json& list) {
  auto it = list.find("disableCheck");
  if (it == list.end()) return false;
  return (it->is_boolean() && it->get<bool>()) ||
         (it->is_string() && *it == "true");
}

absl::StatusOr<std::string> ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return absl::ErrnoToStatus(errno, absl::StrCat("cannot read ", path));
  }
  std::ostringstream content;
  content << in.rdbuf();
  if (in.bad()) {
    return absl::ErrnoToStatus(errno, absl::StrCat("cannot read ", path));
  }
  return content.str();
}

// --- The runtime.

absl::Status CheckRuntime(const CniRuntime& runtime, bool needs_netns) {
  auto invalid = [](absl::string_view fault) {
    return absl::InvalidArgumentError(absl::StrCat("CNI runtime: ", fault));
  };
  if (!IsValidCniName(runtime.container_id)) {
    return invalid(absl::StrCat(
        "container_id \"", absl::CHexEscape(runtime.container_id),
        "\" is not a letter or digit followed by letters, digits, '_', '.' "
        "and '-'"));
  }
  const std::string& ifname = runtime.ifname;
  if (ifname.empty() || ifname.size() > 15 || ifname == "." || ifname == ".." ||
      std::any_of(ifname.begin(), ifname.end(), [](char c) {
        return c == '/' || c == ':' || c == '\0' || absl::ascii_isspace(c);
      })) {
    return invalid(absl::StrCat(
        "ifname \"", absl::CHexEscape(ifname),
        "\" is not an interface name (1 to 15 bytes, not \".\" or \"..\", no "
        "'/', ':' or white space)"));
  }
  if (needs_netns && runtime.netns_path.empty()) {
    return invalid("netns_path is empty");
  }
  for (const auto& [key, value] : runtime.args) {
    if (key.empty() || absl::StrContains(key, '=') ||
        absl::StrContains(key, ';') || absl::StrContains(value, ';') ||
        absl::StrContains(key, '\0') || absl::StrContains(value, '\0')) {
      return invalid(absl::StrCat("args entry \"", absl::CHexEscape(key), "=",
                                  absl::CHexEscape(value),
                                  "\" cannot be passed as CNI_ARGS K=V;K=V"));
    }
  }
  for (const nv1::PortMapping& mapping : runtime.port_mappings) {
    const std::string which =
        absl::StrCat("port_mappings entry \"", mapping.label(),
                     "\" (host port ", mapping.host_port(), ", container port ",
                     mapping.container_port(), ")");
    if (mapping.host_port() < 1 || mapping.host_port() > 65535) {
      return invalid(absl::StrCat(which, ": host_port is not 1 to 65535"));
    }
    if (mapping.container_port() < 1 || mapping.container_port() > 65535) {
      return invalid(absl::StrCat(which, ": container_port is not 1 to 65535"));
    }
    if (mapping.protocol() != nv1::PROTOCOL_UNSPECIFIED &&
        mapping.protocol() != nv1::PROTOCOL_TCP &&
        mapping.protocol() != nv1::PROTOCOL_UDP) {
      return invalid(absl::StrCat(which, ": unknown protocol ",
                                  static_cast<int>(mapping.protocol())));
    }
    if (!mapping.host_ip().empty() && !IsValidIp(mapping.host_ip())) {
      return invalid(absl::StrCat(which, ": host_ip \"", mapping.host_ip(),
                                  "\" is not an IP address"));
    }
  }
  if (!runtime.port_mappings.empty() &&
      runtime.capability_args.count("portMappings") != 0) {
    return invalid(
        "portMappings is given both as port_mappings and in capability_args");
  }
  return absl::OkStatus();
}

json PortMappingsJson(const std::vector<nv1::PortMapping>& port_mappings) {
  json out = json::array();
  for (const nv1::PortMapping& mapping : port_mappings) {
    json entry = {
        {"hostPort", mapping.host_port()},
        {"containerPort", mapping.container_port()},
        {"protocol", mapping.protocol() == nv1::PROTOCOL_UDP ? "udp" : "tcp"}};
    if (!mapping.host_ip().empty()) entry["hostIP"] = mapping.host_ip();
    out.push_back(std::move(entry));
  }
  return out;
}

// The stdin of plugins[index]: its own object with the list's "name" and
// "cniVersion", "prevResult" when given, and "runtimeConfig" with the
// arguments of exactly the capabilities it declares (when there are any).
json PluginConfig(const CniNetwork& network, size_t index,
                  const CniRuntime& runtime, const json* prev_result) {
  json config = network.conflist["plugins"][index];
  config["name"] = network.name;
  config["cniVersion"] = network.cni_version;
  if (prev_result != nullptr) {
    config["prevResult"] = *prev_result;
  } else {
    config.erase("prevResult");
  }
  json runtime_config = json::object();
  if (auto caps = config.find("capabilities"); caps != config.end()) {
    for (const auto& [capability, declared] : caps->items()) {
      if (!declared.is_boolean() || !declared.get<bool>()) continue;
      if (capability == "portMappings" && !runtime.port_mappings.empty()) {
        runtime_config[capability] = PortMappingsJson(runtime.port_mappings);
      } else if (auto arg = runtime.capability_args.find(capability);
                 arg != runtime.capability_args.end()) {
        runtime_config[capability] = arg->second;
      }
    }
  }
  if (!runtime_config.empty()) config["runtimeConfig"] = runtime_config;
  return config;
}

// --- Running one process.

// A file descriptor closed when it goes.
class Fd {
 public:
  Fd() = default;
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() { Reset(); }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }
  void Reset(int fd = -1) {
    if (fd_ >= 0) close(fd_);
    fd_ = fd;
  }

 private:
  int fd_ = -1;
};

absl::Status MakePipe(Fd* read_end, Fd* write_end) {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) return absl::ErrnoToStatus(errno, "pipe2");
  read_end->Reset(fds[0]);
  write_end->Reset(fds[1]);
  return absl::OkStatus();
}

absl::Status SetNonBlocking(int fd) {
  const int flags = fcntl(fd, F_GETFL);
  if (flags < 0 || fcntl(fd, F_SETFL, flags | O_NONBLOCK) != 0) {
    return absl::ErrnoToStatus(errno, "fcntl(O_NONBLOCK)");
  }
  return absl::OkStatus();
}

// A pipe whose read end, given as stdin, holds `data` and then EOF: the
// whole input is written before the child exists (the pipe is grown to fit
// it), so writing can neither block nor raise SIGPIPE.
absl::Status StdinPipe(const std::string& data, Fd* read_end) {
  Fd write_end;
  if (absl::Status status = MakePipe(read_end, &write_end); !status.ok()) {
    return status;
  }
  // A pipe holds 64 KiB, or one page when the user's pipe quota is spent:
  // grow it when the input needs more.
  if (data.size() > 4096 &&
      fcntl(write_end.get(), F_GETPIPE_SZ) < static_cast<int>(data.size())) {
    fcntl(write_end.get(), F_SETPIPE_SZ,
          static_cast<int>(std::min(data.size(), size_t{1} << 30)));
    if (fcntl(write_end.get(), F_GETPIPE_SZ) < static_cast<int>(data.size())) {
      return absl::ResourceExhaustedError(
          absl::StrCat("a pipe cannot hold the ", data.size(),
                       "-byte plugin configuration"));
    }
  }
  if (absl::Status status = SetNonBlocking(write_end.get()); !status.ok()) {
    return status;
  }
  size_t written = 0;
  while (written < data.size()) {
    const ssize_t n =
        write(write_end.get(), data.data() + written, data.size() - written);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      return absl::ErrnoToStatus(
          errno, "writing the plugin configuration into its stdin pipe");
    }
    written += static_cast<size_t>(n);
  }
  return absl::OkStatus();
}

struct ProcessOutcome {
  int wait_status = 0;
  bool timed_out = false;
  std::string out;
  std::string err;
  bool out_truncated = false;
};

// One output pipe being read.
struct Output {
  Fd fd;
  std::string* data;
  size_t limit;
  bool* truncated;
};

// Reads what `output` has now (its fd is non-blocking); closes it at EOF.
void Drain(Output* output) {
  char buffer[65536];
  while (output->fd.get() >= 0) {
    const ssize_t n = read(output->fd.get(), buffer, sizeof(buffer));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      if (errno != EAGAIN && errno != EWOULDBLOCK) output->fd.Reset();
      return;
    }
    if (n == 0) {
      output->fd.Reset();
      return;
    }
    const size_t room =
        output->limit - std::min(output->limit, output->data->size());
    output->data->append(buffer, std::min(room, static_cast<size_t>(n)));
    if (static_cast<size_t>(n) > room && output->truncated != nullptr) {
      *output->truncated = true;
    }
  }
}

void WaitForExit(pid_t pid, int* wait_status) {
  while (waitpid(pid, wait_status, 0) < 0) {
    if (errno == EINTR) continue;
    PLOG(ERROR) << "waitpid(" << pid << ")";
    *wait_status = 0;
    return;
  }
}

// Runs `path` with `input` on stdin, collects stdout and stderr until it
// exits; kills its process group and reaps it at `timeout`.
absl::StatusOr<ProcessOutcome> RunProcess(const std::string& path,
                                          const std::string& input,
                                          std::vector<std::string> env,
                                          absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  ProcessOutcome outcome;
  Fd stdin_read;
  if (absl::Status status = StdinPipe(input, &stdin_read); !status.ok()) {
    return status;
  }
  Output out{Fd(), &outcome.out, kMaxStdout, &outcome.out_truncated};
  Output err{Fd(), &outcome.err, kMaxStderr, nullptr};
  Fd stdout_write, stderr_write;
  for (auto [output, write_end] :
       {std::pair{&out, &stdout_write}, std::pair{&err, &stderr_write}}) {
    if (absl::Status status = MakePipe(&output->fd, write_end); !status.ok()) {
      return status;
    }
    if (absl::Status status = SetNonBlocking(output->fd.get()); !status.ok()) {
      return status;
    }
  }
  // A plugin being installed (or whose write fd another thread's child
  // inherited) fails with ETXTBSY for a moment: tried 4 more times.
  absl::StatusOr<pid_t> spawned = plugin::host::internal::Spawn(
      path, {}, std::move(env), stdin_read.get(), stdout_write.get(),
      stderr_write.get(), /*etxtbsy_retries=*/4);
  if (!spawned.ok()) return spawned.status();
  const pid_t pid = *spawned;
  stdin_read.Reset();
  stdout_write.Reset();
  stderr_write.Reset();

  // A pidfd says when the plugin itself exits, even if a process it left
  // behind still holds its stdout; without one, EOF on both pipes does.
  Fd pidfd(static_cast<int>(syscall(SYS_pidfd_open, pid, 0)));
  bool exited = false;
  while (true) {
    if (exited) {
      Drain(&out);
      Drain(&err);
      break;
    }
    const bool pipes_open = out.fd.get() >= 0 || err.fd.get() >= 0;
    if (!pipes_open && pidfd.get() < 0) break;
    const absl::Duration remaining = deadline - absl::Now();
    if (remaining <= absl::ZeroDuration()) {
      outcome.timed_out = true;
      break;
    }
    struct pollfd fds[3];
    Output* owners[3] = {nullptr, nullptr, nullptr};
    int count = 0;
    for (Output* output : {&out, &err}) {
      if (output->fd.get() < 0) continue;
      fds[count] = {output->fd.get(), POLLIN, 0};
      owners[count++] = output;
    }
    if (pidfd.get() >= 0) fds[count++] = {pidfd.get(), POLLIN, 0};
    const int ready =
        poll(fds, count,
             static_cast<int>(std::min<int64_t>(
                 absl::ToInt64Milliseconds(remaining) + 1, 1 << 30)));
    if (ready < 0) {
      if (errno == EINTR) continue;
      PLOG(ERROR) << "poll on the pipes of " << path;
      outcome.timed_out = true;  // Cannot watch it: end it.
      break;
    }
    for (int i = 0; i < count; ++i) {
      if (fds[i].revents == 0) continue;
      if (owners[i] != nullptr) {
        Drain(owners[i]);
      } else {
        exited = true;
      }
    }
  }

  if (outcome.timed_out) {
    kill(-pid, SIGKILL);
    kill(pid, SIGKILL);
    WaitForExit(pid, &outcome.wait_status);
    return outcome;
  }
  if (exited || pidfd.get() >= 0) {
    WaitForExit(pid, &outcome.wait_status);
    return outcome;
  }
  // No pidfd and both pipes at EOF: the plugin closed them or is exiting.
  while (true) {
    const pid_t done = waitpid(pid, &outcome.wait_status, WNOHANG);
    if (done == pid) return outcome;
    if (done < 0 && errno != EINTR) {
      PLOG(ERROR) << "waitpid(" << pid << ")";
      return outcome;
    }
    if (absl::Now() >= deadline) {
      outcome.timed_out = true;
      kill(-pid, SIGKILL);
      kill(pid, SIGKILL);
      WaitForExit(pid, &outcome.wait_status);
      return outcome;
    }
    absl::SleepFor(absl::Milliseconds(2));
  }
}

std::string DescribeWaitStatus(int wait_status) {
  if (WIFEXITED(wait_status)) {
    return absl::StrCat("exited with code ", WEXITSTATUS(wait_status));
  }
  if (WIFSIGNALED(wait_status)) {
    const int signal = WTERMSIG(wait_status);
    return absl::StrCat("was killed by signal ", signal, " (",
                        strsignal(signal), ")");
  }
  return absl::StrCat("ended with wait status ", wait_status);
}

// The CNI error a failed plugin printed ({"code", "msg", "details"}), as
// "msg; details (CNI error code N)"; empty when stdout holds none.
std::string CniErrorOf(const std::string& stdout_text) {
  json error;
  try {
    error = json::parse(stdout_text);
  } catch (const json::exception&) {
    return "";
  }
  if (!error.is_object()) return "";
  auto code = error.find("code");
  const bool has_code = code != error.end() && code->is_number_integer();
  if (!IsString(error, "msg") && !has_code) return "";
  std::string text = StringOr(error, "msg", "(no message)");
  if (const std::string details = StringOr(error, "details");
      !details.empty()) {
    absl::StrAppend(&text, "; ", details);
  }
  if (has_code) {
    absl::StrAppend(&text, " (CNI error code ", code->get<int64_t>(), ")");
  }
  return text;
}

}  // namespace

// --- Configuration lists.

absl::StatusOr<CniNetwork> NetworkFromJson(const json& config,
                                           const std::string& origin) {
  json list = config;
  // A single plugin's configuration (a .conf file): a list of that one.
  if (list.is_object() && list.find("plugins") == list.end() &&
      list.find("type") != list.end()) {
    list = json::object();
    for (const char* key : {"cniVersion", "name", "disableCheck"}) {
      if (auto it = config.find(key); it != config.end()) list[key] = *it;
    }
    list["plugins"] = json::array({config});
  }
  if (absl::Status status = CheckConflist(list, origin); !status.ok()) {
    return status;
  }
  CniNetwork network;
  network.name = list["name"].get<std::string>();
  network.cni_version = list["cniVersion"].get<std::string>();
  network.conflist = std::move(list);
  network.path = origin;
  return network;
}

absl::StatusOr<CniNetwork> LoadNetwork(const std::string& config_dir,
                                       const std::string& name) {
  DIR* dir = opendir(config_dir.c_str());
  if (dir == nullptr) {
    if (errno == ENOENT || errno == ENOTDIR) {
      return absl::NotFoundError(
          absl::StrCat("no CNI network \"", name, "\" in ", config_dir,
                       ": the directory does not exist"));
    }
    return absl::ErrnoToStatus(
        errno, absl::StrCat("cannot read the CNI configuration directory ",
                            config_dir));
  }
  // libcni's order: .conflist files first, then .conf and .json, each by
  // name.
  std::vector<std::string> lists, singles;
  while (struct dirent* entry = readdir(dir)) {
    const std::string file = entry->d_name;
    if (absl::EndsWith(file, ".conflist")) {
      lists.push_back(file);
    } else if (absl::EndsWith(file, ".conf") || absl::EndsWith(file, ".json")) {
      singles.push_back(file);
    }
  }
  closedir(dir);
  std::sort(lists.begin(), lists.end());
  std::sort(singles.begin(), singles.end());
  lists.insert(lists.end(), singles.begin(), singles.end());

  std::vector<std::string> names_found;
  std::vector<std::string> unreadable;
  for (const std::string& file : lists) {
    const std::string path = absl::StrCat(
        config_dir, absl::EndsWith(config_dir, "/") ? "" : "/", file);
    struct stat st;
    if (stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) continue;
    absl::StatusOr<std::string> content = ReadFile(path);
    if (!content.ok()) {
      unreadable.push_back(std::string(content.status().message()));
      continue;
    }
    json config;
    try {
      config = json::parse(*content);
    } catch (const json::exception& e) {
      unreadable.push_back(
          absl::StrCat(path, " is not valid JSON: ", e.what()));
      continue;
    }
    absl::StatusOr<CniNetwork> network = NetworkFromJson(config, path);
    const bool named = config.is_object() && IsString(config, "name");
    if (!network.ok()) {
      if (named && config["name"] == name) return network.status();
      unreadable.push_back(std::string(network.status().message()));
      continue;
    }
    if (network->name == name) return network;
    names_found.push_back(network->name);
  }
  const std::string found =
      names_found.empty()
          ? std::string("no network configuration found")
          : absl::StrCat("networks found: ", absl::StrJoin(names_found, ", "));
  if (!unreadable.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("no CNI network \"", name, "\" in ", config_dir, " (",
                     found, "); ", absl::StrJoin(unreadable, "; ")));
  }
  return absl::NotFoundError(absl::StrCat("no CNI network \"", name, "\" in ",
                                          config_dir, " (", found, ")"));
}

// --- Results.

absl::StatusOr<CniResult> ParseResult(const json& result,
                                      const std::string& ifname) {
  auto invalid = [](absl::string_view fault) {
    return absl::InvalidArgumentError(absl::StrCat("CNI result: ", fault));
  };
  if (!result.is_object()) return invalid("not a JSON object");
  CniResult out;
  out.raw = result;
  out.interface_name = ifname;

  // Versions 0.1.0 and 0.2.0: "ip4" and "ip6", no interfaces.
  if (result.find("ips") == result.end() &&
      (result.contains("ip4") || result.contains("ip6"))) {
    for (const char* key : {"ip4", "ip6"}) {
      auto it = result.find(key);
      if (it == result.end() || it->is_null()) continue;
      if (!it->is_object())
        return invalid(absl::StrCat(key, " is not an object"));
      const std::string ip = StringOr(*it, "ip");
      if (!IsValidCidr(ip)) {
        return invalid(absl::StrCat(
            key, ".ip \"", ip, "\" is not an address with a prefix length"));
      }
      const std::string gateway = StringOr(*it, "gateway");
      if (!gateway.empty() && !IsValidIp(gateway)) {
        return invalid(absl::StrCat(key, ".gateway \"", gateway,
                                    "\" is not an IP address"));
      }
      out.addresses.push_back({ip, gateway});
    }
    return out;
  }

  static const json kEmpty = json::array();
  const json* interfaces = &kEmpty;
  if (auto it = result.find("interfaces");
      it != result.end() && !it->is_null()) {
    if (!it->is_array()) return invalid("interfaces is not an array");
    interfaces = &*it;
  }
  int chosen = -1;
  for (size_t i = 0; i < interfaces->size(); ++i) {
    const json& interface = (*interfaces)[i];
    if (!interface.is_object() || !IsString(interface, "name")) {
      return invalid(absl::StrCat("interfaces[", i, "] has no name"));
    }
    if (StringOr(interface, "sandbox").empty()) continue;
    if (interface["name"] == ifname) {
      chosen = static_cast<int>(i);
      break;
    }
    if (chosen < 0) chosen = static_cast<int>(i);
  }
  if (chosen >= 0) {
    out.interface_name = (*interfaces)[chosen]["name"].get<std::string>();
  }

  auto ips = result.find("ips");
  if (ips == result.end() || ips->is_null()) return out;
  if (!ips->is_array()) return invalid("ips is not an array");
  for (size_t i = 0; i < ips->size(); ++i) {
    const json& ip = (*ips)[i];
    const std::string where = absl::StrCat("ips[", i, "]");
    if (!ip.is_object())
      return invalid(absl::StrCat(where, " is not an object"));
    const std::string address = StringOr(ip, "address");
    if (!IsValidCidr(address)) {
      return invalid(absl::StrCat(where, ".address \"", address,
                                  "\" is not an address with a prefix length"));
    }
    const std::string gateway = StringOr(ip, "gateway");
    if (!gateway.empty() && !IsValidIp(gateway)) {
      return invalid(absl::StrCat(where, ".gateway \"", gateway,
                                  "\" is not an IP address"));
    }
    bool ours = true;
    if (auto index = ip.find("interface");
        index != ip.end() && !index->is_null() && !interfaces->empty()) {
      if (!index->is_number_integer() || index->get<int64_t>() < 0 ||
          index->get<int64_t>() >= static_cast<int64_t>(interfaces->size())) {
        return invalid(absl::StrCat(where, ".interface ", Dump(*index),
                                    " is not an index of interfaces"));
      }
      ours = index->get<int64_t>() == chosen;
    }
    if (ours) out.addresses.push_back({address, gateway});
  }
  return out;
}

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
      Dump(PluginConfig(network, index, runtime, prev_result));
  VLOG(1) << "CNI " << command_name << " " << type << " (" << *path << ") for "
          << runtime.container_id << " in network " << network.name;

  absl::StatusOr<ProcessOutcome> outcome =
      RunProcess(*path, input, std::move(env), timeout_);
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
      outcome->err.empty() ? ""
                           : absl::StrCat("; stderr: ", Quote(outcome->err));
  if (!WIFEXITED(outcome->wait_status) ||
      WEXITSTATUS(outcome->wait_status) != 0) {
    if (const std::string error = CniErrorOf(outcome->out); !error.empty()) {
      return absl::FailedPreconditionError(
          absl::StrCat(what, " failed: ", error, stderr_part));
    }
    std::string printed;
    if (!outcome->out.empty()) {
      absl::StrAppend(&printed, ", stdout: ", Quote(outcome->out));
    }
    if (!outcome->err.empty()) {
      absl::StrAppend(&printed, ", stderr: ", Quote(outcome->err));
    }
    if (printed.empty()) printed = " and printed nothing";
    return absl::FailedPreconditionError(absl::StrCat(
        what, " ", DescribeWaitStatus(outcome->wait_status), printed));
  }
  if (outcome->out_truncated) {
    return absl::FailedPreconditionError(absl::StrCat(
        what, " printed more than ", kMaxStdout, " bytes on stdout"));
  }
  if (!outcome->err.empty()) {
    VLOG(1) << what
            << " succeeded and printed on stderr: " << Quote(outcome->err);
  }
  return std::move(outcome->out);
}

absl::StatusOr<CniResult> CniRunner::Add(const CniNetwork& network,
                                         const CniRuntime& runtime) const {
  if (absl::Status status = CheckConflist(network.conflist, Origin(network));
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
  if (absl::Status status = CheckConflist(network.conflist, Origin(network));
      !status.ok()) {
    return status;
  }
  if (DisableCheck(network.conflist)) return absl::OkStatus();
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
  if (absl::Status status = CheckConflist(network.conflist, Origin(network));
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
