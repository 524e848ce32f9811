#include "tools/apicompat/apicompat.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"
#include "glog/logging.h"
#include "google/protobuf/descriptor.pb.h"
#include "google/protobuf/io/tokenizer.h"
#include "google/protobuf/text_format.h"

namespace berth {
namespace apicompat {
namespace {

using ::google::protobuf::DescriptorProto;
using ::google::protobuf::EnumDescriptorProto;
using ::google::protobuf::EnumValueDescriptorProto;
using ::google::protobuf::FieldDescriptorProto;
using ::google::protobuf::FileDescriptorProto;
using ::google::protobuf::FileDescriptorSet;
using ::google::protobuf::MethodDescriptorProto;
using ::google::protobuf::ServiceDescriptorProto;

// A message or enum, with the full name of the message it is nested in
// (empty at file level).
template <typename Proto>
struct TypeEntry {
  const Proto* proto = nullptr;
  std::string parent;
};

// The named elements of one FileDescriptorSet, by fully qualified name. The
// maps are ordered, so walking them is deterministic.
struct Index {
  std::map<std::string, const FileDescriptorProto*> files;
  std::map<std::string, TypeEntry<DescriptorProto>> messages;
  std::map<std::string, TypeEntry<EnumDescriptorProto>> enums;
  std::map<std::string, const ServiceDescriptorProto*> services;
};

std::string Qualify(absl::string_view scope, absl::string_view name) {
  return scope.empty() ? std::string(name) : absl::StrCat(scope, ".", name);
}

// Keeps the first definition of a name; a valid set has only one.
template <typename Map, typename Value>
void AddUnique(Map& map, const std::string& full_name, Value value,
               absl::string_view kind, absl::string_view file) {
  if (!map.emplace(full_name, std::move(value)).second) {
    LOG(WARNING) << kind << " " << full_name << " is defined again in " << file
                 << "; comparing its first definition";
  }
}

void IndexEnum(const EnumDescriptorProto& enum_type, absl::string_view scope,
               absl::string_view parent, absl::string_view file, Index& index) {
  AddUnique(index.enums, Qualify(scope, enum_type.name()),
            TypeEntry<EnumDescriptorProto>{&enum_type, std::string(parent)},
            "enum", file);
}

void IndexMessage(const DescriptorProto& message, absl::string_view scope,
                  absl::string_view parent, absl::string_view file,
                  Index& index) {
  const std::string full_name = Qualify(scope, message.name());
  AddUnique(index.messages, full_name,
            TypeEntry<DescriptorProto>{&message, std::string(parent)},
            "message", file);
  for (const DescriptorProto& nested : message.nested_type()) {
    IndexMessage(nested, full_name, full_name, file, index);
  }
  for (const EnumDescriptorProto& nested : message.enum_type()) {
    IndexEnum(nested, full_name, full_name, file, index);
  }
}

Index BuildIndex(const FileDescriptorSet& set) {
  Index index;
  for (const FileDescriptorProto& file : set.file()) {
    AddUnique(index.files, file.name(), &file, "file", file.name());
    for (const DescriptorProto& message : file.message_type()) {
      IndexMessage(message, file.package(), "", file.name(), index);
    }
    for (const EnumDescriptorProto& enum_type : file.enum_type()) {
      IndexEnum(enum_type, file.package(), "", file.name(), index);
    }
    for (const ServiceDescriptorProto& service : file.service()) {
      AddUnique(index.services, Qualify(file.package(), service.name()),
                &service, "service", file.name());
    }
  }
  return index;
}

// Type names in linked descriptors are fully qualified with a leading dot
// (".berth.driver.v1.TaskConfig"); hand-written sets may omit it.
absl::string_view NormalizeTypeName(absl::string_view type_name) {
  absl::ConsumePrefix(&type_name, ".");
  return type_name;
}

const DescriptorProto* MapEntry(const FieldDescriptorProto& field,
                                const Index& index) {
  if (field.type() != FieldDescriptorProto::TYPE_MESSAGE ||
      field.label() != FieldDescriptorProto::LABEL_REPEATED) {
    return nullptr;
  }
  auto it =
      index.messages.find(std::string(NormalizeTypeName(field.type_name())));
  if (it == index.messages.end() || !it->second.proto->options().map_entry()) {
    return nullptr;
  }
  return it->second.proto;
}

const FieldDescriptorProto* FindFieldByNumber(const DescriptorProto& message,
                                              int number) {
  for (const FieldDescriptorProto& field : message.field()) {
    if (field.number() == number) return &field;
  }
  return nullptr;
}

// The type of a field as written in a .proto file: "string",
// "berth.driver.v1.TaskConfig", "map<string, int64>". Map fields are described
// by key and value, so a renamed map field (whose entry message is renamed
// with it) keeps its type.
std::string DescribeType(const FieldDescriptorProto& field,
                         const Index& index) {
  if (const DescriptorProto* entry = MapEntry(field, index)) {
    const FieldDescriptorProto* key = FindFieldByNumber(*entry, 1);
    const FieldDescriptorProto* value = FindFieldByNumber(*entry, 2);
    if (key != nullptr && value != nullptr) {
      return absl::StrCat("map<", DescribeType(*key, index), ", ",
                          DescribeType(*value, index), ">");
    }
  }
  if (field.has_type_name()) {
    absl::string_view name = NormalizeTypeName(field.type_name());
    return field.type() == FieldDescriptorProto::TYPE_GROUP
               ? absl::StrCat("group ", name)
               : std::string(name);
  }
  absl::string_view type = FieldDescriptorProto::Type_Name(field.type());
  absl::ConsumePrefix(&type, "TYPE_");
  return absl::AsciiStrToLower(type);
}

std::string DescribeLabel(FieldDescriptorProto::Label label) {
  absl::string_view name = FieldDescriptorProto::Label_Name(label);
  absl::ConsumePrefix(&name, "LABEL_");
  return absl::AsciiStrToLower(name);
}

// The oneof a field belongs to, by name; empty when none. The synthetic oneof
// of a proto3 `optional` field is not a oneof of the API: a presence change is
// reported as such.
std::string OneofName(const FieldDescriptorProto& field,
                      const DescriptorProto& message) {
  if (!field.has_oneof_index() || field.proto3_optional()) return "";
  const int index = field.oneof_index();
  if (index < 0 || index >= message.oneof_decl_size()) {
    return absl::StrCat("#", index);  // Malformed, but still comparable.
  }
  return message.oneof_decl(index).name();
}

bool IsReservedField(const DescriptorProto& message, int number) {
  for (const DescriptorProto::ReservedRange& range : message.reserved_range()) {
    // DescriptorProto's reserved ranges exclude their end.
    if (number >= range.start() && number < range.end()) return true;
  }
  return false;
}

bool IsReservedEnumValue(const EnumDescriptorProto& enum_type, int number) {
  for (const EnumDescriptorProto::EnumReservedRange& range :
       enum_type.reserved_range()) {
    // Unlike a message's, an enum's reserved ranges include their end.
    if (number >= range.start() && number <= range.end()) return true;
  }
  return false;
}

constexpr absl::string_view kDeprecateHint =
    "; within v1 deprecate it instead of removing it";

class Checker {
 public:
  Checker(const FileDescriptorSet& baseline, const FileDescriptorSet& current)
      : baseline_(BuildIndex(baseline)), current_(BuildIndex(current)) {}

  std::vector<Violation> Run() && {
    CheckFiles();
    CheckMessages();
    CheckEnums();
    CheckServices();
    return std::move(violations_);
  }

 private:
  void Report(absl::string_view rule, std::string message) {
    violations_.push_back(Violation{std::string(rule), std::move(message)});
  }

  void CheckFiles() {
    for (const auto& [name, base] : baseline_.files) {
      auto it = current_.files.find(name);
      if (it == current_.files.end()) continue;  // Its contents are checked.
      if (base->package() != it->second->package()) {
        Report(kFilePackageChanged,
               absl::StrCat("file ", name, " changed package from \"",
                            base->package(), "\" to \"", it->second->package(),
                            "\""));
      }
    }
  }

  // True if `parent` names a message of the baseline that is gone: the
  // elements nested in it are covered by its own removal.
  bool ParentRemoved(const std::string& parent) const {
    return !parent.empty() && current_.messages.count(parent) == 0;
  }

  void CheckMessages() {
    for (const auto& [name, base] : baseline_.messages) {
      auto it = current_.messages.find(name);
      if (it == current_.messages.end()) {
        // A map entry goes with its map field, which is checked by type.
        if (!base.proto->options().map_entry() && !ParentRemoved(base.parent)) {
          Report(kMessageRemoved,
                 absl::StrCat("message ", name, " was removed"));
        }
        continue;
      }
      if (base.proto->options().map_entry()) continue;
      CheckFields(name, *base.proto, *it->second.proto);
    }
  }

  void CheckFields(const std::string& message_name, const DescriptorProto& base,
                   const DescriptorProto& cur) {
    std::map<int, const FieldDescriptorProto*> base_by_number;
    for (const FieldDescriptorProto& field : base.field()) {
      base_by_number.emplace(field.number(), &field);
    }
    std::map<int, const FieldDescriptorProto*> cur_by_number;
    std::map<std::string, const FieldDescriptorProto*> cur_by_name;
    for (const FieldDescriptorProto& field : cur.field()) {
      cur_by_number.emplace(field.number(), &field);
      cur_by_name.emplace(field.name(), &field);
    }

    for (const auto& [number, field] : base_by_number) {
      const std::string full_name = Qualify(message_name, field->name());
      const std::string subject =
          absl::StrCat("field ", full_name, " (", number, ")");

      auto by_name = cur_by_name.find(field->name());
      if (by_name != cur_by_name.end() && by_name->second->number() != number) {
        Report(kFieldRenumbered,
               absl::StrCat("field ", full_name, " changed number from ",
                            number, " to ", by_name->second->number()));
        continue;
      }
      auto by_number = cur_by_number.find(number);
      if (by_number == cur_by_number.end()) {
        Report(kFieldRemoved, absl::StrCat(subject, " was removed",
                                           IsReservedField(cur, number)
                                               ? " (its number is now reserved)"
                                               : "",
                                           kDeprecateHint));
        continue;
      }
      const FieldDescriptorProto& now = *by_number->second;
      if (now.name() != field->name()) {
        Report(kFieldRenamed,
               absl::StrCat(subject, " was renamed to ", now.name()));
      }
      const std::string base_type = DescribeType(*field, baseline_);
      const std::string cur_type = DescribeType(now, current_);
      if (base_type != cur_type) {
        Report(kFieldTypeChanged, absl::StrCat(subject, " changed type from ",
                                               base_type, " to ", cur_type));
      }
      if (field->label() != now.label()) {
        Report(kFieldLabelChanged,
               absl::StrCat(subject, " changed label from ",
                            DescribeLabel(field->label()), " to ",
                            DescribeLabel(now.label())));
      }
      if (field->proto3_optional() != now.proto3_optional()) {
        Report(kFieldPresenceChanged,
               absl::StrCat(subject,
                            field->proto3_optional()
                                ? " is no longer proto3 optional (lost "
                                  "explicit presence)"
                                : " became proto3 optional (gained explicit "
                                  "presence)"));
      }
      const std::string base_oneof = OneofName(*field, base);
      const std::string cur_oneof = OneofName(now, cur);
      if (base_oneof != cur_oneof) {
        std::string change;
        if (base_oneof.empty()) {
          change = absl::StrCat(" moved into oneof ", cur_oneof);
        } else if (cur_oneof.empty()) {
          change = absl::StrCat(" moved out of oneof ", base_oneof);
        } else {
          change = absl::StrCat(" moved from oneof ", base_oneof, " to oneof ",
                                cur_oneof);
        }
        Report(kFieldOneofChanged, absl::StrCat(subject, change));
      }
    }
  }

  void CheckEnums() {
    for (const auto& [name, base] : baseline_.enums) {
      auto it = current_.enums.find(name);
      if (it == current_.enums.end()) {
        if (!ParentRemoved(base.parent)) {
          Report(kEnumRemoved, absl::StrCat("enum ", name, " was removed"));
        }
        continue;
      }
      CheckEnumValues(name, *base.proto, *it->second.proto);
    }
  }

  void CheckEnumValues(const std::string& enum_name,
                       const EnumDescriptorProto& base,
                       const EnumDescriptorProto& cur) {
    // With allow_alias a number may have several names.
    std::map<int, std::set<std::string>> base_names;
    for (const EnumValueDescriptorProto& value : base.value()) {
      base_names[value.number()].insert(value.name());
    }
    std::map<int, std::vector<std::string>> cur_names;
    for (const EnumValueDescriptorProto& value : cur.value()) {
      cur_names[value.number()].push_back(value.name());
    }
    for (const auto& [number, names] : base_names) {
      auto it = cur_names.find(number);
      for (const std::string& name : names) {
        const std::string subject = absl::StrCat(
            "enum value ", Qualify(enum_name, name), " (", number, ")");
        if (it == cur_names.end()) {
          Report(kEnumValueRemoved,
                 absl::StrCat(subject, " was removed",
                              IsReservedEnumValue(cur, number)
                                  ? " (its number is now reserved)"
                                  : "",
                              kDeprecateHint));
        } else if (std::find(it->second.begin(), it->second.end(), name) ==
                   it->second.end()) {
          Report(kEnumValueRenamed,
                 absl::StrCat(subject, " was renamed to ",
                              absl::StrJoin(it->second, " / ")));
        }
      }
    }
  }

  void CheckServices() {
    for (const auto& [name, base] : baseline_.services) {
      auto it = current_.services.find(name);
      if (it == current_.services.end()) {
        Report(kServiceRemoved, absl::StrCat("service ", name, " was removed"));
        continue;
      }
      CheckMethods(name, *base, *it->second);
    }
  }

  void CheckMethods(const std::string& service_name,
                    const ServiceDescriptorProto& base,
                    const ServiceDescriptorProto& cur) {
    std::map<std::string, const MethodDescriptorProto*> base_by_name;
    for (const MethodDescriptorProto& method : base.method()) {
      base_by_name.emplace(method.name(), &method);
    }
    std::map<std::string, const MethodDescriptorProto*> cur_by_name;
    for (const MethodDescriptorProto& method : cur.method()) {
      cur_by_name.emplace(method.name(), &method);
    }
    for (const auto& [name, method] : base_by_name) {
      const std::string subject =
          absl::StrCat("rpc ", Qualify(service_name, name));
      auto it = cur_by_name.find(name);
      if (it == cur_by_name.end()) {
        Report(kRpcRemoved, absl::StrCat(subject, " was removed or renamed"));
        continue;
      }
      const MethodDescriptorProto& now = *it->second;
      const absl::string_view base_input =
          NormalizeTypeName(method->input_type());
      const absl::string_view cur_input = NormalizeTypeName(now.input_type());
      if (base_input != cur_input) {
        Report(kRpcInputTypeChanged,
               absl::StrCat(subject, " changed input type from ", base_input,
                            " to ", cur_input));
      }
      const absl::string_view base_output =
          NormalizeTypeName(method->output_type());
      const absl::string_view cur_output = NormalizeTypeName(now.output_type());
      if (base_output != cur_output) {
        Report(kRpcOutputTypeChanged,
               absl::StrCat(subject, " changed output type from ", base_output,
                            " to ", cur_output));
      }
      if (method->client_streaming() != now.client_streaming()) {
        Report(kRpcClientStreamingChanged,
               absl::StrCat(subject, method->client_streaming()
                                         ? " is no longer client-streaming"
                                         : " became client-streaming"));
      }
      if (method->server_streaming() != now.server_streaming()) {
        Report(kRpcServerStreamingChanged,
               absl::StrCat(subject, method->server_streaming()
                                         ? " is no longer server-streaming"
                                         : " became server-streaming"));
      }
    }
  }

  const Index baseline_;
  const Index current_;
  std::vector<Violation> violations_;
};

// Records the first syntax error of a text-format parse.
class FirstErrorCollector : public google::protobuf::io::ErrorCollector {
 public:
  void AddError(int line, google::protobuf::io::ColumnNumber column,
                const std::string& message) override {
    if (error_.empty()) {
      // TextFormat reports zero-based positions; editors count from one.
      error_ = absl::StrCat(line + 1, ":", column + 1, ": ", message);
    }
  }

  const std::string& error() const { return error_; }

 private:
  std::string error_;
};

}  // namespace

std::vector<Violation> FindBreakingChanges(const FileDescriptorSet& baseline,
                                           const FileDescriptorSet& current) {
  return Checker(baseline, current).Run();
}

absl::StatusOr<FileDescriptorSet> ReadTextDescriptorSet(
    const std::string& path) {
  std::FILE* file = std::fopen(path.c_str(), "rb");
  if (file == nullptr) {
    return absl::ErrnoToStatus(errno, absl::StrCat("cannot open ", path));
  }
  std::string text;
  char buffer[1 << 16];
  size_t read;
  while ((read = std::fread(buffer, 1, sizeof(buffer), file)) > 0) {
    text.append(buffer, read);
  }
  const int read_errno = std::ferror(file) ? errno : 0;
  std::fclose(file);
  if (read_errno != 0) {
    return absl::ErrnoToStatus(read_errno, absl::StrCat("cannot read ", path));
  }

  FileDescriptorSet set;
  google::protobuf::TextFormat::Parser parser;
  FirstErrorCollector errors;
  parser.RecordErrorsTo(&errors);
  if (!parser.ParseFromString(text, &set)) {
    if (errors.error().empty()) {
      return absl::InvalidArgumentError(absl::StrCat(
          path, ": not a text-format google.protobuf.FileDescriptorSet"));
    }
    return absl::InvalidArgumentError(
        absl::StrCat(path, ":", errors.error(),
                     " (expected a text-format "
                     "google.protobuf.FileDescriptorSet)"));
  }
  return set;
}

}  // namespace apicompat
}  // namespace berth
