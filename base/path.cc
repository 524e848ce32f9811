#include "base/path.h"

namespace berth::base {

std::string Dirname(absl::string_view path) {
  while (path.size() > 1 && path.back() == '/') path.remove_suffix(1);
  const size_t slash = path.find_last_of('/');
  if (slash == absl::string_view::npos) return ".";
  size_t end = slash;
  while (end > 0 && path[end - 1] == '/') --end;
  if (end == 0) return "/";
  return std::string(path.substr(0, end));
}

}  // namespace berth::base
