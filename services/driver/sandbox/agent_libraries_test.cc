// Reading an ELF file's interpreter, and where the host's loader finds
// berth-agent's libraries. Also says which of the binaries a sandbox runs
// inside a task's root are static: berth-agent-boot must be (it runs from
// the root, which may have no loader); berth-task-init is too.

#include "services/driver/sandbox/agent_libraries.h"

#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "services/common/test_util.h"

namespace berth::sandbox_driver {
namespace {

using ::berth::testing::PathExists;
using ::berth::testing::RunfilePath;
using ::testing::HasSubstr;

TEST(ElfInterpreterTest, TheAgentIsDynamicTheBootAndTheInitStatic) {
  absl::StatusOr<std::string> agent =
      ElfInterpreter(RunfilePath("services/agent/berth-agent"));
  ASSERT_TRUE(agent.ok()) << agent.status();
  ASSERT_FALSE(agent->empty());
  EXPECT_EQ((*agent)[0], '/');
  EXPECT_TRUE(PathExists(*agent)) << *agent;
  for (const char* binary : {"services/agent/berth-agent-boot",
                             "services/driver/exec/init/berth-task-init"}) {
    absl::StatusOr<std::string> interpreter =
        ElfInterpreter(RunfilePath(binary));
    ASSERT_TRUE(interpreter.ok()) << binary << ": " << interpreter.status();
    EXPECT_EQ(*interpreter, "") << binary << " is not static";
  }
}

TEST(ElfInterpreterTest, NotAnElfFileNamed) {
  testing::ShortTempDir dir;
  const std::string script = dir.Join("script");
  // Longer than an ELF header.
  std::ofstream(script) << "#!/bin/sh\n" << std::string(100, '#') << "\n";
  absl::StatusOr<std::string> interpreter = ElfInterpreter(script);
  ASSERT_FALSE(interpreter.ok());
  EXPECT_EQ(interpreter.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(interpreter.status().message(), HasSubstr(script));
  EXPECT_THAT(interpreter.status().message(), HasSubstr("no ELF magic"));

  const std::string cut = dir.Join("cut");
  std::ofstream(cut) << "\x7f"
                        "ELF";
  interpreter = ElfInterpreter(cut);
  ASSERT_FALSE(interpreter.ok());
  EXPECT_THAT(interpreter.status().message(),
              HasSubstr("shorter than its header"));

  interpreter = ElfInterpreter(dir.Join("missing"));
  ASSERT_FALSE(interpreter.ok());
  EXPECT_EQ(interpreter.status().code(), absl::StatusCode::kNotFound);
}

TEST(ParseLoaderListingTest, DirectoriesInOrderOnce) {
  absl::StatusOr<std::vector<AgentLibraries::Dir>> dirs = ParseLoaderListing(
      "\tlinux-vdso.so.1 (0x00007ffd3a5f2000)\n"
      "\tlibgrpc++.so.1.51 => /lib/x86_64-linux-gnu/libgrpc++.so.1.51 "
      "(0x00007f1c0c8a5000)\n"
      "\tlibfoo.so.1 => /opt/foo lib/libfoo.so.1 (0x00007f1c0c800000)\n"
      "\tlibc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x00007f1c0c600000)\n"
      "\t/lib64/ld-linux-x86-64.so.2 (0x00007f1c0cab0000)\n");
  ASSERT_TRUE(dirs.ok()) << dirs.status();
  ASSERT_EQ(dirs->size(), 2u);
  EXPECT_EQ((*dirs)[0].path, "/lib/x86_64-linux-gnu");
  EXPECT_EQ((*dirs)[1].path, "/opt/foo lib");
}

TEST(ParseLoaderListingTest, ALibraryNotFoundIsNamed) {
  absl::StatusOr<std::vector<AgentLibraries::Dir>> dirs = ParseLoaderListing(
      "\tlibc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x00007f1c0c600000)\n"
      "\tlibgone.so.3 => not found\n");
  ASSERT_FALSE(dirs.ok());
  EXPECT_EQ(dirs.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(dirs.status().message(), HasSubstr("libgone.so.3"));
}

// Every library the agent needs is in one of the directories found, each
// a real directory on the host.
TEST(FindAgentLibrariesTest, TheAgentsLoaderAndLibraries) {
  const std::string agent = RunfilePath("services/agent/berth-agent");
  absl::StatusOr<AgentLibraries> libraries = FindAgentLibraries(agent);
  ASSERT_TRUE(libraries.ok()) << libraries.status();
  EXPECT_EQ(libraries->interpreter, *ElfInterpreter(agent));
  struct stat st;
  ASSERT_EQ(stat(libraries->interpreter_host_path.c_str(), &st), 0);
  EXPECT_TRUE(S_ISREG(st.st_mode)) << libraries->interpreter_host_path;
  ASSERT_FALSE(libraries->dirs.empty());
  bool libc = false, libstdcxx = false;
  for (const AgentLibraries::Dir& dir : libraries->dirs) {
    ASSERT_EQ(stat(dir.host_path.c_str(), &st), 0) << dir.host_path;
    EXPECT_TRUE(S_ISDIR(st.st_mode)) << dir.host_path;
    EXPECT_EQ(dir.path[0], '/') << dir.path;
    libc |= PathExists(dir.host_path + "/libc.so.6");
    libstdcxx |= PathExists(dir.host_path + "/libstdc++.so.6");
  }
  EXPECT_TRUE(libc);
  EXPECT_TRUE(libstdcxx);

  // A static binary needs nothing.
  libraries =
      FindAgentLibraries(RunfilePath("services/agent/berth-agent-boot"));
  ASSERT_TRUE(libraries.ok()) << libraries.status();
  EXPECT_EQ(libraries->interpreter, "");
  EXPECT_TRUE(libraries->dirs.empty());
}

}  // namespace
}  // namespace berth::sandbox_driver
