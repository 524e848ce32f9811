#include "plugins/host/errors.h"

#include "absl/status/status.h"
#include "absl/strings/cord.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace berth::plugin::host {

absl::Status ErrPluginShutdown(absl::string_view name,
                               absl::string_view detail) {
  absl::Status status = absl::UnavailableError(
      detail.empty()
          ? absl::StrCat("plugin ", name, " is shut down")
          : absl::StrCat("plugin ", name, " is shut down: ", detail));
  status.SetPayload(kPluginShutdownTypeUrl, absl::Cord(name));
  return status;
}

bool IsPluginShutdown(const absl::Status& status) {
  return status.code() == absl::StatusCode::kUnavailable &&
         status.GetPayload(kPluginShutdownTypeUrl).has_value();
}

}  // namespace berth::plugin::host
