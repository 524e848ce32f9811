#include "plugins/host/reattach_config.h"

#include <cstdint>
#include <string>
#include <variant>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/string_view.h"

// The format is a flat JSON object of strings and integers, written and read
// here rather than through google.protobuf.Struct: the few lines it takes
// are cheaper than a map type whose inline code misbehaves when this file
// is built with -fsanitize=thread against Debian's uninstrumented protobuf.

namespace berth::plugin::host {
namespace {

constexpr int kVersion = 1;

using JsonValue = std::variant<std::string, int64_t>;
using JsonObject = absl::flat_hash_map<std::string, JsonValue>;

std::string Quote(absl::string_view s) {
  std::string out = "\"";
  for (const char c : s) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          absl::StrAppendFormat(&out, "\\u%04x", c);
        } else {
          out += c;
        }
    }
  }
  out += '"';
  return out;
}

void AppendUtf8(uint32_t code_point, std::string* out) {
  if (code_point < 0x80) {
    *out += static_cast<char>(code_point);
  } else if (code_point < 0x800) {
    *out += static_cast<char>(0xC0 | (code_point >> 6));
    *out += static_cast<char>(0x80 | (code_point & 0x3F));
  } else if (code_point < 0x10000) {
    *out += static_cast<char>(0xE0 | (code_point >> 12));
    *out += static_cast<char>(0x80 | ((code_point >> 6) & 0x3F));
    *out += static_cast<char>(0x80 | (code_point & 0x3F));
  } else {
    *out += static_cast<char>(0xF0 | (code_point >> 18));
    *out += static_cast<char>(0x80 | ((code_point >> 12) & 0x3F));
    *out += static_cast<char>(0x80 | ((code_point >> 6) & 0x3F));
    *out += static_cast<char>(0x80 | (code_point & 0x3F));
  }
}

// A reader of one flat JSON object; every method returns false on a syntax
// error.
class FlatJsonReader {
 public:
  explicit FlatJsonReader(absl::string_view text) : rest_(text) {}

  bool ReadObject(JsonObject* object) {
    SkipSpace();
    if (!Consume('{')) return false;
    SkipSpace();
    if (Consume('}')) return AtEnd();
    while (true) {
      std::string key;
      SkipSpace();
      if (!ReadString(&key)) return false;
      SkipSpace();
      if (!Consume(':')) return false;
      SkipSpace();
      JsonValue value;
      if (!rest_.empty() && rest_[0] == '"') {
        std::string s;
        if (!ReadString(&s)) return false;
        value = std::move(s);
      } else {
        int64_t n;
        if (!ReadInteger(&n)) return false;
        value = n;
      }
      if (!object->emplace(std::move(key), std::move(value)).second) {
        return false;  // a key twice
      }
      SkipSpace();
      if (Consume('}')) return AtEnd();
      if (!Consume(',')) return false;
    }
  }

 private:
  void SkipSpace() {
    while (!rest_.empty() && absl::ascii_isspace(rest_[0])) {
      rest_.remove_prefix(1);
    }
  }

  bool Consume(char c) {
    if (rest_.empty() || rest_[0] != c) return false;
    rest_.remove_prefix(1);
    return true;
  }

  bool AtEnd() {
    SkipSpace();
    return rest_.empty();
  }

  bool ReadHex4(uint32_t* value) {
    if (rest_.size() < 4) return false;
    *value = 0;
    for (int i = 0; i < 4; ++i) {
      const char c = rest_[i];
      if (!absl::ascii_isxdigit(c)) return false;
      *value = *value * 16 + (absl::ascii_isdigit(c)
                                  ? c - '0'
                                  : absl::ascii_tolower(c) - 'a' + 10);
    }
    rest_.remove_prefix(4);
    return true;
  }

  bool ReadString(std::string* out) {
    if (!Consume('"')) return false;
    while (!rest_.empty()) {
      const char c = rest_[0];
      rest_.remove_prefix(1);
      if (c == '"') return true;
      if (static_cast<unsigned char>(c) < 0x20) return false;
      if (c != '\\') {
        *out += c;
        continue;
      }
      if (rest_.empty()) return false;
      const char escape = rest_[0];
      rest_.remove_prefix(1);
      switch (escape) {
        case '"':
        case '\\':
        case '/':
          *out += escape;
          break;
        case 'b':
          *out += '\b';
          break;
        case 'f':
          *out += '\f';
          break;
        case 'n':
          *out += '\n';
          break;
        case 'r':
          *out += '\r';
          break;
        case 't':
          *out += '\t';
          break;
        case 'u': {
          uint32_t code_point;
          if (!ReadHex4(&code_point)) return false;
          if (code_point >= 0xD800 && code_point < 0xDC00) {
            uint32_t low;
            if (!Consume('\\') || !Consume('u') || !ReadHex4(&low) ||
                low < 0xDC00 || low >= 0xE000) {
              return false;
            }
            code_point =
                0x10000 + ((code_point - 0xD800) << 10) + (low - 0xDC00);
          } else if (code_point >= 0xDC00 && code_point < 0xE000) {
            return false;
          }
          AppendUtf8(code_point, out);
          break;
        }
        default:
          return false;
      }
    }
    return false;
  }

  bool ReadInteger(int64_t* value) {
    size_t length = 0;
    if (length < rest_.size() && rest_[length] == '-') ++length;
    while (length < rest_.size() && absl::ascii_isdigit(rest_[length])) {
      ++length;
    }
    if (!absl::SimpleAtoi(rest_.substr(0, length), value)) return false;
    rest_.remove_prefix(length);
    return true;
  }

  absl::string_view rest_;
};

absl::Status Bad(absl::string_view why) {
  return absl::InvalidArgumentError(
      absl::StrCat("bad plugin reattach config: ", why));
}

absl::StatusOr<std::string> StringField(const JsonObject& object,
                                        const char* name) {
  auto it = object.find(name);
  if (it == object.end()) {
    return Bad(absl::StrCat("field \"", name, "\" is missing"));
  }
  if (!std::holds_alternative<std::string>(it->second)) {
    return Bad(absl::StrCat("field \"", name, "\" is not a string"));
  }
  return std::get<std::string>(it->second);
}

absl::StatusOr<int64_t> IntegerField(const JsonObject& object,
                                     const char* name) {
  auto it = object.find(name);
  if (it == object.end()) {
    return Bad(absl::StrCat("field \"", name, "\" is missing"));
  }
  if (!std::holds_alternative<int64_t>(it->second)) {
    return Bad(absl::StrCat("field \"", name, "\" is not an integer"));
  }
  return std::get<int64_t>(it->second);
}

}  // namespace

std::string ReattachConfig::Serialize() const {
  // startTime is a string: a JSON number is a double to most readers, which
  // need not hold every uint64.
  return absl::StrCat("{\"version\":", kVersion, ",\"name\":", Quote(name),
                      ",\"socketPath\":", Quote(socket_path), ",\"pid\":", pid,
                      ",\"startTime\":\"", start_time, "\"}");
}

absl::StatusOr<ReattachConfig> ReattachConfig::Parse(absl::string_view text) {
  JsonObject object;
  if (!FlatJsonReader(text).ReadObject(&object)) {
    return Bad(absl::StrCat(
        "not a flat JSON object of strings and integers: \"", text, "\""));
  }
  absl::StatusOr<int64_t> version = IntegerField(object, "version");
  if (!version.ok()) return version.status();
  if (*version != kVersion) {
    return Bad(absl::StrCat("version ", *version, " (this host reads ",
                            kVersion, ")"));
  }
  ReattachConfig result;
  absl::StatusOr<std::string> name = StringField(object, "name");
  if (!name.ok()) return name.status();
  if (name->empty()) return Bad("field \"name\" is empty");
  result.name = *std::move(name);
  absl::StatusOr<std::string> socket_path = StringField(object, "socketPath");
  if (!socket_path.ok()) return socket_path.status();
  if (socket_path->empty() || (*socket_path)[0] != '/') {
    return Bad("field \"socketPath\" is not an absolute path");
  }
  result.socket_path = *std::move(socket_path);
  absl::StatusOr<int64_t> pid = IntegerField(object, "pid");
  if (!pid.ok()) return pid.status();
  if (*pid <= 0 || *pid > INT32_MAX)
    return Bad("field \"pid\" is out of range");
  result.pid = static_cast<pid_t>(*pid);
  absl::StatusOr<std::string> start_time = StringField(object, "startTime");
  if (!start_time.ok()) return start_time.status();
  if (!absl::SimpleAtoi(*start_time, &result.start_time)) {
    return Bad("field \"startTime\" is not a number");
  }
  return result;
}

}  // namespace berth::plugin::host
