// netns_bench: the two sides of the network benchmark of issue 6, point 8.
//
// Against berth-netns, as berth-node calls it (a separate process, over its
// socket):
//
//   netns_bench --socket=RUNTIME_DIR/netns.sock [--figures=bridge,none]
//               [--cycles=20] [--warmup=2] [--id_prefix=bench-PID]
//
//   berth_bridge   Prerun(NETWORK_MODE_BRIDGE) of a fresh allocation, then
//                  its Postrun: the two calls, each from its start until its
//                  response is back. The checks in between (created, a
//                  namespace file that exists, an address; after Postrun: the
//                  file gone) are not timed. berth_bridge_prerun and
//                  berth_bridge_postrun are the two calls alone.
//   berth_none     the same with NETWORK_MODE_NONE (no address; interface
//                  "lo"), with berth_none_prerun and berth_none_postrun.
//
// The channel is dialed once (DialUnix, waiting up to --dial_timeout), as
// berth-node keeps one; every call has a deadline of --call_timeout.
//
// The references, the same work without berth:
//
//   netns_bench --direct --conflist=FILE [--cni_path=/usr/lib/cni]
//               [--ifname=eth0] [--figures=bridge,none] [--cycles=20]
//               [--warmup=2] [--id_prefix=berth-bench-PID-direct]
//
//   direct_bridge  `ip netns add NAME`, then the ADD of every plugin of the
//                  conflist in order (each gets the previous one's result as
//                  prevResult), then the DEL of each in reverse order with the
//                  last ADD result as prevResult, then `ip netns del NAME`:
//                  what a runtime does with the same conflist, CNI_PATH,
//                  CNI_IFNAME and namespace (/var/run/netns/NAME, the
//                  container id NAME too). Every plugin gets the JSON berth's
//                  CniRunner gives it (the plugin's object with the list's
//                  "name" and "cniVersion", and "prevResult") and the same
//                  environment (CNI_COMMAND, CNI_CONTAINERID, CNI_NETNS,
//                  CNI_IFNAME, CNI_ARGS, CNI_PATH, PATH), through pipes, from
//                  posix_spawn to its reaped exit. The steps are figures too:
//                  direct_bridge_netns_add, direct_bridge_add_<type>,
//                  direct_bridge_del_<type>, direct_bridge_netns_del, and
//                  direct_bridge_add (netns add and the ADDs) and
//                  direct_bridge_del (the DELs and netns del), which stand
//                  next to berth_bridge_prerun and berth_bridge_postrun.
//   direct_none    `ip netns add NAME` then `ip netns del NAME`.
//
// Each cycle uses a fresh id: <id_prefix>-<figure>-<n>. --warmup untimed
// cycles of each figure come first (the first bridge ADD of a run also makes
// the bridge). Each figure prints a "sample" line per timed cycle and a
// "median" line at the end (tools/bench/figures.h). Any failure ends the
// program with exit code 1 and a line on stderr naming the step, the id and
// the error, after undoing what it can of the failed cycle (Postrun; or the
// DELs made with what is known and `ip netns del`). It never sends a packet.

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "base/subprocess.h"
#include "berth/network/v1/network.grpc.pb.h"
#include "glog/logging.h"
#include "grpcpp/client_context.h"
#include "nlohmann/json.hpp"
#include "services/common/dial.h"
#include "tools/bench/figures.h"

ABSL_FLAG(std::string, socket, "",
          "berth-netns's socket (<runtime_dir>/netns.sock): time Prerun + "
          "Postrun through it.");
ABSL_FLAG(bool, direct, false,
          "Time the references instead: `ip netns add/del` and the plugins "
          "of --conflist run directly.");
ABSL_FLAG(std::vector<std::string>, figures,
          std::vector<std::string>({"bridge", "none"}),
          "Which cycles, in this order: bridge, none.");
ABSL_FLAG(int, cycles, 20, "Timed cycles of each figure.");
ABSL_FLAG(int, warmup, 2,
          "Untimed cycles of each figure before the timed ones.");
ABSL_FLAG(std::string, id_prefix, "",
          "Allocation ids (berth) or namespace names and CNI container ids "
          "(--direct) are <id_prefix>-<figure>-<n>; default bench-<pid>, "
          "with --direct berth-bench-<pid>-direct.");
ABSL_FLAG(absl::Duration, call_timeout, absl::Seconds(60),
          "Deadline of each RPC; with --direct, each plugin or `ip` run is "
          "killed after it.");
ABSL_FLAG(absl::Duration, dial_timeout, absl::Seconds(10),
          "How long to wait for --socket to accept a connection.");
ABSL_FLAG(std::string, conflist, "",
          "--direct: the CNI network configuration list of the bridge figure "
          "(berth-netns's <cni_config_dir>/<bridge_network>.conflist).");
ABSL_FLAG(std::string, cni_path, "/usr/lib/cni",
          "--direct: CNI_PATH, and where the plugins are looked up "
          "(':'-separated).");
ABSL_FLAG(std::string, ifname, "eth0", "--direct: CNI_IFNAME.");

namespace berth::bench {
namespace {

namespace nv1 = ::berth::network::v1;
using json = nlohmann::json;
using Clock = std::chrono::steady_clock;

// The environment berth-netns gives plugins (cni.h's kCniPluginPathEnv) and
// ip here.
constexpr char kPath[] =
    "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";
constexpr char kNetnsDir[] = "/var/run/netns";

double MsSince(Clock::time_point start, Clock::time_point end) {
  return std::chrono::duration<double, std::milli>(end - start).count();
}

bool Exists(const std::string& path) {
  struct stat st;
  return lstat(path.c_str(), &st) == 0;
}

// The figures of a run by name, printed in the order they were made.
class Figures {
 public:
  Figure& operator[](const std::string& name) {
    auto it = index_.find(name);
    if (it != index_.end()) return *figures_[it->second];
    index_[name] = figures_.size();
    figures_.push_back(std::make_unique<Figure>(name, "ms"));
    return *figures_.back();
  }
  void PrintMedians() const {
    for (const auto& figure : figures_) {
      std::printf("%s\n", figure->MedianLine().c_str());
    }
  }

 private:
  std::map<std::string, size_t> index_;
  std::vector<std::unique_ptr<Figure>> figures_;
};

// --- berth-netns over its socket.

class BerthSide {
 public:
  explicit BerthSide(std::unique_ptr<nv1::NetworkService::Stub> stub)
      : stub_(std::move(stub)) {}

  // One Prerun + Postrun of allocation `id`; records the times in `figures`
  // when it is not null.
  absl::Status Cycle(const std::string& kind, const std::string& id,
                     Figures* figures) {
    const nv1::NetworkMode mode =
        kind == "bridge" ? nv1::NETWORK_MODE_BRIDGE : nv1::NETWORK_MODE_NONE;
    nv1::PrerunRequest request;
    request.set_allocation_id(id);
    request.set_mode(mode);
    nv1::PrerunResponse response;
    grpc::ClientContext prerun_context;
    prerun_context.set_deadline(Deadline());
    const Clock::time_point t0 = Clock::now();
    const grpc::Status prerun =
        stub_->Prerun(&prerun_context, request, &response);
    const Clock::time_point t1 = Clock::now();
    const std::string what = absl::StrCat(
        "Prerun(", nv1::NetworkMode_Name(mode), ") of allocation ", id);
    if (!prerun.ok()) {
      Postrun(id);  // whatever a failure left (it should leave nothing)
      return absl::FailedPreconditionError(
          absl::StrCat(what, ": ", GrpcCodeName(prerun.error_code()), ": ",
                       prerun.error_message()));
    }
    const std::string path = response.status().namespace_path();
    std::string fault;
    if (!response.created()) {
      fault = "created is false: the allocation existed already";
    } else if (path.empty() || !Exists(path)) {
      fault = absl::StrCat("namespace_path \"", path, "\" does not exist");
    } else if (mode == nv1::NETWORK_MODE_BRIDGE &&
               response.status().addresses_size() == 0) {
      fault = "the status has no address";
    } else if (mode == nv1::NETWORK_MODE_NONE &&
               (response.status().addresses_size() != 0 ||
                response.status().interface_name() != "lo")) {
      fault = absl::StrCat("the status has interface \"",
                           response.status().interface_name(), "\" and ",
                           response.status().addresses_size(),
                           " addresses, not \"lo\" and none");
    }
    if (!fault.empty()) {
      Postrun(id);
      return absl::FailedPreconditionError(absl::StrCat(what, ": ", fault));
    }
    const Clock::time_point t2 = Clock::now();
    const grpc::Status postrun = Postrun(id);
    const Clock::time_point t3 = Clock::now();
    if (!postrun.ok()) {
      return absl::FailedPreconditionError(absl::StrCat(
          "Postrun of allocation ", id, ": ",
          GrpcCodeName(postrun.error_code()), ": ", postrun.error_message()));
    }
    if (Exists(path)) {
      return absl::FailedPreconditionError(
          absl::StrCat("Postrun of allocation ", id, " returned OK but left ",
                       "its namespace ", path));
    }
    if (figures != nullptr) {
      const std::string name = absl::StrCat("berth_", kind);
      (*figures)[name].Add(MsSince(t0, t1) + MsSince(t2, t3));
      (*figures)[name + "_prerun"].Add(MsSince(t0, t1));
      (*figures)[name + "_postrun"].Add(MsSince(t2, t3));
    }
    return absl::OkStatus();
  }

 private:
  static std::chrono::system_clock::time_point Deadline() {
    return std::chrono::system_clock::now() +
           absl::ToChronoNanoseconds(absl::GetFlag(FLAGS_call_timeout));
  }

  static std::string GrpcCodeName(grpc::StatusCode code) {
    return absl::StatusCodeToString(static_cast<absl::StatusCode>(code));
  }

  grpc::Status Postrun(const std::string& id) {
    grpc::ClientContext context;
    context.set_deadline(Deadline());
    nv1::PostrunRequest request;
    request.set_allocation_id(id);
    nv1::PostrunResponse response;
    return stub_->Postrun(&context, request, &response);
  }

  std::unique_ptr<nv1::NetworkService::Stub> stub_;
};

// --- The direct references.

// Runs argv (argv[0] a path) with `env` as its whole environment and
// `input` on its stdin, as berth-netns's CniRunner runs a plugin (the same
// base::RunSubprocess), within `timeout`.
absl::StatusOr<base::SubprocessResult> RunProcess(std::vector<std::string> argv,
                                                  std::vector<std::string> env,
                                                  const std::string& input,
                                                  absl::Duration timeout) {
  base::SubprocessOptions options;
  options.args.assign(argv.begin() + 1, argv.end());
  options.env = std::move(env);
  options.stdin_data = input;
  options.timeout = timeout;
  return base::RunSubprocess(argv[0], options);
}

std::string Trimmed(const std::string& text) {
  return std::string(absl::StripAsciiWhitespace(text.substr(0, 2000)));
}

class DirectSide {
 public:
  static absl::StatusOr<std::unique_ptr<DirectSide>> Create(
      const std::string& conflist_path, const std::string& cni_path,
      const std::string& ifname) {
    auto side = std::unique_ptr<DirectSide>(new DirectSide);
    for (const char* candidate :
         {"/usr/sbin/ip", "/sbin/ip", "/usr/bin/ip", "/bin/ip"}) {
      if (access(candidate, X_OK) == 0) {
        side->ip_ = candidate;
        break;
      }
    }
    if (side->ip_.empty()) {
      return absl::FailedPreconditionError(
          "no `ip` in /usr/sbin, /sbin, /usr/bin, /bin (package iproute2)");
    }
    side->cni_path_ = cni_path;
    side->ifname_ = ifname;
    if (conflist_path.empty()) return side;
    std::ifstream in(conflist_path);
    if (!in) {
      return absl::NotFoundError(
          absl::StrCat("--conflist ", conflist_path, " cannot be read"));
    }
    std::stringstream content;
    content << in.rdbuf();
    side->conflist_ = json::parse(content.str(), nullptr, false);
    const json& list = side->conflist_;
    if (!list.is_object() || !list.contains("name") ||
        !list.contains("cniVersion") || !list.contains("plugins") ||
        !list["plugins"].is_array() || list["plugins"].empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--conflist ", conflist_path,
                       " is not a CNI configuration list (name, cniVersion, "
                       "plugins)"));
    }
    for (const json& plugin : list["plugins"]) {
      const std::string type = plugin.value("type", std::string());
      std::string found;
      for (absl::string_view dir : absl::StrSplit(cni_path, ':')) {
        const std::string path = absl::StrCat(dir, "/", type);
        if (!dir.empty() && access(path.c_str(), X_OK) == 0) {
          found = path;
          break;
        }
      }
      if (type.empty() || found.empty()) {
        return absl::FailedPreconditionError(
            absl::StrCat("CNI plugin \"", type, "\" of ", conflist_path,
                         " not found in ", cni_path));
      }
      side->plugins_.push_back({type, found, plugin});
    }
    return side;
  }

  absl::Status Cycle(const std::string& kind, const std::string& id,
                     Figures* figures) {
    if (kind == "bridge" && plugins_.empty()) {
      return absl::InvalidArgumentError("the bridge figure needs --conflist");
    }
    const std::string figure = absl::StrCat("direct_", kind);
    std::vector<std::pair<std::string, double>> steps;
    Clock::time_point mark = Clock::now();
    const Clock::time_point start = mark;
    auto step = [&](const std::string& name) {
      const Clock::time_point now = Clock::now();
      steps.emplace_back(name, MsSince(mark, now));
      mark = now;
    };
    if (absl::Status status = Ip({"netns", "add", id}); !status.ok()) {
      return status;
    }
    step("netns_add");
    if (kind == "none") {
      if (absl::Status status = Ip({"netns", "del", id}); !status.ok()) {
        return status;
      }
      const Clock::time_point end = Clock::now();
      if (Exists(absl::StrCat(kNetnsDir, "/", id))) {
        return absl::FailedPreconditionError(
            absl::StrCat("`ip netns del ", id, "` left its file"));
      }
      if (figures != nullptr) (*figures)[figure].Add(MsSince(start, end));
      return absl::OkStatus();
    }

    json result;
    bool have_result = false;
    absl::Status failed;
    for (const Plugin& plugin : plugins_) {
      absl::StatusOr<json> added =
          Run(plugin, "ADD", id, have_result ? &result : nullptr);
      if (!added.ok()) {
        failed = added.status();
        break;
      }
      result = *std::move(added);
      have_result = true;
      step("add_" + plugin.type);
    }
    if (failed.ok() && (!result.contains("ips") || !result["ips"].is_array() ||
                        result["ips"].empty())) {
      failed = absl::FailedPreconditionError(absl::StrCat(
          "CNI ADD for ", id, ": the last result has no ips: ", result.dump()));
    }
    const Clock::time_point added_at = Clock::now();
    mark = added_at;
    for (auto it = plugins_.rbegin(); it != plugins_.rend(); ++it) {
      absl::StatusOr<json> deleted =
          Run(*it, "DEL", id, have_result ? &result : nullptr);
      if (!deleted.ok() && failed.ok()) failed = deleted.status();
      step("del_" + it->type);
    }
    absl::Status removed = Ip({"netns", "del", id});
    step("netns_del");
    const Clock::time_point end = Clock::now();
    if (!failed.ok()) return failed;
    if (!removed.ok()) return removed;
    if (figures != nullptr) {
      (*figures)[figure].Add(MsSince(start, end));
      (*figures)[figure + "_add"].Add(MsSince(start, added_at));
      (*figures)[figure + "_del"].Add(MsSince(added_at, end));
      for (const auto& [name, ms] : steps) {
        (*figures)[absl::StrCat(figure, "_", name)].Add(ms);
      }
    }
    return absl::OkStatus();
  }

 private:
  struct Plugin {
    std::string type;
    std::string path;
    json config;
  };

  DirectSide() = default;

  absl::Status Ip(std::vector<std::string> args) {
    const std::string command = absl::StrCat("ip ", absl::StrJoin(args, " "));
    args.insert(args.begin(), ip_);
    absl::StatusOr<base::SubprocessResult> outcome = RunProcess(
        std::move(args), {kPath}, "", absl::GetFlag(FLAGS_call_timeout));
    if (!outcome.ok()) {
      return absl::Status(
          outcome.status().code(),
          absl::StrCat("`", command, "`: ", outcome.status().message()));
    }
    if (outcome->timed_out || outcome->wait_status != 0) {
      return absl::FailedPreconditionError(
          absl::StrCat("`", command, "` ", outcome->Describe(), ": ",
                       Trimmed(outcome->stderr_data)));
    }
    return absl::OkStatus();
  }

  // Runs one plugin; returns its result (ADD) or null (DEL).
  absl::StatusOr<json> Run(const Plugin& plugin, const char* command,
                           const std::string& id, const json* prev_result) {
    json config = plugin.config;
    config["name"] = conflist_["name"];
    config["cniVersion"] = conflist_["cniVersion"];
    if (prev_result != nullptr) config["prevResult"] = *prev_result;
    const std::string what = absl::StrCat("CNI ", command, " of plugin \"",
                                          plugin.type, "\" for container ", id);
    absl::StatusOr<base::SubprocessResult> outcome =
        RunProcess({plugin.path},
                   {absl::StrCat("CNI_COMMAND=", command),
                    absl::StrCat("CNI_CONTAINERID=", id),
                    absl::StrCat("CNI_NETNS=", kNetnsDir, "/", id),
                    absl::StrCat("CNI_IFNAME=", ifname_),
                    "CNI_ARGS=", absl::StrCat("CNI_PATH=", cni_path_), kPath},
                   config.dump(), absl::GetFlag(FLAGS_call_timeout));
    if (!outcome.ok()) {
      return absl::Status(outcome.status().code(),
                          absl::StrCat(what, ": ", outcome.status().message()));
    }
    if (outcome->timed_out || outcome->wait_status != 0) {
      return absl::FailedPreconditionError(
          absl::StrCat(what, " ", outcome->Describe(),
                       ": stdout: ", Trimmed(outcome->stdout_data),
                       ", stderr: ", Trimmed(outcome->stderr_data)));
    }
    if (std::string(command) != "ADD") return json();
    json result = json::parse(outcome->stdout_data, nullptr, false);
    if (!result.is_object()) {
      return absl::FailedPreconditionError(absl::StrCat(
          what, " printed no JSON object: ", Trimmed(outcome->stdout_data)));
    }
    return result;
  }

  std::string ip_;
  std::string cni_path_;
  std::string ifname_;
  json conflist_;
  std::vector<Plugin> plugins_;
};

int Fail(const absl::Status& status) {
  std::fprintf(stderr, "netns_bench: FAILED: %s\n",
               std::string(status.message()).c_str());
  return 1;
}

template <typename Side>
int RunCycles(Side& side, const std::string& id_prefix) {
  Figures figures;
  const std::vector<std::string> kinds = absl::GetFlag(FLAGS_figures);
  const int warmup = absl::GetFlag(FLAGS_warmup);
  const int cycles = absl::GetFlag(FLAGS_cycles);
  for (const std::string& kind : kinds) {
    for (int n = 0; n < warmup + cycles; ++n) {
      const std::string id = absl::StrCat(id_prefix, "-", kind, "-", n);
      if (absl::Status status =
              side.Cycle(kind, id, n < warmup ? nullptr : &figures);
          !status.ok()) {
        return Fail(status);
      }
    }
  }
  figures.PrintMedians();
  return 0;
}

int Main() {
  const std::vector<std::string> kinds = absl::GetFlag(FLAGS_figures);
  for (const std::string& kind : kinds) {
    if (kind != "bridge" && kind != "none") {
      std::fprintf(stderr,
                   "netns_bench: --figures: \"%s\" is not bridge or none\n",
                   kind.c_str());
      return 2;
    }
  }
  if (absl::GetFlag(FLAGS_cycles) < 1 || absl::GetFlag(FLAGS_warmup) < 0) {
    std::fprintf(stderr, "netns_bench: --cycles must be >= 1, --warmup >= 0\n");
    return 2;
  }
  const bool direct = absl::GetFlag(FLAGS_direct);
  const std::string socket = absl::GetFlag(FLAGS_socket);
  if (direct == !socket.empty()) {
    std::fprintf(stderr,
                 "netns_bench: give exactly one of --socket and --direct\n");
    return 2;
  }
  std::string id_prefix = absl::GetFlag(FLAGS_id_prefix);
  if (direct) {
    if (id_prefix.empty()) {
      id_prefix = absl::StrCat("berth-bench-", getpid(), "-direct");
    }
    absl::StatusOr<std::unique_ptr<DirectSide>> side = DirectSide::Create(
        absl::GetFlag(FLAGS_conflist), absl::GetFlag(FLAGS_cni_path),
        absl::GetFlag(FLAGS_ifname));
    if (!side.ok()) return Fail(side.status());
    return RunCycles(**side, id_prefix);
  }
  if (id_prefix.empty()) id_prefix = absl::StrCat("bench-", getpid());
  absl::StatusOr<std::shared_ptr<grpc::Channel>> channel =
      DialUnix(socket, absl::GetFlag(FLAGS_dial_timeout));
  if (!channel.ok()) {
    return Fail(absl::Status(
        channel.status().code(),
        absl::StrCat("dialing berth-netns: ", channel.status().message())));
  }
  BerthSide side(nv1::NetworkService::NewStub(*channel));
  return RunCycles(side, id_prefix);
}

}  // namespace
}  // namespace berth::bench

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "Times network namespace cycles: Prerun + Postrun through berth-netns "
      "(--socket), or the same made directly with ip netns and the CNI "
      "plugins (--direct).\n"
      "usage: netns_bench --socket=RUNTIME_DIR/netns.sock [flags]\n"
      "       netns_bench --direct --conflist=FILE [flags]");
  absl::ParseCommandLine(argc, argv);
  FLAGS_logtostderr = true;
  google::InitGoogleLogging(argv[0]);
  return berth::bench::Main();
}
