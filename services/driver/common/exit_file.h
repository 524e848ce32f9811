// Writing an exit record (init_spec.h's ExitRecord) into a directory that
// whoever runs the task may be able to write to, without following a link
// planted there. libc and libstdc++ only: berth-task-init links it.

#ifndef SERVICES_DRIVER_COMMON_EXIT_FILE_H_
#define SERVICES_DRIVER_COMMON_EXIT_FILE_H_

#include <string>

#include "services/driver/common/init_spec.h"

namespace berth::driver_common {

// The exit record's name in a task's .berth directory (ExitRecordPath).
inline constexpr char kExitRecordName[] = "exit";

// Writes `record` as `name` (one path component) in the directory `dir_fd`:
// NAME.tmp is unlinked if present, created with O_CREAT | O_EXCL |
// O_NOFOLLOW (so a link planted there is never written through), written,
// and renamed over NAME (a link at NAME is replaced, not followed).
// Every call is relative to `dir_fd`, which stays the caller's. False with
// errno set on failure (NAME.tmp is then removed).
bool WriteExitRecordAt(int dir_fd, const std::string& name,
                       const ExitRecord& record);

}  // namespace berth::driver_common

#endif  // SERVICES_DRIVER_COMMON_EXIT_FILE_H_
