#include "services/node/cli/ps_format.h"

#include <algorithm>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"
#include "base/proto_time.h"
#include "services/node/cli/ps_filter.h"
#include "services/node/cli/table.h"

namespace berth::cli {
namespace {

namespace netpb = ::berth::network::v1;
namespace nodepb = ::berth::node::v1;

// Width of the COMMAND column of the default table.
constexpr size_t kCommandWidth = 30;

// The fields of a template, in the order the error lists them, with their
// table headers.
const std::vector<std::pair<std::string, std::string>>& Fields() {
  static const auto* const kFields =
      new std::vector<std::pair<std::string, std::string>>{
          {"ID", "ID"},
          {"Names", "NAMES"},
          {"Name", "NAME"},
          {"Image", "IMAGE"},
          {"Command", "COMMAND"},
          {"Status", "STATUS"},
          {"State", "STATE"},
          {"Health", "HEALTH"},
          {"Labels", "LABELS"},
          {"Label", "LABEL"},
          {"CreatedAt", "CREATED AT"},
          {"RunningFor", "CREATED"},
          {"Ports", "PORTS"},
          {"Driver", "DRIVER"},
          {"Exit", "EXIT"},
      };
  return *kFields;
}

std::string FieldList() {
  std::vector<std::string> names;
  for (const auto& [name, header] : Fields()) {
    names.push_back(name == "Label" ? ".Label \"KEY\"" : "." + name);
  }
  return absl::StrJoin(names, " ");
}

absl::Status BadFormat(absl::string_view format, absl::string_view why) {
  return absl::InvalidArgumentError(
      absl::StrCat("--format \"", format, "\": ", why));
}

// " ago" taken off docker's "5 seconds ago": "Up 5 seconds".
std::string Duration(absl::Time since, absl::Time now) {
  std::string text = HumanAgo(since, now);
  absl::string_view view = text;
  absl::ConsumeSuffix(&view, " ago");
  return std::string(view);
}

std::string Labels(const nodepb::Task& task) {
  std::map<std::string, std::string> sorted(task.spec().labels().begin(),
                                            task.spec().labels().end());
  return absl::StrJoin(sorted, ",", absl::PairFormatter("="));
}

std::string Ports(const nodepb::Task& task) {
  const auto& mappings = task.network().port_mappings().empty()
                             ? task.spec().network().port_mappings()
                             : task.network().port_mappings();
  std::vector<std::string> ports;
  for (const netpb::PortMapping& mapping : mappings) {
    const std::string ip =
        mapping.host_ip().empty() ? "0.0.0.0" : mapping.host_ip();
    const std::string host =
        absl::StrContains(ip, ':') ? absl::StrCat("[", ip, "]") : ip;
    ports.push_back(absl::StrCat(
        host, ":", mapping.host_port(), "->", mapping.container_port(),
        mapping.protocol() == netpb::PROTOCOL_UDP ? "/udp" : "/tcp"));
  }
  return absl::StrJoin(ports, ", ");
}

std::string CreatedAt(const nodepb::Task& task, absl::TimeZone zone) {
  if (!task.has_created_at()) return "";
  // Go's time.Time.String(), as docker prints it.
  return absl::FormatTime("%Y-%m-%d %H:%M:%S %z %Z",
                          base::FromProtoTimestamp(task.created_at()), zone);
}

std::string RunningFor(const nodepb::Task& task, absl::Time now) {
  if (!task.has_created_at()) return "";
  return HumanAgo(base::FromProtoTimestamp(task.created_at()), now);
}

// The value of `field` ("Label" with `label_key`) for `task`.
std::string FieldValue(const std::string& field, const std::string& label_key,
                       const nodepb::Task& task, absl::Time now,
                       absl::TimeZone zone) {
  if (field == "ID") return ShortId(task.id());
  if (field == "Names" || field == "Name") return task.spec().name();
  if (field == "Image") return task.spec().image().reference();
  if (field == "Command") return CommandText(task.spec(), 0);
  if (field == "Status") return DockerStatus(task, now);
  if (field == "State") return StateText(task.state());
  if (field == "Health") return HealthText(task);
  if (field == "Labels") return Labels(task);
  if (field == "Label") {
    auto it = task.spec().labels().find(label_key);
    return it == task.spec().labels().end() ? "" : it->second;
  }
  if (field == "CreatedAt") return CreatedAt(task, zone);
  if (field == "RunningFor") return RunningFor(task, now);
  if (field == "Ports") return Ports(task);
  if (field == "Driver") return task.spec().driver();
  if (field == "Exit") return ExitText(task);
  return "";
}

std::string Header(const std::string& field, const std::string& label_key) {
  if (field == "json") return "JSON";
  if (field == "Label") return absl::AsciiStrToUpper(label_key);
  for (const auto& [name, header] : Fields()) {
    if (name == field) return header;
  }
  return field;
}

std::string JsonString(absl::string_view text) {
  std::string out = "\"";
  for (unsigned char c : text) {
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
      case '\t':
        out += "\\t";
        break;
      case '\r':
        out += "\\r";
        break;
      default:
        if (c < 0x20 || c == 0x7f) {
          absl::StrAppendFormat(&out, "\\u%04x", c);
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  return out + "\"";
}

}  // namespace

std::string StateWithHealth(const nodepb::Task& task) {
  std::string text = StateText(task.state());
  const std::string health = HealthText(task);
  if (health == "starting") return absl::StrCat(text, " (health: starting)");
  if (health != "none") return absl::StrCat(text, " (", health, ")");
  return text;
}

std::string DockerStatus(const nodepb::Task& task, absl::Time now) {
  auto since = [&](const google::protobuf::Timestamp& at) {
    return base::FromProtoTimestamp(at);
  };
  switch (task.state()) {
    case nodepb::TASK_STATE_PENDING:
      return "Created";
    case nodepb::TASK_STATE_STARTING:
      return "Starting";
    case nodepb::TASK_STATE_RUNNING: {
      std::string text = "Up";
      if (task.has_started_at()) {
        absl::StrAppend(&text, " ", Duration(since(task.started_at()), now));
      }
      const std::string health = HealthText(task);
      if (health == "starting") {
        absl::StrAppend(&text, " (health: starting)");
      } else if (health != "none") {
        absl::StrAppend(&text, " (", health, ")");
      }
      return text;
    }
    case nodepb::TASK_STATE_RESTARTING:
    case nodepb::TASK_STATE_EXITED: {
      std::string text =
          task.state() == nodepb::TASK_STATE_EXITED ? "Exited" : "Restarting";
      if (task.has_exit_result()) {
        absl::StrAppend(&text, " (", ExitCodeOf(task.exit_result()), ")");
      }
      if (task.has_finished_at()) {
        absl::StrAppend(&text, " ", HumanAgo(since(task.finished_at()), now));
      }
      return text;
    }
    case nodepb::TASK_STATE_FAILED:
      return "Failed";
    default:
      return "Unknown";
  }
}

std::string PsTable(const std::vector<nodepb::Task>& tasks, absl::Time now) {
  Table table(
      {"ID", "NAME", "IMAGE", "DRIVER", "STATE", "CREATED", "EXIT", "COMMAND"});
  for (const nodepb::Task& task : tasks) {
    const std::string created =
        task.has_created_at() ? RunningFor(task, now) : "-";
    table.AddRow({ShortId(task.id()), task.spec().name(),
                  task.spec().image().reference(), task.spec().driver(),
                  StateWithHealth(task), created, ExitText(task),
                  CommandText(task.spec(), kCommandWidth)});
  }
  return table.Render();
}

std::string PsJsonLine(const nodepb::Task& task, absl::Time now,
                       absl::TimeZone zone) {
  // Sorted keys, as docker's (a Go map).
  std::map<std::string, std::string> object;
  for (const auto& [name, header] : Fields()) {
    if (name == "Label" || name == "Name") continue;
    object[name] = FieldValue(name, "", task, now, zone);
  }
  std::vector<std::string> members;
  for (const auto& [key, value] : object) {
    members.push_back(absl::StrCat(JsonString(key), ":", JsonString(value)));
  }
  return absl::StrCat("{", absl::StrJoin(members, ","), "}");
}

absl::StatusOr<PsFormat> PsFormat::Parse(absl::string_view format) {
  PsFormat parsed;
  // docker's: surrounding spaces dropped, "\t" and "\n" as typed.
  std::string text = absl::StrReplaceAll(absl::StripAsciiWhitespace(format),
                                         {{"\\t", "\t"}, {"\\n", "\n"}});
  if (text.empty() || text == "table") {
    parsed.kind_ = Kind::kDefaultTable;
    return parsed;
  }
  if (text == "json") {
    parsed.kind_ = Kind::kJson;
    return parsed;
  }
  absl::string_view rest = text;
  parsed.kind_ = Kind::kTemplate;
  if (absl::ConsumePrefix(&rest, "table ") ||
      absl::ConsumePrefix(&rest, "table\t")) {
    parsed.kind_ = Kind::kTable;
  }
  while (!rest.empty()) {
    const size_t open = rest.find("{{");
    if (open == absl::string_view::npos) {
      parsed.pieces_.push_back({std::string(rest), "", ""});
      break;
    }
    if (open > 0) {
      parsed.pieces_.push_back({std::string(rest.substr(0, open)), "", ""});
    }
    rest.remove_prefix(open + 2);
    const size_t close = rest.find("}}");
    if (close == absl::string_view::npos) {
      return BadFormat(format, "a \"{{\" is not closed by \"}}\"");
    }
    const absl::string_view action =
        absl::StripAsciiWhitespace(rest.substr(0, close));
    rest.remove_prefix(close + 2);
    const std::string shown = absl::StrCat("{{", action, "}}");
    if (std::vector<absl::string_view> words =
            absl::StrSplit(action, absl::ByAnyChar(" \t"), absl::SkipEmpty());
        words.size() == 2 && words[0] == "json" && words[1] == ".") {
      parsed.pieces_.push_back({"", "json", ""});
      continue;
    }
    absl::string_view field = action;
    if (!absl::ConsumePrefix(&field, ".") || field.empty()) {
      return BadFormat(format, absl::StrCat(shown, " is not a field (fields: ",
                                            FieldList(), "; or {{json .}})"));
    }
    std::string label_key;
    const size_t space = field.find_first_of(" \t");
    if (space != absl::string_view::npos) {
      absl::string_view argument =
          absl::StripAsciiWhitespace(field.substr(space));
      field = field.substr(0, space);
      if (field != "Label") {
        return BadFormat(
            format, absl::StrCat(shown, ": .", field, " takes no argument"));
      }
      if (argument.size() < 2 ||
          !((argument.front() == '"' && argument.back() == '"') ||
            (argument.front() == '`' && argument.back() == '`'))) {
        return BadFormat(format, absl::StrCat(shown,
                                              ": the label's key is quoted: "
                                              "{{.Label \"KEY\"}}"));
      }
      label_key = std::string(argument.substr(1, argument.size() - 2));
      if (label_key.empty()) {
        return BadFormat(format, absl::StrCat(shown,
                                              ": the label's key is "
                                              "empty"));
      }
    } else if (field == "Label") {
      return BadFormat(format, absl::StrCat(shown,
                                            " needs a key: "
                                            "{{.Label \"KEY\"}}"));
    }
    bool known = false;
    for (const auto& [name, header] : Fields()) known |= name == field;
    if (!known) {
      return BadFormat(format, absl::StrCat("unknown field .", field,
                                            " (fields: ", FieldList(), ")"));
    }
    parsed.pieces_.push_back({"", std::string(field), label_key});
  }
  return parsed;
}

std::string PsFormat::RenderPieces(const nodepb::Task* task, absl::Time now,
                                   absl::TimeZone zone) const {
  std::string out;
  for (const Piece& piece : pieces_) {
    if (piece.field.empty()) {
      out += piece.literal;
    } else if (task == nullptr) {
      out += Header(piece.field, piece.label_key);
    } else if (piece.field == "json") {
      out += PsJsonLine(*task, now, zone);
    } else {
      out += FieldValue(piece.field, piece.label_key, *task, now, zone);
    }
  }
  return out;
}

std::string PsFormat::Render(const std::vector<nodepb::Task>& tasks,
                             absl::Time now, absl::TimeZone zone) const {
  switch (kind_) {
    case Kind::kDefaultTable:
      return PsTable(tasks, now);
    case Kind::kJson: {
      std::string out;
      for (const nodepb::Task& task : tasks) {
        absl::StrAppend(&out, PsJsonLine(task, now, zone), "\n");
      }
      return out;
    }
    case Kind::kTemplate: {
      std::string out;
      for (const nodepb::Task& task : tasks) {
        absl::StrAppend(&out, RenderPieces(&task, now, zone), "\n");
      }
      return out;
    }
    case Kind::kTable: {
      // The cells are what tabs separate, aligned as the default table's.
      Table table(absl::StrSplit(RenderPieces(nullptr, now, zone), '\t'));
      for (const nodepb::Task& task : tasks) {
        table.AddRow(absl::StrSplit(RenderPieces(&task, now, zone), '\t'));
      }
      return table.Render();
    }
  }
  return "";
}

}  // namespace berth::cli
