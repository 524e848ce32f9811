#include "services/node/cli/detach_keys.h"

#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"

namespace berth::cli {

absl::StatusOr<std::string> ParseDetachKeys(absl::string_view spec) {
  std::string keys;
  if (spec.empty()) return keys;
  for (absl::string_view key : absl::StrSplit(spec, ',')) {
    if (key.size() == 1) {
      keys.push_back(key[0]);
      continue;
    }
    if (key.size() == 6 && absl::StartsWithIgnoreCase(key, "ctrl-")) {
      const char c = key[5];
      if (absl::ascii_isalpha(static_cast<unsigned char>(c))) {
        keys.push_back(static_cast<char>(
            absl::ascii_tolower(static_cast<unsigned char>(c)) - 'a' + 1));
        continue;
      }
      // Ctrl-@ is NUL, Ctrl-[ ESC, Ctrl-\ FS, Ctrl-] GS, Ctrl-^ RS, Ctrl-_ US.
      const absl::string_view kSymbols = "@[\\]^_";
      if (const size_t at = kSymbols.find(c); at != absl::string_view::npos) {
        keys.push_back(static_cast<char>(at == 0 ? 0 : 26 + at));
        continue;
      }
    }
    return absl::InvalidArgumentError(absl::StrCat(
        "\"", key,
        "\" is not a key (ctrl-a..ctrl-z, ctrl-@, ctrl-[, ctrl-\\, ctrl-], "
        "ctrl-^, ctrl-_ or one character, separated by commas)"));
  }
  return keys;
}

std::string DetachMatcher::Feed(absl::string_view input) {
  std::string send;
  if (detached_) return send;
  if (keys_.empty()) return std::string(input);
  for (const char byte : input) {
    held_.push_back(byte);
    if (absl::StartsWith(keys_, held_)) {
      if (held_.size() == keys_.size()) {
        held_.clear();
        detached_ = true;
        return send;
      }
      continue;
    }
    // Cut short: release the front of the held bytes until what is left
    // starts the sequence again (or nothing is left).
    size_t release = 1;
    while (release < held_.size() &&
           !absl::StartsWith(keys_, absl::string_view(held_).substr(release))) {
      ++release;
    }
    send.append(held_, 0, release);
    held_.erase(0, release);
  }
  return send;
}

std::string DetachMatcher::TakeHeld() { return std::exchange(held_, ""); }

}  // namespace berth::cli
