// API compatibility checker: finds the changes of a current set of proto
// descriptors that break clients built against a baseline set.
//
// The comparison works on the descriptor protos themselves, never on a
// DescriptorPool, so sets whose imports are absent still compare. Elements are
// matched by fully qualified name (package plus enclosing message names), so
// moving a message between files of the same package is not a break. Fields
// and enum values are matched by number, RPCs by name.
//
// Additions (files, messages, enums, fields, enum values, services, RPCs) are
// always compatible. Within a v1 package a field or enum value is deprecated,
// never removed: removing one is reported even when its number is reserved.

#ifndef BERTH_TOOLS_APICOMPAT_APICOMPAT_H_
#define BERTH_TOOLS_APICOMPAT_APICOMPAT_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "google/protobuf/descriptor.pb.h"

namespace berth {
namespace apicompat {

// Rule ids, as printed in `BREAKING [RULE] message`.
inline constexpr char kFilePackageChanged[] = "FILE_PACKAGE_CHANGED";
inline constexpr char kMessageRemoved[] = "MESSAGE_REMOVED";
inline constexpr char kEnumRemoved[] = "ENUM_REMOVED";
inline constexpr char kServiceRemoved[] = "SERVICE_REMOVED";
inline constexpr char kFieldRemoved[] = "FIELD_REMOVED";
inline constexpr char kFieldRenumbered[] = "FIELD_RENUMBERED";
inline constexpr char kFieldRenamed[] = "FIELD_RENAMED";
inline constexpr char kFieldTypeChanged[] = "FIELD_TYPE_CHANGED";
inline constexpr char kFieldLabelChanged[] = "FIELD_LABEL_CHANGED";
inline constexpr char kFieldPresenceChanged[] = "FIELD_PRESENCE_CHANGED";
inline constexpr char kFieldOneofChanged[] = "FIELD_ONEOF_CHANGED";
inline constexpr char kEnumValueRemoved[] = "ENUM_VALUE_REMOVED";
inline constexpr char kEnumValueRenamed[] = "ENUM_VALUE_RENAMED";
inline constexpr char kRpcRemoved[] = "RPC_REMOVED";
inline constexpr char kRpcInputTypeChanged[] = "RPC_INPUT_TYPE_CHANGED";
inline constexpr char kRpcOutputTypeChanged[] = "RPC_OUTPUT_TYPE_CHANGED";
inline constexpr char kRpcClientStreamingChanged[] =
    "RPC_CLIENT_STREAMING_CHANGED";
inline constexpr char kRpcServerStreamingChanged[] =
    "RPC_SERVER_STREAMING_CHANGED";

// One breaking change.
struct Violation {
  // One of the rule ids above, e.g. "FIELD_REMOVED".
  std::string rule;
  // What changed, naming the full element, e.g.
  // "field berth.driver.v1.TaskConfig.name (2) was removed".
  std::string message;
};

// Returns the breaking changes of `current` against `baseline`, in a
// deterministic order that does not depend on the order of files or
// declarations in either set: file package changes, then messages (each with
// its fields, by number), then enums (each with its values), then services
// (each with its RPCs), every kind by full name. Empty means compatible.
//
// A removed message, enum or service is reported once; the elements nested in
// it are not reported again. A renumbered field is reported as renumbered
// only, not also as removed.
std::vector<Violation> FindBreakingChanges(
    const google::protobuf::FileDescriptorSet& baseline,
    const google::protobuf::FileDescriptorSet& current);

// Reads a FileDescriptorSet in protobuf text format, such as the output of
// `protoc --decode=google.protobuf.FileDescriptorSet`. The error names `path`
// (and the line and column of a syntax error).
absl::StatusOr<google::protobuf::FileDescriptorSet> ReadTextDescriptorSet(
    const std::string& path);

}  // namespace apicompat
}  // namespace berth

#endif  // BERTH_TOOLS_APICOMPAT_APICOMPAT_H_
