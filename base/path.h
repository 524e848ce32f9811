// Paths as strings.

#ifndef BASE_PATH_H_
#define BASE_PATH_H_

#include <string>

#include "absl/strings/string_view.h"

namespace berth::base {

// The directory part of `path`, as dirname(1) says it: "/a/b" → "/a",
// "/a" → "/", "a" → "." (a bare file name is in the working directory),
// "a/" → "." and "/" → "/" (trailing slashes are not a name).
std::string Dirname(absl::string_view path);

// `path` as an absolute path with "." and ".." resolved lexically (".."
// at the top stays at "/") and slashes collapsed, without looking at the
// file system: "/a/./b/../c/" → "/a/c", "//" → "/". A relative path is
// taken from "/": "a/b" → "/a/b".
std::string LexicallyNormal(absl::string_view path);

}  // namespace berth::base

#endif  // BASE_PATH_H_
