#include "services/driver/common/passwd.h"

#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace berth::driver_common {
namespace {

// The largest id an entry may give: (uid_t)-1 means "unchanged" to
// setresuid(2) and setresgid(2).
constexpr uint64_t kMaxId = 4294967294u;

// The fields of `line`, at most `most` (the last holding the rest of the
// line); empty when it holds no entry: blank, a comment, an NIS compat
// line, a NUL byte, fewer than `least` fields or an empty name.
std::vector<absl::string_view> EntryFields(absl::string_view line, int least,
                                           int most) {
  absl::ConsumeSuffix(&line, "\r");
  if (line.empty() || line[0] == '#' || line[0] == '+' || line[0] == '-' ||
      line.find('\0') != absl::string_view::npos) {
    return {};
  }
  std::vector<absl::string_view> fields =
      absl::StrSplit(line, absl::MaxSplits(':', most - 1));
  if (fields.size() < static_cast<size_t>(least) || fields[0].empty()) {
    return {};
  }
  return fields;
}

bool AllDigits(absl::string_view text) {
  if (text.empty()) return false;
  for (char c : text) {
    if (!absl::ascii_isdigit(c)) return false;
  }
  return true;
}

std::string MissingFile(absl::string_view file) {
  return absl::StrCat(" (the image has no ", file, ")");
}

}  // namespace

ResolvedUser RootUser() {
  ResolvedUser root;
  root.name = "root";
  root.home = "/root";
  return root;
}

ResolvedUser UnlistedUser(uid_t uid, const std::string& text) {
  ResolvedUser user;
  user.uid = uid;
  user.gid = kNoGroup;
  user.name = text;
  user.home = "/";
  return user;
}

std::optional<uint32_t> ParseId(absl::string_view text) {
  // Ten digits hold every id; more cannot overflow the sum below either.
  if (!AllDigits(text) || text.size() > 10) return std::nullopt;
  uint64_t value = 0;
  for (char c : text) value = value * 10 + static_cast<uint64_t>(c - '0');
  if (value > kMaxId) return std::nullopt;
  return static_cast<uint32_t>(value);
}

absl::StatusOr<std::optional<uint32_t>> NumericId(const std::string& text,
                                                  const std::string& field) {
  if (!AllDigits(text)) return std::optional<uint32_t>();
  std::optional<uint32_t> id = ParseId(text);
  if (!id.has_value()) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, ": ", text, " is not an id (0 to ", kMaxId, ")"));
  }
  return id;
}

std::optional<PasswdEntry> ParsePasswdLine(absl::string_view line) {
  // NAME:PASSWORD:UID:GID:GECOS:DIR:SHELL, the shell being the rest.
  const std::vector<absl::string_view> fields = EntryFields(line, 4, 7);
  if (fields.empty()) return std::nullopt;
  const std::optional<uint32_t> uid = ParseId(fields[2]);
  const std::optional<uint32_t> gid = ParseId(fields[3]);
  if (!uid.has_value() || !gid.has_value()) return std::nullopt;
  PasswdEntry entry;
  entry.name = std::string(fields[0]);
  entry.uid = *uid;
  entry.gid = *gid;
  entry.home =
      fields.size() > 5 && !fields[5].empty() ? std::string(fields[5]) : "/";
  return entry;
}

std::optional<GroupEntry> ParseGroupLine(absl::string_view line) {
  // NAME:PASSWORD:GID:MEMBERS, the members being the rest.
  const std::vector<absl::string_view> fields = EntryFields(line, 3, 4);
  if (fields.empty()) return std::nullopt;
  const std::optional<uint32_t> gid = ParseId(fields[2]);
  if (!gid.has_value()) return std::nullopt;
  GroupEntry entry;
  entry.name = std::string(fields[0]);
  entry.gid = *gid;
  if (fields.size() > 3) {
    entry.members = absl::StrSplit(fields[3], ',', absl::SkipEmpty());
  }
  return entry;
}

std::optional<PasswdEntry> FindUserByName(absl::string_view content,
                                          absl::string_view name) {
  // Only a line that starts with "NAME:" can be its entry.
  const std::string prefix = absl::StrCat(name, ":");
  for (absl::string_view line : absl::StrSplit(content, '\n')) {
    if (!absl::StartsWith(line, prefix)) continue;
    std::optional<PasswdEntry> entry = ParsePasswdLine(line);
    if (entry.has_value() && entry->name == name) return entry;
  }
  return std::nullopt;
}

std::optional<PasswdEntry> FindUserById(absl::string_view content, uid_t uid) {
  for (absl::string_view line : absl::StrSplit(content, '\n')) {
    std::optional<PasswdEntry> entry = ParsePasswdLine(line);
    if (entry.has_value() && entry->uid == uid) return entry;
  }
  return std::nullopt;
}

std::optional<gid_t> FindGroupByName(absl::string_view content,
                                     absl::string_view name) {
  const std::string prefix = absl::StrCat(name, ":");
  for (absl::string_view line : absl::StrSplit(content, '\n')) {
    if (!absl::StartsWith(line, prefix)) continue;
    std::optional<GroupEntry> entry = ParseGroupLine(line);
    if (entry.has_value() && entry->name == name) return entry->gid;
  }
  return std::nullopt;
}

std::vector<gid_t> GroupsOfUser(absl::string_view content,
                                absl::string_view user, gid_t primary) {
  std::vector<gid_t> groups = {primary};
  absl::flat_hash_set<gid_t> seen = {primary};
  for (absl::string_view line : absl::StrSplit(content, '\n')) {
    std::optional<GroupEntry> entry = ParseGroupLine(line);
    if (!entry.has_value() || seen.contains(entry->gid)) continue;
    for (const std::string& member : entry->members) {
      if (member != user) continue;
      groups.push_back(entry->gid);
      seen.insert(entry->gid);
      break;
    }
  }
  return groups;
}

absl::StatusOr<ResolvedUser> ResolveUserInFiles(const std::string& user,
                                                const UserFiles& files,
                                                const std::string& field) {
  if (user.empty()) return RootUser();
  absl::StatusOr<std::optional<uint32_t>> number = NumericId(user, field);
  if (!number.ok()) return number.status();
  std::optional<PasswdEntry> entry;
  if (files.passwd.has_value()) {
    entry = number->has_value() ? FindUserById(*files.passwd, **number)
                                : FindUserByName(*files.passwd, user);
  }
  if (!entry.has_value()) {
    if (number->has_value()) return UnlistedUser(**number, user);
    return absl::InvalidArgumentError(absl::StrCat(
        field, ": no user named \"", user, "\" in the image's /etc/passwd",
        files.passwd.has_value() ? "" : MissingFile("/etc/passwd")));
  }
  ResolvedUser resolved;
  resolved.uid = entry->uid;
  resolved.gid = entry->gid;
  resolved.name = std::move(entry->name);
  resolved.home = std::move(entry->home);
  resolved.groups =
      files.group.has_value()
          ? GroupsOfUser(*files.group, resolved.name, resolved.gid)
          : std::vector<gid_t>{resolved.gid};
  if (resolved.groups.size() > kMaxGroups) {
    return absl::InvalidArgumentError(absl::StrCat(
        field, ": user \"", user, "\" is in ", resolved.groups.size(),
        " groups of the image's /etc/group, more than the ", kMaxGroups,
        " a process can have"));
  }
  return resolved;
}

absl::StatusOr<gid_t> ResolveGroupInFiles(const std::string& group,
                                          const UserFiles& files,
                                          const std::string& field) {
  absl::StatusOr<std::optional<uint32_t>> number = NumericId(group, field);
  if (!number.ok()) return number.status();
  if (number->has_value()) return **number;
  std::optional<gid_t> gid;
  if (files.group.has_value()) gid = FindGroupByName(*files.group, group);
  if (!gid.has_value()) {
    return absl::InvalidArgumentError(absl::StrCat(
        field, ": no group named \"", group, "\" in the image's /etc/group",
        files.group.has_value() ? "" : MissingFile("/etc/group")));
  }
  return *gid;
}

}  // namespace berth::driver_common
