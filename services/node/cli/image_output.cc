#include "services/node/cli/image_output.h"

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"
#include "services/images/oci/reference.h"

namespace berth::cli {
namespace {

namespace imagepb = ::berth::image::v1;

// A terminal narrower than this shows no progress bar (the line would
// wrap), as docker does.
constexpr int kBarMinColumns = 110;
// Characters between the brackets of the bar.
constexpr int64_t kBarWidth = 50;

std::string StateText(imagepb::LayerState state) {
  switch (state) {
    case imagepb::LAYER_STATE_WAITING:
      return "Waiting";
    case imagepb::LAYER_STATE_DOWNLOADING:
      return "Downloading";
    case imagepb::LAYER_STATE_VERIFYING:
      return "Verifying Checksum";
    case imagepb::LAYER_STATE_DOWNLOADED:
      return "Download complete";
    case imagepb::LAYER_STATE_UNPACKING:
      return "Extracting";
    case imagepb::LAYER_STATE_COMPLETE:
      return "Pull complete";
    case imagepb::LAYER_STATE_ALREADY_EXISTS:
      return "Already exists";
    case imagepb::LAYER_STATE_FAILED:
      return "Failed";
    case imagepb::LAYER_STATE_RETRYING:
      return "Retrying";
    default:
      return "Pulling fs layer";
  }
}

// "[=====>     ] " for `done` of `total`.
std::string Bar(int64_t done, int64_t total) {
  const int64_t filled = std::clamp<int64_t>(
      done * kBarWidth / std::max<int64_t>(total, 1), 0, kBarWidth);
  std::string bar = absl::StrCat("[", std::string(filled, '='));
  if (filled < kBarWidth) {
    absl::StrAppend(&bar, ">", std::string(kBarWidth - filled - 1, ' '));
  }
  return absl::StrCat(bar, "] ");
}

}  // namespace

std::string DecimalBytes(int64_t bytes) {
  static constexpr const char* kUnits[] = {"B", "kB", "MB", "GB", "TB", "PB"};
  double value = static_cast<double>(std::max<int64_t>(bytes, 0));
  size_t unit = 0;
  // 999.5 would print as "1e+03" with three digits: the next unit's 1.
  while (value >= 999.5 && unit + 1 < std::size(kUnits)) {
    value /= 1000;
    ++unit;
  }
  return absl::StrFormat("%.3g%s", value, kUnits[unit]);
}

std::string FamiliarName(absl::string_view name) {
  absl::StatusOr<images::Reference> reference = images::ParseReference(name);
  if (!reference.ok()) return std::string(name);
  return images::FamiliarString(*reference);
}

RepositoryTag SplitImageName(absl::string_view name) {
  absl::StatusOr<images::Reference> reference = images::ParseReference(name);
  if (!reference.ok()) return {std::string(name), "<none>"};
  // A name given by digest alone has no tag (ParseReference adds "latest"
  // only when neither is given).
  RepositoryTag split{"", reference->tag.empty() ? "<none>" : reference->tag};
  reference->tag.clear();
  reference->digest.clear();
  split.repository = images::FamiliarString(*reference);
  return split;
}

std::string ShortDigest(absl::string_view digest) {
  const size_t colon = digest.find(':');
  if (colon != digest.npos) digest.remove_prefix(colon + 1);
  return std::string(digest.substr(0, 12));
}

absl::StatusOr<imagepb::Platform> ParsePlatform(absl::string_view text) {
  const std::vector<absl::string_view> parts = absl::StrSplit(text, '/');
  bool empty_part = false;
  for (absl::string_view part : parts) empty_part |= part.empty();
  if (parts.size() < 2 || parts.size() > 3 || empty_part) {
    return absl::InvalidArgumentError(absl::StrCat(
        "\"", text, "\" must be OS/ARCH[/VARIANT], e.g. linux/amd64"));
  }
  imagepb::Platform platform;
  platform.set_os(std::string(parts[0]));
  platform.set_architecture(std::string(parts[1]));
  if (parts.size() == 3) platform.set_variant(std::string(parts[2]));
  return platform;
}

PullProgressPrinter::PullProgressPrinter(bool terminal, int columns)
    : terminal_(terminal), columns_(columns) {}

std::string PullProgressPrinter::TerminalLine(
    const imagepb::LayerProgress& layer) const {
  std::string line =
      absl::StrCat(ShortDigest(layer.digest()), ": ", StateText(layer.state()));
  if (layer.state() == imagepb::LAYER_STATE_DOWNLOADING ||
      layer.state() == imagepb::LAYER_STATE_RETRYING) {
    if (layer.size() > 0) {
      const bool bar = columns_ == 0 || columns_ >= kBarMinColumns;
      const std::string downloaded = DecimalBytes(layer.downloaded());
      const std::string size = DecimalBytes(layer.size());
      // absl::StrFormat takes only constant formats (clang checks it).
      absl::StrAppend(
          &line, " ",
          bar ? absl::StrCat(Bar(layer.downloaded(), layer.size()),
                             absl::StrFormat("%8s/%s", downloaded, size))
              : absl::StrCat(downloaded, "/", size));
    } else {
      absl::StrAppend(&line, " ", DecimalBytes(layer.downloaded()));
    }
  }
  // A line that wrapped would throw the cursor movements off.
  if (columns_ > 1 && line.size() >= static_cast<size_t>(columns_)) {
    line.resize(columns_ - 1);
  }
  return line;
}

std::string PullProgressPrinter::Update(
    const imagepb::PullImageProgress& progress) {
  std::string out;
  if (!terminal_) {
    // A status that comes with layers already shown ("pulled ...") reads
    // after their last changes; one before any layer, before them.
    const bool status_first = printed_.empty();
    if (status_first && !progress.status().empty()) {
      absl::StrAppend(&out, progress.status(), "\n");
    }
    for (const imagepb::LayerProgress& layer : progress.layers()) {
      auto [it, inserted] = printed_.try_emplace(layer.digest(), layer.state());
      if (!inserted && it->second == layer.state()) continue;
      it->second = layer.state();
      absl::StrAppend(&out, ShortDigest(layer.digest()), ": ",
                      StateText(layer.state()));
      if (layer.state() == imagepb::LAYER_STATE_DOWNLOADING &&
          layer.size() > 0) {
        absl::StrAppend(&out, " ", DecimalBytes(layer.size()));
      }
      absl::StrAppend(&out, "\n");
    }
    if (!status_first && !progress.status().empty()) {
      absl::StrAppend(&out, progress.status(), "\n");
    }
    return out;
  }

  std::vector<std::string> lines;
  for (const imagepb::LayerProgress& layer : progress.layers()) {
    lines.push_back(TerminalLine(layer));
  }
  // The stream lists every layer known so far; one it no longer lists
  // keeps its line.
  for (size_t i = lines.size(); i < drawn_.size(); ++i) {
    lines.push_back(drawn_[i]);
  }
  if (progress.status().empty() && lines == drawn_) return out;
  // Up to the first layer line (the cursor is below the last one), then
  // each line cleared and written again.
  if (!drawn_.empty()) absl::StrAppend(&out, "\033[", drawn_.size(), "A");
  if (!progress.status().empty()) {
    absl::StrAppend(&out, "\033[2K", progress.status(), "\n");
  }
  for (const std::string& line : lines) {
    absl::StrAppend(&out, "\033[2K", line, "\n");
  }
  drawn_ = std::move(lines);
  return out;
}

std::string PullSummary(const imagepb::Image& image, bool up_to_date) {
  return absl::StrCat(
      "Digest: ", image.digest(), "\nStatus: ",
      up_to_date ? "Image is up to date for " : "Downloaded newer image for ",
      FamiliarName(image.name()), "\n");
}

}  // namespace berth::cli
