#include "services/node/task_isolation.h"

#include <sys/stat.h>
#include <unistd.h>

#include <functional>
#include <string>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace berth::node {
namespace {

namespace driverpb = ::berth::driver::v1;
using ::testing::HasSubstr;

// A scratch tree: <root>/run/berth and <root>/lib/berth play berth's
// directories, <root>/data is a directory a task may see.
class TaskIsolationTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* tmp = getenv("TEST_TMPDIR");
    root_ = absl::StrCat(tmp != nullptr ? tmp : "/tmp", "/isolation");
    for (const char* dir :
         {"", "/run", "/run/berth", "/lib", "/lib/berth", "/data"}) {
      mkdir(absl::StrCat(root_, dir).c_str(), 0755);
    }
    unlink(absl::StrCat(root_, "/sneaky").c_str());
    ASSERT_EQ(symlink(absl::StrCat(root_, "/run/berth").c_str(),
                      absl::StrCat(root_, "/sneaky").c_str()),
              0);
    dirs_.runtime_dir = absl::StrCat(root_, "/run/berth");
    dirs_.state_dir = absl::StrCat(root_, "/lib/berth/");
  }

  v1::TaskSpec Spec() const {
    v1::TaskSpec spec;
    spec.set_driver("mock");
    return spec;
  }

  static driverpb::Mount* Bind(v1::TaskSpec& spec, const std::string& source,
                               const std::string& destination) {
    driverpb::Mount* mount = spec.mutable_isolation()->add_mounts();
    mount->set_type(driverpb::MOUNT_TYPE_BIND);
    mount->set_source(source);
    mount->set_destination(destination);
    return mount;
  }

  std::string root_;
  ProtectedDirs dirs_;
};

TEST_F(TaskIsolationTest, ValidAndInvalidSpecs) {
  struct Case {
    std::string name;
    std::function<void(v1::TaskSpec&)> change;
    std::string error;  // empty: valid
  };
  const std::string data = absl::StrCat(root_, "/data");
  const std::string runtime = absl::StrCat(root_, "/run/berth");
  const Case cases[] = {
      {"nothing asked", [](v1::TaskSpec&) {}, ""},
      {"a bind and a tmpfs",
       [&](v1::TaskSpec& s) {
         Bind(s, data, "/data")->set_read_only(true);
         auto* tmpfs = s.mutable_isolation()->add_mounts();
         tmpfs->set_type(driverpb::MOUNT_TYPE_TMPFS);
         tmpfs->set_destination("/scratch");
       },
       ""},
      {"relative source", [](v1::TaskSpec& s) { Bind(s, "myvolume", "/data"); },
       "spec.isolation.mounts[0].source: \"myvolume\" is not an absolute path "
       "(named volumes are not supported"},
      {"missing source",
       [&](v1::TaskSpec& s) { Bind(s, data + "/nope", "/data"); },
       "spec.isolation.mounts[0].source: cannot resolve"},
      {"the runtime directory",
       [&](v1::TaskSpec& s) { Bind(s, runtime, "/x"); },
       absl::StrCat("spec.isolation.mounts[0].source: ", runtime,
                    " is inside berth's runtime directory ", runtime)},
      {"inside the state directory, through ..",
       [&](v1::TaskSpec& s) {
         Bind(s, absl::StrCat(root_, "/data/../lib/berth"), "/x");
       },
       "is inside berth's state directory"},
      {"a link to the runtime directory",
       [&](v1::TaskSpec& s) { Bind(s, root_ + "/sneaky", "/x"); },
       absl::StrCat(root_, "/sneaky (", runtime,
                    ") is inside berth's runtime directory")},
      {"a parent of the runtime directory",
       [&](v1::TaskSpec& s) { Bind(s, root_ + "/run", "/x"); },
       "holds berth's runtime directory"},
      {"the host's root", [&](v1::TaskSpec& s) { Bind(s, "/", "/host"); },
       "spec.isolation.mounts[0].source: / holds berth's runtime directory"},
      {"second mount named",
       [&](v1::TaskSpec& s) {
         Bind(s, data, "/a");
         Bind(s, data, "b");
       },
       "spec.isolation.mounts[1].destination: \"b\" is not an absolute path"},
      {"over the root", [&](v1::TaskSpec& s) { Bind(s, data, "/"); },
       "spec.isolation.mounts[0].destination: cannot mount over /"},
      {"dot dot", [&](v1::TaskSpec& s) { Bind(s, data, "/a/../etc"); },
       "has a \"..\" component"},
      {"not normalized", [&](v1::TaskSpec& s) { Bind(s, data, "/a//b/"); },
       "is not normalized (write /a/b)"},
      {"tmpfs with a source",
       [&](v1::TaskSpec& s) {
         Bind(s, data, "/a")->set_type(driverpb::MOUNT_TYPE_TMPFS);
       },
       "spec.isolation.mounts[0].source: a tmpfs mount has no source"},
      {"no type",
       [&](v1::TaskSpec& s) {
         Bind(s, data, "/a")->set_type(driverpb::MOUNT_TYPE_UNSPECIFIED);
       },
       "spec.isolation.mounts[0].type: is required"},
      {"NUL in a destination",
       [&](v1::TaskSpec& s) { Bind(s, data, std::string("/a\0z", 4)); },
       "spec.isolation.mounts[0].destination: \"/a\\x00z\" holds a control"},
      {"caps of every spelling",
       [](v1::TaskSpec& s) {
         s.mutable_isolation()->add_cap_add("NET_ADMIN");
         s.mutable_isolation()->add_cap_add("cap_sys_ptrace");
         s.mutable_isolation()->add_cap_drop("all");
       },
       ""},
      {"unknown cap",
       [](v1::TaskSpec& s) {
         s.mutable_isolation()->add_cap_add("NET_ADMIN");
         s.mutable_isolation()->add_cap_add("CAP_FLY");
       },
       "spec.isolation.cap_add[1]: \"CAP_FLY\" is not a capability"},
      {"unknown dropped cap",
       [](v1::TaskSpec& s) { s.mutable_isolation()->add_cap_drop("root"); },
       "spec.isolation.cap_drop[0]"},
      {"custom seccomp",
       [](v1::TaskSpec& s) {
         auto* seccomp = s.mutable_isolation()->mutable_seccomp();
         seccomp->set_type(driverpb::SECCOMP_PROFILE_TYPE_CUSTOM);
         seccomp->set_custom_profile_json(
             R"({"defaultAction": "SCMP_ACT_ALLOW"})");
       },
       ""},
      {"custom seccomp without JSON",
       [](v1::TaskSpec& s) {
         s.mutable_isolation()->mutable_seccomp()->set_type(
             driverpb::SECCOMP_PROFILE_TYPE_CUSTOM);
       },
       "spec.isolation.seccomp.custom_profile_json: is required"},
      {"custom seccomp, bad JSON",
       [](v1::TaskSpec& s) {
         auto* seccomp = s.mutable_isolation()->mutable_seccomp();
         seccomp->set_type(driverpb::SECCOMP_PROFILE_TYPE_CUSTOM);
         seccomp->set_custom_profile_json("{defaultAction");
       },
       "custom_profile_json: is not valid JSON"},
      {"custom seccomp, not an object",
       [](v1::TaskSpec& s) {
         auto* seccomp = s.mutable_isolation()->mutable_seccomp();
         seccomp->set_type(driverpb::SECCOMP_PROFILE_TYPE_CUSTOM);
         seccomp->set_custom_profile_json("[1]");
       },
       "custom_profile_json: is not a JSON object"},
      {"JSON with the default profile",
       [](v1::TaskSpec& s) {
         s.mutable_isolation()->mutable_seccomp()->set_custom_profile_json(
             "{}");
       },
       "is only for SECCOMP_PROFILE_TYPE_CUSTOM"},
      {"user namespace mappings",
       [](v1::TaskSpec& s) {
         s.mutable_isolation()
             ->mutable_user_namespace()
             ->add_uid_mappings()
             ->set_size(1);
       },
       "spec.isolation.user_namespace: must be empty: the node chooses the "
       "mappings (set spec.userns instead)"},
      {"userns auto", [](v1::TaskSpec& s) { s.set_userns("auto"); }, ""},
      {"userns host", [](v1::TaskSpec& s) { s.set_userns("host"); }, ""},
      {"userns other", [](v1::TaskSpec& s) { s.set_userns("private"); },
       "spec.userns: \"private\" must be empty, \"host\" or \"auto\""},
      {"rootfs",
       [](v1::TaskSpec& s) { s.mutable_isolation()->set_rootfs("/img"); },
       "spec.isolation.rootfs: is the node's to fill: set spec.image"},
      {"rootfs_idmapped",
       [](v1::TaskSpec& s) {
         s.mutable_isolation()->set_rootfs_idmapped(true);
       },
       "spec.isolation.rootfs_idmapped: is the node's to set"},
      {"user and group", [](v1::TaskSpec& s) { s.set_user("alice:staff"); },
       ""},
      {"user with an empty group", [](v1::TaskSpec& s) { s.set_user("a:"); },
       "spec.user: \"a:\" must be NAME, UID, NAME:GROUP or UID:GID"},
      {"user with two colons", [](v1::TaskSpec& s) { s.set_user("a:b:c"); },
       "spec.user"},
      {"NUL in the user",
       [](v1::TaskSpec& s) { s.set_user(std::string("a\0b", 3)); },
       "spec.user: holds a NUL byte"},
      {"newline in the user", [](v1::TaskSpec& s) { s.set_user("a\nb"); },
       "spec.user: \"a\\nb\" holds a control character"},
      {"NUL in an env value",
       [](v1::TaskSpec& s) {
         (*s.mutable_env())["A"] = std::string("x\0y", 3);
       },
       "spec.env[\"A\"]: holds a NUL byte"},
      {"NUL in an env name",
       [](v1::TaskSpec& s) {
         (*s.mutable_env())[std::string("A\0Z", 3)] = "x";
       },
       "spec.env[\"A\\x00Z\"]: holds a NUL byte"},
      {"= in an env name",
       [](v1::TaskSpec& s) { (*s.mutable_env())["A=B"] = "x"; },
       "spec.env[\"A=B\"]"},
      {"NUL in an argument",
       [](v1::TaskSpec& s) {
         auto& fields = *s.mutable_driver_config()->mutable_fields();
         fields["command"].set_string_value("/bin/sh");
         auto* args = fields["args"].mutable_list_value();
         args->add_values()->set_string_value("-c");
         args->add_values()->set_string_value(std::string("id\0-G", 5));
       },
       "spec.driver_config.args[1]: holds a NUL byte"},
      {"NUL in the command",
       [](v1::TaskSpec& s) {
         (*s.mutable_driver_config()->mutable_fields())["command"]
             .set_string_value(std::string("/bin/\0sh", 8));
       },
       "spec.driver_config.command: holds a NUL byte"},
  };
  for (const Case& c : cases) {
    v1::TaskSpec spec = Spec();
    c.change(spec);
    const absl::Status status = ValidateTaskIsolation(spec, dirs_);
    if (c.error.empty()) {
      EXPECT_TRUE(status.ok()) << c.name << ": " << status;
    } else {
      EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << c.name;
      EXPECT_THAT(status.message(), HasSubstr(c.error)) << c.name;
    }
  }
}

TEST(CanonicalCapabilityTest, Spellings) {
  EXPECT_EQ(*CanonicalCapability("NET_ADMIN"), "NET_ADMIN");
  EXPECT_EQ(*CanonicalCapability("cap_net_admin"), "NET_ADMIN");
  EXPECT_EQ(*CanonicalCapability("Cap_Chown"), "CHOWN");
  EXPECT_EQ(*CanonicalCapability("all"), "ALL");
  EXPECT_EQ(*CanonicalCapability("CHECKPOINT_RESTORE"), "CHECKPOINT_RESTORE");
  EXPECT_FALSE(CanonicalCapability("").ok());
  EXPECT_FALSE(CanonicalCapability("CAP_").ok());
  EXPECT_FALSE(CanonicalCapability("NET ADMIN").ok());
}

TEST(ParseTaskUserTest, Forms) {
  EXPECT_EQ(ParseTaskUser("alice")->user, "alice");
  EXPECT_EQ(ParseTaskUser("alice")->group, "");
  EXPECT_EQ(ParseTaskUser("1000:100")->user, "1000");
  EXPECT_EQ(ParseTaskUser("1000:100")->group, "100");
  EXPECT_EQ(ParseTaskUser("")->user, "");
  EXPECT_FALSE(ParseTaskUser(":g").ok());
  EXPECT_FALSE(ParseTaskUser("u:").ok());
}

TEST(CheckIsolationSupportedTest, ClaimsNeeded) {
  struct Case {
    std::string name;
    std::function<void(v1::TaskSpec&)> change;
    std::string error;  // empty: any driver runs it
  };
  const Case cases[] = {
      {"nothing asked", [](v1::TaskSpec&) {}, ""},
      {"less isolation needs no claim",
       [](v1::TaskSpec& s) {
         s.mutable_isolation()->set_privileged(true);
         s.mutable_isolation()->set_allow_privilege_escalation(true);
         s.mutable_isolation()->mutable_seccomp()->set_type(
             driverpb::SECCOMP_PROFILE_TYPE_UNCONFINED);
         s.set_userns("host");
       },
       ""},
      {"a mount",
       [](v1::TaskSpec& s) {
         s.mutable_isolation()->add_mounts()->set_destination("/a");
       },
       "spec.isolation.mounts: driver mock does not support mounts (its "
       "capabilities claim no isolation.mounts)"},
      {"a read-only root",
       [](v1::TaskSpec& s) {
         s.mutable_isolation()->set_readonly_rootfs(true);
       },
       "spec.isolation.readonly_rootfs: driver mock does not support a "
       "read-only root (its capabilities claim no isolation.mounts)"},
      {"cap_add",
       [](v1::TaskSpec& s) { s.mutable_isolation()->add_cap_add("NET_ADMIN"); },
       "spec.isolation.cap_add: driver mock does not support choosing "
       "capabilities"},
      {"cap_drop",
       [](v1::TaskSpec& s) { s.mutable_isolation()->add_cap_drop("ALL"); },
       "spec.isolation.cap_drop: driver mock"},
      {"runtime default seccomp",
       [](v1::TaskSpec& s) {
         s.mutable_isolation()->mutable_seccomp()->set_type(
             driverpb::SECCOMP_PROFILE_TYPE_RUNTIME_DEFAULT);
       },
       "spec.isolation.seccomp: driver mock does not support seccomp"},
      {"custom seccomp",
       [](v1::TaskSpec& s) {
         s.mutable_isolation()->mutable_seccomp()->set_type(
             driverpb::SECCOMP_PROFILE_TYPE_CUSTOM);
       },
       "isolation.seccomp)"},
      {"userns auto", [](v1::TaskSpec& s) { s.set_userns("auto"); },
       "spec.userns: driver mock does not support user namespaces (its "
       "capabilities claim no isolation.user_namespaces)"},
      {"an image",
       [](v1::TaskSpec& s) { s.mutable_image()->set_reference("busybox"); },
       "spec.image: driver mock does not support running tasks from images "
       "(its capabilities claim no isolation.image_rootfs)"},
  };
  driverpb::DriverCapabilities everything;
  everything.mutable_isolation()->set_mounts(true);
  everything.mutable_isolation()->set_capabilities(true);
  everything.mutable_isolation()->set_seccomp(true);
  everything.mutable_isolation()->set_user_namespaces(true);
  everything.mutable_isolation()->set_image_rootfs(true);
  for (const Case& c : cases) {
    v1::TaskSpec spec;
    spec.set_driver("mock");
    c.change(spec);
    const absl::Status status = CheckIsolationSupported(spec, "mock", {});
    if (c.error.empty()) {
      EXPECT_TRUE(status.ok()) << c.name << ": " << status;
    } else {
      EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition) << c.name;
      EXPECT_THAT(status.message(), HasSubstr(c.error)) << c.name;
    }
    EXPECT_TRUE(CheckIsolationSupported(spec, "mock", everything).ok())
        << c.name;
  }
}

TEST_F(TaskIsolationTest, ApplyFillsTheTaskConfig) {
  v1::TaskSpec spec = Spec();
  spec.set_user("alice:staff");
  // A link to a directory a task may see: the driver gets the real path.
  const std::string link = absl::StrCat(root_, "/data-link");
  unlink(link.c_str());
  ASSERT_EQ(symlink(absl::StrCat(root_, "/data").c_str(), link.c_str()), 0);
  Bind(spec, link, "/data")->set_read_only(true);
  spec.mutable_isolation()->add_cap_add("cap_net_admin");
  spec.mutable_isolation()->add_cap_drop("all");
  driverpb::DriverCapabilities caps;
  caps.mutable_isolation()->set_mounts(true);
  caps.mutable_isolation()->set_capabilities(true);

  driverpb::UserNamespace mapping;
  driverpb::IdMapping* uid = mapping.add_uid_mappings();
  uid->set_container_id(0);
  uid->set_host_id(100000);
  uid->set_size(65536);
  *mapping.add_gid_mappings() = *uid;

  driverpb::TaskConfig config;
  ASSERT_TRUE(ApplyTaskIsolation(spec, caps, dirs_, &mapping, &config).ok());
  EXPECT_EQ(config.user(), "alice");
  EXPECT_EQ(config.group(), "staff");
  ASSERT_EQ(config.isolation().mounts_size(), 1);
  EXPECT_EQ(config.isolation().mounts(0).source(),
            absl::StrCat(root_, "/data"));
  EXPECT_EQ(config.isolation().mounts(0).destination(), "/data");
  EXPECT_TRUE(config.isolation().mounts(0).read_only());
  EXPECT_THAT(config.isolation().cap_add(),
              ::testing::ElementsAre("NET_ADMIN"));
  EXPECT_THAT(config.isolation().cap_drop(), ::testing::ElementsAre("ALL"));
  EXPECT_EQ(config.isolation().user_namespace().uid_mappings(0).host_id(),
            100000u);

  // Without a mapping, none; a spec asking nothing gives an empty isolation.
  driverpb::TaskConfig plain;
  ASSERT_TRUE(ApplyTaskIsolation(Spec(), driverpb::DriverCapabilities(), dirs_,
                                 nullptr, &plain)
                  .ok());
  EXPECT_FALSE(plain.has_isolation() && plain.isolation().ByteSizeLong() > 0);
  EXPECT_EQ(plain.user(), "");

  // The driver claims less now, or its claims are unknown: refused, not run
  // with less isolation than asked.
  const absl::Status less = ApplyTaskIsolation(
      spec, driverpb::DriverCapabilities(), dirs_, nullptr, &config);
  EXPECT_EQ(less.code(), absl::StatusCode::kFailedPrecondition);
  const absl::Status unknown =
      ApplyTaskIsolation(spec, absl::UnavailableError("plugin mock is down"),
                         dirs_, nullptr, &config);
  EXPECT_EQ(unknown.code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(unknown.message(),
              HasSubstr("spec.isolation.mounts: cannot check that driver mock "
                        "supports it: plugin mock is down"));
  EXPECT_TRUE(ApplyTaskIsolation(Spec(),
                                 absl::UnavailableError("plugin mock is down"),
                                 dirs_, nullptr, &plain)
                  .ok());

  // A source that became a link to berth's state since RunTask.
  unlink(link.c_str());
  ASSERT_EQ(symlink(absl::StrCat(root_, "/lib/berth").c_str(), link.c_str()),
            0);
  const absl::Status moved =
      ApplyTaskIsolation(spec, caps, dirs_, nullptr, &config);
  EXPECT_EQ(moved.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(moved.message(), HasSubstr("is inside berth's state directory"));
}

TEST_F(TaskIsolationTest, InteractiveSettingsRlimitsAndHostnameReachTheConfig) {
  v1::TaskSpec spec = Spec();
  spec.set_name("web");
  spec.set_stdin_open(true);
  spec.set_tty(true);
  driverpb::Rlimit* nofile = spec.add_ulimits();
  nofile->set_type("nofile");
  nofile->set_soft(1024);
  nofile->set_hard(4096);
  driverpb::Rlimit* core = spec.add_ulimits();
  core->set_type("RLIMIT_CORE");
  core->set_soft(UINT64_MAX);
  core->set_hard(UINT64_MAX);
  driverpb::DriverCapabilities caps;
  caps.set_attach(true);
  caps.set_rlimits(true);

  driverpb::TaskConfig config;
  ASSERT_TRUE(ApplyTaskIsolation(spec, caps, dirs_, nullptr, &config).ok());
  EXPECT_TRUE(config.stdin_open());
  EXPECT_TRUE(config.tty());
  ASSERT_EQ(config.rlimits_size(), 2);
  EXPECT_EQ(config.rlimits(0).type(), "RLIMIT_NOFILE");
  EXPECT_EQ(config.rlimits(0).soft(), 1024u);
  EXPECT_EQ(config.rlimits(0).hard(), 4096u);
  EXPECT_EQ(config.rlimits(1).type(), "RLIMIT_CORE");
  EXPECT_EQ(config.rlimits(1).hard(), UINT64_MAX);
  // No hostname of its own: its name.
  EXPECT_EQ(config.hostname(), "web");
  spec.set_hostname("box.example");
  ASSERT_TRUE(ApplyTaskIsolation(spec, caps, dirs_, nullptr, &config).ok());
  EXPECT_EQ(config.hostname(), "box.example");
  EXPECT_EQ(config.rlimits_size(), 2);  // not added twice

  // A driver without attach or rlimits: refused, naming the field.
  const absl::Status no_attach =
      CheckIsolationSupported(spec, "plain", driverpb::DriverCapabilities());
  EXPECT_EQ(no_attach.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(no_attach.message(),
              HasSubstr("spec.tty: driver plain does not support interactive "
                        "tasks (its capabilities claim no attach)"));
  spec.set_tty(false);
  EXPECT_THAT(
      CheckIsolationSupported(spec, "plain", driverpb::DriverCapabilities())
          .message(),
      HasSubstr("spec.stdin_open: driver plain"));
  spec.set_stdin_open(false);
  const absl::Status no_rlimits =
      CheckIsolationSupported(spec, "plain", driverpb::DriverCapabilities());
  EXPECT_EQ(no_rlimits.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(no_rlimits.message(),
              HasSubstr("spec.ulimits: driver plain does not support resource "
                        "limits (its capabilities claim no rlimits)"));
  spec.clear_ulimits();
  EXPECT_TRUE(
      CheckIsolationSupported(spec, "plain", driverpb::DriverCapabilities())
          .ok());
}

TEST(TaskSettingsTest, NamesAndNumbers) {
  EXPECT_EQ(ParseSignalName("SIGTERM"), 15);
  EXPECT_EQ(ParseSignalName("term"), 15);
  EXPECT_EQ(ParseSignalName("9"), 9);
  EXPECT_EQ(ParseSignalName("SIGRTMIN"), std::nullopt);
  EXPECT_EQ(ParseSignalName("65"), std::nullopt);
  EXPECT_EQ(ParseSignalName(""), std::nullopt);
  EXPECT_EQ(*CanonicalRlimitType("nofile"), "RLIMIT_NOFILE");
  EXPECT_EQ(*CanonicalRlimitType("rlimit_memlock"), "RLIMIT_MEMLOCK");
  EXPECT_FALSE(CanonicalRlimitType("RLIMIT_").ok());
  v1::TaskSpec spec;
  spec.set_name(std::string(70, 'n'));
  EXPECT_EQ(TaskHostname(spec), std::string(63, 'n'));
  spec.set_name("my_task_");
  EXPECT_EQ(TaskHostname(spec), "my-task");
  spec.set_hostname("given");
  EXPECT_EQ(TaskHostname(spec), "given");
}

// Nothing of an API client's spec may add lines of its own to the task's
// /etc/hosts or /etc/resolv.conf: a NUL (inet_pton stops there) or a
// newline in an extra host's IP or in the DNS settings is refused.
TEST(TaskSettingsTest, HostsAndDnsValuesCannotAddLines) {
  v1::TaskSpec spec;
  v1::HostEntry* entry = spec.add_extra_hosts();
  entry->set_hostname("db");
  entry->set_ip(std::string("10.0.0.1\0\n6.6.6.6\tbank.example", 30));
  absl::Status s = ValidateTaskSettings(spec);
  EXPECT_TRUE(absl::IsInvalidArgument(s)) << s;
  EXPECT_THAT(s.message(), HasSubstr("spec.extra_hosts[0].ip"));
  entry->set_ip("10.0.0.1");
  ASSERT_TRUE(ValidateTaskSettings(spec).ok());

  network::v1::DnsConfig* dns = spec.mutable_network()->mutable_dns();
  dns->add_servers("10.0.0.53");
  dns->add_searches("example.com");
  dns->add_options("ndots:2");
  ASSERT_TRUE(ValidateTaskSettings(spec).ok());
  struct Case {
    std::function<void(network::v1::DnsConfig*)> change;
    std::string field;
  };
  const Case cases[] = {
      {[](network::v1::DnsConfig* d) {
         d->set_servers(0, "10.0.0.53\nnameserver 6.6.6.6");
       },
       "spec.network.dns.servers[0]"},
      {[](network::v1::DnsConfig* d) {
         d->set_servers(0, std::string("10.0.0.53\0x", 11));
       },
       "spec.network.dns.servers[0]"},
      {[](network::v1::DnsConfig* d) { d->set_servers(0, "ns.example"); },
       "spec.network.dns.servers[0]"},
      {[](network::v1::DnsConfig* d) {
         d->set_searches(0, "example.com\nnameserver 6.6.6.6");
       },
       "spec.network.dns.searches[0]"},
      {[](network::v1::DnsConfig* d) { d->set_searches(0, ""); },
       "spec.network.dns.searches[0]"},
      {[](network::v1::DnsConfig* d) {
         d->set_options(0, "ndots:1\nnameserver 6.6.6.6");
       },
       "spec.network.dns.options[0]"},
      {[](network::v1::DnsConfig* d) { d->set_options(0, "a b"); },
       "spec.network.dns.options[0]"},
      {[](network::v1::DnsConfig* d) {
         for (int i = 0; i < 65; ++i) d->add_options("edns0");
       },
       "spec.network.dns.options"},
  };
  for (const Case& c : cases) {
    v1::TaskSpec changed = spec;
    c.change(changed.mutable_network()->mutable_dns());
    absl::Status bad = ValidateTaskSettings(changed);
    EXPECT_TRUE(absl::IsInvalidArgument(bad)) << c.field << ": " << bad;
    EXPECT_THAT(bad.message(), HasSubstr(c.field));
  }
}

}  // namespace
}  // namespace berth::node
