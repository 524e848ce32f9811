#include "tools/fuzz/fuzz_util.h"

#include <errno.h>
#include <sys/stat.h>

#include <cstdint>
#include <set>
#include <string>

#include "absl/strings/str_cat.h"
#include "glog/logging.h"
#include "gtest/gtest.h"
#include "tools/fuzz/fuzz_files.h"

namespace berth::fuzz {
namespace {

TEST(AsTextTest, IsTheBytesAsTheyAre) {
  const uint8_t bytes[] = {'a', 0, 0xff, '\n'};
  const absl::string_view text = AsText(bytes, sizeof(bytes));
  EXPECT_EQ(text, absl::string_view("a\0\xff\n", 4));
  EXPECT_EQ(static_cast<const void*>(text.data()), bytes);
  EXPECT_TRUE(AsText(nullptr, 0).empty());
}

TEST(RequireTest, AbortsNamingTheTargetAndWhat) {
  EXPECT_EQ(TargetName(), "fuzz_util_test");
  Require(true, "never printed");
  EXPECT_DEATH(Require(false, "an accepted size too big"),
               "^fuzz_util_test: an accepted size too big\n");
}

TEST(RequireTest, NamesTheTargetAlikeInItsCorpusTest) {
  char* const program = program_invocation_short_name;
  char corpus_test[] = "demo_fuzzer_corpus_test";
  program_invocation_short_name = corpus_test;
  const std::string name(TargetName());
  program_invocation_short_name = program;
  EXPECT_EQ(name, "demo_fuzzer");
}

TEST(QuietLoggingTest, RaisesTheLevelToError) {
  FLAGS_minloglevel = google::GLOG_INFO;
  QuietLogging();
  EXPECT_EQ(FLAGS_minloglevel, google::GLOG_ERROR);
}

TEST(ScopedTempDirTest, IsMadeAndRemovedWithItsContents) {
  std::string path;
  {
    ScopedTempDir dir("fuzz-util-test");
    path = dir.path();
    EXPECT_EQ(path.rfind(TempBase() + "/fuzz-util-test-", 0), 0u) << path;
    struct stat st;
    ASSERT_EQ(stat(path.c_str(), &st), 0);
    EXPECT_TRUE(S_ISDIR(st.st_mode));
    ASSERT_EQ(mkdir((path + "/sub").c_str(), 0700), 0);
    CreateFile(path + "/sub/file", "bytes");
    CreateFile(path + "/empty", "");
    EXPECT_EQ(ListNames(path), (std::set<std::string>{"empty", "sub"}));
  }
  struct stat st;
  EXPECT_NE(stat(path.c_str(), &st), 0) << path << " is still there";
}

TEST(ScopedTempDirTest, AbortsWhenItCannotMakeTheDirectory) {
  EXPECT_DEATH(ScopedTempDir("no/such/dir"),
               "fuzz_util_test: mkdtemp .*/no/such/dir-XXXXXX: No such file");
}

TEST(CreateFileTest, RefusesAnExistingFileNamingIt) {
  ScopedTempDir dir("fuzz-util-test");
  const std::string path = dir.path() + "/file";
  CreateFile(path, "first");
  EXPECT_DEATH(
      CreateFile(path, "second"),
      absl::StrCat("fuzz_util_test: cannot create ", path, ": File exists"));
}

TEST(ListNamesTest, AbortsNamingADirectoryItCannotList) {
  ScopedTempDir dir("fuzz-util-test");
  const std::string missing = dir.path() + "/missing";
  EXPECT_DEATH(ListNames(missing), absl::StrCat("fuzz_util_test: cannot list ",
                                                missing, ": No such file"));
}

}  // namespace
}  // namespace berth::fuzz
