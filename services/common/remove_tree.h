// rm -rf of berth's own directories (task directories, kept logs).

#ifndef SERVICES_COMMON_REMOVE_TREE_H_
#define SERVICES_COMMON_REMOVE_TREE_H_

#include <string>

#include "absl/status/status.h"

namespace berth {

// Removes `path` and everything below it, without following symbolic links
// or crossing mounts (a mount below stops it with an error); OK when `path`
// is absent. Errors name the path.
absl::Status RemoveTree(const std::string& path);

}  // namespace berth

#endif  // SERVICES_COMMON_REMOVE_TREE_H_
