#include "services/node/cli/image_output.h"

#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "berth/image/v1/image.pb.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace berth::cli {
namespace {

namespace imagepb = ::berth::image::v1;
using ::testing::HasSubstr;

const std::string kLayerA = absl::StrCat("sha256:", std::string(64, 'a'));
const std::string kLayerB = absl::StrCat("sha256:", std::string(64, 'b'));

TEST(DecimalBytesTest, ThreeSignificantDigitsInDecimalUnits) {
  EXPECT_EQ(DecimalBytes(0), "0B");
  EXPECT_EQ(DecimalBytes(999), "999B");
  EXPECT_EQ(DecimalBytes(1000), "1kB");
  EXPECT_EQ(DecimalBytes(1234), "1.23kB");
  EXPECT_EQ(DecimalBytes(12'345'678), "12.3MB");
  EXPECT_EQ(DecimalBytes(999'600), "1MB");  // not "1e+03kB"
  EXPECT_EQ(DecimalBytes(4'560'000'000), "4.56GB");
  EXPECT_EQ(DecimalBytes(-5), "0B");
}

TEST(FamiliarNameTest, DockerHubNamesShortened) {
  EXPECT_EQ(FamiliarName("docker.io/library/busybox:latest"), "busybox:latest");
  EXPECT_EQ(FamiliarName("docker.io/team/app:1.2"), "team/app:1.2");
  EXPECT_EQ(FamiliarName("docker.io/library/a/b:1"), "library/a/b:1");
  EXPECT_EQ(FamiliarName("127.0.0.1:5000/busybox:latest"),
            "127.0.0.1:5000/busybox:latest");
  EXPECT_EQ(FamiliarName(absl::StrCat("docker.io/library/busybox@", kLayerA)),
            absl::StrCat("busybox@", kLayerA));
  EXPECT_EQ(FamiliarName("not a name"), "not a name");
}

TEST(SplitImageNameTest, RepositoryAndTag) {
  RepositoryTag split = SplitImageName("docker.io/library/busybox:1.36");
  EXPECT_EQ(split.repository, "busybox");
  EXPECT_EQ(split.tag, "1.36");
  split = SplitImageName("127.0.0.1:5000/team/app:v2");
  EXPECT_EQ(split.repository, "127.0.0.1:5000/team/app");
  EXPECT_EQ(split.tag, "v2");
  split = SplitImageName(absl::StrCat("registry:5000/app@", kLayerA));
  EXPECT_EQ(split.repository, "registry:5000/app");
  EXPECT_EQ(split.tag, "<none>");
}

TEST(ShortDigestTest, TwelveHex) {
  EXPECT_EQ(ShortDigest(kLayerA), "aaaaaaaaaaaa");
  EXPECT_EQ(ShortDigest("abc"), "abc");
}

TEST(ParsePlatformTest, OsArchVariant) {
  absl::StatusOr<imagepb::Platform> platform = ParsePlatform("linux/arm64/v8");
  ASSERT_TRUE(platform.ok()) << platform.status();
  EXPECT_EQ(platform->os(), "linux");
  EXPECT_EQ(platform->architecture(), "arm64");
  EXPECT_EQ(platform->variant(), "v8");
  for (const char* bad : {"linux", "linux/", "/amd64", "a/b/c/d", ""}) {
    absl::StatusOr<imagepb::Platform> parsed = ParsePlatform(bad);
    EXPECT_FALSE(parsed.ok()) << bad;
    EXPECT_THAT(parsed.status().message(), HasSubstr("OS/ARCH[/VARIANT]"));
  }
}

imagepb::LayerProgress Layer(const std::string& digest,
                             imagepb::LayerState state, int64_t downloaded,
                             int64_t size) {
  imagepb::LayerProgress layer;
  layer.set_digest(digest);
  layer.set_state(state);
  layer.set_downloaded(downloaded);
  layer.set_size(size);
  return layer;
}

imagepb::PullImageProgress Message(const std::string& status,
                                   std::vector<imagepb::LayerProgress> layers) {
  imagepb::PullImageProgress progress;
  progress.set_status(status);
  for (const auto& layer : layers) *progress.add_layers() = layer;
  return progress;
}

// A pull of two layers: A downloaded and unpacked, B there before.
std::vector<imagepb::PullImageProgress> Pull() {
  const imagepb::LayerProgress b =
      Layer(kLayerB, imagepb::LAYER_STATE_ALREADY_EXISTS, 0, 500);
  std::vector<imagepb::PullImageProgress> pull = {
      Message("resolving docker.io/library/busybox:latest", {})};
  // Layer A's states, with the bytes downloaded in each.
  const std::vector<std::pair<imagepb::LayerState, int64_t>> states = {
      {imagepb::LAYER_STATE_WAITING, 0},
      {imagepb::LAYER_STATE_DOWNLOADING, 0},
      {imagepb::LAYER_STATE_DOWNLOADING, 1'000'000},
      {imagepb::LAYER_STATE_VERIFYING, 2'000'000},
      {imagepb::LAYER_STATE_DOWNLOADED, 2'000'000},
      {imagepb::LAYER_STATE_UNPACKING, 2'000'000},
      {imagepb::LAYER_STATE_COMPLETE, 2'000'000},
  };
  for (const auto& [state, downloaded] : states) {
    pull.push_back(
        Message("", {Layer(kLayerA, state, downloaded, 2'000'000), b}));
  }
  return pull;
}

TEST(PullProgressPrinterTest, PlainLinesOnePerStateChange) {
  PullProgressPrinter printer(/*terminal=*/false, 0);
  std::string out;
  for (const auto& message : Pull()) out += printer.Update(message);
  EXPECT_EQ(out,
            "resolving docker.io/library/busybox:latest\n"
            "aaaaaaaaaaaa: Waiting\n"
            "bbbbbbbbbbbb: Already exists\n"
            "aaaaaaaaaaaa: Downloading 2MB\n"
            "aaaaaaaaaaaa: Verifying Checksum\n"
            "aaaaaaaaaaaa: Download complete\n"
            "aaaaaaaaaaaa: Extracting\n"
            "aaaaaaaaaaaa: Pull complete\n");
  EXPECT_EQ(out.find('\033'), std::string::npos);
}

// The last message's status ("pulled ...") comes with the layers' last
// changes: it reads after them, as docker's summary does.
TEST(PullProgressPrinterTest, PlainStatusAfterShownLayersComesLast) {
  PullProgressPrinter printer(/*terminal=*/false, 0);
  std::vector<imagepb::PullImageProgress> pull = Pull();
  pull.back().set_status("pulled docker.io/library/busybox:latest");
  std::string out;
  for (const auto& message : pull) out += printer.Update(message);
  EXPECT_THAT(out,
              testing::EndsWith("aaaaaaaaaaaa: Pull complete\n"
                                "pulled docker.io/library/busybox:latest\n"));
  EXPECT_THAT(
      out, testing::StartsWith("resolving docker.io/library/busybox:latest\n"));
}

TEST(PullProgressPrinterTest, TerminalRedrawsEachLayerInPlace) {
  PullProgressPrinter printer(/*terminal=*/true, 120);
  const std::vector<imagepb::PullImageProgress> pull = Pull();
  EXPECT_EQ(printer.Update(pull[0]),
            "\033[2Kresolving docker.io/library/busybox:latest\n");
  // The layers appear: drawn below, nothing to go back over.
  EXPECT_EQ(printer.Update(pull[1]),
            "\033[2Kaaaaaaaaaaaa: Waiting\n"
            "\033[2Kbbbbbbbbbbbb: Already exists\n");
  // Then up two lines and both drawn again.
  EXPECT_EQ(printer.Update(pull[2]),
            absl::StrCat("\033[2A\033[2Kaaaaaaaaaaaa: Downloading [>",
                         std::string(49, ' '), "]       0B/2MB\n",
                         "\033[2Kbbbbbbbbbbbb: Already exists\n"));
  EXPECT_EQ(printer.Update(pull[3]),
            absl::StrCat("\033[2A\033[2Kaaaaaaaaaaaa: Downloading [",
                         std::string(25, '='), ">", std::string(24, ' '),
                         "]      1MB/2MB\n",
                         "\033[2Kbbbbbbbbbbbb: Already exists\n"));
  EXPECT_EQ(printer.Update(pull[3]), "");  // nothing moved
  // A status line goes above the layers, which move down one line.
  EXPECT_EQ(
      printer.Update(Message("retrying a mirror", {})),
      absl::StrCat("\033[2A\033[2Kretrying a mirror\n",
                   "\033[2Kaaaaaaaaaaaa: Downloading [", std::string(25, '='),
                   ">", std::string(24, ' '), "]      1MB/2MB\n",
                   "\033[2Kbbbbbbbbbbbb: Already exists\n"));
  EXPECT_EQ(printer.Update(pull.back()),
            "\033[2A\033[2Kaaaaaaaaaaaa: Pull complete\n"
            "\033[2Kbbbbbbbbbbbb: Already exists\n");
}

TEST(PullProgressPrinterTest, NarrowTerminalHasNoBarAndCutsLines) {
  const std::vector<imagepb::PullImageProgress> pull = Pull();
  PullProgressPrinter narrow(/*terminal=*/true, 80);
  EXPECT_EQ(narrow.Update(pull[3]),
            "\033[2Kaaaaaaaaaaaa: Downloading 1MB/2MB\n"
            "\033[2Kbbbbbbbbbbbb: Already exists\n");
  PullProgressPrinter tiny(/*terminal=*/true, 20);
  EXPECT_EQ(tiny.Update(pull[3]),
            "\033[2Kaaaaaaaaaaaa: Downl\n"
            "\033[2Kbbbbbbbbbbbb: Alrea\n");
}

TEST(PullSummaryTest, DigestAndStatus) {
  imagepb::Image image;
  image.set_name("docker.io/library/busybox:latest");
  image.set_digest(kLayerA);
  EXPECT_EQ(PullSummary(image, /*up_to_date=*/false),
            absl::StrCat("Digest: ", kLayerA,
                         "\nStatus: Downloaded newer image for "
                         "busybox:latest\n"));
  EXPECT_EQ(PullSummary(image, /*up_to_date=*/true),
            absl::StrCat("Digest: ", kLayerA,
                         "\nStatus: Image is up to date for busybox:latest\n"));
}

}  // namespace
}  // namespace berth::cli
