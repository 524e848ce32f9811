#include "services/driver/common/init_spec.h"

#include <string>
#include <utility>
#include <vector>

#include "gtest/gtest.h"

namespace berth::driver_common {
namespace {

TEST(InitSpecTest, RoundTripsEveryField) {
  InitSpec spec;
  spec.path = "/bin/sh";
  spec.args = {"sh", "-c", "echo a=b; printf 'x\\ny'"};
  spec.env = {"A=1", "B=x=y", "EMPTY="};
  spec.uid = 65534;
  spec.gid = 65533;
  spec.groups = {1, 2, 3};
  spec.cwd = "/tmp/task dir";
  spec.tty = true;
  spec.join_user_namespace = true;
  spec.hostname = "web-1";
  spec.netns = "/var/run/netns/berth-a";
  spec.cgroup_procs = {"/sys/fs/cgroup/memory/berth/t/cgroup.procs",
                       "/sys/fs/cgroup/pids/berth/t/cgroup.procs"};
  spec.log_dir = "/tmp/task dir/logs";
  spec.log_max_bytes = 12345;
  spec.log_max_files = 7;
  spec.exit_file = "/tmp/x/exit";
  spec.privileges.enabled = true;
  spec.privileges.capabilities = (1ull << 0) | (1ull << 40);
  spec.privileges.no_new_privs = false;
  spec.privileges.seccomp_filter = std::string("\x20\0\0\0 9:x\n", 9);
  spec.root.enabled = true;
  spec.root.mount_point = "/var/lib/berth/exec/root";
  spec.root.rootfs = "/images/x/rootfs";
  spec.root.host_dirs = {"/usr", "/bin"};
  spec.root.readonly_rootfs = true;
  spec.root.task_dir = "/tmp/task dir";
  spec.root.mounts = {{MountSpec::Kind::kBind, "/srv/data", "/data", true},
                      {MountSpec::Kind::kTmpfs, "", "/scratch", false}};
  spec.root.privileged = true;
  spec.root.cgroup_namespace = false;
  spec.root.rootfs_fd = 6;
  spec.root.task_dir_fd = 7;
  spec.root.mounts[0].source_fd = 8;
  spec.log_dir_fd = 9;
  spec.exit_dir_fd = 10;
  spec.rlimits = {{7, 1024, 4096}, {4, 0, UINT64_MAX}};
  spec.stdin_open = true;
  spec.attach_fd = 11;
  spec.go_fd = 5;

  InitSpec decoded;
  std::string error;
  ASSERT_TRUE(DecodeInitSpec(EncodeInitSpec(spec), &decoded, &error)) << error;
  EXPECT_EQ(decoded.path, spec.path);
  EXPECT_EQ(decoded.args, spec.args);
  EXPECT_EQ(decoded.env, spec.env);
  EXPECT_EQ(decoded.uid, spec.uid);
  EXPECT_EQ(decoded.gid, spec.gid);
  EXPECT_EQ(decoded.groups, spec.groups);
  EXPECT_EQ(decoded.cwd, spec.cwd);
  ASSERT_EQ(decoded.rlimits.size(), 2u);
  EXPECT_EQ(decoded.rlimits[0].resource, 7);
  EXPECT_EQ(decoded.rlimits[0].soft, 1024u);
  EXPECT_EQ(decoded.rlimits[0].hard, 4096u);
  EXPECT_EQ(decoded.rlimits[1].resource, 4);
  EXPECT_EQ(decoded.rlimits[1].hard, UINT64_MAX);
  EXPECT_TRUE(decoded.stdin_open);
  EXPECT_EQ(decoded.attach_fd, 11);
  EXPECT_EQ(decoded.go_fd, 5);
  EXPECT_TRUE(decoded.tty);
  EXPECT_TRUE(decoded.join_user_namespace);
  EXPECT_EQ(decoded.hostname, spec.hostname);
  EXPECT_EQ(decoded.netns, spec.netns);
  EXPECT_EQ(decoded.cgroup_procs, spec.cgroup_procs);
  EXPECT_EQ(decoded.log_dir, spec.log_dir);
  EXPECT_EQ(decoded.log_max_bytes, 12345u);
  EXPECT_EQ(decoded.log_max_files, 7u);
  EXPECT_EQ(decoded.exit_file, spec.exit_file);
  EXPECT_TRUE(decoded.privileges.enabled);
  EXPECT_EQ(decoded.privileges.capabilities, spec.privileges.capabilities);
  EXPECT_FALSE(decoded.privileges.no_new_privs);
  EXPECT_EQ(decoded.privileges.seccomp_filter, spec.privileges.seccomp_filter);
  EXPECT_TRUE(decoded.root.enabled);
  EXPECT_EQ(decoded.root.mount_point, spec.root.mount_point);
  EXPECT_EQ(decoded.root.rootfs, spec.root.rootfs);
  EXPECT_EQ(decoded.root.host_dirs, spec.root.host_dirs);
  EXPECT_TRUE(decoded.root.readonly_rootfs);
  EXPECT_EQ(decoded.root.task_dir, spec.root.task_dir);
  ASSERT_EQ(decoded.root.mounts.size(), 2u);
  EXPECT_EQ(decoded.root.mounts[0].kind, MountSpec::Kind::kBind);
  EXPECT_EQ(decoded.root.mounts[0].source, "/srv/data");
  EXPECT_EQ(decoded.root.mounts[0].destination, "/data");
  EXPECT_TRUE(decoded.root.mounts[0].read_only);
  EXPECT_EQ(decoded.root.mounts[1].kind, MountSpec::Kind::kTmpfs);
  EXPECT_EQ(decoded.root.mounts[1].destination, "/scratch");
  EXPECT_FALSE(decoded.root.mounts[1].read_only);
  EXPECT_TRUE(decoded.root.privileged);
  EXPECT_EQ(decoded.root.rootfs_fd, 6);
  EXPECT_EQ(decoded.root.task_dir_fd, 7);
  ASSERT_EQ(decoded.root.mounts.size(), 2u);
  EXPECT_EQ(decoded.root.mounts[0].source_fd, 8);
  EXPECT_EQ(decoded.root.mounts[1].source_fd, -1);
  EXPECT_EQ(decoded.log_dir_fd, 9);
  EXPECT_EQ(decoded.exit_dir_fd, 10);
  EXPECT_FALSE(decoded.root.cgroup_namespace);
}

// The old NUL-separated encoding let an argument holding "\0group=4242" add
// a record; lengths make every byte of a value part of that value.
TEST(InitSpecTest, SeparatorsInValuesCannotForgeRecords) {
  InitSpec spec;
  spec.path = "/usr/bin/id";
  spec.args = {"id", std::string("-G\0group=4242", 14), "x 3:uid 1:7"};
  spec.env = {std::string("A=1\0env=B=2", 11)};
  InitSpec decoded;
  std::string error;
  ASSERT_TRUE(DecodeInitSpec(EncodeInitSpec(spec), &decoded, &error)) << error;
  EXPECT_EQ(decoded.args, spec.args);
  EXPECT_EQ(decoded.env, spec.env);
  EXPECT_TRUE(decoded.groups.empty());
  EXPECT_EQ(decoded.uid, 0u);
}

TEST(InitSpecTest, RefusesMalformedSpecsNamingTheKey) {
  InitSpec spec;
  std::string error;
  const auto decode = [&](const std::string& data) {
    return DecodeInitSpec(data, &spec, &error);
  };
  EXPECT_FALSE(decode("path 9:/bin/truearg 9:true"));
  EXPECT_NE(error.find("arg: value runs past the end"), std::string::npos)
      << error;
  EXPECT_FALSE(decode("path 2:/xarg 1:xuid 3:abc"));
  EXPECT_NE(error.find("uid is not a number"), std::string::npos) << error;
  EXPECT_FALSE(decode("path 2:/xarg 1:xcolour 3:red"));
  EXPECT_NE(error.find("unknown key colour"), std::string::npos) << error;
  EXPECT_FALSE(decode("arg 1:x"));
  EXPECT_NE(error.find("path"), std::string::npos) << error;
  EXPECT_FALSE(decode("path x:/x"));
  EXPECT_NE(error.find("path: malformed length"), std::string::npos) << error;
  EXPECT_FALSE(decode("path 99999999999:/x"));
  EXPECT_NE(error.find("length too large"), std::string::npos) << error;
  EXPECT_FALSE(decode("path 2:/xarg 1:xmount.source 2:/a"));
  EXPECT_NE(error.find("mount.source before mount.kind"), std::string::npos)
      << error;
  EXPECT_FALSE(decode("path 2:/xarg 1:xtty 3:yes"));
  EXPECT_NE(error.find("tty is not 0 or 1"), std::string::npos) << error;
}

TEST(ExitRecordTest, RoundTripsAndRefusesGarbage) {
  ExitRecord record{3, 0, 1700000000123456789};
  ExitRecord decoded;
  ASSERT_TRUE(DecodeExitRecord(EncodeExitRecord(record), &decoded));
  EXPECT_EQ(decoded.exit_code, 3);
  EXPECT_EQ(decoded.signal, 0);
  EXPECT_EQ(decoded.exited_at_unix_nanos, 1700000000123456789);

  ASSERT_TRUE(DecodeExitRecord("berth-exit v1 0 9 5\n", &decoded));
  EXPECT_EQ(decoded.signal, 9);

  EXPECT_FALSE(DecodeExitRecord("", &decoded));
  EXPECT_FALSE(DecodeExitRecord("berth-exit v2 0 9 5\n", &decoded));
  EXPECT_FALSE(DecodeExitRecord("berth-exit v1 0 nine 5\n", &decoded));
  EXPECT_FALSE(DecodeExitRecord("berth-exit v1 0 9\n", &decoded));
}

// Found by exit_record_fuzzer and init_report_fuzzer: a number followed by
// a NUL byte and anything else was taken for the number; values beyond an
// int were cut; a record longer than kMaxExitRecordBytes was taken; a report
// of several lines passed its later lines off as part of `what`.
TEST(ExitRecordTest, RefusesTrailingBytesOutOfRangeValuesAndLongRecords) {
  ExitRecord decoded;
  EXPECT_FALSE(DecodeExitRecord(
      std::string("berth-exit v1 44 0 44\0garbage 5\n", 32), &decoded));
  EXPECT_FALSE(DecodeExitRecord("berth-exit v1 4294967299 0 5\n", &decoded));
  EXPECT_FALSE(DecodeExitRecord("berth-exit v1 0 -4294967287 5\n", &decoded));
  EXPECT_FALSE(DecodeExitRecord("berth-exit v1 +3 0 5\n", &decoded));
  EXPECT_FALSE(DecodeExitRecord("berth-exit v1 \t3 0 5\n", &decoded));
  EXPECT_FALSE(DecodeExitRecord("berth-exit v1 - 0 5\n", &decoded));
  EXPECT_FALSE(DecodeExitRecord(
      "berth-exit v1 0 0 " + std::string(kMaxExitRecordBytes, '0') + "\n",
      &decoded));
  ASSERT_TRUE(DecodeExitRecord("berth-exit v1 -1 0 -5\n", &decoded));
  EXPECT_EQ(decoded.exit_code, -1);
  EXPECT_EQ(decoded.exited_at_unix_nanos, -5);

  InitReport report;
  EXPECT_FALSE(DecodeInitReport("exit 4294967296\n", &report));
  EXPECT_FALSE(DecodeInitReport(std::string("exit 0\0\n", 8), &report));
  EXPECT_FALSE(DecodeInitReport("error 13 open /x\nforged line\n", &report));
  EXPECT_FALSE(
      DecodeInitReport(std::string("error 13 open /x\0y\n", 19), &report));
  ASSERT_TRUE(DecodeInitReport("error 13 open /x\r\n", &report));
  EXPECT_EQ(report.what, "open /x\r");
}

// A uid of 2^32 was cut to 0 (root); 2^32 - 1 is setresuid's "unchanged".
TEST(InitSpecTest, RefusesIdsAndCountsBeyondTheirTypes) {
  for (const auto& [key, number] :
       std::vector<std::pair<std::string, std::string>>{
           {"uid", "4294967296"},
           {"uid", "4294967295"},
           {"gid", "4294967295"},
           {"group", "8589934593"},
           {"log_max_files", "4294967296"}}) {
    InitSpec spec;
    std::string error;
    const std::string data = EncodeInitSpec(spec) + key + " " +
                             std::to_string(number.size()) + ":" + number;
    EXPECT_FALSE(DecodeInitSpec(data, &spec, &error)) << key << " " << number;
    EXPECT_NE(error.find(key), std::string::npos) << error;
  }
  InitSpec spec;
  spec.path = "/bin/true";
  spec.args = {"true"};
  std::string error;
  ASSERT_TRUE(
      DecodeInitSpec(EncodeInitSpec(spec) + "uid 10:4294967294", &spec, &error))
      << error;
  EXPECT_EQ(spec.uid, 4294967294u);
}

TEST(InitSpecTest, RefusesANumberFollowedByANulByte) {
  InitSpec spec;
  std::string error;
  std::string data = EncodeInitSpec(spec);
  const std::string uid = "uid 1:0";
  const size_t at = data.find(uid);
  ASSERT_NE(at, std::string::npos) << data;
  data.replace(at, uid.size(), std::string("uid 3:0\0x", 9));
  EXPECT_FALSE(DecodeInitSpec(data, &spec, &error));
  EXPECT_NE(error.find("uid"), std::string::npos) << error;
}

TEST(InitReportTest, RoundTripsEachKind) {
  InitReport report;
  report.kind = InitReport::Kind::kStarted;
  InitReport decoded;
  ASSERT_TRUE(DecodeInitReport(EncodeInitReport(report), &decoded));
  EXPECT_EQ(decoded.kind, InitReport::Kind::kStarted);

  report.kind = InitReport::Kind::kExited;
  report.wait_status = 0x0300;
  ASSERT_TRUE(DecodeInitReport(EncodeInitReport(report), &decoded));
  EXPECT_EQ(decoded.kind, InitReport::Kind::kExited);
  EXPECT_EQ(decoded.wait_status, 0x0300);

  report.kind = InitReport::Kind::kFailed;
  report.error_number = 2;
  report.what = "executing /no/such\nbinary";
  ASSERT_TRUE(DecodeInitReport(EncodeInitReport(report), &decoded));
  EXPECT_EQ(decoded.kind, InitReport::Kind::kFailed);
  EXPECT_EQ(decoded.error_number, 2);
  EXPECT_EQ(decoded.what, "executing /no/such binary");

  EXPECT_FALSE(DecodeInitReport("exit\n", &decoded));
  EXPECT_FALSE(DecodeInitReport("error x y\n", &decoded));
  EXPECT_FALSE(DecodeInitReport("", &decoded));
}

}  // namespace
}  // namespace berth::driver_common
