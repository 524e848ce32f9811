// What `berth image` prints, as docker prints it: decimal sizes ("12.3MB"),
// familiar names ("busybox:latest" for docker.io/library/busybox:latest),
// image ids, --platform, and the progress of a pull — one line per layer,
// redrawn in place on a terminal, one line per change of a layer otherwise.

#ifndef SERVICES_NODE_CLI_IMAGE_OUTPUT_H_
#define SERVICES_NODE_CLI_IMAGE_OUTPUT_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "berth/image/v1/image.pb.h"

namespace berth::cli {

// Bytes in decimal units with three significant digits, as docker shows
// image sizes: "0B", "999B", "1.23kB", "12.3MB", "4.56GB".
std::string DecimalBytes(int64_t bytes);

// The short form docker shows of a normalised name: "busybox:latest" for
// "docker.io/library/busybox:latest", "team/app:1" for
// "docker.io/team/app:1"; other registries' names as they are.
std::string FamiliarName(absl::string_view name);

// An image name as `image ls` shows it: the familiar repository and the tag,
// "<none>" for a name with a digest and no tag.
struct RepositoryTag {
  std::string repository;
  std::string tag;
};
RepositoryTag SplitImageName(absl::string_view name);

// The first 12 hex characters of "sha256:<hex>" (a layer's short id, an
// image id as `image ls` shows it).
std::string ShortDigest(absl::string_view digest);

// "OS/ARCH[/VARIANT]" (--platform linux/arm64/v8).
absl::StatusOr<image::v1::Platform> ParsePlatform(absl::string_view text);

// Renders the messages of a PullImage stream as `docker pull` does:
//
//   a3ed95caeb02: Pull complete
//   5f70bf18a086: Downloading [=========>           ]  12.3MB/45.6MB
//   7e9a1b0c2d3f: Waiting
//
// On a terminal each layer has a line, redrawn in place (ANSI cursor up and
// line clear) as the stream moves; the bar is left out on a terminal
// narrower than 110 columns and lines are cut to its width. Otherwise a
// line is printed each time a layer changes state, without escape codes.
// The stream's status lines are printed above the layers.
class PullProgressPrinter {
 public:
  // `columns`: the terminal's width, 0 when unknown.
  PullProgressPrinter(bool terminal, int columns);

  // The text to write for one message of the stream; empty when nothing
  // shown changed.
  std::string Update(const image::v1::PullImageProgress& progress);

 private:
  std::string TerminalLine(const image::v1::LayerProgress& layer) const;

  const bool terminal_;
  const int columns_;
  // Terminal: the layer lines as drawn.
  std::vector<std::string> drawn_;
  // Not a terminal: each layer's last state printed, by digest.
  std::map<std::string, image::v1::LayerState> printed_;
};

// The lines after a pull:
//   Digest: sha256:...
//   Status: Downloaded newer image for busybox:latest
// ("Image is up to date for" when `up_to_date`).
std::string PullSummary(const image::v1::Image& image, bool up_to_date);

}  // namespace berth::cli

#endif  // SERVICES_NODE_CLI_IMAGE_OUTPUT_H_
