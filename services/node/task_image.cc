#include "services/node/task_image.h"

#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <map>
#include <utility>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "base/path.h"
#include "base/proto_time.h"
#include "base/unique_fd.h"
#include "services/node/health_checker.h"
#include "services/node/task_isolation.h"

namespace berth::node {
namespace {

absl::Status Invalid(const v1::TaskSpec& spec, absl::string_view why) {
  return absl::InvalidArgumentError(absl::StrCat(
      "spec.image: image \"", spec.image().reference(), "\" ", why));
}

// Opens `path` (relative to the root, without a leading '/') below root_fd
// as the task would see it.
int OpenInRoot(int root_fd, const std::string& path) {
  struct open_how how;
  std::memset(&how, 0, sizeof(how));
  how.flags = O_PATH | O_DIRECTORY | O_CLOEXEC;
  how.resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS;
  return static_cast<int>(syscall(SYS_openat2, root_fd,
                                  path.empty() ? "." : path.c_str(), &how,
                                  sizeof(how)));
}

}  // namespace

absl::StatusOr<std::vector<std::string>> ImageCommand(
    const v1::TaskSpec& spec, const image::v1::ImageConfig& image) {
  std::vector<std::string> command;
  const v1::TaskImage& wanted = spec.image();
  if (wanted.override_entrypoint()) {
    command.assign(wanted.entrypoint().begin(), wanted.entrypoint().end());
  } else {
    command.assign(image.entrypoint().begin(), image.entrypoint().end());
  }
  const auto& fields = spec.driver_config().fields();
  std::vector<std::string> given;
  if (auto it = fields.find("command");
      it != fields.end() && !it->second.string_value().empty()) {
    given.push_back(it->second.string_value());
  }
  if (auto it = fields.find("args");
      it != fields.end() && it->second.has_list_value()) {
    for (const google::protobuf::Value& arg :
         it->second.list_value().values()) {
      given.push_back(arg.string_value());
    }
  }
  if (!given.empty()) {
    command.insert(command.end(), given.begin(), given.end());
  } else if (!wanted.override_entrypoint()) {
    // An entrypoint of the spec's own does not take the image's default
    // arguments (docker run --entrypoint, Kubernetes' command).
    command.insert(command.end(), image.cmd().begin(), image.cmd().end());
  }
  if (command.empty() || command[0].empty()) {
    return Invalid(spec, "has no command: give one");
  }
  return command;
}

absl::Status ApplyImageConfig(const v1::TaskSpec& spec,
                              const image::v1::ImageConfig& image,
                              driver::v1::TaskConfig* config) {
  absl::StatusOr<std::vector<std::string>> command = ImageCommand(spec, image);
  if (!command.ok()) return command.status();
  auto& fields = *config->mutable_driver_config()->mutable_fields();
  fields["command"].set_string_value((*command)[0]);
  google::protobuf::ListValue* args = fields["args"].mutable_list_value();
  args->Clear();
  for (size_t i = 1; i < command->size(); ++i) {
    args->add_values()->set_string_value((*command)[i]);
  }

  std::map<std::string, std::string> env;
  for (const std::string& entry : image.env()) {
    std::pair<std::string, std::string> variable =
        absl::StrSplit(entry, absl::MaxSplits('=', 1));
    // An entry without '=' sets nothing (docker passes it through as it is,
    // which execve takes as a variable without a value).
    if (variable.first.empty() || entry.find('=') == std::string::npos) {
      continue;
    }
    env[variable.first] = variable.second;
  }
  for (const auto& [name, value] : spec.env()) env[name] = value;
  config->mutable_env()->clear();
  config->mutable_env()->insert(env.begin(), env.end());

  if (spec.user().empty() && !image.user().empty()) {
    absl::StatusOr<TaskUser> user = ParseTaskUser(image.user());
    if (!user.ok()) {
      return Invalid(
          spec, absl::StrCat("has a User \"", absl::CHexEscape(image.user()),
                             "\" that is not NAME, UID, NAME:GROUP "
                             "or UID:GID"));
    }
    config->set_user(user->user);
    config->set_group(user->group);
  }

  if (fields.find("work_dir") == fields.end()) {
    const std::string& dir = image.working_dir();
    config->set_working_dir(base::LexicallyNormal(
        dir.empty() || dir[0] != '/' ? absl::StrCat("/", dir) : dir));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::optional<v1::HealthCheck>> HealthCheckInForce(
    const v1::TaskSpec& spec, const image::v1::ImageConfig* image) {
  const v1::HealthCheck& ours = spec.healthcheck();
  if (!ours.test().empty()) return HealthCheckInForce(ours);
  v1::HealthCheck check;  // the image's
  if (image != nullptr && image->has_healthcheck()) {
    const image::v1::HealthCheck& theirs = image->healthcheck();
    check.mutable_test()->CopyFrom(theirs.test());
    if (theirs.has_interval()) *check.mutable_interval() = theirs.interval();
    if (theirs.has_timeout()) *check.mutable_timeout() = theirs.timeout();
    if (theirs.has_start_period()) {
      *check.mutable_start_period() = theirs.start_period();
    }
    if (theirs.retries() > 0) {
      check.set_retries(static_cast<uint32_t>(theirs.retries()));
    }
  }
  if (!HealthCheckSetsOptions(ours)) return HealthCheckInForce(check);
  // Settings without a test: the image's test with them (docker's merge),
  // when the image has one to run.
  if (check.test().empty() || check.test(0) == "NONE") {
    return absl::InvalidArgumentError(
        image == nullptr
            ? std::string(
                  "spec.healthcheck.test: empty, and the task has no image "
                  "whose HEALTHCHECK the check's settings could change: give "
                  "a test ([\"CMD-SHELL\", command] or [\"CMD\", program, "
                  "args...])")
            : absl::StrCat("spec.healthcheck.test: empty, and image \"",
                           spec.image().reference(), "\" has no HEALTHCHECK",
                           check.test().empty() ? "" : " (it is NONE)",
                           " the check's settings could change: give a test "
                           "([\"CMD-SHELL\", command] or [\"CMD\", program, "
                           "args...])"));
  }
  if (base::FromProtoDuration(ours.interval()) > absl::ZeroDuration()) {
    *check.mutable_interval() = ours.interval();
  }
  if (base::FromProtoDuration(ours.timeout()) > absl::ZeroDuration()) {
    *check.mutable_timeout() = ours.timeout();
  }
  if (base::FromProtoDuration(ours.start_period()) > absl::ZeroDuration()) {
    *check.mutable_start_period() = ours.start_period();
  }
  if (ours.retries() > 0) check.set_retries(ours.retries());
  if (ours.on_failure() != v1::HEALTH_FAILURE_ACTION_UNSPECIFIED) {
    check.set_on_failure(ours.on_failure());
  }
  return HealthCheckInForce(check);
}

v1::TaskImageStatus ImageStatusOf(const image::v1::Image& image,
                                  const std::string& rootfs) {
  v1::TaskImageStatus status;
  status.set_name(image.name());
  status.set_digest(image.digest());
  status.set_manifest_digest(image.manifest_digest());
  status.set_config_digest(image.config_digest());
  status.set_rootfs(rootfs);
  return status;
}

absl::Status MakeDirInRoot(const std::string& rootfs, const std::string& path,
                           uid_t uid, gid_t gid) {
  base::UniqueFd root(
      open(rootfs.c_str(), O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!root.valid()) {
    return absl::ErrnoToStatus(errno, absl::StrCat("opening ", rootfs));
  }
  std::string parent;
  for (absl::string_view part : absl::StrSplit(path, '/', absl::SkipEmpty())) {
    const std::string here =
        parent.empty() ? std::string(part) : absl::StrCat(parent, "/", part);
    base::UniqueFd existing(OpenInRoot(root.get(), here));
    if (!existing.valid()) {
      if (errno != ENOENT) {
        return absl::ErrnoToStatus(errno, absl::StrCat("/", here));
      }
      base::UniqueFd dir(OpenInRoot(root.get(), parent));
      if (!dir.valid()) {
        return absl::ErrnoToStatus(errno, absl::StrCat("/", parent));
      }
      const std::string name(part);
      if (mkdirat(dir.get(), name.c_str(), 0755) != 0) {
        if (errno != EEXIST) {
          return absl::ErrnoToStatus(
              errno, absl::StrCat("making /", here, " in the image"));
        }
      } else if ((uid != 0 || gid != 0) &&
                 fchownat(dir.get(), name.c_str(), uid, gid,
                          AT_SYMLINK_NOFOLLOW) != 0) {
        return absl::ErrnoToStatus(
            errno,
            absl::StrCat("chown /", here, " in the image to ", uid, ":", gid));
      }
      // A link left dangling where the directory goes: not a directory.
      existing = base::UniqueFd(OpenInRoot(root.get(), here));
      if (!existing.valid()) {
        return absl::ErrnoToStatus(errno, absl::StrCat("/", here));
      }
    }
    parent = here;
  }
  return absl::OkStatus();
}

}  // namespace berth::node
