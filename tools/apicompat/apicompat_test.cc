#include "tools/apicompat/apicompat.h"

#include <algorithm>
#include <fstream>
#include <initializer_list>
#include <ostream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "gmock/gmock.h"
#include "google/protobuf/descriptor.pb.h"
#include "google/protobuf/text_format.h"
#include "gtest/gtest.h"

namespace berth {
namespace apicompat {

void PrintTo(const Violation& violation, std::ostream* os) {
  *os << "[" << violation.rule << "] " << violation.message;
}

namespace {

using ::google::protobuf::FileDescriptorProto;
using ::google::protobuf::FileDescriptorSet;
using ::testing::ElementsAre;
using ::testing::ElementsAreArray;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

// Every snippet below is the body of one FileDescriptorProto, in this file
// unless it names its own.
constexpr absl::string_view kHeader = R"pb(
  name: "berth/test/v1/test.proto"
  package: "berth.test.v1"
  syntax: "proto3"
)pb";

std::string File(absl::string_view body) { return absl::StrCat(kHeader, body); }

FileDescriptorSet SetOf(const std::vector<std::string>& files) {
  FileDescriptorSet set;
  for (const std::string& text : files) {
    FileDescriptorProto* file = set.add_file();
    EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(text, file))
        << "bad test snippet:\n"
        << text;
  }
  return set;
}

std::vector<std::string> Rules(const std::vector<Violation>& violations) {
  std::vector<std::string> rules;
  for (const Violation& violation : violations) rules.push_back(violation.rule);
  return rules;
}

// A message with two string fields, the base of the field cases.
constexpr absl::string_view kTaskConfig = R"pb(
  message_type {
    name: "TaskConfig"
    field { name: "id" number: 1 label: LABEL_OPTIONAL type: TYPE_STRING }
    field { name: "name" number: 2 label: LABEL_OPTIONAL type: TYPE_STRING }
  }
)pb";

constexpr absl::string_view kState = R"pb(
  enum_type {
    name: "State"
    value { name: "STATE_UNSPECIFIED" number: 0 }
    value { name: "STATE_RUNNING" number: 1 }
    value { name: "STATE_DONE" number: 2 }
  }
)pb";

constexpr absl::string_view kTaskService = R"pb(
  service {
    name: "TaskService"
    method {
      name: "Start"
      input_type: ".berth.test.v1.StartRequest"
      output_type: ".berth.test.v1.StartResponse"
    }
    method {
      name: "Stop"
      input_type: ".berth.test.v1.StopRequest"
      output_type: ".berth.test.v1.StopResponse"
    }
  }
)pb";

// A map<string, VALUE> field `labels` (1) of TaskConfig.
std::string MapField(absl::string_view field_name, absl::string_view entry,
                     absl::string_view value_type) {
  // Plain strings: clang-format reflows R"pb(...)pb" fragments.
  return absl::StrCat(
      "message_type {\n"
      "  name: \"TaskConfig\"\n"
      "  field {\n"
      "    name: \"",
      field_name,
      "\"\n"
      "    number: 1\n"
      "    label: LABEL_REPEATED\n"
      "    type: TYPE_MESSAGE\n"
      "    type_name: \".berth.test.v1.TaskConfig.",
      entry,
      "\"\n"
      "  }\n"
      "  nested_type {\n"
      "    name: \"",
      entry,
      "\"\n"
      "    field { name: \"key\" number: 1 label: LABEL_OPTIONAL type: "
      "TYPE_STRING }\n"
      "    field { name: \"value\" number: 2 label: LABEL_OPTIONAL type: ",
      value_type,
      " }\n"
      "    options { map_entry: true }\n"
      "  }\n"
      "}\n");
}

// One case: `rules` are the rules expected to fire, in order (none for a
// compatible pair); `message` is the exact message of the first.
struct Case {
  std::string name;
  std::vector<std::string> baseline;
  std::vector<std::string> current;
  std::vector<std::string> rules;
  std::string message;
};

std::ostream& operator<<(std::ostream& os, const Case& c) {
  return os << c.name;
}

std::vector<Case> Cases() {
  return {
      // ---- A file's package.
      {"FilePackageChanged",
       {R"pb(name: "a.proto" package: "berth.test.v1")pb"},
       {R"pb(name: "a.proto" package: "berth.test.v2")pb"},
       {"FILE_PACKAGE_CHANGED"},
       "file a.proto changed package from \"berth.test.v1\" to "
       "\"berth.test.v2\""},
      {"MessageMovedToAnotherFileOfThePackage",
       {R"pb(name: "a.proto"
             package: "berth.test.v1"
             message_type { name: "M" })pb"},
       {R"pb(name: "a.proto" package: "berth.test.v1")pb",
        R"pb(name: "b.proto"
             package: "berth.test.v1"
             message_type { name: "M" })pb"},
       {},
       ""},

      // ---- Messages.
      {"MessageRemoved",
       {File(R"pb(message_type { name: "Keep" }
                  message_type { name: "Gone" })pb")},
       {File(R"pb(message_type { name: "Keep" })pb")},
       {"MESSAGE_REMOVED"},
       "message berth.test.v1.Gone was removed"},
      {"NestedMessageRemovedOnceWithWhatItHolds",
       {File(R"pb(message_type {
                    name: "Outer"
                    nested_type {
                      name: "Inner"
                      nested_type { name: "Leaf" }
                      enum_type {
                        name: "Kind"
                        value { name: "KIND_UNSPECIFIED" number: 0 }
                      }
                    }
                  })pb")},
       {File(R"pb(message_type { name: "Outer" })pb")},
       {"MESSAGE_REMOVED"},
       "message berth.test.v1.Outer.Inner was removed"},
      {"MessagesAdded",
       {File(R"pb(message_type { name: "Outer" })pb")},
       {File(R"pb(message_type {
                    name: "Outer"
                    nested_type { name: "Inner" }
                  }
                  message_type { name: "Other" })pb"),
        R"pb(name: "berth/test/v1/new.proto"
             package: "berth.test.v1"
             message_type { name: "New" })pb"},
       {},
       ""},

      // ---- Enums.
      {"EnumRemoved",
       {File(kState)},
       {File("")},
       {"ENUM_REMOVED"},
       "enum berth.test.v1.State was removed"},
      {"NestedEnumRemoved",
       {File(R"pb(message_type {
                    name: "Task"
                    enum_type {
                      name: "Kind"
                      value { name: "KIND_UNSPECIFIED" number: 0 }
                    }
                  })pb")},
       {File(R"pb(message_type { name: "Task" })pb")},
       {"ENUM_REMOVED"},
       "enum berth.test.v1.Task.Kind was removed"},
      {"EnumAdded", {File("")}, {File(kState)}, {}, ""},

      // ---- Services.
      {"ServiceRemoved",
       {File(kTaskService)},
       {File("")},
       {"SERVICE_REMOVED"},
       "service berth.test.v1.TaskService was removed"},
      {"ServiceAdded", {File("")}, {File(kTaskService)}, {}, ""},

      // ---- Field removed.
      {"FieldRemoved",
       {File(kTaskConfig)},
       {File(R"pb(message_type {
                    name: "TaskConfig"
                    field {
                      name: "id"
                      number: 1
                      label: LABEL_OPTIONAL
                      type: TYPE_STRING
                    }
                  })pb")},
       {"FIELD_REMOVED"},
       "field berth.test.v1.TaskConfig.name (2) was removed; within v1 "
       "deprecate it instead of removing it"},
      {"FieldRemovedEvenIfReserved",
       {File(kTaskConfig)},
       {File(R"pb(message_type {
                    name: "TaskConfig"
                    field {
                      name: "id"
                      number: 1
                      label: LABEL_OPTIONAL
                      type: TYPE_STRING
                    }
                    reserved_range { start: 2 end: 3 }
                    reserved_name: "name"
                  })pb")},
       {"FIELD_REMOVED"},
       "field berth.test.v1.TaskConfig.name (2) was removed (its number is "
       "now reserved); within v1 deprecate it instead of removing it"},
      {"FieldDeprecatedAndFieldAdded",
       {File(kTaskConfig)},
       {File(R"pb(message_type {
                    name: "TaskConfig"
                    field {
                      name: "id"
                      number: 1
                      label: LABEL_OPTIONAL
                      type: TYPE_STRING
                    }
                    field {
                      name: "name"
                      number: 2
                      label: LABEL_OPTIONAL
                      type: TYPE_STRING
                      options { deprecated: true }
                    }
                    field {
                      name: "title"
                      number: 3
                      label: LABEL_OPTIONAL
                      type: TYPE_STRING
                    }
                  })pb")},
       {},
       ""},

      // ---- Field renumbered.
      {"FieldRenumbered",
       {File(kTaskConfig)},
       {File(R"pb(message_type {
                    name: "TaskConfig"
                    field {
                      name: "id"
                      number: 1
                      label: LABEL_OPTIONAL
                      type: TYPE_STRING
                    }
                    field {
                      name: "name"
                      number: 3
                      label: LABEL_OPTIONAL
                      type: TYPE_STRING
                    }
                  })pb")},
       {"FIELD_RENUMBERED"},
       "field berth.test.v1.TaskConfig.name changed number from 2 to 3"},
      {"FieldNumbersSwapped",
       {File(kTaskConfig)},
       {File(R"pb(message_type {
                    name: "TaskConfig"
                    field {
                      name: "id"
                      number: 2
                      label: LABEL_OPTIONAL
                      type: TYPE_STRING
                    }
                    field {
                      name: "name"
                      number: 1
                      label: LABEL_OPTIONAL
                      type: TYPE_STRING
                    }
                  })pb")},
       {"FIELD_RENUMBERED", "FIELD_RENUMBERED"},
       "field berth.test.v1.TaskConfig.id changed number from 1 to 2"},
      {"FieldsReordered",
       {File(kTaskConfig)},
       {File(R"pb(message_type {
                    name: "TaskConfig"
                    field {
                      name: "name"
                      number: 2
                      label: LABEL_OPTIONAL
                      type: TYPE_STRING
                    }
                    field {
                      name: "id"
                      number: 1
                      label: LABEL_OPTIONAL
                      type: TYPE_STRING
                    }
                  })pb")},
       {},
       ""},

      // ---- Field renamed.
      {"FieldRenamed",
       {File(kTaskConfig)},
       {File(R"pb(message_type {
                    name: "TaskConfig"
                    field {
                      name: "id"
                      number: 1
                      label: LABEL_OPTIONAL
                      type: TYPE_STRING
                    }
                    field {
                      name: "title"
                      number: 2
                      label: LABEL_OPTIONAL
                      type: TYPE_STRING
                    }
                  })pb")},
       {"FIELD_RENAMED"},
       "field berth.test.v1.TaskConfig.name (2) was renamed to title"},
      {"MapFieldRenamedIsOnlyARename",
       {File(MapField("labels", "LabelsEntry", "TYPE_INT32"))},
       {File(MapField("tags", "TagsEntry", "TYPE_INT32"))},
       {"FIELD_RENAMED"},
       "field berth.test.v1.TaskConfig.labels (1) was renamed to tags"},

      // ---- Field type.
      {"FieldScalarTypeChanged",
       {File(kTaskConfig)},
       {File(R"pb(message_type {
                    name: "TaskConfig"
                    field {
                      name: "id"
                      number: 1
                      label: LABEL_OPTIONAL
                      type: TYPE_STRING
                    }
                    field {
                      name: "name"
                      number: 2
                      label: LABEL_OPTIONAL
                      type: TYPE_BYTES
                    }
                  })pb")},
       {"FIELD_TYPE_CHANGED"},
       "field berth.test.v1.TaskConfig.name (2) changed type from string to "
       "bytes"},
      {"FieldMessageTypeChanged",
       {File(R"pb(message_type {
                    name: "Task"
                    field {
                      name: "spec"
                      number: 1
                      label: LABEL_OPTIONAL
                      type: TYPE_MESSAGE
                      type_name: ".berth.test.v1.Spec"
                    }
                  })pb")},
       {File(R"pb(message_type {
                    name: "Task"
                    field {
                      name: "spec"
                      number: 1
                      label: LABEL_OPTIONAL
                      type: TYPE_MESSAGE
                      type_name: ".berth.test.v1.OtherSpec"
                    }
                  })pb")},
       {"FIELD_TYPE_CHANGED"},
       "field berth.test.v1.Task.spec (1) changed type from "
       "berth.test.v1.Spec to berth.test.v1.OtherSpec"},
      {"FieldMapValueTypeChanged",
       {File(MapField("labels", "LabelsEntry", "TYPE_INT32"))},
       {File(MapField("labels", "LabelsEntry", "TYPE_INT64"))},
       {"FIELD_TYPE_CHANGED"},
       "field berth.test.v1.TaskConfig.labels (1) changed type from "
       "map<string, int32> to map<string, int64>"},
      {"FieldTypeNameWithoutLeadingDotIsTheSame",
       {File(R"pb(message_type {
                    name: "Task"
                    field {
                      name: "spec"
                      number: 1
                      label: LABEL_OPTIONAL
                      type: TYPE_MESSAGE
                      type_name: ".berth.test.v1.Spec"
                    }
                  })pb")},
       {File(R"pb(message_type {
                    name: "Task"
                    field {
                      name: "spec"
                      number: 1
                      label: LABEL_OPTIONAL
                      type: TYPE_MESSAGE
                      type_name: "berth.test.v1.Spec"
                    }
                  })pb")},
       {},
       ""},

      // ---- Field label.
      {"FieldLabelChanged",
       {File(kTaskConfig)},
       {File(R"pb(message_type {
                    name: "TaskConfig"
                    field {
                      name: "id"
                      number: 1
                      label: LABEL_OPTIONAL
                      type: TYPE_STRING
                    }
                    field {
                      name: "name"
                      number: 2
                      label: LABEL_REPEATED
                      type: TYPE_STRING
                    }
                  })pb")},
       {"FIELD_LABEL_CHANGED"},
       "field berth.test.v1.TaskConfig.name (2) changed label from optional "
       "to repeated"},
      {"FieldLabelUnsetIsOptional",
       {File(kTaskConfig)},
       {File(R"pb(message_type {
                    name: "TaskConfig"
                    field { name: "id" number: 1 type: TYPE_STRING }
                    field { name: "name" number: 2 type: TYPE_STRING }
                  })pb")},
       {},
       ""},

      // ---- Field presence (proto3 optional).
      {"FieldBecameProto3Optional",
       {File(kTaskConfig)},
       {File(R"pb(message_type {
                    name: "TaskConfig"
                    field {
                      name: "id"
                      number: 1
                      label: LABEL_OPTIONAL
                      type: TYPE_STRING
                    }
                    field {
                      name: "name"
                      number: 2
                      label: LABEL_OPTIONAL
                      type: TYPE_STRING
                      oneof_index: 0
                      proto3_optional: true
                    }
                    oneof_decl { name: "_name" }
                  })pb")},
       {"FIELD_PRESENCE_CHANGED"},
       "field berth.test.v1.TaskConfig.name (2) became proto3 optional "
       "(gained explicit presence)"},
      {"FieldNoLongerProto3Optional",
       {File(R"pb(message_type {
                    name: "TaskConfig"
                    field {
                      name: "name"
                      number: 2
                      label: LABEL_OPTIONAL
                      type: TYPE_STRING
                      oneof_index: 0
                      proto3_optional: true
                    }
                    oneof_decl { name: "_name" }
                  })pb")},
       {File(R"pb(message_type {
                    name: "TaskConfig"
                    field {
                      name: "name"
                      number: 2
                      label: LABEL_OPTIONAL
                      type: TYPE_STRING
                    }
                  })pb")},
       {"FIELD_PRESENCE_CHANGED"},
       "field berth.test.v1.TaskConfig.name (2) is no longer proto3 optional "
       "(lost explicit presence)"},
      {"Proto3OptionalFieldAdded",
       {File(kTaskConfig)},
       {File(R"pb(message_type {
                    name: "TaskConfig"
                    field {
                      name: "id"
                      number: 1
                      label: LABEL_OPTIONAL
                      type: TYPE_STRING
                    }
                    field {
                      name: "name"
                      number: 2
                      label: LABEL_OPTIONAL
                      type: TYPE_STRING
                    }
                    field {
                      name: "title"
                      number: 3
                      label: LABEL_OPTIONAL
                      type: TYPE_STRING
                      oneof_index: 0
                      proto3_optional: true
                    }
                    oneof_decl { name: "_title" }
                  })pb")},
       {},
       ""},

      // ---- Field oneof.
      {"FieldMovedIntoOneof",
       {File(kTaskConfig)},
       {File(R"pb(message_type {
                    name: "TaskConfig"
                    field {
                      name: "id"
                      number: 1
                      label: LABEL_OPTIONAL
                      type: TYPE_STRING
                    }
                    field {
                      name: "name"
                      number: 2
                      label: LABEL_OPTIONAL
                      type: TYPE_STRING
                      oneof_index: 0
                    }
                    oneof_decl { name: "label" }
                  })pb")},
       {"FIELD_ONEOF_CHANGED"},
       "field berth.test.v1.TaskConfig.name (2) moved into oneof label"},
      {"FieldMovedOutOfOneof",
       {File(R"pb(message_type {
                    name: "TaskConfig"
                    field {
                      name: "name"
                      number: 2
                      label: LABEL_OPTIONAL
                      type: TYPE_STRING
                      oneof_index: 0
                    }
                    oneof_decl { name: "label" }
                  })pb")},
       {File(R"pb(message_type {
                    name: "TaskConfig"
                    field {
                      name: "name"
                      number: 2
                      label: LABEL_OPTIONAL
                      type: TYPE_STRING
                    }
                  })pb")},
       {"FIELD_ONEOF_CHANGED"},
       "field berth.test.v1.TaskConfig.name (2) moved out of oneof label"},
      {"FieldMovedBetweenOneofs",
       {File(R"pb(message_type {
                    name: "TaskConfig"
                    field {
                      name: "id"
                      number: 1
                      label: LABEL_OPTIONAL
                      type: TYPE_STRING
                      oneof_index: 0
                    }
                    field {
                      name: "name"
                      number: 2
                      label: LABEL_OPTIONAL
                      type: TYPE_STRING
                      oneof_index: 0
                    }
                    oneof_decl { name: "key" }
                    oneof_decl { name: "label" }
                  })pb")},
       {File(R"pb(message_type {
                    name: "TaskConfig"
                    field {
                      name: "id"
                      number: 1
                      label: LABEL_OPTIONAL
                      type: TYPE_STRING
                      oneof_index: 0
                    }
                    field {
                      name: "name"
                      number: 2
                      label: LABEL_OPTIONAL
                      type: TYPE_STRING
                      oneof_index: 1
                    }
                    oneof_decl { name: "key" }
                    oneof_decl { name: "label" }
                  })pb")},
       {"FIELD_ONEOF_CHANGED"},
       "field berth.test.v1.TaskConfig.name (2) moved from oneof key to "
       "oneof label"},
      {"OneofsReorderedAndFieldAddedToOneof",
       {File(R"pb(message_type {
                    name: "TaskConfig"
                    field {
                      name: "id"
                      number: 1
                      label: LABEL_OPTIONAL
                      type: TYPE_STRING
                      oneof_index: 0
                    }
                    field {
                      name: "name"
                      number: 2
                      label: LABEL_OPTIONAL
                      type: TYPE_STRING
                      oneof_index: 1
                    }
                    oneof_decl { name: "key" }
                    oneof_decl { name: "label" }
                  })pb")},
       {File(R"pb(message_type {
                    name: "TaskConfig"
                    field {
                      name: "id"
                      number: 1
                      label: LABEL_OPTIONAL
                      type: TYPE_STRING
                      oneof_index: 1
                    }
                    field {
                      name: "name"
                      number: 2
                      label: LABEL_OPTIONAL
                      type: TYPE_STRING
                      oneof_index: 0
                    }
                    field {
                      name: "title"
                      number: 3
                      label: LABEL_OPTIONAL
                      type: TYPE_STRING
                      oneof_index: 0
                    }
                    oneof_decl { name: "label" }
                    oneof_decl { name: "key" }
                  })pb")},
       {},
       ""},

      // ---- Enum values.
      {"EnumValueRemoved",
       {File(kState)},
       {File(R"pb(enum_type {
                    name: "State"
                    value { name: "STATE_UNSPECIFIED" number: 0 }
                    value { name: "STATE_RUNNING" number: 1 }
                  })pb")},
       {"ENUM_VALUE_REMOVED"},
       "enum value berth.test.v1.State.STATE_DONE (2) was removed; within "
       "v1 deprecate it instead of removing it"},
      {"EnumValueRemovedEvenIfReserved",
       {File(kState)},
       {File(R"pb(enum_type {
                    name: "State"
                    value { name: "STATE_UNSPECIFIED" number: 0 }
                    value { name: "STATE_RUNNING" number: 1 }
                    reserved_range { start: 2 end: 2 }
                    reserved_name: "STATE_DONE"
                  })pb")},
       {"ENUM_VALUE_REMOVED"},
       "enum value berth.test.v1.State.STATE_DONE (2) was removed (its "
       "number is now reserved); within v1 deprecate it instead of removing "
       "it"},
      {"EnumValueRenamed",
       {File(kState)},
       {File(R"pb(enum_type {
                    name: "State"
                    value { name: "STATE_UNSPECIFIED" number: 0 }
                    value { name: "STATE_RUNNING" number: 1 }
                    value { name: "STATE_FINISHED" number: 2 }
                  })pb")},
       {"ENUM_VALUE_RENAMED"},
       "enum value berth.test.v1.State.STATE_DONE (2) was renamed to "
       "STATE_FINISHED"},
      {"EnumValueAddedAndAliasAdded",
       {File(kState)},
       {File(R"pb(enum_type {
                    name: "State"
                    value { name: "STATE_UNSPECIFIED" number: 0 }
                    value { name: "STATE_RUNNING" number: 1 }
                    value { name: "STATE_DONE" number: 2 }
                    value { name: "STATE_FINISHED" number: 2 }
                    value { name: "STATE_FAILED" number: 3 }
                    options { allow_alias: true }
                  })pb")},
       {},
       ""},

      // ---- RPCs.
      {"RpcRemoved",
       {File(kTaskService)},
       {File(R"pb(service {
                    name: "TaskService"
                    method {
                      name: "Start"
                      input_type: ".berth.test.v1.StartRequest"
                      output_type: ".berth.test.v1.StartResponse"
                    }
                  })pb")},
       {"RPC_REMOVED"},
       "rpc berth.test.v1.TaskService.Stop was removed or renamed"},
      {"RpcRenamed",
       {File(kTaskService)},
       {File(R"pb(service {
                    name: "TaskService"
                    method {
                      name: "Start"
                      input_type: ".berth.test.v1.StartRequest"
                      output_type: ".berth.test.v1.StartResponse"
                    }
                    method {
                      name: "Halt"
                      input_type: ".berth.test.v1.StopRequest"
                      output_type: ".berth.test.v1.StopResponse"
                    }
                  })pb")},
       {"RPC_REMOVED"},
       "rpc berth.test.v1.TaskService.Stop was removed or renamed"},
      {"RpcAdded",
       {File(kTaskService)},
       {File(R"pb(service {
                    name: "TaskService"
                    method {
                      name: "Start"
                      input_type: ".berth.test.v1.StartRequest"
                      output_type: ".berth.test.v1.StartResponse"
                    }
                    method {
                      name: "Stop"
                      input_type: ".berth.test.v1.StopRequest"
                      output_type: ".berth.test.v1.StopResponse"
                    }
                    method {
                      name: "Watch"
                      input_type: ".berth.test.v1.WatchRequest"
                      output_type: ".berth.test.v1.WatchResponse"
                      server_streaming: true
                    }
                  })pb")},
       {},
       ""},
      {"RpcInputTypeChanged",
       {File(kTaskService)},
       {File(R"pb(service {
                    name: "TaskService"
                    method {
                      name: "Start"
                      input_type: ".berth.test.v1.StartRequest"
                      output_type: ".berth.test.v1.StartResponse"
                    }
                    method {
                      name: "Stop"
                      input_type: ".berth.test.v1.StartRequest"
                      output_type: ".berth.test.v1.StopResponse"
                    }
                  })pb")},
       {"RPC_INPUT_TYPE_CHANGED"},
       "rpc berth.test.v1.TaskService.Stop changed input type from "
       "berth.test.v1.StopRequest to berth.test.v1.StartRequest"},
      {"RpcOutputTypeChanged",
       {File(kTaskService)},
       {File(R"pb(service {
                    name: "TaskService"
                    method {
                      name: "Start"
                      input_type: ".berth.test.v1.StartRequest"
                      output_type: ".berth.test.v1.StartResponse"
                    }
                    method {
                      name: "Stop"
                      input_type: ".berth.test.v1.StopRequest"
                      output_type: ".google.protobuf.Empty"
                    }
                  })pb")},
       {"RPC_OUTPUT_TYPE_CHANGED"},
       "rpc berth.test.v1.TaskService.Stop changed output type from "
       "berth.test.v1.StopResponse to google.protobuf.Empty"},
      {"RpcTypeNamesWithoutLeadingDotAreTheSame",
       {File(kTaskService)},
       {File(R"pb(service {
                    name: "TaskService"
                    method {
                      name: "Start"
                      input_type: "berth.test.v1.StartRequest"
                      output_type: "berth.test.v1.StartResponse"
                    }
                    method {
                      name: "Stop"
                      input_type: "berth.test.v1.StopRequest"
                      output_type: "berth.test.v1.StopResponse"
                    }
                  })pb")},
       {},
       ""},
      {"RpcBecameClientStreaming",
       {File(kTaskService)},
       {File(R"pb(service {
                    name: "TaskService"
                    method {
                      name: "Start"
                      input_type: ".berth.test.v1.StartRequest"
                      output_type: ".berth.test.v1.StartResponse"
                      client_streaming: true
                    }
                    method {
                      name: "Stop"
                      input_type: ".berth.test.v1.StopRequest"
                      output_type: ".berth.test.v1.StopResponse"
                    }
                  })pb")},
       {"RPC_CLIENT_STREAMING_CHANGED"},
       "rpc berth.test.v1.TaskService.Start became client-streaming"},
      {"RpcNoLongerServerStreaming",
       {File(R"pb(service {
                    name: "TaskService"
                    method {
                      name: "Watch"
                      input_type: ".berth.test.v1.WatchRequest"
                      output_type: ".berth.test.v1.WatchResponse"
                      server_streaming: true
                    }
                  })pb")},
       {File(R"pb(service {
                    name: "TaskService"
                    method {
                      name: "Watch"
                      input_type: ".berth.test.v1.WatchRequest"
                      output_type: ".berth.test.v1.WatchResponse"
                    }
                  })pb")},
       {"RPC_SERVER_STREAMING_CHANGED"},
       "rpc berth.test.v1.TaskService.Watch is no longer server-streaming"},
  };
}

class RuleTest : public ::testing::TestWithParam<Case> {};

TEST_P(RuleTest, FiresExactlyTheExpectedRules) {
  const Case& c = GetParam();
  const std::vector<Violation> violations =
      FindBreakingChanges(SetOf(c.baseline), SetOf(c.current));
  EXPECT_THAT(Rules(violations), ElementsAreArray(c.rules))
      << ::testing::PrintToString(violations);
  if (!c.rules.empty() && !violations.empty()) {
    EXPECT_EQ(violations[0].message, c.message);
  }
}

INSTANTIATE_TEST_SUITE_P(AllRules, RuleTest, ::testing::ValuesIn(Cases()),
                         [](const ::testing::TestParamInfo<Case>& info) {
                           return info.param.name;
                         });

// Every rule of apicompat.h has a breaking case above.
TEST(RuleTest, EveryRuleHasABreakingCase) {
  std::vector<std::string> covered;
  for (const Case& c : Cases()) {
    covered.insert(covered.end(), c.rules.begin(), c.rules.end());
  }
  for (const char* rule :
       {kFilePackageChanged, kMessageRemoved, kEnumRemoved, kServiceRemoved,
        kFieldRemoved, kFieldRenumbered, kFieldRenamed, kFieldTypeChanged,
        kFieldLabelChanged, kFieldPresenceChanged, kFieldOneofChanged,
        kEnumValueRemoved, kEnumValueRenamed, kRpcRemoved, kRpcInputTypeChanged,
        kRpcOutputTypeChanged, kRpcClientStreamingChanged,
        kRpcServerStreamingChanged}) {
    EXPECT_NE(std::find(covered.begin(), covered.end(), rule), covered.end())
        << rule;
  }
}

// A file with a bit of everything.
const std::vector<std::string>& FullApi() {
  static const auto* files = new std::vector<std::string>{
      File(absl::StrCat(kTaskConfig, kState, kTaskService,
                        R"pb(message_type {
                               name: "Task"
                               field {
                                 name: "state"
                                 number: 1
                                 label: LABEL_OPTIONAL
                                 type: TYPE_ENUM
                                 type_name: ".berth.test.v1.State"
                               }
                               field {
                                 name: "pid"
                                 number: 2
                                 label: LABEL_OPTIONAL
                                 type: TYPE_INT32
                                 oneof_index: 0
                               }
                               field {
                                 name: "note"
                                 number: 3
                                 label: LABEL_OPTIONAL
                                 type: TYPE_STRING
                                 oneof_index: 1
                                 proto3_optional: true
                               }
                               oneof_decl { name: "status" }
                               oneof_decl { name: "_note" }
                               nested_type {
                                 name: "Port"
                                 field {
                                   name: "number"
                                   number: 1
                                   label: LABEL_REPEATED
                                   type: TYPE_UINT32
                                 }
                               }
                             })pb",
                        MapField("labels", "LabelsEntry", "TYPE_STRING"))),
      R"pb(name: "berth/other/v1/other.proto"
           package: "berth.other.v1"
           dependency: "berth/test/v1/test.proto"
           message_type { name: "Other" })pb",
  };
  return *files;
}

TEST(FindBreakingChangesTest, IdenticalSetsYieldNothing) {
  EXPECT_THAT(FindBreakingChanges(SetOf(FullApi()), SetOf(FullApi())),
              IsEmpty());
}

TEST(FindBreakingChangesTest, EmptySetsYieldNothing) {
  EXPECT_THAT(FindBreakingChanges(FileDescriptorSet(), FileDescriptorSet()),
              IsEmpty());
}

TEST(FindBreakingChangesTest, EverythingRemovedIsReportedOncePerTopLevelType) {
  EXPECT_THAT(
      Rules(FindBreakingChanges(SetOf(FullApi()), FileDescriptorSet())),
      ElementsAre("MESSAGE_REMOVED", "MESSAGE_REMOVED", "MESSAGE_REMOVED",
                  "ENUM_REMOVED", "SERVICE_REMOVED"));
}

TEST(FindBreakingChangesTest, OrderDoesNotDependOnDeclarationOrder) {
  const std::vector<std::string> baseline = {
      R"pb(name: "b.proto"
           package: "berth.b.v1"
           message_type { name: "Z" }
           message_type { name: "A" })pb",
      R"pb(name: "a.proto"
           package: "berth.a.v1"
           service { name: "S" }
           enum_type { name: "E" }
           message_type {
             name: "M"
             field { name: "y" number: 9 type: TYPE_STRING }
             field { name: "x" number: 3 type: TYPE_STRING }
           })pb",
  };
  const std::vector<std::string> current = {
      R"pb(name: "a.proto"
           package: "berth.a.v1"
           message_type { name: "M" })pb",
  };
  const std::vector<Violation> violations =
      FindBreakingChanges(SetOf(baseline), SetOf(current));
  std::vector<std::string> messages;
  for (const Violation& violation : violations) {
    messages.push_back(violation.message);
  }
  EXPECT_THAT(messages,
              ElementsAre(HasSubstr("field berth.a.v1.M.x (3) was removed"),
                          HasSubstr("field berth.a.v1.M.y (9) was removed"),
                          "message berth.b.v1.A was removed",
                          "message berth.b.v1.Z was removed",
                          "enum berth.a.v1.E was removed",
                          "service berth.a.v1.S was removed"));

  const std::vector<std::string> reversed(baseline.rbegin(), baseline.rend());
  const std::vector<Violation> again =
      FindBreakingChanges(SetOf(reversed), SetOf(current));
  ASSERT_EQ(again.size(), violations.size());
  for (size_t i = 0; i < again.size(); ++i) {
    EXPECT_EQ(again[i].rule, violations[i].rule);
    EXPECT_EQ(again[i].message, violations[i].message);
  }
}

TEST(FindBreakingChangesTest, PackageChangeAlsoRemovesWhatTheFileHeld) {
  EXPECT_THAT(
      Rules(FindBreakingChanges(SetOf({R"pb(name: "a.proto"
                                            package: "berth.test.v1"
                                            message_type { name: "M" })pb"}),
                                SetOf({R"pb(name: "a.proto"
                                            package: "berth.test.v2"
                                            message_type { name: "M" })pb"}))),
      ElementsAre("FILE_PACKAGE_CHANGED", "MESSAGE_REMOVED"));
}

// ---- ReadTextDescriptorSet.

std::string WriteTempFile(absl::string_view name, absl::string_view contents) {
  const std::string path = absl::StrCat(::testing::TempDir(), "/", name);
  std::ofstream(path) << contents;
  return path;
}

TEST(ReadTextDescriptorSetTest, ReadsATextFormatSet) {
  const std::string path = WriteTempFile("good.textproto", R"pb(
    file {
      name: "berth/test/v1/test.proto"
      package: "berth.test.v1"
      message_type { name: "M" }
    }
  )pb");
  absl::StatusOr<FileDescriptorSet> set = ReadTextDescriptorSet(path);
  ASSERT_TRUE(set.ok()) << set.status();
  ASSERT_EQ(set->file_size(), 1);
  EXPECT_EQ(set->file(0).package(), "berth.test.v1");
  EXPECT_EQ(set->file(0).message_type(0).name(), "M");
}

TEST(ReadTextDescriptorSetTest, MissingFileIsNotFoundNamingThePath) {
  const std::string path = absl::StrCat(::testing::TempDir(), "/absent.txt");
  absl::StatusOr<FileDescriptorSet> set = ReadTextDescriptorSet(path);
  EXPECT_EQ(set.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(set.status().message(), HasSubstr(path));
}

TEST(ReadTextDescriptorSetTest, SyntaxErrorNamesThePathAndLine) {
  const std::string path = WriteTempFile(
      "bad.textproto", "file {\n  name: \"a.proto\"\n  bogus: 1\n}\n");
  absl::StatusOr<FileDescriptorSet> set = ReadTextDescriptorSet(path);
  EXPECT_EQ(set.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(set.status().message(), HasSubstr(absl::StrCat(path, ":3:")));
  EXPECT_THAT(set.status().message(), HasSubstr("bogus"));
}

}  // namespace
}  // namespace apicompat
}  // namespace berth
