#include "services/netns_hook/cni_config.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <netinet/in.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstdint>
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

namespace berth {
namespace netns_hook {
namespace {

using json = nlohmann::json;
namespace nv1 = ::berth::network::v1;

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

}  // namespace

std::string DumpJson(const json& value) {
  return value.dump(-1, ' ', false, json::error_handler_t::replace);
}

// --- Configuration lists.

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

std::string NetworkOrigin(const CniNetwork& network) {
  return network.path.empty()
             ? absl::StrCat("CNI network \"", network.name, "\"")
             : network.path;
}

bool ChecksDisabled(const json& list) {
  auto it = list.find("disableCheck");
  if (it == list.end()) return false;
  return (it->is_boolean() && it->get<bool>()) ||
         (it->is_string() && *it == "true");
}

bool HasCheckAndDelPrevResult(const std::string& cni_version) {
  Version version;
  return ParseVersion(cni_version, &version) && version >= Version{0, 4, 0};
}

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

std::vector<std::string> HostLocalLeaseDirs(const CniNetwork& network) {
  std::vector<std::string> dirs;
  auto plugins = network.conflist.find("plugins");
  if (plugins == network.conflist.end() || !plugins->is_array()) return dirs;
  for (const json& plugin : *plugins) {
    if (!plugin.is_object()) continue;
    auto ipam = plugin.find("ipam");
    if (ipam == plugin.end() || !ipam->is_object() ||
        StringOr(*ipam, "type") != "host-local") {
      continue;
    }
    std::string data_dir = "/var/lib/cni/networks";
    if (auto it = ipam->find("dataDir"); it != ipam->end()) {
      if (!it->is_string()) continue;
      data_dir = it->get<std::string>();
    }
    if (!absl::StartsWith(data_dir, "/")) continue;
    std::string dir = absl::StrCat(data_dir, "/", network.name);
    if (std::find(dirs.begin(), dirs.end(), dir) == dirs.end()) {
      dirs.push_back(std::move(dir));
    }
  }
  return dirs;
}

// --- The runtime and what each plugin gets.

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

// --- What plugins print.

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
        return invalid(absl::StrCat(where, ".interface ", DumpJson(*index),
                                    " is not an index of interfaces"));
      }
      ours = index->get<int64_t>() == chosen;
    }
    if (ours) out.addresses.push_back({address, gateway});
  }
  return out;
}

}  // namespace netns_hook
}  // namespace berth
