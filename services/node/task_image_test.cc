#include "services/node/task_image.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <optional>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "base/proto_time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "services/common/test_util.h"

namespace berth::node {
namespace {

using ::berth::testing::ShortTempDir;
using ::testing::ElementsAre;
using ::testing::ElementsAreArray;
using ::testing::HasSubstr;
using ::testing::Pair;
using ::testing::UnorderedElementsAre;

image::v1::ImageConfig Config(std::vector<std::string> entrypoint,
                              std::vector<std::string> cmd) {
  image::v1::ImageConfig config;
  for (const std::string& part : entrypoint) config.add_entrypoint(part);
  for (const std::string& part : cmd) config.add_cmd(part);
  return config;
}

v1::TaskSpec Spec(const std::string& command,
                  std::vector<std::string> args = {}) {
  v1::TaskSpec spec;
  spec.set_driver("exec");
  spec.mutable_image()->set_reference("busybox");
  auto& fields = *spec.mutable_driver_config()->mutable_fields();
  if (!command.empty()) fields["command"].set_string_value(command);
  if (!args.empty()) {
    auto* list = fields["args"].mutable_list_value();
    for (const std::string& arg : args) {
      list->add_values()->set_string_value(arg);
    }
  }
  return spec;
}

v1::TaskSpec WithEntrypoint(v1::TaskSpec spec,
                            std::vector<std::string> entrypoint) {
  spec.mutable_image()->set_override_entrypoint(true);
  for (const std::string& part : entrypoint) {
    spec.mutable_image()->add_entrypoint(part);
  }
  return spec;
}

// The command, as docker composes it.
TEST(TaskImageTest, TheCommandIsTheEntrypointThenTheCommandOrTheImagesCmd) {
  struct Case {
    std::string name;
    v1::TaskSpec spec;
    image::v1::ImageConfig image;
    std::vector<std::string> want;  // empty: "has no command"
  };
  const Case cases[] = {
      {"the image's Cmd", Spec(""), Config({}, {"sh"}), {"sh"}},
      {"Entrypoint and Cmd",
       Spec(""),
       Config({"/entry.sh"}, {"serve", "-v"}),
       {"/entry.sh", "serve", "-v"}},
      {"the spec's command replaces Cmd",
       Spec("echo", {"hi"}),
       Config({}, {"sh"}),
       {"echo", "hi"}},
      {"the spec's command follows Entrypoint",
       Spec("echo", {"hi"}),
       Config({"/entry.sh"}, {"serve"}),
       {"/entry.sh", "echo", "hi"}},
      {"args alone replace Cmd",
       Spec("", {"-x", "1"}),
       Config({"/entry.sh"}, {"serve"}),
       {"/entry.sh", "-x", "1"}},
      {"an entrypoint of the spec's drops Cmd",
       WithEntrypoint(Spec(""), {"/bin/env"}),
       Config({"/entry.sh"}, {"sh"}),
       {"/bin/env"}},
      {"an entrypoint of the spec's and its command",
       WithEntrypoint(Spec("-c", {"echo hi"}), {"/bin/sh"}),
       Config({"/entry.sh"}, {"x"}),
       {"/bin/sh", "-c", "echo hi"}},
      {"a cleared entrypoint (--entrypoint '')",
       WithEntrypoint(Spec("echo", {"hi"}), {}),
       Config({"/entry.sh"}, {"x"}),
       {"echo", "hi"}},
      {"nothing at all", Spec(""), Config({}, {}), {}},
      {"a cleared entrypoint and no command",
       WithEntrypoint(Spec(""), {}),
       Config({"/entry.sh"}, {"serve"}),
       {}},
  };
  for (const Case& c : cases) {
    absl::StatusOr<std::vector<std::string>> command =
        ImageCommand(c.spec, c.image);
    if (c.want.empty()) {
      EXPECT_TRUE(absl::IsInvalidArgument(command.status())) << c.name;
      EXPECT_EQ(command.status().message(),
                "spec.image: image \"busybox\" has no command: give one")
          << c.name;
      continue;
    }
    ASSERT_TRUE(command.ok()) << c.name << ": " << command.status();
    EXPECT_THAT(*command, ElementsAreArray(c.want)) << c.name;
  }
}

TEST(TaskImageTest, ApplyFillsCommandEnvironmentUserAndWorkingDirectory) {
  v1::TaskSpec spec = Spec("echo", {"hi"});
  (*spec.mutable_env())["MODE"] = "spec";
  (*spec.mutable_env())["EXTRA"] = "1";
  image::v1::ImageConfig image = Config({"/entry"}, {"serve"});
  image.add_env("PATH=/usr/local/bin:/bin");
  image.add_env("MODE=image");
  image.add_env("EQUALS=a=b");
  image.add_env("NOVALUE");
  image.set_user("1000:1000");
  image.set_working_dir("/srv/app");

  driver::v1::TaskConfig config;
  (*config.mutable_driver_config()->mutable_fields())["other"].set_string_value(
      "kept");
  config.set_user("");
  ASSERT_TRUE(ApplyImageConfig(spec, image, &config).ok());
  const auto& fields = config.driver_config().fields();
  EXPECT_EQ(fields.at("command").string_value(), "/entry");
  ASSERT_EQ(fields.at("args").list_value().values_size(), 2);
  EXPECT_EQ(fields.at("args").list_value().values(0).string_value(), "echo");
  EXPECT_EQ(fields.at("args").list_value().values(1).string_value(), "hi");
  EXPECT_EQ(fields.at("other").string_value(), "kept");
  EXPECT_THAT(config.env(),
              UnorderedElementsAre(Pair("PATH", "/usr/local/bin:/bin"),
                                   Pair("MODE", "spec"), Pair("EQUALS", "a=b"),
                                   Pair("EXTRA", "1")));
  EXPECT_EQ(config.user(), "1000");
  EXPECT_EQ(config.group(), "1000");
  EXPECT_EQ(config.working_dir(), "/srv/app");

  // The spec's user wins (ApplyTaskIsolation set it already).
  spec.set_user("nobody");
  config.set_user("nobody");
  config.clear_group();
  ASSERT_TRUE(ApplyImageConfig(spec, image, &config).ok());
  EXPECT_EQ(config.user(), "nobody");
  EXPECT_EQ(config.group(), "");

  // No WorkingDir: "/"; a relative one is taken from "/".
  image.clear_working_dir();
  ASSERT_TRUE(ApplyImageConfig(spec, image, &config).ok());
  EXPECT_EQ(config.working_dir(), "/");
  image.set_working_dir("app/../data/");
  ASSERT_TRUE(ApplyImageConfig(spec, image, &config).ok());
  EXPECT_EQ(config.working_dir(), "/data");

  // The spec's work_dir (in its task directory) wins over WorkingDir.
  (*spec.mutable_driver_config()->mutable_fields())["work_dir"]
      .set_string_value("scratch");
  config.clear_working_dir();
  (*config.mutable_driver_config()->mutable_fields())["work_dir"]
      .set_string_value("scratch");
  ASSERT_TRUE(ApplyImageConfig(spec, image, &config).ok());
  EXPECT_EQ(config.working_dir(), "");

  // An image user berth cannot take.
  spec.clear_user();
  image.set_user("a:b:c");
  absl::Status bad = ApplyImageConfig(spec, image, &config);
  EXPECT_TRUE(absl::IsInvalidArgument(bad));
  EXPECT_THAT(bad.message(),
              HasSubstr("image \"busybox\" has a User \"a:b:c\""));
}

TEST(TaskImageTest, StatusShowsTheImageAndTheRoot) {
  image::v1::Image image;
  image.set_name("docker.io/library/busybox:latest");
  image.set_digest("sha256:aa");
  image.set_manifest_digest("sha256:bb");
  image.set_config_digest("sha256:cc");
  v1::TaskImageStatus status = ImageStatusOf(image, "/var/lib/x/rootfs");
  EXPECT_EQ(status.name(), "docker.io/library/busybox:latest");
  EXPECT_EQ(status.digest(), "sha256:aa");
  EXPECT_EQ(status.manifest_digest(), "sha256:bb");
  EXPECT_EQ(status.config_digest(), "sha256:cc");
  EXPECT_EQ(status.rootfs(), "/var/lib/x/rootfs");
}

// The working directory is made in the image's root; the image's links
// resolve inside it, never on the host.
TEST(TaskImageTest, MakeDirInRootStaysInTheRoot) {
  ShortTempDir root;
  ShortTempDir outside;
  ASSERT_TRUE(MakeDirInRoot(root.path(), "/srv/app/data").ok());
  struct stat st;
  ASSERT_EQ(stat(root.Join("srv/app/data").c_str(), &st), 0);
  EXPECT_TRUE(S_ISDIR(st.st_mode));
  EXPECT_EQ(st.st_mode & 07777, 0755);
  // Again: nothing to do.
  EXPECT_TRUE(MakeDirInRoot(root.path(), "/srv/app/data").ok());

  // An absolute link to a host directory: taken inside the root, where
  // it leads nowhere.
  ASSERT_EQ(symlink(outside.path().c_str(), root.Join("link").c_str()), 0);
  absl::Status dangling = MakeDirInRoot(root.path(), "/link/made");
  EXPECT_TRUE(absl::IsNotFound(dangling)) << dangling;
  EXPECT_FALSE(::berth::testing::PathExists(outside.Join("made")));
  // Once the root has the link's target, inside it.
  ASSERT_TRUE(MakeDirInRoot(root.path(), outside.path()).ok());
  ASSERT_TRUE(MakeDirInRoot(root.path(), "/link/made").ok());
  EXPECT_FALSE(::berth::testing::PathExists(outside.Join("made")));
  EXPECT_EQ(stat(root.Join(outside.path().substr(1) + "/made").c_str(), &st),
            0);
  // A relative one climbing out: stopped at the root.
  ASSERT_EQ(symlink("../../../../../../..", root.Join("up").c_str()), 0);
  ASSERT_TRUE(MakeDirInRoot(root.path(), "/up/climbed").ok());
  EXPECT_EQ(stat(root.Join("climbed").c_str(), &st), 0);

  // A file where a directory goes.
  ASSERT_EQ(close(creat(root.Join("file").c_str(), 0644)), 0);
  EXPECT_FALSE(MakeDirInRoot(root.path(), "/file/x").ok());
}

TEST(TaskImageTest, TheHealthCheckInForceIsTheSpecsElseTheImages) {
  image::v1::ImageConfig image;
  image.mutable_healthcheck()->add_test("CMD-SHELL");
  image.mutable_healthcheck()->add_test("wget -q localhost");
  image.mutable_healthcheck()->mutable_interval()->set_seconds(5);
  image.mutable_healthcheck()->set_retries(2);
  v1::TaskSpec spec;

  // The image's, its unset timeout filled.
  absl::StatusOr<std::optional<v1::HealthCheck>> check =
      HealthCheckInForce(spec, &image);
  ASSERT_TRUE(check.ok()) << check.status();
  ASSERT_TRUE(check->has_value());
  EXPECT_EQ((*check)->test(1), "wget -q localhost");
  EXPECT_EQ((*check)->interval().seconds(), 5);
  EXPECT_EQ((*check)->timeout().seconds(), 30);
  EXPECT_EQ((*check)->retries(), 2u);

  // The spec's wins, whole; ["NONE"] turns the image's off.
  spec.mutable_healthcheck()->add_test("CMD");
  spec.mutable_healthcheck()->add_test("/bin/true");
  check = HealthCheckInForce(spec, &image);
  ASSERT_TRUE(check.ok() && check->has_value());
  EXPECT_EQ((*check)->test(1), "/bin/true");
  EXPECT_EQ((*check)->interval().seconds(), 30);
  EXPECT_EQ((*check)->retries(), 3u);
  spec.mutable_healthcheck()->clear_test();
  spec.mutable_healthcheck()->add_test("NONE");
  check = HealthCheckInForce(spec, &image);
  ASSERT_TRUE(check.ok());
  EXPECT_FALSE(check->has_value());
  // An empty check of the spec's is no change.
  spec.mutable_healthcheck()->Clear();
  check = HealthCheckInForce(spec, &image);
  ASSERT_TRUE(check.ok() && check->has_value());
  EXPECT_EQ((*check)->test(1), "wget -q localhost");

  // Without an image, or an image without one: none.
  check = HealthCheckInForce(v1::TaskSpec(), nullptr);
  ASSERT_TRUE(check.ok());
  EXPECT_FALSE(check->has_value());
  check = HealthCheckInForce(v1::TaskSpec(),
                             &image::v1::ImageConfig::default_instance());
  ASSERT_TRUE(check.ok());
  EXPECT_FALSE(check->has_value());
  image.mutable_healthcheck()->clear_test();
  image.mutable_healthcheck()->add_test("NONE");
  check = HealthCheckInForce(v1::TaskSpec(), &image);
  ASSERT_TRUE(check.ok());
  EXPECT_FALSE(check->has_value());
}

// docker run --health-interval 1s IMAGE: the image's test with the given
// settings, the others the image's.
TEST(TaskImageTest, ACheckWithoutATestChangesTheImagesHealthcheck) {
  image::v1::ImageConfig image;
  image::v1::HealthCheck& theirs = *image.mutable_healthcheck();
  theirs.add_test("CMD");
  theirs.add_test("/probe");
  *theirs.mutable_interval() = base::ToProtoDuration(absl::Seconds(5));
  *theirs.mutable_timeout() = base::ToProtoDuration(absl::Seconds(2));
  *theirs.mutable_start_period() = base::ToProtoDuration(absl::Seconds(9));
  theirs.set_retries(4);
  v1::TaskSpec spec;
  spec.mutable_image()->set_reference("web:1");
  v1::HealthCheck& ours = *spec.mutable_healthcheck();
  *ours.mutable_interval() = base::ToProtoDuration(absl::Milliseconds(200));
  ours.set_on_failure(v1::HEALTH_FAILURE_ACTION_RESTART);

  absl::StatusOr<std::optional<v1::HealthCheck>> check =
      HealthCheckInForce(spec, &image);
  ASSERT_TRUE(check.ok()) << check.status();
  ASSERT_TRUE(check->has_value());
  EXPECT_THAT((*check)->test(), ElementsAre("CMD", "/probe"));
  EXPECT_EQ(base::FromProtoDuration((*check)->interval()),
            absl::Milliseconds(200));
  EXPECT_EQ(base::FromProtoDuration((*check)->timeout()), absl::Seconds(2));
  EXPECT_EQ(base::FromProtoDuration((*check)->start_period()),
            absl::Seconds(9));
  EXPECT_EQ((*check)->retries(), 4u);
  EXPECT_EQ((*check)->on_failure(), v1::HEALTH_FAILURE_ACTION_RESTART);

  // Each field given replaces the image's.
  *ours.mutable_timeout() = base::ToProtoDuration(absl::Seconds(7));
  *ours.mutable_start_period() = base::ToProtoDuration(absl::Seconds(1));
  ours.set_retries(1);
  check = HealthCheckInForce(spec, &image);
  ASSERT_TRUE(check.ok() && check->has_value());
  EXPECT_EQ(base::FromProtoDuration((*check)->timeout()), absl::Seconds(7));
  EXPECT_EQ(base::FromProtoDuration((*check)->start_period()),
            absl::Seconds(1));
  EXPECT_EQ((*check)->retries(), 1u);

  // Nothing to change: no image, an image without a HEALTHCHECK, or one
  // that turns it off.
  for (const image::v1::ImageConfig* without :
       {static_cast<const image::v1::ImageConfig*>(nullptr),
        &image::v1::ImageConfig::default_instance()}) {
    check = HealthCheckInForce(spec, without);
    EXPECT_TRUE(absl::IsInvalidArgument(check.status())) << check.status();
    EXPECT_THAT(check.status().message(), HasSubstr("spec.healthcheck.test"));
  }
  check = HealthCheckInForce(spec, &image::v1::ImageConfig::default_instance());
  EXPECT_THAT(check.status().message(), HasSubstr("\"web:1\""));
  image.mutable_healthcheck()->clear_test();
  image.mutable_healthcheck()->add_test("NONE");
  check = HealthCheckInForce(spec, &image);
  EXPECT_TRUE(absl::IsInvalidArgument(check.status())) << check.status();
  EXPECT_THAT(check.status().message(), HasSubstr("NONE"));
}

}  // namespace
}  // namespace berth::node
