#include "services/driver/common/init_spec.h"

#include <string>

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
  spec.hostname = "web-1";
  spec.netns = "/var/run/netns/berth-a";
  spec.cgroup_procs = {"/sys/fs/cgroup/memory/berth/t/cgroup.procs",
                       "/sys/fs/cgroup/pids/berth/t/cgroup.procs"};
  spec.log_dir = "/tmp/task dir/logs";
  spec.log_max_bytes = 12345;
  spec.log_max_files = 7;
  spec.exit_file = "/tmp/x/exit";

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
  EXPECT_TRUE(decoded.tty);
  EXPECT_EQ(decoded.hostname, spec.hostname);
  EXPECT_EQ(decoded.netns, spec.netns);
  EXPECT_EQ(decoded.cgroup_procs, spec.cgroup_procs);
  EXPECT_EQ(decoded.log_dir, spec.log_dir);
  EXPECT_EQ(decoded.log_max_bytes, 12345u);
  EXPECT_EQ(decoded.log_max_files, 7u);
  EXPECT_EQ(decoded.exit_file, spec.exit_file);
}

TEST(InitSpecTest, RefusesMalformedSpecsNamingTheKey) {
  InitSpec spec;
  std::string error;
  EXPECT_FALSE(DecodeInitSpec(std::string("path=/bin/true\0arg=true", 23),
                              &spec, &error));
  EXPECT_NE(error.find("NUL"), std::string::npos) << error;

  EXPECT_FALSE(DecodeInitSpec(std::string("path=/x\0arg=x\0uid=abc\0", 22),
                              &spec, &error));
  EXPECT_NE(error.find("uid"), std::string::npos) << error;

  EXPECT_FALSE(DecodeInitSpec(std::string("path=/x\0arg=x\0colour=red\0", 25),
                              &spec, &error));
  EXPECT_NE(error.find("colour"), std::string::npos) << error;

  EXPECT_FALSE(DecodeInitSpec(std::string("arg=x\0", 6), &spec, &error));
  EXPECT_NE(error.find("path"), std::string::npos) << error;
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
