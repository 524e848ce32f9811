// RegistriesConfig: the registries configuration file (JSON).

#include <string>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "base/io.h"
#include "nlohmann/json.hpp"
#include "services/images/registry/registry_client.h"
#include "services/images/registry/url.h"

namespace berth::images {
namespace {

using Json = nlohmann::json;

constexpr size_t kMaxConfigSize = 1 << 20;

// A registry host as a reference names it: host[:port], no scheme or path.
absl::Status ValidateHostKey(const std::string& key) {
  auto invalid = [&](absl::string_view why) {
    return absl::InvalidArgumentError(
        absl::StrCat("registries: host \"", key, "\": ", why));
  };
  if (key.empty()) return invalid("empty");
  if (absl::StrContains(key, "://")) {
    return invalid("a host, not a URL (no scheme; mirrors take URLs)");
  }
  for (char c : key) {
    if (!absl::ascii_isalnum(static_cast<unsigned char>(c)) && c != '.' &&
        c != '-' && c != ':' && c != '[' && c != ']' && c != '_') {
      return invalid(absl::StrCat("character '", std::string(1, c),
                                  "' is not allowed in host[:port]"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> GetString(const Json& value,
                                      const std::string& field) {
  if (!value.is_string()) {
    return absl::InvalidArgumentError(
        absl::StrCat("registries: ", field, ": must be a string"));
  }
  return value.get<std::string>();
}

absl::StatusOr<RegistryHost> ParseHost(const std::string& name,
                                       const Json& object) {
  const std::string where = absl::StrCat("registries.\"", name, "\"");
  if (!object.is_object()) {
    return absl::InvalidArgumentError(
        absl::StrCat("registries: ", where, ": must be an object"));
  }
  RegistryHost host;
  for (const auto& [key, value] : object.items()) {
    const std::string field = absl::StrCat(where, ".", key);
    if (key == "mirrors") {
      if (!value.is_array()) {
        return absl::InvalidArgumentError(
            absl::StrCat("registries: ", field, ": must be an array"));
      }
      for (size_t i = 0; i < value.size(); ++i) {
        const std::string item = absl::StrCat(field, "[", i, "]");
        absl::StatusOr<std::string> mirror = GetString(value[i], item);
        if (!mirror.ok()) return mirror.status();
        absl::StatusOr<HttpUrl> url =
            ParseHttpUrl(*mirror, absl::StrCat("registries: ", item),
                         /*base_only=*/true);
        if (!url.ok()) return url.status();
        host.mirrors.push_back(url->String());
      }
    } else if (key == "insecure") {
      if (!value.is_boolean()) {
        return absl::InvalidArgumentError(
            absl::StrCat("registries: ", field, ": must be true or false"));
      }
      host.insecure = value.get<bool>();
    } else if (key == "ca_file") {
      absl::StatusOr<std::string> ca_file = GetString(value, field);
      if (!ca_file.ok()) return ca_file.status();
      if (ca_file->empty() || (*ca_file)[0] != '/') {
        return absl::InvalidArgumentError(
            absl::StrCat("registries: ", field,
                         ": must be an absolute path, not \"", *ca_file, "\""));
      }
      host.ca_file = *ca_file;
    } else if (key == "username") {
      absl::StatusOr<std::string> username = GetString(value, field);
      if (!username.ok()) return username.status();
      if (absl::StrContains(*username, ":")) {
        return absl::InvalidArgumentError(absl::StrCat(
            "registries: ", field, ": a user name cannot contain ':'"));
      }
      host.username = *username;
    } else if (key == "password") {
      absl::StatusOr<std::string> password = GetString(value, field);
      if (!password.ok()) return password.status();
      host.password = *password;
    } else {
      return absl::InvalidArgumentError(
          absl::StrCat("registries: unknown field ", field));
    }
  }
  if (host.username.empty() && !host.password.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("registries: ", where, ": a password without a username"));
  }
  return host;
}

}  // namespace

absl::StatusOr<RegistriesConfig> RegistriesConfig::Parse(
    absl::string_view json) {
  Json document = Json::parse(json.begin(), json.end(), /*cb=*/nullptr,
                              /*allow_exceptions=*/false);
  if (document.is_discarded()) {
    return absl::InvalidArgumentError("registries: not valid JSON");
  }
  if (!document.is_object()) {
    return absl::InvalidArgumentError(
        "registries: the document must be a JSON object");
  }
  RegistriesConfig config;
  for (const auto& [key, value] : document.items()) {
    if (key != "registries") {
      return absl::InvalidArgumentError(
          absl::StrCat("registries: unknown field ", key));
    }
    if (!value.is_object()) {
      return absl::InvalidArgumentError(
          "registries: registries: must be an object of hosts");
    }
    for (const auto& [name, host] : value.items()) {
      absl::Status status = ValidateHostKey(name);
      if (!status.ok()) return status;
      absl::StatusOr<RegistryHost> parsed = ParseHost(name, host);
      if (!parsed.ok()) return parsed.status();
      config.hosts.emplace(name, *std::move(parsed));
    }
  }
  return config;
}

absl::StatusOr<RegistriesConfig> RegistriesConfig::Load(
    const std::string& path) {
  absl::StatusOr<std::string> content = base::ReadFile(path, kMaxConfigSize);
  // A missing file is an empty configuration.
  if (absl::IsNotFound(content.status())) return RegistriesConfig();
  if (!content.ok()) return content.status();
  absl::StatusOr<RegistriesConfig> config = Parse(*content);
  if (!config.ok()) {
    return absl::Status(config.status().code(),
                        absl::StrCat(path, ": ", config.status().message()));
  }
  return config;
}

}  // namespace berth::images
