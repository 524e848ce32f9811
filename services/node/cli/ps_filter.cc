#include "services/node/cli/ps_filter.h"

#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "services/node/cli/table.h"

namespace berth::cli {
namespace {

namespace nodepb = ::berth::node::v1;

constexpr char kKeys[] = "label, name, id, status, health";
constexpr char kStatuses[] =
    "created, pending, starting, running, restarting, exited, failed";
constexpr char kHealths[] = "starting, healthy, unhealthy, none";

absl::Status BadFilter(absl::string_view filter, absl::string_view why) {
  return absl::InvalidArgumentError(
      absl::StrCat("--filter \"", filter, "\": ", why));
}

bool IsStatus(absl::string_view value) {
  return value == "created" || value == "pending" || value == "starting" ||
         value == "running" || value == "restarting" || value == "exited" ||
         value == "failed";
}

bool IsHealth(absl::string_view value) {
  return value == "starting" || value == "healthy" || value == "unhealthy" ||
         value == "none";
}

bool MatchesOne(absl::string_view key, absl::string_view value,
                const nodepb::Task& task) {
  if (key == "label") {
    const auto& labels = task.spec().labels();
    const size_t equals = value.find('=');
    const std::string label_key(value.substr(0, equals));
    auto it = labels.find(label_key);
    if (it == labels.end()) return false;
    return equals == absl::string_view::npos ||
           it->second == value.substr(equals + 1);
  }
  if (key == "name") return absl::StrContains(task.spec().name(), value);
  if (key == "id") return absl::StartsWith(task.id(), value);
  if (key == "status") {
    const std::string state = StateText(task.state());
    if (value == "created") return state == "pending" || state == "starting";
    return state == value;
  }
  if (key == "health") return HealthText(task) == value;
  return false;
}

}  // namespace

absl::StatusOr<PsFilters> PsFilters::Parse(
    const std::vector<std::string>& filters) {
  PsFilters parsed;
  for (const std::string& filter : filters) {
    const size_t equals = filter.find('=');
    if (equals == std::string::npos) {
      return BadFilter(filter,
                       absl::StrCat("not KEY=VALUE (keys: ", kKeys, ")"));
    }
    const std::string key = filter.substr(0, equals);
    const std::string value = filter.substr(equals + 1);
    if (key != "label" && key != "name" && key != "id" && key != "status" &&
        key != "health") {
      return BadFilter(filter, absl::StrCat("unknown key \"", key,
                                            "\" (keys: ", kKeys, ")"));
    }
    if (value.empty()) return BadFilter(filter, "the value is empty");
    if (key == "label" && value[0] == '=') {
      return BadFilter(filter, "the label's key is empty (label=K or K=V)");
    }
    if (key == "id") {
      for (char c : value) {
        if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) {
          return BadFilter(filter, "an id prefix is lowercase hex (0-9, a-f)");
        }
      }
    }
    if (key == "status" && !IsStatus(value)) {
      return BadFilter(filter, absl::StrCat("unknown status \"", value,
                                            "\" (one of ", kStatuses, ")"));
    }
    if (key == "health" && !IsHealth(value)) {
      return BadFilter(filter, absl::StrCat("unknown health \"", value,
                                            "\" (one of ", kHealths, ")"));
    }
    parsed.values_[key].push_back(value);
  }
  return parsed;
}

bool PsFilters::Matches(const nodepb::Task& task) const {
  for (const auto& [key, values] : values_) {
    bool any = false;
    for (const std::string& value : values) {
      if (MatchesOne(key, value, task)) {
        any = true;
        break;
      }
    }
    if (!any) return false;
  }
  return true;
}

std::string HealthText(const nodepb::Task& task) {
  switch (task.health().status()) {
    case nodepb::HEALTH_STATUS_STARTING:
      return "starting";
    case nodepb::HEALTH_STATUS_HEALTHY:
      return "healthy";
    case nodepb::HEALTH_STATUS_UNHEALTHY:
      return "unhealthy";
    default:
      return "none";
  }
}

}  // namespace berth::cli
