// Users and groups looked up in the files of a task's own root, as Docker,
// runc and containerd do for an image: its /etc/passwd and /etc/group, not
// the host's NSS. What is parsed here comes from an image's author, hence
// untrusted: a line that is not a well-formed entry is skipped, whatever
// its content, and nothing read is trusted to be short, unique or sane.

#ifndef SERVICES_DRIVER_COMMON_PASSWD_H_
#define SERVICES_DRIVER_COMMON_PASSWD_H_

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace berth::driver_common {

// The user a task runs as: uid, primary gid, supplementary groups (the
// primary first) and home.
struct ResolvedUser {
  uid_t uid = 0;
  gid_t gid = 0;
  std::vector<gid_t> groups;
  std::string home;
  std::string name;
};

// The gid of a numeric user without a passwd entry.
inline constexpr gid_t kNoGroup = 65534;

// The user of a task that names none: root, home /root, nothing looked up.
ResolvedUser RootUser();
// A uid without a passwd entry (`text` as the task gave it): kNoGroup,
// never group 0 (which owns berth's sockets and much of the host), home
// "/", no other group.
ResolvedUser UnlistedUser(uid_t uid, const std::string& text);

// What is read of an image's /etc/passwd or /etc/group at most; real ones
// are a few kilobytes.
inline constexpr size_t kMaxUserFileBytes = size_t{4} << 20;

// More supplementary groups than setgroups(2) takes (NGROUPS_MAX).
inline constexpr size_t kMaxGroups = 65536;

// A uid or gid as passwd(5) and group(5) write it: decimal digits only,
// below 4294967295 ((uid_t)-1, which setresuid(2) takes as "unchanged").
std::optional<uint32_t> ParseId(absl::string_view text);

// A task's user or group as given (TaskConfig.user or .group): nullopt for
// a name, the id for a number as ParseId takes it, INVALID_ARGUMENT naming
// `field` for digits beyond that range (4294967295 would leave the task
// root).
absl::StatusOr<std::optional<uint32_t>> NumericId(const std::string& text,
                                                  const std::string& field);

// A passwd(5) line, NAME:PASSWORD:UID:GID[:GECOS[:DIR[:SHELL]]].
struct PasswdEntry {
  std::string name;
  uid_t uid = 0;
  gid_t gid = 0;
  // "/" when the entry has none.
  std::string home;
};
// nullopt for a line that is no entry: blank, a comment ('#'), an NIS
// compat line ('+' or '-'), fewer than four fields, an empty name, a uid
// or gid ParseId refuses, or a NUL byte anywhere. A trailing '\r' is
// dropped.
std::optional<PasswdEntry> ParsePasswdLine(absl::string_view line);

// A group(5) line, NAME:PASSWORD:GID[:MEMBER,MEMBER...]; nullopt as for
// ParsePasswdLine (fewer than three fields, ...). Empty members dropped.
struct GroupEntry {
  std::string name;
  gid_t gid = 0;
  std::vector<std::string> members;
};
std::optional<GroupEntry> ParseGroupLine(absl::string_view line);

// The first entry of the passwd file `content` with that name or uid (as
// getpwnam/getpwuid take the first).
std::optional<PasswdEntry> FindUserByName(absl::string_view content,
                                          absl::string_view name);
std::optional<PasswdEntry> FindUserById(absl::string_view content, uid_t uid);
// The gid of the first group of the group file `content` with that name.
std::optional<gid_t> FindGroupByName(absl::string_view content,
                                     absl::string_view name);
// What getgrouplist(3) gives: `primary`, then the gid of every group that
// lists `user` as a member, in the file's order, each once.
std::vector<gid_t> GroupsOfUser(absl::string_view content,
                                absl::string_view user, gid_t primary);

// The content of a root's /etc/passwd and /etc/group; nullopt when the
// root has no such file.
struct UserFiles {
  std::optional<std::string> passwd;
  std::optional<std::string> group;
};

// The user `user` names (a name or a uid) in `files`, as ResolveUser does
// on the host: a name not in the passwd file is INVALID_ARGUMENT naming
// `field`, the user and the image's /etc/passwd; a uid without an entry
// gets kNoGroup, home "/" and no other group; more than kMaxGroups groups
// is INVALID_ARGUMENT. An empty `user` is root (home /root), unlooked-up.
absl::StatusOr<ResolvedUser> ResolveUserInFiles(const std::string& user,
                                                const UserFiles& files,
                                                const std::string& field);
// The group `group` names (a name or a gid) in `files`; a name not in the
// group file is INVALID_ARGUMENT naming `field`, the group and the image's
// /etc/group.
absl::StatusOr<gid_t> ResolveGroupInFiles(const std::string& group,
                                          const UserFiles& files,
                                          const std::string& field);

}  // namespace berth::driver_common

#endif  // SERVICES_DRIVER_COMMON_PASSWD_H_
