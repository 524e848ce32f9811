// What an image gives a task (TaskSpec.image): the image's configuration
// under the spec, as docker applies it, into the driver's TaskConfig, and
// its working directory made in the snapshot.
//
// The command is the entrypoint (spec.image.entrypoint when
// override_entrypoint, else the image's Entrypoint) followed by the spec's
// driver_config command and args when it gives them, else by the image's
// Cmd; an overridden entrypoint drops the image's Cmd as
// `docker run --entrypoint` does (and Kubernetes' `command`). Environment:
// the image's Env, the spec's env on top. User: the spec's, else the
// image's. Working directory: driver_config.work_dir when the spec gives
// one (in the task directory, as for any task), else the image's
// WorkingDir, "/" when it has none.

#ifndef SERVICES_NODE_TASK_IMAGE_H_
#define SERVICES_NODE_TASK_IMAGE_H_

#include <sys/types.h>

#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "berth/driver/v1/driver.pb.h"
#include "berth/image/v1/image.pb.h"
#include "berth/node/v1/node.pb.h"

namespace berth::node {

// The program and its arguments of an image task: INVALID_ARGUMENT
// `spec.image: image "REF" has no command: give one` when both the
// entrypoint and the command are empty.
absl::StatusOr<std::vector<std::string>> ImageCommand(
    const v1::TaskSpec& spec, const image::v1::ImageConfig& image);

// Sets config's driver_config command and args, env, user and group, and
// working_dir from `image` under `spec` (see above); the rest of config is
// left as StartRun made it. Errors are INVALID_ARGUMENT naming the image
// (no command; an image User that is not NAME, UID, NAME:GROUP or UID:GID).
absl::Status ApplyImageConfig(const v1::TaskSpec& spec,
                              const image::v1::ImageConfig& image,
                              driver::v1::TaskConfig* config);

// The health check in force (Task.healthcheck), merged as docker merges a
// container's health settings onto its image's HEALTHCHECK: the spec's
// check when it has a test (none when that is ["NONE"]); else the image's
// HEALTHCHECK (`image` null: none; none when it is ["NONE"] or has no test)
// with the spec's check's non-zero interval, timeout, start_period, retries
// and on_failure over the image's. A spec's check that sets some of those
// and has no test, for a task without an image (`image` null) or whose
// image has no HEALTHCHECK to run, is INVALID_ARGUMENT naming
// spec.healthcheck.test. Defaults filled as the health_checker.h
// HealthCheckInForce does (interval 30s, timeout 30s, retries 3).
absl::StatusOr<std::optional<v1::HealthCheck>> HealthCheckInForce(
    const v1::TaskSpec& spec, const image::v1::ImageConfig* image);

// What Task.image shows of a prepared snapshot.
v1::TaskImageStatus ImageStatusOf(const image::v1::Image& image,
                                  const std::string& rootfs);

// Makes the directory `path` (absolute, in the task's view) in the image
// root `rootfs`, with its missing parents, 0755 and owned by `uid`:`gid`
// (root; in a snapshot idmapped for a user namespace, the task's root's
// mapped host ids), resolving every link inside the root as the task would
// (openat2 RESOLVE_IN_ROOT): an image's link never leads the node outside
// it. Existing directories are left as they are.
absl::Status MakeDirInRoot(const std::string& rootfs, const std::string& path,
                           uid_t uid = 0, gid_t gid = 0);

}  // namespace berth::node

#endif  // SERVICES_NODE_TASK_IMAGE_H_
