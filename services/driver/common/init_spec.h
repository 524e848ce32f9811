// What a built-in driver tells berth-task-init: the task's command (the
// sandbox driver's: berth-agent), identity, namespaces, cgroup and log files.
// The driver encodes it into a memfd that becomes the init's fd 3; the init
// decodes it. No absl, glog or protobuf here: the init links nothing but libc
// and libstdc++, statically, to stay small.
//
// Encoding: a sequence of "key=value" strings, each ended by a NUL byte.
// Nothing is escaped: a value must hold no NUL byte, which ResolveTaskSpec
// (task_spec.h) makes sure of for everything that comes from a TaskConfig
// (a protobuf string may hold one; argv and environ cannot). Lists are
// repeated keys, in order.

#ifndef SERVICES_DRIVER_COMMON_INIT_SPEC_H_
#define SERVICES_DRIVER_COMMON_INIT_SPEC_H_

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

namespace berth::driver_common {

// The file descriptors berth-task-init is started with, besides 0, 1, 2.
inline constexpr int kInitSpecFd = 3;    // the encoded InitSpec (read to EOF)
inline constexpr int kInitReportFd = 4;  // run: "ok" or an error, then closed;
                                         // exec: the exit record
inline constexpr int kInitTargetFd = 5;  // exec: a pidfd of the task's init

struct InitSpec {
  // Absolute path of the program (already resolved on the task's PATH).
  std::string path;
  // argv, argv[0] included.
  std::vector<std::string> args;
  // environ, "NAME=value".
  std::vector<std::string> env;
  uid_t uid = 0;
  gid_t gid = 0;
  // Supplementary groups.
  std::vector<gid_t> groups;
  // Working directory of the command.
  std::string cwd;
  // Allocate a controlling terminal from fd 0 (exec only).
  bool tty = false;

  // ---- run only ----
  // Host name in the task's UTS namespace; empty keeps the host's.
  std::string hostname;
  // Network namespace to join; empty stays in the host's.
  std::string netns;
  // cgroup.procs files to join before anything is started (also exec).
  std::vector<std::string> cgroup_procs;
  // Directory of stdout.log and stderr.log and their rotations.
  std::string log_dir;
  uint64_t log_max_bytes = 10 << 20;
  uint32_t log_max_files = 4;
  // Where the init records how the task ended (see ExitRecord).
  std::string exit_file;
};

std::string EncodeInitSpec(const InitSpec& spec);

// False with `*error` naming the key at fault when `data` is malformed.
bool DecodeInitSpec(const std::string& data, InitSpec* spec,
                    std::string* error);

// How the task's main process ended, as the init records it in
// InitSpec::exit_file (written to a temporary file and renamed into place).
struct ExitRecord {
  int exit_code = 0;
  int signal = 0;
  // CLOCK_REALTIME when the init saw the exit.
  int64_t exited_at_unix_nanos = 0;
};

// "berth-exit v1 CODE SIGNAL NANOS\n".
std::string EncodeExitRecord(const ExitRecord& record);
bool DecodeExitRecord(const std::string& data, ExitRecord* record);

// What the init says on kInitReportFd, one line:
//   "started\n"           run: the task's program was executed;
//   "exit STATUS\n"       exec: the command ended with this raw wait status;
//   "error ERRNO WHAT\n"  nothing was started; WHAT names the step and path.
struct InitReport {
  enum class Kind { kStarted, kExited, kFailed };
  Kind kind = Kind::kFailed;
  int wait_status = 0;
  int error_number = 0;
  std::string what;
};
std::string EncodeInitReport(const InitReport& report);
bool DecodeInitReport(const std::string& data, InitReport* report);

}  // namespace berth::driver_common

#endif  // SERVICES_DRIVER_COMMON_INIT_SPEC_H_
