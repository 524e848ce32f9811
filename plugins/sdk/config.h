// Checking a JSON configuration (google.protobuf.Struct) against the schema a
// plugin publishes (berth.plugin.v1.ConfigSchema). The SDK checks
// SetConfigRequest.config against Driver::PluginConfigSchema() and
// TaskConfig.driver_config against Driver::TaskConfigSchema() before the
// driver sees them, so a driver can rely on the types and required fields.

#ifndef PLUGINS_SDK_CONFIG_H_
#define PLUGINS_SDK_CONFIG_H_

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "berth/plugin/v1/plugin.pb.h"
#include "google/protobuf/struct.pb.h"

namespace berth::plugin {

// OK if `config` has every required field of `schema`, no field the schema
// lacks, and values of the declared types (see plugin.v1.ConfigFieldType; a
// DURATION must parse with ParseConfigDuration, an INTEGER be a whole
// number; a null value counts as absent). INVALID_ARGUMENT otherwise, naming
// the field as `where`.name, e.g.
//   task.driver_config.command is required
//   task.driver_config.args must be a list of strings
//   task.driver_config.colour is not a known field (known: command, args)
absl::Status ValidateConfig(const google::protobuf::Struct& config,
                            const v1::ConfigSchema& schema,
                            absl::string_view where);

// Appends a field to `schema`: the one-liner a driver's TaskConfigSchema()
// is made of.
void AddConfigField(v1::ConfigSchema* schema, absl::string_view name,
                    v1::ConfigFieldType type, bool required,
                    absl::string_view description);

// A duration as configurations write it: "1.5s", "300ms", "2m", "1h30m"
// (absl::ParseDuration; google.protobuf.Duration's JSON form "1.5s" is one of
// them). Negative durations and "inf" are refused.
absl::StatusOr<absl::Duration> ParseConfigDuration(absl::string_view text);

}  // namespace berth::plugin

#endif  // PLUGINS_SDK_CONFIG_H_
