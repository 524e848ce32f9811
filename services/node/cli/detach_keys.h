// The detach keys of `berth run -it` and `berth attach` (docker's
// --detach-keys): a sequence typed on stdin that ends the attach and leaves
// the task running, and the matcher that finds it in what the user types.

#ifndef SERVICES_NODE_CLI_DETACH_KEYS_H_
#define SERVICES_NODE_CLI_DETACH_KEYS_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace berth::cli {

// docker's default: Ctrl-P then Ctrl-Q.
inline constexpr char kDefaultDetachKeys[] = "ctrl-p,ctrl-q";

// Parses docker's format: keys separated by commas, each "ctrl-a".."ctrl-z"
// (any case), "ctrl-@", "ctrl-[", "ctrl-\", "ctrl-]", "ctrl-^", "ctrl-_", or
// one character standing for itself ("a", ","). Returns the bytes the keys
// send. The empty string is no keys at all (podman's way to turn detaching
// off). INVALID_ARGUMENT naming the key that is not one.
absl::StatusOr<std::string> ParseDetachKeys(absl::string_view spec);

// Finds the detach sequence in the bytes typed on stdin. Bytes that may
// start the sequence are held back until the next one shows whether they do
// (docker's behaviour): a byte that does not continue it releases them, so a
// lone Ctrl-P still reaches the task, one byte late. When the sequence is
// cut short, the longest end of the held bytes that starts it again stays
// held (Ctrl-P Ctrl-P Ctrl-Q passes one Ctrl-P and detaches).
class DetachMatcher {
 public:
  // `keys` as ParseDetachKeys returns them; empty never detaches.
  explicit DetachMatcher(std::string keys) : keys_(std::move(keys)) {}

  // Feeds bytes read from stdin; returns those to send to the task now. Once
  // the whole sequence has been typed detached() is true, and the sequence
  // and whatever followed it in `input` are dropped.
  std::string Feed(absl::string_view input);

  // The bytes held back as a possible start of the sequence, which are no
  // longer held (at the end of stdin they are sent before it closes).
  std::string TakeHeld();

  bool detached() const { return detached_; }

 private:
  const std::string keys_;
  // A prefix of keys_, not yet sent.
  std::string held_;
  bool detached_ = false;
};

}  // namespace berth::cli

#endif  // SERVICES_NODE_CLI_DETACH_KEYS_H_
