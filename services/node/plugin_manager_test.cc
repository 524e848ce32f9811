#include "services/node/plugin_manager.h"

#include <signal.h>

#include <atomic>
#include <fstream>
#include <iterator>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "services/common/test_util.h"

namespace berth::node {
namespace {

using ::berth::testing::RunfilePath;
using ::berth::testing::ShortTempDir;
using ::berth::testing::WaitFor;
using ::testing::HasSubstr;

std::string MockDriver() {
  return RunfilePath("plugins/examples/mock_driver/mock_driver");
}

std::string WriteConfig(const ShortTempDir& dir, const std::string& text) {
  const std::string path = dir.Join("plugins.json");
  std::ofstream(path) << text;
  return path;
}

TEST(LoadPluginConfigTest, ReadsPluginsAndResolvesRelativeBinaries) {
  ShortTempDir dir;
  const std::string binary = MockDriver();
  const std::string plugin_dir = binary.substr(0, binary.rfind('/'));
  auto specs = LoadPluginConfig(WriteConfig(dir, R"({"plugins": [
        {"name": "mock", "binary": "mock_driver", "args": ["--x=1"],
         "config": {"answer": 42}}]})"),
                                plugin_dir);
  ASSERT_TRUE(specs.ok()) << specs.status();
  ASSERT_EQ(specs->size(), 1u);
  EXPECT_EQ((*specs)[0].name, "mock");
  EXPECT_EQ((*specs)[0].binary, plugin_dir + "/mock_driver");
  EXPECT_EQ((*specs)[0].args, std::vector<std::string>{"--x=1"});
  EXPECT_EQ((*specs)[0].config.fields().at("answer").number_value(), 42);
  EXPECT_TRUE((*specs)[0].env.empty());
}

TEST(LoadPluginConfigTest, ReadsEachPluginsEnvironment) {
  ShortTempDir dir;
  const std::string binary = MockDriver();
  auto specs = LoadPluginConfig(
      WriteConfig(
          dir,
          absl::StrCat(
              R"({"plugins": [{"name": "py", "binary": ")", binary,
              R"(", "env": {"PYTHONPATH": "/usr/lib/berth/python", "EMPTY": ""}}]})")),
      "/");
  ASSERT_TRUE(specs.ok()) << specs.status();
  ASSERT_EQ(specs->size(), 1u);
  using Env = std::vector<std::pair<std::string, std::string>>;
  EXPECT_EQ((*specs)[0].env,
            (Env{{"EMPTY", ""}, {"PYTHONPATH", "/usr/lib/berth/python"}}));
}

TEST(LoadPluginConfigTest, ErrorsNameTheFileAndTheField) {
  ShortTempDir dir;
  struct Case {
    std::string text;
    std::string expected;
  };
  const std::string binary = MockDriver();
  const Case cases[] = {
      {"not json", "not a JSON object"},
      {R"({"plugin": []})", "\"plugins\" must be an array"},
      {R"({"plugins": [{"binary": "x"}]})", "plugins[0].name"},
      {absl::StrCat(R"({"plugins": [{"name": "a", "binary": ")", binary,
                    R"("}, {"name": "a", "binary": ")", binary, R"("}]})"),
       "plugins[1].name: a is configured twice"},
      {R"({"plugins": [{"name": "a", "binary": "/nonexistent/driver"}]})",
       "/nonexistent/driver is not an executable file"},
      {absl::StrCat(R"({"plugins": [{"name": "a", "binary": ")", binary,
                    R"(", "args": "--x"}]})"),
       "plugins[0].args must be an array of strings"},
      {absl::StrCat(R"({"plugins": [{"name": "a", "binary": ")", binary,
                    R"(", "env": ["A=1"]}]})"),
       "plugins[0].env must be an object of strings"},
      {absl::StrCat(R"({"plugins": [{"name": "a", "binary": ")", binary,
                    R"(", "env": {"A": 1}}]})"),
       "plugins[0].env.A must be a string"},
      {absl::StrCat(R"({"plugins": [{"name": "a", "binary": ")", binary,
                    R"(", "env": {"A=B": "1"}}]})"),
       "plugins[0].env: \"A=B\" is not a variable name"},
      {absl::StrCat(R"({"plugins": [{"name": "a", "binary": ")", binary,
                    R"(", "env": {"BERTH_PLUGIN_SOCKET_DIR": "/tmp"}}]})"),
       "plugins[0].env.BERTH_PLUGIN_SOCKET_DIR: the host sets"},
      {absl::StrCat(R"({"plugins": [{"name": "a", "binary": ")", binary,
                    R"(", "evn": {}}]})"),
       "plugins[0]: unknown field \"evn\""},
  };
  for (const Case& c : cases) {
    const std::string path = WriteConfig(dir, c.text);
    auto specs = LoadPluginConfig(path, "/usr/lib/berth/plugins");
    ASSERT_FALSE(specs.ok()) << c.text;
    EXPECT_THAT(specs.status().message(), HasSubstr(path)) << c.text;
    EXPECT_THAT(specs.status().message(), HasSubstr(c.expected)) << c.text;
  }
  auto missing = LoadPluginConfig(dir.Join("none.json"), "/");
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(missing.status().message(), HasSubstr(dir.Join("none.json")));
}

class PluginManagerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto store = TaskStore::Open(dir_.Join("state.db"));
    ASSERT_TRUE(store.ok()) << store.status();
    store_ = *std::move(store);
    options_.socket_dir = dir_.Join("plugins");
    options_.store = store_.get();
    options_.min_backoff = absl::Milliseconds(50);
    options_.health_interval = absl::Milliseconds(200);
    PluginSpec spec;
    spec.name = "mock";
    spec.binary = MockDriver();
    specs_.push_back(spec);
  }

  ShortTempDir dir_;
  std::unique_ptr<TaskStore> store_;
  PluginManager::Options options_;
  std::vector<PluginSpec> specs_;
};

TEST_F(PluginManagerTest, LaunchesRelaunchesACrashedPluginAndStops) {
  PluginManager manager(options_, specs_);
  std::atomic<int> ups{0};
  manager.Start([&](const std::string& name) {
    EXPECT_EQ(name, "mock");
    ++ups;
  });
  auto client = manager.Client("mock", absl::Now() + absl::Seconds(30));
  ASSERT_TRUE(client.ok()) << client.status();
  EXPECT_TRUE((*client)->GetPluginInfo().ok());
  std::vector<v1::ComponentStatus> status = manager.Status();
  ASSERT_EQ(status.size(), 1u);
  EXPECT_TRUE(status[0].healthy());
  const int first_pid = status[0].pid();
  ASSERT_GT(first_pid, 0);
  // How to find it again is persisted.
  EXPECT_EQ(store_->Plugins()->count("mock"), 1u);

  ASSERT_EQ(kill(first_pid, SIGKILL), 0);
  ASSERT_TRUE(WaitFor([&] {
    std::vector<v1::ComponentStatus> now = manager.Status();
    return now[0].healthy() && now[0].pid() != first_pid;
  }));
  EXPECT_EQ(ups.load(), 2);
  EXPECT_THAT(manager.Status()[0].message(), HasSubstr("restarted 1"));
  auto again = manager.Client("mock", absl::Now() + absl::Seconds(5));
  ASSERT_TRUE(again.ok());
  EXPECT_TRUE((*again)->GetPluginInfo().ok());

  const int second_pid = manager.Status()[0].pid();
  manager.Stop();
  EXPECT_NE(kill(second_pid, 0), 0) << "the plugin still runs after Stop";
  EXPECT_EQ(store_->Plugins()->count("mock"), 0u);
  EXPECT_EQ(manager.Client("mock", absl::Now()).status().code(),
            absl::StatusCode::kCancelled);
}

TEST_F(PluginManagerTest, APluginGetsTheEnvironmentOfItsEntry) {
  specs_[0].env = {{"BERTH_TEST_PLUGIN_ENV", "from plugins.json"}};
  PluginManager manager(options_, specs_);
  manager.Start([](const std::string&) {});
  auto client = manager.Client("mock", absl::Now() + absl::Seconds(30));
  ASSERT_TRUE(client.ok()) << client.status();
  const int pid = manager.Status()[0].pid();
  ASSERT_GT(pid, 0);
  std::ifstream in(absl::StrCat("/proc/", pid, "/environ"));
  std::string environ((std::istreambuf_iterator<char>(in)),
                      std::istreambuf_iterator<char>());
  std::vector<std::string> vars = absl::StrSplit(environ, '\0');
  EXPECT_THAT(vars,
              ::testing::Contains("BERTH_TEST_PLUGIN_ENV=from plugins.json"));
  manager.Stop();
}

TEST_F(PluginManagerTest, AnUnknownDriverIsRefusedListingTheConfiguredOnes) {
  PluginManager manager(options_, specs_);
  auto client = manager.Client("docker", absl::Now());
  EXPECT_EQ(client.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(client.status().message(),
              HasSubstr("unknown driver \"docker\" (this node has: mock)"));
}

TEST_F(PluginManagerTest, APluginThatCannotStartIsUnhealthyWithTheReason) {
  specs_[0].binary = "/bin/false";
  PluginManager manager(options_, specs_);
  manager.Start([](const std::string&) {});
  auto client = manager.Client("mock", absl::Now() + absl::Seconds(2));
  EXPECT_EQ(client.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(client.status().message(), HasSubstr("/bin/false"));
  std::vector<v1::ComponentStatus> status = manager.Status();
  EXPECT_FALSE(status[0].healthy());
  EXPECT_THAT(status[0].message(), HasSubstr("/bin/false"));
}

}  // namespace
}  // namespace berth::node
