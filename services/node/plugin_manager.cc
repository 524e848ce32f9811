#include "services/node/plugin_manager.h"

#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <set>
#include <sstream>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "glog/logging.h"
#include "google/protobuf/util/json_util.h"
#include "nlohmann/json.hpp"
#include "plugins/host/errors.h"
#include "plugins/host/reattach_config.h"
#include "services/node/orphans.h"

namespace berth::node {
namespace {

using plugin::host::DriverClient;
using plugin::host::PluginProcess;

absl::Status ConfigError(const std::string& path, absl::string_view what) {
  return absl::InvalidArgumentError(
      absl::StrCat("plugin configuration ", path, ": ", what));
}

}  // namespace

absl::StatusOr<std::vector<PluginSpec>> LoadPluginConfig(
    const std::string& path, const std::string& plugin_dir) {
  std::ifstream in(path);
  if (!in) {
    return absl::NotFoundError(
        absl::StrCat("cannot read the plugin configuration ", path));
  }
  nlohmann::json root = nlohmann::json::parse(in, nullptr, false);
  if (root.is_discarded() || !root.is_object()) {
    return ConfigError(path, "not a JSON object");
  }
  if (!root.contains("plugins") || !root["plugins"].is_array()) {
    return ConfigError(path, "\"plugins\" must be an array");
  }
  std::vector<PluginSpec> specs;
  std::set<std::string> names;
  int index = 0;
  for (const nlohmann::json& entry : root["plugins"]) {
    const std::string field = absl::StrCat("plugins[", index++, "]");
    if (!entry.is_object())
      return ConfigError(path, field + " is not an object");
    for (const auto& [key, value] : entry.items()) {
      if (key != "name" && key != "binary" && key != "args" && key != "env" &&
          key != "config") {
        return ConfigError(
            path, absl::StrCat(field, ": unknown field \"", key,
                               "\" (known: name, binary, args, env, config)"));
      }
    }
    PluginSpec spec;
    if (!entry.contains("name") || !entry["name"].is_string() ||
        entry["name"].get<std::string>().empty()) {
      return ConfigError(path, field + ".name must be a non-empty string");
    }
    spec.name = entry["name"].get<std::string>();
    if (!names.insert(spec.name).second) {
      return ConfigError(path, absl::StrCat(field, ".name: ", spec.name,
                                            " is configured twice"));
    }
    if (!entry.contains("binary") || !entry["binary"].is_string()) {
      return ConfigError(path, field + ".binary must be a string");
    }
    spec.binary = entry["binary"].get<std::string>();
    if (spec.binary.empty() || spec.binary[0] != '/') {
      spec.binary = absl::StrCat(plugin_dir, "/", spec.binary);
    }
    if (access(spec.binary.c_str(), X_OK) != 0) {
      return ConfigError(
          path, absl::StrCat(field, ".binary: plugin ", spec.name, ": ",
                             spec.binary, " is not an executable file"));
    }
    if (entry.contains("args")) {
      if (!entry["args"].is_array()) {
        return ConfigError(path, field + ".args must be an array of strings");
      }
      for (const nlohmann::json& arg : entry["args"]) {
        if (!arg.is_string()) {
          return ConfigError(path, field + ".args must be an array of strings");
        }
        spec.args.push_back(arg.get<std::string>());
      }
    }
    if (entry.contains("env")) {
      const nlohmann::json& env = entry["env"];
      if (!env.is_object()) {
        return ConfigError(path, field + ".env must be an object of strings");
      }
      for (const auto& [key, value] : env.items()) {
        if (key.empty() || key.find('=') != std::string::npos ||
            key.find('\0') != std::string::npos) {
          return ConfigError(path, absl::StrCat(field, ".env: \"", key,
                                                "\" is not a variable name"));
        }
        if (absl::StartsWith(key, "BERTH_PLUGIN_")) {
          return ConfigError(
              path, absl::StrCat(field, ".env.", key,
                                 ": the host sets the BERTH_PLUGIN_ variables "
                                 "of the handshake itself"));
        }
        if (!value.is_string() ||
            value.get<std::string>().find('\0') != std::string::npos) {
          return ConfigError(
              path, absl::StrCat(field, ".env.", key, " must be a string"));
        }
        spec.env.emplace_back(key, value.get<std::string>());
      }
    }
    if (entry.contains("config")) {
      if (!entry["config"].is_object()) {
        return ConfigError(path, field + ".config must be an object");
      }
      google::protobuf::util::Status parsed =
          google::protobuf::util::JsonStringToMessage(entry["config"].dump(),
                                                      &spec.config);
      if (!parsed.ok()) {
        return ConfigError(
            path,
            absl::StrCat(field, ".config: ", parsed.message().as_string()));
      }
    }
    specs.push_back(std::move(spec));
  }
  return specs;
}

PluginManager::PluginManager(Options options, std::vector<PluginSpec> plugins)
    : options_(std::move(options)) {
  absl::MutexLock lock(&mu_);
  for (PluginSpec& spec : plugins) {
    std::string name = spec.name;
    plugins_[name].spec = std::move(spec);
  }
}

PluginManager::~PluginManager() { Stop(); }

void PluginManager::Start(UpCallback on_up, EventCallback on_event) {
  on_up_ = std::move(on_up);
  on_event_ = std::move(on_event);
  std::vector<std::string> names = Names();
  for (const std::string& name : names) {
    supervisors_.emplace_back([this, name] { Supervise(name); });
  }
}

bool PluginManager::Has(const std::string& name) const {
  absl::MutexLock lock(&mu_);
  return plugins_.count(name) > 0;
}

std::vector<std::string> PluginManager::Names() const {
  absl::MutexLock lock(&mu_);
  std::vector<std::string> names;
  for (const auto& [name, plugin] : plugins_) names.push_back(name);
  return names;
}

bool PluginManager::SleepUnlessStopping(absl::Duration d) {
  absl::MutexLock lock(&mu_);
  mu_.AwaitWithTimeout(absl::Condition(&stopping_), d);
  return !stopping_;
}

absl::Status PluginManager::BringUp(const std::string& name,
                                    bool may_reattach) {
  PluginSpec spec;
  {
    absl::MutexLock lock(&mu_);
    spec = plugins_.at(name).spec;
  }
  std::unique_ptr<PluginProcess> process;
  if (may_reattach && options_.store != nullptr) {
    absl::StatusOr<std::map<std::string, std::string>> stored =
        options_.store->Plugins();
    if (stored.ok() && stored->count(name) > 0) {
      absl::StatusOr<plugin::host::ReattachConfig> config =
          plugin::host::ReattachConfig::Parse(stored->at(name));
      if (config.ok()) {
        absl::StatusOr<std::unique_ptr<PluginProcess>> reattached =
            PluginProcess::Reattach(*config, options_.start_timeout);
        if (reattached.ok()) {
          LOG(INFO) << "plugin " << name << ": reattached to pid "
                    << (*reattached)->pid();
          process = *std::move(reattached);
        } else {
          LOG(INFO) << "plugin " << name << ": not reattached ("
                    << reattached.status().message() << "); launching it";
        }
      }
    }
  }
  if (process == nullptr) {
    // A plugin on its socket that this node did not reattach to (its
    // reattach record is gone with a wiped state directory, or was of
    // another process): the fresh one could not serve there. Stop it.
    const std::string socket =
        absl::StrCat(options_.socket_dir, "/", name, ".sock");
    if (absl::Status s = StopSocketOwner(socket, options_.orphan_grace);
        !s.ok()) {
      return absl::Status(s.code(),
                          absl::StrCat("plugin ", name, ": ", s.message()));
    }
    plugin::host::LaunchOptions launch;
    launch.name = name;
    launch.binary = spec.binary;
    launch.args = spec.args;
    launch.env = spec.env;
    launch.socket_dir = options_.socket_dir;
    launch.start_timeout = options_.start_timeout;
    absl::StatusOr<std::unique_ptr<PluginProcess>> launched =
        PluginProcess::Launch(launch);
    if (!launched.ok()) return launched.status();
    process = *std::move(launched);
    LOG(INFO) << "plugin " << name << ": launched " << spec.binary << " (pid "
              << process->pid() << ", socket " << process->socket_path() << ")";
  }
  std::shared_ptr<DriverClient> client = process->client();
  const absl::Time deadline = absl::Now() + options_.start_timeout;
  plugin::v1::SetConfigRequest set_config;
  *set_config.mutable_config() = spec.config;
  *set_config.mutable_node() = options_.node;
  if (absl::StatusOr<plugin::v1::SetConfigResponse> configured =
          client->SetConfig(set_config, {deadline});
      !configured.ok()) {
    process->Stop();
    return configured.status();
  }
  absl::StatusOr<driver::v1::GetCapabilitiesResponse> capabilities =
      client->GetCapabilities({}, {deadline});
  if (!capabilities.ok()) {
    process->Stop();
    return capabilities.status();
  }
  if (options_.store != nullptr) {
    if (absl::Status s = options_.store->PutPlugin(
            name, process->reattach_config().Serialize());
        !s.ok()) {
      LOG(WARNING) << "plugin " << name
                   << ": cannot persist how to reattach to it: " << s;
    }
  }
  absl::MutexLock lock(&mu_);
  Plugin& plugin = plugins_.at(name);
  plugin.process = std::move(process);
  plugin.capabilities = capabilities->capabilities();
  plugin.last_error.clear();
  return absl::OkStatus();
}

void PluginManager::Supervise(const std::string& name) {
  absl::Duration backoff = options_.min_backoff;
  bool may_reattach = true;
  while (true) {
    {
      absl::MutexLock lock(&mu_);
      if (stopping_) return;
    }
    absl::Status up = BringUp(name, may_reattach);
    may_reattach = false;
    if (!up.ok()) {
      LOG(ERROR) << "plugin " << name << ": " << up.message()
                 << "; trying again in " << backoff;
      {
        absl::MutexLock lock(&mu_);
        plugins_.at(name).last_error = std::string(up.message());
      }
      if (!SleepUnlessStopping(backoff)) return;
      backoff = std::min(backoff * 2, options_.max_backoff);
      continue;
    }
    const absl::Time up_since = absl::Now();
    if (on_up_) on_up_(name);
    std::thread events;
    if (on_event_) {
      std::shared_ptr<DriverClient> client;
      {
        absl::MutexLock lock(&mu_);
        client = plugins_.at(name).process->client();
      }
      events =
          std::thread([this, name, client] { FollowEvents(name, client); });
    }
    // The event thread ends with the stream: when the plugin goes, or when
    // Stop cancels it.
    struct Joiner {
      std::thread& thread;
      ~Joiner() {
        if (thread.joinable()) thread.join();
      }
    } joiner{events};

    // Watch it: its exit (the lifetime) and health checks.
    std::shared_ptr<plugin::host::PluginLifetime> lifetime;
    std::shared_ptr<DriverClient> client;
    {
      absl::MutexLock lock(&mu_);
      lifetime = plugins_.at(name).process->lifetime();
      client = plugins_.at(name).process->client();
    }
    int failed_checks = 0;
    absl::Time next_check = absl::Now() + options_.health_interval;
    while (!lifetime->WaitGone(absl::Milliseconds(250))) {
      {
        absl::MutexLock lock(&mu_);
        if (stopping_) return;
      }
      if (absl::Now() < next_check) continue;
      next_check = absl::Now() + options_.health_interval;
      absl::StatusOr<plugin::v1::GetPluginInfoResponse> info =
          client->GetPluginInfo({}, {absl::Now() + absl::Seconds(2)});
      if (info.ok()) {
        failed_checks = 0;
        continue;
      }
      if (lifetime->gone() || ++failed_checks < 3) continue;
      LOG(ERROR) << "plugin " << name << ": failed 3 health checks in a row ("
                 << info.status().message() << "); killing it";
      absl::MutexLock lock(&mu_);
      plugins_.at(name).process->Kill();
    }
    std::string reason = lifetime->reason();
    std::unique_ptr<PluginProcess> gone;
    {
      absl::MutexLock lock(&mu_);
      if (stopping_) return;
      Plugin& plugin = plugins_.at(name);
      gone = std::move(plugin.process);
      plugin.last_error = absl::StrCat("gone: ", reason);
      ++plugin.restarts;
    }
    // Reap it (Stop on a gone plugin only collects its exit).
    gone->Stop(absl::ZeroDuration());
    LOG(ERROR) << "plugin " << name << " is gone (" << reason
               << "); relaunching it in " << backoff;
    // A plugin that ran a while earns a fresh backoff.
    if (absl::Now() - up_since > options_.max_backoff) {
      backoff = options_.min_backoff;
    }
    if (!SleepUnlessStopping(backoff)) return;
    backoff = std::min(backoff * 2, options_.max_backoff);
  }
}

void PluginManager::FollowEvents(const std::string& name,
                                 std::shared_ptr<DriverClient> client) {
  absl::StatusOr<std::unique_ptr<plugin::host::TaskEventsStream>> stream =
      client->TaskEvents({}, {absl::InfiniteFuture(), &events_canceller_});
  if (!stream.ok()) {
    LOG(WARNING) << "plugin " << name
                 << ": no task events: " << stream.status().message();
    return;
  }
  while (true) {
    absl::StatusOr<std::optional<driver::v1::TaskEventsResponse>> event =
        (*stream)->Next();
    if (!event.ok() || !event->has_value()) return;
    on_event_(name, **event);
  }
}

absl::StatusOr<std::shared_ptr<DriverClient>> PluginManager::Client(
    const std::string& name, absl::Time deadline) {
  absl::MutexLock lock(&mu_);
  auto it = plugins_.find(name);
  if (it == plugins_.end()) {
    std::vector<std::string> names;
    for (const auto& [n, p] : plugins_) names.push_back(n);
    return absl::InvalidArgumentError(absl::StrCat(
        "spec.driver: unknown driver \"", name, "\" (this node has: ",
        names.empty() ? "none" : absl::StrJoin(names, ", "), ")"));
  }
  auto up = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    const Plugin& plugin = plugins_.at(name);
    return stopping_ ||
           (plugin.process != nullptr && !plugin.process->lifetime()->gone());
  };
  mu_.AwaitWithDeadline(absl::Condition(&up), deadline);
  if (stopping_) {
    return absl::CancelledError(
        absl::StrCat("plugin ", name, ": the node is stopping"));
  }
  const Plugin& plugin = it->second;
  if (plugin.process == nullptr || plugin.process->lifetime()->gone()) {
    return absl::UnavailableError(
        absl::StrCat("plugin ", name, " is not running",
                     plugin.last_error.empty() ? "" : ": ", plugin.last_error));
  }
  return plugin.process->client();
}

absl::StatusOr<driver::v1::DriverCapabilities> PluginManager::Capabilities(
    const std::string& name) {
  absl::MutexLock lock(&mu_);
  auto it = plugins_.find(name);
  if (it == plugins_.end() || it->second.process == nullptr) {
    return absl::UnavailableError(
        absl::StrCat("plugin ", name, " is not running"));
  }
  return it->second.capabilities;
}

std::vector<v1::ComponentStatus> PluginManager::Status() {
  absl::MutexLock lock(&mu_);
  std::vector<v1::ComponentStatus> statuses;
  for (const auto& [name, plugin] : plugins_) {
    v1::ComponentStatus status;
    status.set_name(name);
    if (plugin.process != nullptr && !plugin.process->lifetime()->gone()) {
      status.set_healthy(true);
      status.set_socket(plugin.process->socket_path());
      status.set_pid(plugin.process->pid());
      status.set_message(
          plugin.restarts > 0
              ? absl::StrCat("running; restarted ", plugin.restarts, " times")
              : "running");
    } else {
      status.set_healthy(false);
      status.set_message(plugin.last_error.empty() ? "starting"
                                                   : plugin.last_error);
    }
    statuses.push_back(std::move(status));
  }
  return statuses;
}

void PluginManager::Stop() {
  {
    absl::MutexLock lock(&mu_);
    if (stopped_) return;
    stopped_ = true;
    stopping_ = true;
  }
  events_canceller_.Cancel();
  for (std::thread& supervisor : supervisors_) supervisor.join();
  supervisors_.clear();
  std::map<std::string, std::unique_ptr<PluginProcess>> processes;
  {
    absl::MutexLock lock(&mu_);
    for (auto& [name, plugin] : plugins_) {
      if (plugin.process != nullptr) {
        processes[name] = std::move(plugin.process);
      }
    }
  }
  for (auto& [name, process] : processes) {
    plugin::host::PluginExit exit = process->Stop();
    LOG(INFO) << "plugin " << name << " stopped: " << exit.ToString();
    if (options_.store != nullptr) {
      if (absl::Status s = options_.store->DeletePlugin(name); !s.ok()) {
        LOG(WARNING) << s;
      }
    }
  }
}

}  // namespace berth::node
