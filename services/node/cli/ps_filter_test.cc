#include "services/node/cli/ps_filter.h"

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "berth/node/v1/node.pb.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace berth::cli {
namespace {

namespace nodepb = ::berth::node::v1;
using ::testing::HasSubstr;

nodepb::Task MakeTask(const std::string& id, const std::string& name,
                      nodepb::TaskState state) {
  nodepb::Task task;
  task.set_id(id);
  task.mutable_spec()->set_name(name);
  task.set_state(state);
  return task;
}

// The names of `tasks` that `filters` lets through.
std::vector<std::string> Matching(const std::vector<std::string>& filters,
                                  const std::vector<nodepb::Task>& tasks) {
  absl::StatusOr<PsFilters> parsed = PsFilters::Parse(filters);
  EXPECT_TRUE(parsed.ok()) << parsed.status();
  std::vector<std::string> names;
  if (!parsed.ok()) return names;
  for (const nodepb::Task& task : tasks) {
    if (parsed->Matches(task)) names.push_back(task.spec().name());
  }
  return names;
}

class PsFilterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    nodepb::Task web = MakeTask("aaaa1111", "web", nodepb::TASK_STATE_RUNNING);
    (*web.mutable_spec()->mutable_labels())["tier"] = "front";
    (*web.mutable_spec()->mutable_labels())["team"] = "a";
    web.mutable_health()->set_status(nodepb::HEALTH_STATUS_HEALTHY);
    nodepb::Task api = MakeTask("aaaa2222", "api", nodepb::TASK_STATE_RUNNING);
    (*api.mutable_spec()->mutable_labels())["tier"] = "back";
    api.mutable_health()->set_status(nodepb::HEALTH_STATUS_UNHEALTHY);
    nodepb::Task webjob =
        MakeTask("bbbb3333", "webjob", nodepb::TASK_STATE_EXITED);
    (*webjob.mutable_spec()->mutable_labels())["team"] = "a";
    nodepb::Task boot =
        MakeTask("cccc4444", "boot", nodepb::TASK_STATE_PENDING);
    boot.mutable_health()->set_status(nodepb::HEALTH_STATUS_STARTING);
    nodepb::Task bad = MakeTask("dddd5555", "bad", nodepb::TASK_STATE_FAILED);
    tasks_ = {web, api, webjob, boot, bad};
  }

  std::vector<nodepb::Task> tasks_;
};

TEST_F(PsFilterTest, NoFiltersMatchEverything) {
  EXPECT_EQ(Matching({}, tasks_).size(), tasks_.size());
  EXPECT_TRUE(PsFilters::Parse({})->empty());
}

TEST_F(PsFilterTest, LabelByKeyOrKeyAndValue) {
  EXPECT_THAT(Matching({"label=tier"}, tasks_),
              ::testing::ElementsAre("web", "api"));
  EXPECT_THAT(Matching({"label=tier=back"}, tasks_),
              ::testing::ElementsAre("api"));
  EXPECT_THAT(Matching({"label=tier="}, tasks_), ::testing::IsEmpty());
  EXPECT_THAT(Matching({"label=nope"}, tasks_), ::testing::IsEmpty());
}

TEST_F(PsFilterTest, NameIsASubstringAndIdAPrefix) {
  EXPECT_THAT(Matching({"name=web"}, tasks_),
              ::testing::ElementsAre("web", "webjob"));
  EXPECT_THAT(Matching({"name=job"}, tasks_), ::testing::ElementsAre("webjob"));
  EXPECT_THAT(Matching({"id=aaaa"}, tasks_),
              ::testing::ElementsAre("web", "api"));
  EXPECT_THAT(Matching({"id=1111"}, tasks_), ::testing::IsEmpty());
}

TEST_F(PsFilterTest, StatusAndHealth) {
  EXPECT_THAT(Matching({"status=running"}, tasks_),
              ::testing::ElementsAre("web", "api"));
  EXPECT_THAT(Matching({"status=exited"}, tasks_),
              ::testing::ElementsAre("webjob"));
  // docker's "created": not started yet.
  EXPECT_THAT(Matching({"status=created"}, tasks_),
              ::testing::ElementsAre("boot"));
  EXPECT_THAT(Matching({"status=failed"}, tasks_),
              ::testing::ElementsAre("bad"));
  EXPECT_THAT(Matching({"health=healthy"}, tasks_),
              ::testing::ElementsAre("web"));
  EXPECT_THAT(Matching({"health=unhealthy"}, tasks_),
              ::testing::ElementsAre("api"));
  EXPECT_THAT(Matching({"health=starting"}, tasks_),
              ::testing::ElementsAre("boot"));
  EXPECT_THAT(Matching({"health=none"}, tasks_),
              ::testing::ElementsAre("webjob", "bad"));
}

TEST_F(PsFilterTest, ValuesOfOneKeyOrKeysAnd) {
  EXPECT_THAT(Matching({"status=exited", "status=failed"}, tasks_),
              ::testing::ElementsAre("webjob", "bad"));
  EXPECT_THAT(Matching({"label=team=a", "status=running"}, tasks_),
              ::testing::ElementsAre("web"));
  EXPECT_THAT(Matching({"name=web", "name=api", "label=tier"}, tasks_),
              ::testing::ElementsAre("web", "api"));
}

TEST_F(PsFilterTest, AStatusFilterImpliesAll) {
  EXPECT_TRUE(PsFilters::Parse({"status=exited"})->ImpliesAll());
  EXPECT_FALSE(PsFilters::Parse({"name=web", "health=none"})->ImpliesAll());
}

TEST(PsFilterParseTest, BadFiltersNameTheFlagAndTheValue) {
  struct Case {
    std::string filter;
    std::string message;
  };
  for (const Case& c : std::vector<Case>{
           {"web", "--filter \"web\": not KEY=VALUE"},
           {"colour=red", "--filter \"colour=red\": unknown key \"colour\""},
           {"name=", "--filter \"name=\": the value is empty"},
           {"label==x", "--filter \"label==x\": the label's key is empty"},
           {"id=XYZ", "--filter \"id=XYZ\": an id prefix is lowercase hex"},
           {"status=paused",
            "--filter \"status=paused\": unknown status \"paused\" (one of "
            "created, pending, starting, running, restarting, exited, "
            "failed)"},
           {"health=sick",
            "--filter \"health=sick\": unknown health "
            "\"sick\" (one of starting, healthy, unhealthy, "
            "none)"},
       }) {
    absl::StatusOr<PsFilters> parsed = PsFilters::Parse({"name=ok", c.filter});
    ASSERT_FALSE(parsed.ok()) << c.filter;
    EXPECT_EQ(parsed.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(parsed.status().message()), HasSubstr(c.message));
  }
}

TEST(HealthTextTest, Words) {
  nodepb::Task task;
  EXPECT_EQ(HealthText(task), "none");
  task.mutable_health()->set_status(nodepb::HEALTH_STATUS_STARTING);
  EXPECT_EQ(HealthText(task), "starting");
  task.mutable_health()->set_status(nodepb::HEALTH_STATUS_HEALTHY);
  EXPECT_EQ(HealthText(task), "healthy");
  task.mutable_health()->set_status(nodepb::HEALTH_STATUS_UNHEALTHY);
  EXPECT_EQ(HealthText(task), "unhealthy");
}

}  // namespace
}  // namespace berth::cli
