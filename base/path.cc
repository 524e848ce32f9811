#include "base/path.h"

#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

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

std::string LexicallyNormal(absl::string_view path) {
  std::vector<absl::string_view> parts;
  for (absl::string_view part : absl::StrSplit(path, '/', absl::SkipEmpty())) {
    if (part == ".") continue;
    if (part == "..") {
      if (!parts.empty()) parts.pop_back();
      continue;
    }
    parts.push_back(part);
  }
  std::string normal;
  for (absl::string_view part : parts) absl::StrAppend(&normal, "/", part);
  return normal.empty() ? "/" : normal;
}

}  // namespace berth::base
