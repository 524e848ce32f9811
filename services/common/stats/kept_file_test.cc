#include "services/common/stats/kept_file.h"

#include <sys/stat.h>
#include <unistd.h>

#include <optional>
#include <string>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "services/common/stats/test_util.h"

namespace berth {
namespace stats {
namespace {

using ::berth::stats::testing::ShortTempDir;
using ::berth::stats::testing::WriteFile;
using ::testing::HasSubstr;
using ::testing::Optional;

TEST(KeptFileTest, RereadsTheCurrentContent) {
  ShortTempDir dir;
  const std::string path = dir.Join("memory.current");
  WriteFile(path, "123\n");
  absl::StatusOr<KeptFile> file = KeptFile::Open(path);
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_EQ(*file->Read(), "123\n");
  WriteFile(path, "4567890\n");
  EXPECT_EQ(*file->Read(), "4567890\n");
  WriteFile(path, "1\n");
  EXPECT_EQ(*file->Read(), "1\n");
}

TEST(KeptFileTest, ReadsFilesLongerThanItsFirstBuffer) {
  ShortTempDir dir;
  const std::string path = dir.Join("big");
  const std::string content(20000, 'x');
  WriteFile(path, content);
  absl::StatusOr<KeptFile> file = KeptFile::Open(path);
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_EQ(*file->Read(), content);
}

TEST(KeptFileTest, MissingFileIsNotFoundNamingThePath) {
  ShortTempDir dir;
  const std::string path = dir.Join("nothing");
  absl::StatusOr<KeptFile> file = KeptFile::Open(path);
  EXPECT_TRUE(absl::IsNotFound(file.status())) << file.status();
  EXPECT_THAT(file.status().message(), HasSubstr(path));

  absl::StatusOr<KeptFile> optional = OpenIfPresent(path);
  ASSERT_TRUE(optional.ok()) << optional.status();
  EXPECT_FALSE(optional->is_open());
  std::optional<uint64_t> value;
  EXPECT_TRUE(ReadSingleNumber(*optional, &value).ok());
  EXPECT_EQ(value, std::nullopt);
}

TEST(DirWatchTest, SeesARemovedDirectory) {
  ShortTempDir dir;
  const std::string path = dir.Join("cgroup");
  ASSERT_EQ(mkdir(path.c_str(), 0755), 0);
  absl::StatusOr<DirWatch> watch = DirWatch::Open(path);
  ASSERT_TRUE(watch.ok()) << watch.status();
  EXPECT_FALSE(watch->Gone());
  ASSERT_EQ(rmdir(path.c_str()), 0);
  EXPECT_TRUE(watch->Gone());
  EXPECT_TRUE(absl::IsNotFound(DirWatch::Open(path).status()));
}

TEST(ParseSingleNumberTest, TakesOneNumber) {
  EXPECT_EQ(*ParseSingleNumber("42\n", "f"), 42u);
  EXPECT_EQ(*ParseSingleNumber("18446744073709551615", "f"),
            18446744073709551615u);
  EXPECT_TRUE(
      absl::IsInvalidArgument(ParseSingleNumber("max\n", "f").status()));
  EXPECT_TRUE(absl::IsInvalidArgument(ParseSingleNumber("", "f").status()));
  EXPECT_TRUE(absl::IsInvalidArgument(ParseSingleNumber("1 2", "f").status()));
  EXPECT_TRUE(absl::IsInvalidArgument(
      ParseSingleNumber("18446744073709551616", "f").status()));
  EXPECT_THAT(ParseSingleNumber("x", "/a/memory.peak").status().message(),
              HasSubstr("/a/memory.peak"));
}

TEST(ParseFlatKeyedTest, FindsWholeKeysOnly) {
  std::optional<uint64_t> rss, cache, total_rss, absent;
  const KeyedField fields[] = {{"rss", &rss},
                               {"cache", &cache},
                               {"total_rss", &total_rss},
                               {"swap", &absent}};
  ParseFlatKeyed("cache 10\nrss_huge 99\nrss 20\ntotal_rss 30\nbad x\n",
                 fields);
  EXPECT_THAT(rss, Optional(20u));
  EXPECT_THAT(cache, Optional(10u));
  EXPECT_THAT(total_rss, Optional(30u));
  EXPECT_EQ(absent, std::nullopt);
}

TEST(ParseFlatKeyedTest, ReadsProcStatusLines) {
  std::optional<uint64_t> rss, swap;
  const KeyedField fields[] = {{"VmRSS:", &rss}, {"VmSwap:", &swap}};
  ParseFlatKeyed("Name:\tsh\nVmRSS:\t    1234 kB\nVmSwap:\t       0 kB\n",
                 fields);
  EXPECT_THAT(rss, Optional(1234u));
  EXPECT_THAT(swap, Optional(0u));
}

TEST(ParseFlatKeyedTest, LeavesKeysWithoutANumberUnset) {
  std::optional<uint64_t> value;
  const KeyedField fields[] = {{"key", &value}};
  ParseFlatKeyed("key\nkey \nkey max\n", fields);
  EXPECT_EQ(value, std::nullopt);
}

}  // namespace
}  // namespace stats
}  // namespace berth
