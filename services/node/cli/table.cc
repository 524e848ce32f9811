#include "services/node/cli/table.h"

#include <string.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "absl/time/time.h"
#include "google/protobuf/struct.pb.h"
#include "google/protobuf/util/json_util.h"

namespace berth::cli {
namespace {

namespace nodepb = ::berth::node::v1;

constexpr size_t kColumnGap = 3;

// Characters, not bytes: "…" is one column wide.
size_t DisplayWidth(const std::string& text) {
  size_t width = 0;
  for (unsigned char c : text) {
    if ((c & 0xC0) != 0x80) ++width;
  }
  return width;
}

std::string Plural(int64_t count, absl::string_view unit) {
  return absl::StrCat(count, " ", unit, count == 1 ? "" : "s", " ago");
}

// A word is quoted when it has characters a shell would split on.
std::string ShellWord(const std::string& word) {
  if (!word.empty() &&
      word.find_first_of(" \t\n'\"\\$`*?;&|<>()") == std::string::npos) {
    return word;
  }
  std::string quoted = "'";
  for (char c : word) {
    if (c == '\'') {
      quoted += "'\\''";
    } else {
      quoted += c;
    }
  }
  return quoted + "'";
}

}  // namespace

Table::Table(std::vector<std::string> header) {
  rows_.push_back(std::move(header));
}

void Table::AddRow(std::vector<std::string> row) {
  row.resize(rows_[0].size());
  rows_.push_back(std::move(row));
}

std::string Table::Render() const {
  std::vector<size_t> widths(rows_[0].size(), 0);
  for (const std::vector<std::string>& row : rows_) {
    for (size_t i = 0; i < row.size(); ++i) {
      widths[i] = std::max(widths[i], DisplayWidth(row[i]));
    }
  }
  std::string text;
  for (const std::vector<std::string>& row : rows_) {
    std::string line;
    for (size_t i = 0; i < row.size(); ++i) {
      absl::StrAppend(&line, row[i]);
      if (i + 1 < row.size()) {
        line.append(widths[i] - DisplayWidth(row[i]) + kColumnGap, ' ');
      }
    }
    absl::StripTrailingAsciiWhitespace(&line);
    absl::StrAppend(&text, line, "\n");
  }
  return text;
}

std::string HumanAgo(absl::Time then, absl::Time now) {
  const absl::Duration ago = now - then;
  const int64_t seconds = absl::ToInt64Seconds(ago);
  if (seconds < 1) return "Less than a second ago";
  if (seconds < 60) return Plural(seconds, "second");
  const int64_t minutes = seconds / 60;
  if (minutes == 1) return "About a minute ago";
  if (minutes < 60) return Plural(minutes, "minute");
  const int64_t hours = minutes / 60;
  if (hours == 1) return "About an hour ago";
  if (hours < 48) return Plural(hours, "hour");
  const int64_t days = hours / 24;
  if (days < 14) return Plural(days, "day");
  if (days < 60) return Plural(days / 7, "week");
  if (days < 365 * 2) return Plural(days / 30, "month");
  return Plural(days / 365, "year");
}

std::string HumanBytes(uint64_t bytes) {
  static constexpr const char* kUnits[] = {"B",   "KiB", "MiB",
                                           "GiB", "TiB", "PiB"};
  double value = static_cast<double>(bytes);
  size_t unit = 0;
  while (value >= 1024 && unit + 1 < std::size(kUnits)) {
    value /= 1024;
    ++unit;
  }
  return absl::StrFormat("%.4g%s", value, kUnits[unit]);
}

std::string ShortId(const std::string& task_id) {
  return task_id.substr(0, 12);
}

std::string CommandText(const nodepb::TaskSpec& spec, size_t max_width) {
  const auto& fields = spec.driver_config().fields();
  std::vector<std::string> words;
  if (spec.image().override_entrypoint()) {
    for (const std::string& word : spec.image().entrypoint()) {
      words.push_back(ShellWord(word));
    }
  }
  if (auto it = fields.find("command"); it != fields.end()) {
    words.push_back(ShellWord(it->second.string_value()));
  }
  if (auto it = fields.find("args"); it != fields.end()) {
    for (const google::protobuf::Value& arg :
         it->second.list_value().values()) {
      words.push_back(ShellWord(arg.string_value()));
    }
  }
  std::string text = absl::StrJoin(words, " ");
  if (max_width > 0 && DisplayWidth(text) > max_width) {
    // Cut at a character boundary.
    size_t end = 0;
    size_t width = 0;
    while (end < text.size() && width < max_width - 1) {
      ++end;
      while (end < text.size() && (text[end] & 0xC0) == 0x80) ++end;
      ++width;
    }
    text = absl::StrCat(text.substr(0, end), "…");
  }
  return text;
}

std::string StateText(nodepb::TaskState state) {
  const std::string full_name = nodepb::TaskState_Name(state);
  absl::string_view name = full_name;
  absl::ConsumePrefix(&name, "TASK_STATE_");
  if (name.empty()) return "unknown";
  return absl::AsciiStrToLower(name);
}

std::string ExitText(const nodepb::Task& task) {
  if (!task.has_exit_result() ||
      (task.state() != nodepb::TASK_STATE_EXITED &&
       task.state() != nodepb::TASK_STATE_RESTARTING)) {
    return "-";
  }
  const driver::v1::ExitResult& result = task.exit_result();
  std::string text;
  if (result.signal() != 0) {
    const char* name = sigabbrev_np(result.signal());
    text = name != nullptr ? absl::StrCat("SIG", name)
                           : absl::StrCat("signal ", result.signal());
  } else {
    text = absl::StrCat(result.exit_code());
  }
  if (result.oom_killed()) absl::StrAppend(&text, " (OOM)");
  return text;
}

int ExitCodeOf(const driver::v1::ExitResult& result) {
  if (result.signal() != 0) return 128 + result.signal();
  return result.exit_code();
}

absl::StatusOr<std::string> ToJson(const google::protobuf::Message& message,
                                   bool pretty) {
  google::protobuf::util::JsonPrintOptions options;
  options.add_whitespace = pretty;
  std::string json;
  const google::protobuf::util::Status status =
      google::protobuf::util::MessageToJsonString(message, &json, options);
  if (!status.ok()) {
    return absl::InternalError(
        absl::StrCat("cannot print ", message.GetTypeName(),
                     " as JSON: ", std::string(status.message())));
  }
  if (json.empty() || json.back() != '\n') json += '\n';
  return json;
}

}  // namespace berth::cli
