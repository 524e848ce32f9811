#include "plugins/conformance/cli.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "plugins/conformance/suite.h"

ABSL_FLAG(bool, cli_test_bool, false, "A bool flag for the test.");
ABSL_FLAG(std::string, cli_test_name, "", "A string flag for the test.");

namespace berth::conformance {
namespace {

using ::testing::HasSubstr;

absl::Status CheckArgs(std::vector<std::string> args) {
  args.insert(args.begin(), "berth-driver-conformance");
  std::vector<char*> argv;
  for (std::string& arg : args) argv.push_back(arg.data());
  return CheckFlagNames(static_cast<int>(argv.size()), argv.data());
}

TEST(CheckFlagNamesTest, AcceptsDefinedFlagsInEverySpelling) {
  EXPECT_TRUE(CheckArgs({"--cli_test_name=x"}).ok());
  EXPECT_TRUE(CheckArgs({"--cli-test-name=x"}).ok());
  EXPECT_TRUE(CheckArgs({"-cli_test_name", "x"}).ok());
  EXPECT_TRUE(CheckArgs({"--cli_test_bool"}).ok());
  EXPECT_TRUE(CheckArgs({"--nocli_test_bool"}).ok());
  EXPECT_TRUE(CheckArgs({"-h"}).ok());
  EXPECT_TRUE(CheckArgs({"--help"}).ok());
  EXPECT_TRUE(CheckArgs({"--version"}).ok());
  EXPECT_TRUE(CheckArgs({"--helpfull"}).ok());
  EXPECT_TRUE(CheckArgs({"positional", "-"}).ok());
}

TEST(CheckFlagNamesTest, NamesAnUnknownFlag) {
  const absl::Status status = CheckArgs({"--cli_test_bool", "--plugins=x"});
  EXPECT_TRUE(absl::IsInvalidArgument(status)) << status;
  EXPECT_THAT(status.message(), HasSubstr("--plugins=x"));
  // "no" only negates a bool flag.
  EXPECT_FALSE(CheckArgs({"--nocli_test_name"}).ok());
  EXPECT_FALSE(CheckArgs({"--nocli_test_bool=true"}).ok());
}

TEST(CheckFlagNamesTest, StopsAtDoubleDash) {
  EXPECT_TRUE(CheckArgs({"--", "--whatever"}).ok());
}

class ValidateOptionsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* tmp = std::getenv("TEST_TMPDIR");
    dir_ = tmp != nullptr ? tmp : "/tmp";
  }

  // A file in the test's directory with `mode`.
  std::string MakeFile(const std::string& name, mode_t mode) {
    const std::string path = absl::StrCat(dir_, "/", name);
    const int fd = open(path.c_str(), O_CREAT | O_WRONLY | O_TRUNC, mode);
    EXPECT_GE(fd, 0) << path;
    close(fd);
    chmod(path.c_str(), mode);
    return path;
  }

  SuiteOptions Valid() {
    SuiteOptions options;
    options.plugin = MakeFile("driver", 0755);
    return options;
  }

  std::string dir_;
};

TEST_F(ValidateOptionsTest, AcceptsValidOptions) {
  SuiteOptions options = Valid();
  options.task_config_json = R"({"image": "x"})";
  options.filter = "exec";
  EXPECT_TRUE(ValidateOptions(options).ok()) << ValidateOptions(options);
}

TEST_F(ValidateOptionsTest, PluginIsRequired) {
  SuiteOptions options = Valid();
  options.plugin = "";
  const absl::Status status = ValidateOptions(options);
  EXPECT_TRUE(absl::IsInvalidArgument(status));
  EXPECT_THAT(status.message(), HasSubstr("--plugin is required"));
}

TEST_F(ValidateOptionsTest, PluginMustBeAnExecutableFile) {
  SuiteOptions options = Valid();
  options.plugin = absl::StrCat(dir_, "/no-such-driver");
  EXPECT_THAT(ValidateOptions(options).message(),
              HasSubstr(absl::StrCat("--plugin=", dir_, "/no-such-driver: ")));
  options.plugin = MakeFile("not-executable", 0644);
  EXPECT_THAT(ValidateOptions(options).message(), HasSubstr("not executable"));
  options.plugin = dir_;
  EXPECT_THAT(ValidateOptions(options).message(),
              HasSubstr("not a regular file"));
}

TEST_F(ValidateOptionsTest, TaskConfigMustBeAnObject) {
  SuiteOptions options = Valid();
  options.task_config_json = "[1]";
  EXPECT_THAT(ValidateOptions(options).message(), HasSubstr("--task-config"));
}

TEST_F(ValidateOptionsTest, StartTimeoutMustBePositive) {
  SuiteOptions options = Valid();
  options.start_timeout = absl::ZeroDuration();
  EXPECT_THAT(ValidateOptions(options).message(), HasSubstr("--start_timeout"));
}

TEST_F(ValidateOptionsTest, FilterMustMatchACheck) {
  SuiteOptions options = Valid();
  options.filter = "no_such_check";
  const absl::Status status = ValidateOptions(options);
  EXPECT_THAT(status.message(), HasSubstr("--filter=no_such_check"));
  EXPECT_THAT(status.message(), HasSubstr("exec_streaming_100mb"));
}

TEST(UsageTextTest, ListsEveryCheck) {
  const std::string usage = UsageText();
  for (const Check& check : AllChecks()) {
    EXPECT_THAT(usage, HasSubstr(absl::StrCat("  ", check.name, ": ")));
  }
  EXPECT_THAT(usage, HasSubstr("[needs exec_tty]"));
}

}  // namespace
}  // namespace berth::conformance
