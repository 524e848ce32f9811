#include "services/netns_hook/network_hooks.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <fstream>
#include <optional>
#include <set>
#include <sstream>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "glog/logging.h"
#include "google/protobuf/util/time_util.h"

namespace berth::netns_hook {
namespace {

namespace nv1 = ::berth::network::v1;
using nlohmann::json;

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream content;
  content << in.rdbuf();
  return content.str();
}

// Runs a command and returns its stdout ("" when it cannot run).
std::string CommandOutput(const std::string& command) {
  std::string output;
  FILE* pipe = popen(command.c_str(), "re");
  if (pipe == nullptr) return output;
  char buffer[4096];
  size_t n;
  while ((n = fread(buffer, 1, sizeof(buffer), pipe)) > 0) {
    output.append(buffer, n);
  }
  pclose(pipe);
  return output;
}

// The CNI container ids (with `prefix`) iptables rules carry in their
// comments, e.g. --comment "name: \"berth\" id: \"berth-a1\"", with the
// network name when the comment has it.
std::map<std::string, std::string> ContainerIdsInFirewall(
    const std::string& prefix) {
  std::map<std::string, std::string> ids;
  for (const char* table : {"nat", "filter"}) {
    // The PATH plugins get: a service's own may lack /usr/sbin.
    const std::string rules = CommandOutput(
        absl::StrCat("PATH=", kCniPluginPathEnv, " iptables-save -t ", table,
                     " 2>/dev/null"));
    for (absl::string_view line : absl::StrSplit(rules, '\n')) {
      const size_t at = line.find("id: \\\"" + prefix);
      if (at == absl::string_view::npos) continue;
      absl::string_view rest = line.substr(at + 6);
      const size_t end = rest.find("\\\"");
      if (end == absl::string_view::npos) continue;
      std::string network;
      const size_t name_at = line.find("name: \\\"");
      if (name_at != absl::string_view::npos) {
        absl::string_view name = line.substr(name_at + 8);
        network = std::string(name.substr(0, name.find("\\\"")));
      }
      ids.emplace(std::string(rest.substr(0, end)), network);
    }
  }
  return ids;
}

// Removes the iptables rules whose comment names CNI container `id`, and the
// per-container chains they jump to: what CNI DEL cannot remove without the
// ADD's full arguments (portmap needs the port mappings, bridge's masquerade
// its interface). Chains shared by every container (CNI-HOSTPORT-*,
// CNI-FORWARD, CNI-ADMIN) stay. Returns how many rules went.
absl::StatusOr<int> SweepFirewall(const std::string& id) {
  int removed = 0;
  for (const char* table : {"nat", "filter"}) {
    const std::string rules = CommandOutput(
        absl::StrCat("PATH=", kCniPluginPathEnv, " iptables-save -t ", table,
                     " 2>/dev/null"));
    std::string script = absl::StrCat("*", table, "\n");
    std::set<std::string> chains;
    int count = 0;
    for (absl::string_view line : absl::StrSplit(rules, '\n')) {
      if (!absl::StartsWith(line, "-A ") ||
          !absl::StrContains(line, absl::StrCat("id: \\\"", id, "\\\""))) {
        continue;
      }
      absl::StrAppend(&script, "-D ", line.substr(3), "\n");
      ++count;
      const size_t jump = line.find(" -j ");
      if (jump == absl::string_view::npos) continue;
      const std::string target(
          absl::StripAsciiWhitespace(line.substr(jump + 4)));
      if (absl::StartsWith(target, "CNI-") &&
          !absl::StartsWith(target, "CNI-HOSTPORT-") &&
          target != "CNI-FORWARD" && target != "CNI-ADMIN") {
        chains.insert(target);
      }
    }
    if (count == 0) continue;
    for (const std::string& chain : chains) {
      absl::StrAppend(&script, "-F ", chain, "\n-X ", chain, "\n");
    }
    absl::StrAppend(&script, "COMMIT\n");
    FILE* restore = popen(
        absl::StrCat("PATH=", kCniPluginPathEnv, " iptables-restore --noflush")
            .c_str(),
        "we");
    if (restore == nullptr) {
      return absl::ErrnoToStatus(errno, "running iptables-restore");
    }
    fwrite(script.data(), 1, script.size(), restore);
    const int status = pclose(restore);
    if (status != 0) {
      return absl::InternalError(
          absl::StrCat("iptables-restore of the rules of ", id, " in table ",
                       table, " failed (status ", status, ")"));
    }
    removed += count;
  }
  return removed;
}

// A host-local lease: the file <dataDir>/<network>/<ip> holding the
// container id (and the interface on its second line).
struct Lease {
  std::string network;
  std::string ip;
  std::string container_id;
  std::string path;
};

bool LooksLikeIp(absl::string_view name) {
  return !name.empty() &&
         (absl::ascii_isdigit(name[0]) || absl::StrContains(name, ':')) &&
         !absl::StartsWith(name, "last_reserved_ip") && name != "lock";
}

// The host-local leases of `network`, read from their files.
std::vector<Lease> LeasesOf(const CniNetwork& network) {
  std::vector<Lease> leases;
  for (const std::string& dir : HostLocalLeaseDirs(network)) {
    DIR* leases_dir = opendir(dir.c_str());
    if (leases_dir == nullptr) continue;
    while (struct dirent* entry = readdir(leases_dir)) {
      if (!LooksLikeIp(entry->d_name)) continue;
      Lease lease;
      lease.network = network.name;
      lease.ip = entry->d_name;
      lease.path = absl::StrCat(dir, "/", entry->d_name);
      std::vector<std::string> lines =
          absl::StrSplit(ReadFile(lease.path), absl::ByAnyChar("\r\n"));
      lease.container_id =
          lines.empty() ? ""
                        : std::string(absl::StripAsciiWhitespace(lines[0]));
      leases.push_back(std::move(lease));
    }
    closedir(leases_dir);
  }
  return leases;
}

// What CNI DEL needs of an ADD result that was never recorded (an ADD a
// crash interrupted, or a record lost): the addresses `leases` of network
// `network` hold. The firewall plugin removes its per-address rules only for
// the addresses of the result it is given.
json ResultFromLeases(const CniNetwork& network,
                      const std::vector<Lease>& leases) {
  json result = {{"cniVersion", network.cni_version},
                 {"interfaces", json::array()},
                 {"ips", json::array()}};
  for (const Lease& lease : leases) {
    if (lease.network != network.name) continue;
    result["ips"].push_back(
        {{"address",
          absl::StrCat(lease.ip,
                       absl::StrContains(lease.ip, ':') ? "/128" : "/32")}});
  }
  return result;
}

}  // namespace

LinuxNetworkHooks::LinuxNetworkHooks(LinuxNetworkHooksOptions options)
    : options_(std::move(options)),
      store_(absl::StrCat(options_.state_dir, "/allocations")),
      namespaces_(options_.netns_dir),
      cni_(options_.cni_plugin_dirs, options_.plugin_timeout) {}

std::string LinuxNetworkHooks::DefaultBridgeConflist(
    const LinuxNetworkHooksOptions& options) {
  json bridge = {
      {"type", "bridge"},
      {"bridge", options.bridge_name},
      {"isGateway", true},
      {"ipMasq", true},
      {"hairpinMode", true},
      {"ipam",
       {{"type", "host-local"},
        {"ranges",
         json::array({json::array({{{"subnet", options.bridge_subnet}}})})},
        {"routes", json::array({{{"dst", "0.0.0.0/0"}}})},
        {"dataDir", absl::StrCat(options.state_dir, "/ipam")}}},
  };
  json portmap = {{"type", "portmap"},
                  {"capabilities", {{"portMappings", true}}},
                  {"snat", true}};
  json firewall = {{"type", "firewall"}, {"backend", "iptables"}};
  json conflist = {{"cniVersion", "1.0.0"},
                   {"name", options.bridge_network},
                   {"plugins", json::array({bridge, portmap, firewall})}};
  return conflist.dump(2) + "\n";
}

absl::StatusOr<std::unique_ptr<LinuxNetworkHooks>> LinuxNetworkHooks::Start(
    LinuxNetworkHooksOptions options) {
  auto hooks = absl::WrapUnique(new LinuxNetworkHooks(std::move(options)));
  const LinuxNetworkHooksOptions& o = hooks->options_;
  if (absl::Status status = hooks->store_.Prepare(); !status.ok()) {
    return status;
  }
  if (absl::Status status = hooks->namespaces_.Prepare(); !status.ok()) {
    return status;
  }
  std::string path;
  for (absl::string_view part :
       absl::StrSplit(o.cni_config_dir, '/', absl::SkipEmpty())) {
    absl::StrAppend(&path, "/", part);
    if (mkdir(path.c_str(), 0755) != 0 && errno != EEXIST) {
      return absl::ErrnoToStatus(
          errno, absl::StrCat("making the CNI configuration directory ", path));
    }
  }
  if (!LoadNetwork(o.cni_config_dir, o.bridge_network).ok()) {
    const std::string file =
        absl::StrCat(o.cni_config_dir, "/", o.bridge_network, ".conflist");
    std::ofstream out(file);
    out << DefaultBridgeConflist(o);
    if (!out.good()) {
      return absl::ErrnoToStatus(errno, absl::StrCat("writing ", file));
    }
    LOG(INFO) << "wrote the default bridge network " << o.bridge_network
              << " to " << file;
  }
  if (absl::Status status = hooks->Reconcile(); !status.ok()) return status;
  return hooks;
}

absl::Mutex* LinuxNetworkHooks::LockFor(const std::string& allocation_id) {
  absl::MutexLock lock(&locks_mu_);
  std::unique_ptr<absl::Mutex>& mutex = locks_[allocation_id];
  if (mutex == nullptr) mutex = std::make_unique<absl::Mutex>();
  return mutex.get();
}

CniRuntime LinuxNetworkHooks::RuntimeOf(const AllocationRecord& record) const {
  CniRuntime runtime;
  runtime.container_id = ContainerId(record.allocation_id);
  runtime.netns_path = record.namespace_path;
  runtime.ifname = record.interface_name.empty() ? options_.interface_name
                                                 : record.interface_name;
  runtime.port_mappings = record.port_mappings;
  return runtime;
}

nv1::NetworkStatus LinuxNetworkHooks::StatusOf(
    const AllocationRecord& record) const {
  nv1::NetworkStatus status;
  status.set_allocation_id(record.allocation_id);
  status.set_mode(record.mode);
  status.set_namespace_path(record.namespace_path);
  if (!record.cni_result.is_null()) {
    absl::StatusOr<CniResult> result =
        ParseResult(record.cni_result, record.interface_name);
    if (result.ok()) {
      status.set_interface_name(result->interface_name);
      for (const CniAddress& address : result->addresses) {
        nv1::InterfaceAddress* out = status.add_addresses();
        out->set_cidr(address.cidr);
        out->set_gateway(address.gateway);
      }
    }
  } else if (record.mode == nv1::NETWORK_MODE_NONE) {
    status.set_interface_name("lo");
  }
  for (const auto& mapping : record.port_mappings) {
    *status.add_port_mappings() = mapping;
  }
  *status.mutable_dns() = record.dns;
  status.set_cni_network(record.cni_network);
  *status.mutable_created_at() =
      google::protobuf::util::TimeUtil::NanosecondsToTimestamp(
          absl::ToUnixNanos(record.created_at));
  return status;
}

absl::StatusOr<nv1::PrerunResponse> LinuxNetworkHooks::Prerun(
    const nv1::PrerunRequest& request) {
  const std::string& id = request.allocation_id();
  if (absl::Status status = CheckAllocationId(id); !status.ok()) return status;
  const std::string prefix = absl::StrCat("allocation ", id, ": ");
  std::string network;
  switch (request.mode()) {
    case nv1::NETWORK_MODE_NONE:
    case nv1::NETWORK_MODE_HOST:
      break;
    case nv1::NETWORK_MODE_BRIDGE:
      network = options_.bridge_network;
      break;
    case nv1::NETWORK_MODE_CNI:
      if (request.cni_network().empty()) {
        return absl::InvalidArgumentError(absl::StrCat(
            prefix, "cni_network is required for NETWORK_MODE_CNI"));
      }
      network = request.cni_network();
      break;
    default:
      return absl::InvalidArgumentError(
          absl::StrCat(prefix, "mode ", nv1::NetworkMode_Name(request.mode()),
                       " is not one of NONE, HOST, BRIDGE, CNI"));
  }
  for (const auto& mapping : request.port_mappings()) {
    if (mapping.host_port() == 0 || mapping.host_port() > 65535 ||
        mapping.container_port() == 0 || mapping.container_port() > 65535) {
      return absl::InvalidArgumentError(
          absl::StrCat(prefix, "port_mappings \"", mapping.label(),
                       "\": host_port and container_port must be 1-65535"));
    }
    if (network.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat(prefix, "port_mappings need mode BRIDGE or CNI, not ",
                       nv1::NetworkMode_Name(request.mode())));
    }
  }
  std::optional<CniNetwork> cni_network;
  if (!network.empty()) {
    absl::StatusOr<CniNetwork> loaded =
        LoadNetwork(options_.cni_config_dir, network);
    if (!loaded.ok()) {
      return absl::Status(
          absl::IsNotFound(loaded.status()) ? absl::StatusCode::kInvalidArgument
                                            : loaded.status().code(),
          absl::StrCat(prefix, "cni_network: ", loaded.status().message()));
    }
    cni_network = *std::move(loaded);
  }

  absl::MutexLock lock(LockFor(id));
  absl::StatusOr<std::optional<AllocationRecord>> existing = store_.Read(id);
  if (!existing.ok()) return existing.status();
  if (existing->has_value()) {
    const AllocationRecord& record = **existing;
    if (record.phase == AllocationRecord::Phase::kReady &&
        (record.namespace_path.empty() ||
         namespaces_.Exists(record.namespace_name))) {
      if (record.mode != request.mode() || record.cni_network != network) {
        return absl::FailedPreconditionError(
            absl::StrCat(prefix, "has a network of mode ",
                         nv1::NetworkMode_Name(record.mode),
                         record.cni_network.empty()
                             ? ""
                             : absl::StrCat(" (", record.cni_network, ")"),
                         " already; Postrun it first"));
      }
      nv1::PrerunResponse response;
      *response.mutable_status() = StatusOf(record);
      response.set_created(false);
      return response;
    }
    // Half-made (a crash), or its namespace vanished: start again.
    LOG(WARNING) << prefix << "found a " << PhaseName(record.phase)
                 << " network; removing it before making it again";
    if (absl::Status status = TearDown(record); !status.ok()) return status;
  }

  AllocationRecord record;
  record.allocation_id = id;
  record.mode = request.mode();
  record.cni_network = network;
  record.interface_name = network.empty() ? "" : options_.interface_name;
  record.port_mappings.assign(request.port_mappings().begin(),
                              request.port_mappings().end());
  record.dns = request.dns();
  record.hostname = request.hostname();
  record.created_at = absl::Now();
  if (request.mode() == nv1::NETWORK_MODE_HOST) {
    record.phase = AllocationRecord::Phase::kReady;
    if (absl::Status status = store_.Write(record); !status.ok()) {
      return status;
    }
    nv1::PrerunResponse response;
    *response.mutable_status() = StatusOf(record);
    response.set_created(true);
    return response;
  }
  record.namespace_name = ContainerId(id);
  record.namespace_path = namespaces_.PathOf(record.namespace_name);

  // Each step is recorded before it is taken, so that a crash at any point
  // leaves a record saying what to undo.
  auto fail = [&](absl::Status status) {
    if (absl::Status undone = TearDown(record); !undone.ok()) {
      LOG(ERROR) << prefix << "undoing a failed Prerun: " << undone;
    }
    return status;
  };
  record.namespace_made = true;
  if (absl::Status status = store_.Write(record); !status.ok()) return status;
  if (absl::Status status = namespaces_.Create(record.namespace_name);
      !status.ok()) {
    return fail(
        absl::Status(status.code(), absl::StrCat(prefix, status.message())));
  }
  if (cni_network.has_value()) {
    record.cni_added = true;
    if (absl::Status status = store_.Write(record); !status.ok()) {
      return fail(status);
    }
    absl::StatusOr<CniResult> added = cni_.Add(*cni_network, RuntimeOf(record));
    if (!added.ok()) {
      return fail(absl::Status(added.status().code(),
                               absl::StrCat(prefix, added.status().message())));
    }
    record.cni_result = added->raw;
  }
  record.phase = AllocationRecord::Phase::kReady;
  if (absl::Status status = store_.Write(record); !status.ok()) {
    return fail(status);
  }
  nv1::PrerunResponse response;
  *response.mutable_status() = StatusOf(record);
  response.set_created(true);
  return response;
}

absl::Status LinuxNetworkHooks::TearDown(AllocationRecord record) {
  const std::string prefix =
      absl::StrCat("allocation ", record.allocation_id, ": ");
  record.phase = AllocationRecord::Phase::kDeleting;
  std::optional<CniNetwork> network;
  bool no_result = false;
  if (record.cni_added) {
    absl::StatusOr<CniNetwork> loaded =
        LoadNetwork(options_.cni_config_dir, record.cni_network);
    if (!loaded.ok()) {
      if (absl::Status status = store_.Write(record); !status.ok()) {
        return status;
      }
      return absl::FailedPreconditionError(absl::StrCat(
          prefix,
          "cannot remove its CNI network: ", loaded.status().message()));
    }
    network = *std::move(loaded);
    no_result = record.cni_result.is_null();
    if (no_result) {
      // An ADD a crash interrupted (or one that failed): its result was never
      // recorded, but what it made may exist. DEL without a result would
      // leave the firewall plugin's rules of the address (they carry no
      // container id to sweep by), so the result is rebuilt from the leases
      // of this container, before the DEL frees them, and recorded in case
      // this DEL is interrupted too.
      std::vector<Lease> mine;
      for (Lease& lease : LeasesOf(*network)) {
        if (lease.container_id == ContainerId(record.allocation_id)) {
          mine.push_back(std::move(lease));
        }
      }
      if (!mine.empty()) {
        record.cni_result = ResultFromLeases(*network, mine);
        LOG(INFO) << prefix << "no CNI ADD result recorded; removing with "
                  << record.cni_result["ips"].size()
                  << " addresses of its leases";
      }
    }
  }
  if (absl::Status status = store_.Write(record); !status.ok()) return status;
  if (record.cni_added) {
    const json* previous =
        record.cni_result.is_null() ? nullptr : &record.cni_result;
    if (absl::Status status = cni_.Del(*network, RuntimeOf(record), previous);
        !status.ok()) {
      // A plugin that is not installed made nothing to remove (a Prerun
      // failing on it never ran it): go on. Any other failure keeps the
      // record as "deleting", for Postrun again or the next start to retry.
      std::vector<std::string> missing;
      for (const json& plugin : network->conflist["plugins"]) {
        const std::string type = plugin.value("type", std::string());
        if (!cni_.FindPlugin(type).ok()) missing.push_back(type);
      }
      if (missing.empty()) {
        return absl::Status(status.code(),
                            absl::StrCat(prefix, status.message()));
      }
      LOG(WARNING) << prefix << "CNI DEL could not run the missing plugins "
                   << absl::StrJoin(missing, ", ") << "; going on: " << status;
    }
    if (no_result) {
      // Rules of the interrupted ADD that name the container (bridge's
      // masquerade, portmap's chains) that a DEL without the whole ADD
      // result may not find.
      absl::StatusOr<int> swept =
          SweepFirewall(ContainerId(record.allocation_id));
      if (!swept.ok()) {
        return absl::Status(swept.status().code(),
                            absl::StrCat(prefix, swept.status().message()));
      }
    }
  }
  if (record.namespace_made) {
    if (absl::Status status = namespaces_.Remove(record.namespace_name);
        !status.ok()) {
      return absl::Status(status.code(),
                          absl::StrCat(prefix, status.message()));
    }
  }
  return store_.Remove(record.allocation_id);
}

absl::Status LinuxNetworkHooks::Postrun(const std::string& allocation_id) {
  if (absl::Status status = CheckAllocationId(allocation_id); !status.ok()) {
    return status;
  }
  absl::MutexLock lock(LockFor(allocation_id));
  absl::StatusOr<std::optional<AllocationRecord>> record =
      store_.Read(allocation_id);
  if (!record.ok()) return record.status();
  if (!record->has_value()) return absl::OkStatus();
  return TearDown(**record);
}

absl::StatusOr<std::vector<nv1::NetworkStatus>> LinuxNetworkHooks::List() {
  absl::StatusOr<std::vector<AllocationRecord>> records = store_.List();
  if (!records.ok()) return records.status();
  std::vector<nv1::NetworkStatus> statuses;
  for (const AllocationRecord& record : *records) {
    if (record.phase == AllocationRecord::Phase::kReady) {
      statuses.push_back(StatusOf(record));
    }
  }
  return statuses;
}

absl::Status LinuxNetworkHooks::Reconcile() {
  absl::StatusOr<std::vector<AllocationRecord>> records = store_.List();
  if (!records.ok()) return records.status();
  std::set<std::string> live;
  for (const AllocationRecord& record : *records) {
    const bool intact = record.phase == AllocationRecord::Phase::kReady &&
                        (record.namespace_path.empty() ||
                         namespaces_.Exists(record.namespace_name));
    if (intact) {
      live.insert(ContainerId(record.allocation_id));
      continue;
    }
    const std::string what = absl::StrCat(
        "allocation ", record.allocation_id, ": a ", PhaseName(record.phase),
        " network", intact ? "" : " (interrupted, or its namespace is gone)");
    if (absl::Status status = TearDown(record); !status.ok()) {
      LOG(ERROR) << "reconcile: " << what << ": " << status;
      live.insert(ContainerId(record.allocation_id));  // retried later
      continue;
    }
    LOG(INFO) << "reconcile: removed " << what;
    reconciled_.push_back(what);
  }

  // CNI attachments of no live allocation, found by their leases and
  // firewall rules: DEL them with what is known of them.
  std::map<std::string, std::set<std::string>> orphans;  // id -> networks
  std::map<std::string, std::vector<Lease>> leases;      // id -> leases
  DIR* config = opendir(options_.cni_config_dir.c_str());
  std::vector<std::string> networks;
  if (config != nullptr) {
    while (struct dirent* entry = readdir(config)) {
      absl::string_view name = entry->d_name;
      if (!absl::EndsWith(name, ".conflist") &&
          !absl::EndsWith(name, ".conf")) {
        continue;
      }
      const json parsed = json::parse(
          ReadFile(absl::StrCat(options_.cni_config_dir, "/", name)), nullptr,
          false);
      if (parsed.is_object() && parsed.contains("name") &&
          parsed["name"].is_string()) {
        networks.push_back(parsed["name"].get<std::string>());
      }
    }
    closedir(config);
  }
  for (const std::string& name : networks) {
    absl::StatusOr<CniNetwork> network =
        LoadNetwork(options_.cni_config_dir, name);
    if (!network.ok()) continue;
    for (Lease& lease : LeasesOf(*network)) {
      if (absl::StartsWith(lease.container_id, options_.prefix) &&
          live.count(lease.container_id) == 0) {
        orphans[lease.container_id].insert(name);
        leases[lease.container_id].push_back(std::move(lease));
      }
    }
  }
  for (const auto& [id, network] : ContainerIdsInFirewall(options_.prefix)) {
    if (live.count(id) > 0) continue;
    orphans[id];
    if (!network.empty()) orphans[id].insert(network);
  }
  absl::StatusOr<std::vector<std::string>> names =
      namespaces_.List(options_.prefix);
  if (names.ok()) {
    for (const std::string& name : *names) {
      if (live.count(name) == 0) orphans[name];
    }
  }
  for (const auto& [id, networks_of_id] : orphans) {
    for (const std::string& name : networks_of_id) {
      absl::StatusOr<CniNetwork> network =
          LoadNetwork(options_.cni_config_dir, name);
      if (!network.ok()) continue;
      CniRuntime runtime;
      runtime.container_id = id;
      runtime.netns_path = namespaces_.Exists(id) ? namespaces_.PathOf(id) : "";
      runtime.ifname = options_.interface_name;
      // What DEL needs of the ADD result: the addresses the leases hold.
      json result = ResultFromLeases(*network, leases[id]);
      absl::Status deleted = cni_.Del(*network, runtime, &result);
      const std::string what = absl::StrCat(
          "CNI attachment ", id, " to network ", name, " of no allocation");
      if (!deleted.ok()) {
        LOG(ERROR) << "reconcile: " << what << ": " << deleted;
        continue;
      }
      for (const Lease& lease : leases[id]) {
        if (lease.network == name) unlink(lease.path.c_str());
      }
      LOG(INFO) << "reconcile: removed " << what;
      reconciled_.push_back(what);
    }
    absl::StatusOr<int> swept = SweepFirewall(id);
    if (!swept.ok()) {
      LOG(ERROR) << "reconcile: firewall rules of " << id << ": "
                 << swept.status();
    } else if (*swept > 0) {
      const std::string what =
          absl::StrCat(*swept, " firewall rules of ", id, " (no allocation)");
      LOG(INFO) << "reconcile: removed " << what;
      reconciled_.push_back(what);
    }
    if (namespaces_.Exists(id) ||
        (names.ok() && std::count(names->begin(), names->end(), id))) {
      const std::string what =
          absl::StrCat("namespace ", id, " of no allocation");
      if (absl::Status status = namespaces_.Remove(id); !status.ok()) {
        LOG(ERROR) << "reconcile: " << what << ": " << status;
        continue;
      }
      LOG(INFO) << "reconcile: removed " << what;
      reconciled_.push_back(what);
    }
  }
  return absl::OkStatus();
}

}  // namespace berth::netns_hook
