// `berth ps --filter KEY=VALUE`: which tasks to list, with docker's keys and
// rules, applied in the CLI to what ListTasks answers (the API has no
// filters of its own).

#ifndef SERVICES_NODE_CLI_PS_FILTER_H_
#define SERVICES_NODE_CLI_PS_FILTER_H_

#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "berth/node/v1/node.pb.h"

namespace berth::cli {

// The filters of one `berth ps`. A task is listed when, for every key
// given, it matches at least one of that key's values (docker's rule:
// values of one key OR, keys AND):
//
//   label=K     it has the label K (any value)
//   label=K=V   its label K is V
//   name=TEXT   its name contains TEXT
//   id=PREFIX   its id starts with PREFIX (hex)
//   status=S    its state: pending, starting, running, restarting, exited,
//               failed, or docker's "created" (pending or starting)
//   health=H    starting, healthy, unhealthy, or none (no health check)
class PsFilters {
 public:
  PsFilters() = default;

  // Parses the values of --filter. INVALID_ARGUMENT naming the flag and the
  // value: not KEY=VALUE, an unknown key, an empty or bad value.
  static absl::StatusOr<PsFilters> Parse(
      const std::vector<std::string>& filters);

  bool empty() const { return values_.empty(); }

  // A status filter lists ended tasks without -a, as docker's does: the
  // states it asks for decide.
  bool ImpliesAll() const { return values_.count("status") != 0; }

  bool Matches(const node::v1::Task& task) const;

 private:
  // Values by key, each as given after "KEY=".
  std::map<std::string, std::vector<std::string>> values_;
};

// The word --filter health= and --format's {{.Health}} use for a task's
// health: "starting", "healthy", "unhealthy", or "none" without a check.
std::string HealthText(const node::v1::Task& task);

}  // namespace berth::cli

#endif  // SERVICES_NODE_CLI_PS_FILTER_H_
