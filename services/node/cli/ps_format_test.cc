#include "services/node/cli/ps_format.h"

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "berth/node/v1/node.pb.h"
#include "gmock/gmock.h"
#include "google/protobuf/util/time_util.h"
#include "gtest/gtest.h"

namespace berth::cli {
namespace {

namespace netpb = ::berth::network::v1;
namespace nodepb = ::berth::node::v1;
using ::google::protobuf::util::TimeUtil;
using ::testing::HasSubstr;

const absl::Time kNow = absl::FromUnixSeconds(1700000000);

google::protobuf::Timestamp Ago(absl::Duration duration) {
  return TimeUtil::SecondsToTimestamp(absl::ToUnixSeconds(kNow - duration));
}

nodepb::Task Web() {
  nodepb::Task task;
  task.set_id("aaaabbbbccccddddeeeeffff00001111");
  task.mutable_spec()->set_name("web");
  task.mutable_spec()->set_driver("exec");
  task.mutable_spec()->mutable_image()->set_reference("busybox");
  auto& fields =
      *task.mutable_spec()->mutable_driver_config()->mutable_fields();
  fields["command"].set_string_value("/bin/httpd");
  fields["args"].mutable_list_value()->add_values()->set_string_value("-f");
  (*task.mutable_spec()->mutable_labels())["tier"] = "front";
  (*task.mutable_spec()->mutable_labels())["app"] = "shop";
  netpb::PortMapping* port =
      task.mutable_spec()->mutable_network()->add_port_mappings();
  port->set_host_port(8080);
  port->set_container_port(80);
  task.set_state(nodepb::TASK_STATE_RUNNING);
  *task.mutable_created_at() = Ago(absl::Minutes(3));
  *task.mutable_started_at() = Ago(absl::Minutes(2));
  task.mutable_health()->set_status(nodepb::HEALTH_STATUS_HEALTHY);
  return task;
}

nodepb::Task Job() {
  nodepb::Task task;
  task.set_id("1234567890ab1234567890ab12345678");
  task.mutable_spec()->set_name("job");
  task.mutable_spec()->set_driver("exec");
  task.set_state(nodepb::TASK_STATE_EXITED);
  task.mutable_exit_result()->set_exit_code(2);
  *task.mutable_created_at() = Ago(absl::Hours(3));
  *task.mutable_finished_at() = Ago(absl::Seconds(5));
  return task;
}

std::string Render(absl::string_view format,
                   const std::vector<nodepb::Task>& tasks) {
  absl::StatusOr<PsFormat> parsed = PsFormat::Parse(format);
  EXPECT_TRUE(parsed.ok()) << parsed.status();
  if (!parsed.ok()) return "";
  return parsed->Render(tasks, kNow, absl::UTCTimeZone());
}

TEST(PsFormatTest, StateWithHealthAsDockerSaysIt) {
  nodepb::Task task = Web();
  EXPECT_EQ(StateWithHealth(task), "running (healthy)");
  task.mutable_health()->set_status(nodepb::HEALTH_STATUS_UNHEALTHY);
  EXPECT_EQ(StateWithHealth(task), "running (unhealthy)");
  task.mutable_health()->set_status(nodepb::HEALTH_STATUS_STARTING);
  EXPECT_EQ(StateWithHealth(task), "running (health: starting)");
  EXPECT_EQ(StateWithHealth(Job()), "exited");
}

TEST(PsFormatTest, DockerStatus) {
  EXPECT_EQ(DockerStatus(Web(), kNow), "Up 2 minutes (healthy)");
  EXPECT_EQ(DockerStatus(Job(), kNow), "Exited (2) 5 seconds ago");
  nodepb::Task killed = Job();
  killed.set_state(nodepb::TASK_STATE_RESTARTING);
  killed.mutable_exit_result()->set_exit_code(0);
  killed.mutable_exit_result()->set_signal(9);
  EXPECT_EQ(DockerStatus(killed, kNow), "Restarting (137) 5 seconds ago");
  nodepb::Task pending;
  pending.set_state(nodepb::TASK_STATE_PENDING);
  EXPECT_EQ(DockerStatus(pending, kNow), "Created");
  pending.set_state(nodepb::TASK_STATE_FAILED);
  EXPECT_EQ(DockerStatus(pending, kNow), "Failed");
}

TEST(PsFormatTest, DefaultTableShowsHealthInState) {
  const std::string table = PsTable({Web(), Job()}, kNow);
  EXPECT_EQ(table,
            "ID             NAME   IMAGE     DRIVER   STATE               "
            "CREATED         EXIT   COMMAND\n"
            "aaaabbbbcccc   web    busybox   exec     running (healthy)   "
            "3 minutes ago   -      /bin/httpd -f\n"
            "1234567890ab   job              exec     exited              "
            "3 hours ago     2\n");
  // "table" alone and an empty format are the default table.
  EXPECT_EQ(Render("table", {Web(), Job()}), table);
  EXPECT_EQ(Render("", {Web(), Job()}), table);
}

TEST(PsFormatTest, TemplateFields) {
  EXPECT_EQ(Render("{{.ID}} {{.Names}} {{.Name}} {{.Image}} {{.Driver}}",
                   {Web(), Job()}),
            "aaaabbbbcccc web web busybox exec\n"
            "1234567890ab job job  exec\n");
  EXPECT_EQ(
      Render("{{.Command}}|{{.State}}|{{.Health}}|{{.Exit}}", {Web(), Job()}),
      "/bin/httpd -f|running|healthy|-\n"
      "|exited|none|2\n");
  EXPECT_EQ(Render("{{.Labels}}|{{.Label \"tier\"}}|{{ .Label `app` }}|"
                   "{{.Label \"none\"}}",
                   {Web()}),
            "app=shop,tier=front|front|shop|\n");
  EXPECT_EQ(
      Render("{{.CreatedAt}}|{{.RunningFor}}|{{.Ports}}|{{.Status}}", {Web()}),
      "2023-11-14 22:10:20 +0000 UTC|3 minutes ago|"
      "0.0.0.0:8080->80/tcp|Up 2 minutes (healthy)\n");
}

TEST(PsFormatTest, PortsInForceWinOverTheSpecs) {
  nodepb::Task task = Web();
  netpb::PortMapping* port = task.mutable_network()->add_port_mappings();
  port->set_host_ip("::1");
  port->set_host_port(5353);
  port->set_container_port(53);
  port->set_protocol(netpb::PROTOCOL_UDP);
  *task.mutable_network()->add_port_mappings() = *port;
  task.mutable_network()->mutable_port_mappings(1)->set_host_ip("127.0.0.1");
  EXPECT_EQ(Render("{{.Ports}}", {task}),
            "[::1]:5353->53/udp, 127.0.0.1:5353->53/udp\n");
}

TEST(PsFormatTest, EscapesAndSpaces) {
  EXPECT_EQ(Render("  {{.Names}}\\t{{.State}}\\n--  ", {Web()}),
            "web\trunning\n--\n");
}

TEST(PsFormatTest, TableHasAHeaderAndAlignsTheCells) {
  EXPECT_EQ(Render("table {{.ID}}\\t{{.Names}}\\t{{.Status}}\\t"
                   "{{.Label \"tier\"}}",
                   {Web(), Job()}),
            "ID             NAMES   STATUS                     TIER\n"
            "aaaabbbbcccc   web     Up 2 minutes (healthy)     front\n"
            "1234567890ab   job     Exited (2) 5 seconds ago\n");
  EXPECT_EQ(Render("table {{.Names}}: {{.RunningFor}}", {}),
            "NAMES: CREATED\n");
}

TEST(PsFormatTest, JsonIsOneObjectPerLine) {
  const std::string expected =
      "{\"Command\":\"/bin/httpd -f\",\"CreatedAt\":\"2023-11-14 22:10:20 "
      "+0000 UTC\",\"Driver\":\"exec\",\"Exit\":\"-\",\"Health\":"
      "\"healthy\",\"ID\":\"aaaabbbbcccc\",\"Image\":\"busybox\","
      "\"Labels\":\"app=shop,tier=front\",\"Names\":\"web\",\"Ports\":"
      "\"0.0.0.0:8080->80/tcp\",\"RunningFor\":\"3 minutes ago\","
      "\"State\":\"running\",\"Status\":\"Up 2 minutes (healthy)\"}\n";
  EXPECT_EQ(Render("json", {Web()}), expected);
  EXPECT_EQ(Render("{{json .}}", {Web()}), expected);
  EXPECT_EQ(Render("json", {Web(), Job()}).size(),
            expected.size() + Render("json", {Job()}).size());
  EXPECT_EQ(Render("json", {}), "");

  nodepb::Task odd = Job();
  odd.mutable_spec()->set_name("a\"b\\c\td\x01");
  EXPECT_THAT(Render("json", {odd}),
              HasSubstr("\"Names\":\"a\\\"b\\\\c\\td\\u0001\""));
}

TEST(PsFormatTest, BadTemplatesNameTheProblem) {
  struct Case {
    std::string format;
    std::string message;
  };
  for (const Case& c : std::vector<Case>{
           {"{{.Foo}}",
            "--format \"{{.Foo}}\": unknown field .Foo (fields: "
            ".ID .Names"},
           {"{{.ID}", "a \"{{\" is not closed by \"}}\""},
           {"{{ID}}", "{{ID}} is not a field"},
           {"{{json .Labels}}", "{{json .Labels}} is not a field"},
           {"{{.Label}}", "{{.Label}} needs a key"},
           {"{{.Label tier}}", "the label's key is quoted"},
           {"{{.Label \"\"}}", "the label's key is empty"},
           {"{{.Names \"x\"}}", ".Names takes no argument"},
       }) {
    absl::StatusOr<PsFormat> parsed = PsFormat::Parse(c.format);
    ASSERT_FALSE(parsed.ok()) << c.format;
    EXPECT_EQ(parsed.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(parsed.status().message()), HasSubstr(c.message))
        << c.format;
  }
}

}  // namespace
}  // namespace berth::cli
