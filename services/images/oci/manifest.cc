#include "services/images/oci/manifest.h"

#include <sys/utsname.h>

#include <cstdint>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "berth/image/v1/image.pb.h"
#include "nlohmann/json.hpp"
#include "services/images/oci/digest.h"

namespace berth::images {
namespace {

using Json = nlohmann::json;

// JSON nested deeper than this is refused before it is parsed: none of
// these documents nests more than four levels.
constexpr int kMaxJsonDepth = 64;
// Strings quoted in errors are cut at this length.
constexpr size_t kQuoteLimit = 100;

std::string Quote(absl::string_view text) {
  if (text.size() > kQuoteLimit) {
    return absl::StrCat("\"", absl::CHexEscape(text.substr(0, kQuoteLimit)),
                        "...\"");
  }
  return absl::StrCat("\"", absl::CHexEscape(text), "\"");
}

// "config.Env[2]": how errors name a field.
std::string FieldPath(absl::string_view parent, absl::string_view key) {
  if (parent.empty()) return std::string(key);
  return absl::StrCat(parent, ".", key);
}
std::string ElementPath(absl::string_view parent, size_t index) {
  return absl::StrCat(parent, "[", index, "]");
}

const char* TypeName(const Json& value) {
  switch (value.type()) {
    case Json::value_t::null:
      return "null";
    case Json::value_t::object:
      return "an object";
    case Json::value_t::array:
      return "an array";
    case Json::value_t::string:
      return "a string";
    case Json::value_t::boolean:
      return "a boolean";
    case Json::value_t::number_integer:
    case Json::value_t::number_unsigned:
      return "an integer";
    case Json::value_t::number_float:
      return "a fractional number";
    default:
      return "not a JSON value";
  }
}

// The error of one document: "image manifest: field "layers[1].size" must
// be an integer, got a string".
class Document {
 public:
  explicit Document(absl::string_view kind) : kind_(kind) {}

  absl::Status Error(absl::string_view message) const {
    return absl::InvalidArgumentError(absl::StrCat(kind_, ": ", message));
  }
  absl::Status WrongType(absl::string_view field, absl::string_view want,
                         const Json& got) const {
    return Error(absl::StrCat("field \"", field, "\" must be ", want, ", got ",
                              TypeName(got)));
  }
  absl::Status Missing(absl::string_view field) const {
    return Error(absl::StrCat("field \"", field, "\" is missing"));
  }

  // Parses `text` into an object. Never throws.
  absl::StatusOr<Json> Parse(absl::string_view text, int64_t max_size) const {
    if (static_cast<int64_t>(text.size()) > max_size) {
      return Error(absl::StrCat(text.size(), " bytes, more than the limit of ",
                                max_size));
    }
    // Depth, counted outside strings, before nlohmann builds anything.
    int depth = 0;
    bool in_string = false;
    bool escaped = false;
    for (char c : text) {
      if (in_string) {
        if (escaped) {
          escaped = false;
        } else if (c == '\\') {
          escaped = true;
        } else if (c == '"') {
          in_string = false;
        }
        continue;
      }
      if (c == '"') {
        in_string = true;
      } else if (c == '[' || c == '{') {
        if (++depth > kMaxJsonDepth) {
          return Error(absl::StrCat("JSON nested deeper than ", kMaxJsonDepth,
                                    " levels"));
        }
      } else if (c == ']' || c == '}') {
        --depth;
      }
    }
    Json document;
    try {
      document = Json::parse(text.begin(), text.end());
    } catch (const Json::exception& e) {
      return Error(absl::StrCat("not valid JSON: ", e.what()));
    } catch (const std::exception& e) {
      return Error(absl::StrCat("cannot parse: ", e.what()));
    }
    if (!document.is_object()) {
      return Error(absl::StrCat("the document must be a JSON object, got ",
                                TypeName(document)));
    }
    return document;
  }

  // The member `key` of `object`, or nullptr when absent or null.
  static const Json* Member(const Json& object, absl::string_view key) {
    auto it = object.find(std::string(key));
    if (it == object.end() || it->is_null()) return nullptr;
    return &*it;
  }

  // A string field: absent or null leaves `out` as it is, unless required.
  absl::Status String(const Json& object, absl::string_view parent,
                      absl::string_view key, bool required,
                      std::string* out) const {
    const std::string field = FieldPath(parent, key);
    const Json* value = Member(object, key);
    if (value == nullptr) return required ? Missing(field) : absl::OkStatus();
    return StringValue(*value, field, out);
  }

  absl::Status StringValue(const Json& value, absl::string_view field,
                           std::string* out) const {
    if (!value.is_string()) return WrongType(field, "a string", value);
    const std::string& text = value.get_ref<const std::string&>();
    if (text.find('\0') != std::string::npos) {
      return Error(absl::StrCat("field \"", field, "\" has a NUL character"));
    }
    *out = text;
    return absl::OkStatus();
  }

  // An integer in [min, max].
  absl::Status Integer(const Json& object, absl::string_view parent,
                       absl::string_view key, bool required, int64_t min,
                       int64_t max, int64_t* out) const {
    const std::string field = FieldPath(parent, key);
    const Json* value = Member(object, key);
    if (value == nullptr) return required ? Missing(field) : absl::OkStatus();
    int64_t number = 0;
    if (value->is_number_unsigned()) {
      const uint64_t unsigned_number = value->get<uint64_t>();
      if (unsigned_number >
          static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
        return OutOfRange(field, absl::StrCat(unsigned_number), min, max);
      }
      number = static_cast<int64_t>(unsigned_number);
    } else if (value->is_number_integer()) {
      number = value->get<int64_t>();
    } else {
      return WrongType(field, "an integer", *value);
    }
    if (number < min || number > max) {
      return OutOfRange(field, absl::StrCat(number), min, max);
    }
    *out = number;
    return absl::OkStatus();
  }

  absl::Status OutOfRange(absl::string_view field, absl::string_view value,
                          int64_t min, int64_t max) const {
    return Error(absl::StrCat("field \"", field, "\" is ", value, ", outside [",
                              min, ", ", max, "]"));
  }

  // An array of strings; a lone string is taken as one element when
  // `string_ok` (Docker's Entrypoint and Cmd may be either).
  absl::Status Strings(const Json& object, absl::string_view parent,
                       absl::string_view key, bool string_ok,
                       std::vector<std::string>* out) const {
    const std::string field = FieldPath(parent, key);
    const Json* value = Member(object, key);
    if (value == nullptr) return absl::OkStatus();
    out->clear();
    if (string_ok && value->is_string()) {
      std::string one;
      if (absl::Status s = StringValue(*value, field, &one); !s.ok()) return s;
      out->push_back(std::move(one));
      return absl::OkStatus();
    }
    if (!value->is_array()) {
      return WrongType(field, "an array of strings", *value);
    }
    for (size_t i = 0; i < value->size(); ++i) {
      std::string element;
      absl::Status s =
          StringValue((*value)[i], ElementPath(field, i), &element);
      if (!s.ok()) return s;
      out->push_back(std::move(element));
    }
    return absl::OkStatus();
  }

  // An object of strings (annotations, labels).
  absl::Status StringMap(const Json& object, absl::string_view parent,
                         absl::string_view key,
                         std::map<std::string, std::string>* out) const {
    const std::string field = FieldPath(parent, key);
    const Json* value = Member(object, key);
    if (value == nullptr) return absl::OkStatus();
    if (!value->is_object()) {
      return WrongType(field, "an object of strings", *value);
    }
    for (const auto& [name, element] : value->items()) {
      std::string text;
      absl::Status s = StringValue(
          element, absl::StrCat(field, "[", Quote(name), "]"), &text);
      if (!s.ok()) return s;
      (*out)[name] = std::move(text);
    }
    return absl::OkStatus();
  }

  // The keys of an object whose values are ignored (ExposedPorts, Volumes).
  absl::Status Keys(const Json& object, absl::string_view parent,
                    absl::string_view key,
                    std::vector<std::string>* out) const {
    const std::string field = FieldPath(parent, key);
    const Json* value = Member(object, key);
    if (value == nullptr) return absl::OkStatus();
    if (!value->is_object()) return WrongType(field, "an object", *value);
    for (const auto& item : value->items()) {
      if (item.key().find('\0') != std::string::npos) {
        return Error(
            absl::StrCat("field \"", field, "\" has a NUL character in a key"));
      }
      out->push_back(item.key());
    }
    return absl::OkStatus();
  }

  // A member of the JSON type `is` checks (`want` names it); nullptr when
  // absent or null (an error if required).
  absl::StatusOr<const Json*> TypedMember(const Json& object,
                                          absl::string_view parent,
                                          absl::string_view key, bool required,
                                          bool (Json::*is)() const noexcept,
                                          absl::string_view want) const {
    const std::string field = FieldPath(parent, key);
    const Json* value = Member(object, key);
    if (value == nullptr) {
      if (required) return Missing(field);
      return nullptr;
    }
    if (!(value->*is)()) return WrongType(field, want, *value);
    return value;
  }

  absl::StatusOr<const Json*> Object(const Json& object,
                                     absl::string_view parent,
                                     absl::string_view key,
                                     bool required) const {
    return TypedMember(object, parent, key, required, &Json::is_object,
                       "an object");
  }

  absl::StatusOr<const Json*> Array(const Json& object,
                                    absl::string_view parent,
                                    absl::string_view key, size_t max_size,
                                    bool required) const {
    absl::StatusOr<const Json*> value =
        TypedMember(object, parent, key, required, &Json::is_array, "an array");
    if (!value.ok() || *value == nullptr) return value;
    const std::string field = FieldPath(parent, key);
    if ((*value)->size() > max_size) {
      return Error(absl::StrCat("field \"", field, "\" has ", (*value)->size(),
                                " entries, more than the limit of ", max_size));
    }
    return value;
  }

  absl::Status Digest(const Json& object, absl::string_view parent,
                      absl::string_view key, std::string* out) const {
    const std::string field = FieldPath(parent, key);
    std::string digest;
    if (absl::Status s = String(object, parent, key, true, &digest); !s.ok()) {
      return s;
    }
    return DigestValue(digest, field, out);
  }

  absl::Status DigestValue(std::string digest, absl::string_view field,
                           std::string* out) const {
    absl::Status valid =
        ValidateDigest(digest, absl::StrCat("digest in field \"", field, "\""));
    if (!valid.ok()) return Error(valid.message());
    *out = std::move(digest);
    return absl::OkStatus();
  }

  // A schemaVersion of 2.
  absl::Status SchemaVersion2(const Json& object) const {
    int64_t version = 0;
    absl::Status s = Integer(object, "", "schemaVersion", true,
                             std::numeric_limits<int64_t>::min(),
                             std::numeric_limits<int64_t>::max(), &version);
    if (!s.ok()) return s;
    if (version == 1) {
      return Error(
          "Docker schema 1 manifests (schemaVersion 1) are not "
          "supported");
    }
    if (version != 2) {
      return Error(absl::StrCat("schemaVersion is ", version, ", want 2"));
    }
    return absl::OkStatus();
  }

  absl::StatusOr<image::v1::Platform> Platform(const Json& object,
                                               absl::string_view field) const {
    image::v1::Platform platform;
    std::string value;
    if (absl::Status s = String(object, field, "os", false, &value); !s.ok()) {
      return s;
    }
    platform.set_os(value);
    value.clear();
    if (absl::Status s = String(object, field, "architecture", false, &value);
        !s.ok()) {
      return s;
    }
    platform.set_architecture(value);
    value.clear();
    if (absl::Status s = String(object, field, "variant", false, &value);
        !s.ok()) {
      return s;
    }
    platform.set_variant(value);
    return platform;
  }

  absl::StatusOr<Descriptor> ParseDescriptor(const Json& value,
                                             absl::string_view field,
                                             bool with_platform) const {
    if (!value.is_object()) return WrongType(field, "an object", value);
    Descriptor descriptor;
    absl::Status s =
        String(value, field, "mediaType", true, &descriptor.media_type);
    if (s.ok()) s = Digest(value, field, "digest", &descriptor.digest);
    if (s.ok()) {
      s = Integer(value, field, "size", true, 0, kMaxBlobSize,
                  &descriptor.size);
    }
    if (s.ok()) s = Strings(value, field, "urls", false, &descriptor.urls);
    if (s.ok()) {
      s = StringMap(value, field, "annotations", &descriptor.annotations);
    }
    if (!s.ok()) return s;
    if (with_platform) {
      absl::StatusOr<const Json*> platform =
          Object(value, field, "platform", false);
      if (!platform.ok()) return platform.status();
      if (*platform != nullptr) {
        absl::StatusOr<image::v1::Platform> parsed =
            Platform(**platform, FieldPath(field, "platform"));
        if (!parsed.ok()) return parsed.status();
        descriptor.platform = *std::move(parsed);
      }
    }
    return descriptor;
  }

  // Parses `json`, checks its schemaVersion is 2 and sets `media_type` from
  // the one given and its own (`fallback` when neither says), refused
  // unless `accepted`, which `kind` describes.
  absl::StatusOr<Json> ParseVersioned(absl::string_view json,
                                      absl::string_view given,
                                      absl::string_view fallback,
                                      bool (*accepted)(absl::string_view),
                                      absl::string_view kind,
                                      std::string* media_type) const {
    absl::StatusOr<Json> root = Parse(json, kMaxManifestSize);
    if (!root.ok()) return root.status();
    if (absl::Status s = SchemaVersion2(*root); !s.ok()) return s;
    absl::StatusOr<std::string> type = MediaType(*root, given, fallback);
    if (!type.ok()) return type.status();
    if (!accepted(*type)) {
      return Error(absl::StrCat("media type ", Quote(*type), " is not ", kind));
    }
    *media_type = *std::move(type);
    return root;
  }

  // The array of descriptors `key` (required), at most `max_size` of them.
  absl::Status Descriptors(const Json& root, absl::string_view key,
                           size_t max_size, bool with_platform,
                           std::vector<Descriptor>* out) const {
    absl::StatusOr<const Json*> array = Array(root, "", key, max_size, true);
    if (!array.ok()) return array.status();
    for (size_t i = 0; i < (*array)->size(); ++i) {
      absl::StatusOr<Descriptor> descriptor =
          ParseDescriptor((**array)[i], ElementPath(key, i), with_platform);
      if (!descriptor.ok()) return descriptor.status();
      out->push_back(*std::move(descriptor));
    }
    return absl::OkStatus();
  }

  // The document's media type from the one given (a Content-Type, maybe
  // with parameters) and its own mediaType field.
  absl::StatusOr<std::string> MediaType(const Json& object,
                                        absl::string_view given,
                                        absl::string_view fallback) const {
    std::string own;
    if (absl::Status s = String(object, "", "mediaType", false, &own);
        !s.ok()) {
      return s;
    }
    const size_t semicolon = given.find(';');
    if (semicolon != absl::string_view::npos)
      given = given.substr(0, semicolon);
    given = absl::StripAsciiWhitespace(given);
    if (!given.empty() && !own.empty() && given != own) {
      return Error(absl::StrCat("its mediaType ", Quote(own),
                                " contradicts the media type ", Quote(given),
                                " it was given as"));
    }
    if (!given.empty()) return std::string(given);
    if (!own.empty()) return own;
    return std::string(fallback);
  }

 private:
  std::string kind_;
};

// GOARCH spelling of architectures, and the variant implied.
void NormalizePlatform(image::v1::Platform* platform) {
  std::string arch = absl::AsciiStrToLower(platform->architecture());
  std::string variant = absl::AsciiStrToLower(platform->variant());
  if (arch == "x86_64" || arch == "x86-64") {
    arch = "amd64";
  } else if (arch == "aarch64") {
    arch = "arm64";
  } else if (arch == "armhf") {
    arch = "arm";
    if (variant.empty()) variant = "v7";
  } else if (arch == "armel") {
    arch = "arm";
    if (variant.empty()) variant = "v6";
  } else if (arch == "i386" || arch == "i486" || arch == "i586" ||
             arch == "i686") {
    arch = "386";
  }
  if (arch == "arm64" && (variant == "8" || variant == "v8")) variant = "";
  if (arch == "amd64" && variant == "v1") variant = "";
  if (arch == "arm" && (variant == "7" || variant == "6" || variant == "5")) {
    variant = absl::StrCat("v", variant);
  }
  platform->set_architecture(arch);
  platform->set_variant(variant);
  platform->set_os(absl::AsciiStrToLower(platform->os()));
}

void SetDuration(int64_t nanos, google::protobuf::Duration* duration) {
  duration->set_seconds(nanos / 1000000000);
  duration->set_nanos(static_cast<int32_t>(nanos % 1000000000));
}

}  // namespace

std::string ManifestAcceptHeader() {
  return absl::StrJoin(
      {kOciIndex, kOciManifest, kDockerManifestList, kDockerManifest}, ", ");
}

bool IsIndexMediaType(absl::string_view media_type) {
  return media_type == kOciIndex || media_type == kDockerManifestList;
}

bool IsManifestMediaType(absl::string_view media_type) {
  return media_type == kOciManifest || media_type == kDockerManifest;
}

bool IsLayerMediaType(absl::string_view media_type) {
  return media_type == kOciLayerTar || media_type == kOciLayerGzip ||
         media_type == kOciLayerZstd || media_type == kDockerLayerGzip ||
         media_type == kDockerLayerTar || media_type == kDockerForeignLayer ||
         media_type == kOciNondistributableLayerTar ||
         media_type == kOciNondistributableLayerGzip ||
         media_type == kOciNondistributableLayerZstd;
}

absl::StatusOr<Index> ParseIndex(absl::string_view json,
                                 absl::string_view media_type) {
  const Document document("image index");
  Index index;
  absl::StatusOr<Json> root =
      document.ParseVersioned(json, media_type, kOciIndex, &IsIndexMediaType,
                              "an index or manifest list", &index.media_type);
  if (!root.ok()) return root.status();
  absl::Status s =
      document.Descriptors(*root, "manifests", kMaxIndexEntries,
                           /*with_platform=*/true, &index.manifests);
  if (s.ok())
    s = document.StringMap(*root, "", "annotations", &index.annotations);
  if (!s.ok()) return s;
  return index;
}

absl::StatusOr<Manifest> ParseManifest(absl::string_view json,
                                       absl::string_view media_type) {
  const Document document("image manifest");
  Manifest manifest;
  absl::StatusOr<Json> root = document.ParseVersioned(
      json, media_type, kOciManifest, &IsManifestMediaType, "an image manifest",
      &manifest.media_type);
  if (!root.ok()) return root.status();
  absl::StatusOr<const Json*> config =
      document.Object(*root, "", "config", true);
  if (!config.ok()) return config.status();
  absl::StatusOr<Descriptor> config_descriptor =
      document.ParseDescriptor(**config, "config", /*with_platform=*/false);
  if (!config_descriptor.ok()) return config_descriptor.status();
  if (config_descriptor->size > kMaxConfigSize) {
    return document.Error(
        absl::StrCat("the config is ", config_descriptor->size,
                     " bytes, more than the limit of ", kMaxConfigSize));
  }
  manifest.config = *std::move(config_descriptor);
  absl::Status s =
      document.Descriptors(*root, "layers", kMaxLayers,
                           /*with_platform=*/false, &manifest.layers);
  if (s.ok()) {
    s = document.StringMap(*root, "", "annotations", &manifest.annotations);
  }
  if (!s.ok()) return s;
  return manifest;
}

absl::StatusOr<ImageConfigFile> ParseImageConfig(absl::string_view json) {
  const Document document("image config");
  absl::StatusOr<Json> parsed = document.Parse(json, kMaxConfigSize);
  if (!parsed.ok()) return parsed.status();
  const Json& root = *parsed;
  ImageConfigFile file;

  absl::StatusOr<image::v1::Platform> platform = document.Platform(root, "");
  if (!platform.ok()) return platform.status();
  file.platform = *std::move(platform);

  std::string created;
  if (absl::Status s = document.String(root, "", "created", false, &created);
      !s.ok()) {
    return s;
  }
  if (!created.empty()) {
    absl::Time time;
    std::string error;
    if (!absl::ParseTime(absl::RFC3339_full, created, &time, &error)) {
      return document.Error(absl::StrCat("field \"created\" (", Quote(created),
                                         ") is not an RFC 3339 time: ", error));
    }
    // Go's zero time (year 1) and other times int64 nanoseconds cannot
    // hold mean "not known".
    static const absl::Time kEarliest =
        absl::FromUnixNanos(std::numeric_limits<int64_t>::min());
    static const absl::Time kLatest =
        absl::FromUnixNanos(std::numeric_limits<int64_t>::max());
    if (time > kEarliest && time < kLatest) {
      file.created_unix_nanos = absl::ToUnixNanos(time);
    }
  }

  absl::StatusOr<const Json*> config_object =
      document.Object(root, "", "config", false);
  if (!config_object.ok()) return config_object.status();
  if (*config_object != nullptr) {
    const Json& object = **config_object;
    image::v1::ImageConfig& config = file.config;
    std::vector<std::string> strings;
    std::string text;
    absl::Status s;
    auto repeated = [&](absl::string_view key, bool string_ok,
                        google::protobuf::RepeatedPtrField<std::string>* out) {
      strings.clear();
      absl::Status status =
          document.Strings(object, "config", key, string_ok, &strings);
      for (std::string& value : strings) out->Add(std::move(value));
      return status;
    };
    auto single = [&](absl::string_view key, std::string* out) {
      return document.String(object, "config", key, false, out);
    };
    s = repeated("Entrypoint", true, config.mutable_entrypoint());
    if (s.ok()) s = repeated("Cmd", true, config.mutable_cmd());
    if (s.ok()) s = repeated("Env", false, config.mutable_env());
    if (s.ok()) s = single("WorkingDir", config.mutable_working_dir());
    if (s.ok()) s = single("User", config.mutable_user());
    if (s.ok()) s = single("StopSignal", config.mutable_stop_signal());
    if (s.ok()) {
      std::map<std::string, std::string> labels;
      s = document.StringMap(object, "config", "Labels", &labels);
      config.mutable_labels()->insert(labels.begin(), labels.end());
    }
    if (s.ok()) {
      strings.clear();
      s = document.Keys(object, "config", "ExposedPorts", &strings);
      for (std::string& port : strings)
        config.add_exposed_ports(std::move(port));
    }
    if (s.ok()) {
      strings.clear();
      s = document.Keys(object, "config", "Volumes", &strings);
      for (std::string& volume : strings) config.add_volumes(std::move(volume));
    }
    if (!s.ok()) return s;

    absl::StatusOr<const Json*> healthcheck =
        document.Object(object, "config", "Healthcheck", false);
    if (!healthcheck.ok()) return healthcheck.status();
    if (*healthcheck != nullptr) {
      const Json& check = **healthcheck;
      constexpr absl::string_view kField = "config.Healthcheck";
      image::v1::HealthCheck* out = config.mutable_healthcheck();
      strings.clear();
      s = document.Strings(check, kField, "Test", false, &strings);
      for (std::string& word : strings) out->add_test(std::move(word));
      struct DurationField {
        absl::string_view key;
        google::protobuf::Duration* (image::v1::HealthCheck::*mutable_field)();
      };
      const DurationField durations[] = {
          {"Interval", &image::v1::HealthCheck::mutable_interval},
          {"Timeout", &image::v1::HealthCheck::mutable_timeout},
          {"StartPeriod", &image::v1::HealthCheck::mutable_start_period},
      };
      for (const DurationField& field : durations) {
        if (!s.ok()) break;
        int64_t nanos = 0;
        s = document.Integer(check, kField, field.key, false, 0,
                             std::numeric_limits<int64_t>::max(), &nanos);
        if (s.ok() && nanos > 0)
          SetDuration(nanos, (out->*field.mutable_field)());
      }
      if (s.ok()) {
        int64_t retries = 0;
        s = document.Integer(check, kField, "Retries", false, 0,
                             std::numeric_limits<int32_t>::max(), &retries);
        out->set_retries(static_cast<int32_t>(retries));
      }
      if (!s.ok()) return s;
    }
  }

  absl::StatusOr<const Json*> rootfs =
      document.Object(root, "", "rootfs", true);
  if (!rootfs.ok()) return rootfs.status();
  std::string rootfs_type;
  if (absl::Status s =
          document.String(**rootfs, "rootfs", "type", true, &rootfs_type);
      !s.ok()) {
    return s;
  }
  if (rootfs_type != "layers") {
    return document.Error(absl::StrCat(
        "field \"rootfs.type\" is ", Quote(rootfs_type), ", want \"layers\""));
  }
  absl::StatusOr<const Json*> diff_ids =
      document.Array(**rootfs, "rootfs", "diff_ids", kMaxLayers, true);
  if (!diff_ids.ok()) return diff_ids.status();
  for (size_t i = 0; i < (*diff_ids)->size(); ++i) {
    const std::string field = ElementPath("rootfs.diff_ids", i);
    std::string digest;
    absl::Status s = document.StringValue((**diff_ids)[i], field, &digest);
    if (s.ok()) s = document.DigestValue(std::move(digest), field, &digest);
    if (!s.ok()) return s;
    file.diff_ids.push_back(std::move(digest));
  }
  return file;
}

absl::StatusOr<std::string> DetectMediaType(absl::string_view json) {
  const Document document("image document");
  absl::StatusOr<Json> parsed = document.Parse(json, kMaxManifestSize);
  if (!parsed.ok()) return parsed.status();
  const Json& root = *parsed;
  std::string own;
  if (absl::Status s = document.String(root, "", "mediaType", false, &own);
      !s.ok()) {
    return s;
  }
  if (!own.empty()) return own;
  if (const Json* version = Document::Member(root, "schemaVersion");
      version != nullptr && version->is_number_integer() &&
      version->get<int64_t>() == 1) {
    return document.Error(
        "Docker schema 1 manifests (schemaVersion 1) are not supported");
  }
  const bool has_manifests = root.contains("manifests");
  const bool has_layers = root.contains("layers") || root.contains("config");
  if (has_manifests && !has_layers) return std::string(kOciIndex);
  if (has_layers && !has_manifests) return std::string(kOciManifest);
  return document.Error(
      "no mediaType, and neither an index (\"manifests\") nor a manifest "
      "(\"config\" and \"layers\")");
}

image::v1::Platform HostPlatform() {
  image::v1::Platform platform;
  platform.set_os("linux");
  struct utsname name;
  if (uname(&name) == 0) {
    platform.set_architecture(name.machine);
    const absl::string_view machine = name.machine;
    if (machine == "armv7l" || machine == "armv7") {
      platform.set_architecture("arm");
      platform.set_variant("v7");
    } else if (machine == "armv6l") {
      platform.set_architecture("arm");
      platform.set_variant("v6");
    }
  } else {
    platform.set_architecture("amd64");
  }
  NormalizePlatform(&platform);
  return platform;
}

absl::StatusOr<Descriptor> ChoosePlatform(const Index& index,
                                          const image::v1::Platform& platform) {
  image::v1::Platform want = platform;
  NormalizePlatform(&want);
  const Descriptor* compatible = nullptr;
  std::vector<std::string> available;
  for (const Descriptor& descriptor : index.manifests) {
    if (!descriptor.platform.has_value()) continue;
    image::v1::Platform have = *descriptor.platform;
    NormalizePlatform(&have);
    available.push_back(PlatformString(*descriptor.platform));
    if (have.os() != want.os() || have.architecture() != want.architecture()) {
      continue;
    }
    if (have.variant() == want.variant()) return descriptor;
    if (compatible == nullptr &&
        (have.variant().empty() || want.variant().empty())) {
      compatible = &descriptor;
    }
  }
  if (compatible != nullptr) return *compatible;
  return absl::NotFoundError(absl::StrCat(
      "no manifest for platform ", PlatformString(platform), " in the ",
      index.media_type == kDockerManifestList ? "manifest list" : "index",
      "; it has ",
      available.empty() ? std::string("no platforms")
                        : absl::StrJoin(available, ", ")));
}

std::string PlatformString(const image::v1::Platform& platform) {
  std::string out = absl::StrCat(platform.os(), "/", platform.architecture());
  if (!platform.variant().empty())
    absl::StrAppend(&out, "/", platform.variant());
  return out;
}

}  // namespace berth::images
