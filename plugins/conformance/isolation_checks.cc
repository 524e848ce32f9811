// The checks of DriverCapabilities.isolation: a driver that claims a part of
// TaskConfig.isolation enforces it, as plugins/DRIVERS.md ("Isolation")
// documents. Each task runs a shell probe (builtins, `id` at most, since an
// image root may hold little else) that prints what it saw in its stdout,
// read on the host where berth-node reads it; the check compares.

#include "plugins/conformance/isolation_checks.h"

#include <dirent.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/cleanup/cleanup.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "berth/driver/v1/driver.pb.h"
#include "plugins/conformance/check_util.h"
#include "plugins/conformance/context.h"

namespace berth::conformance {
namespace {

namespace driver = ::berth::driver::v1;

// Docker's default capabilities: CHOWN, DAC_OVERRIDE, FOWNER, FSETID, KILL,
// SETGID, SETUID, SETPCAP, NET_BIND_SERVICE, NET_RAW, SYS_CHROOT, MKNOD,
// AUDIT_WRITE, SETFCAP.
constexpr uint64_t kDefaultCapabilities = 0xa80425fb;
constexpr uint64_t kCapNetAdmin = uint64_t{1} << 12;
// The last line of every probe: the script ran to its end.
constexpr char kEndLine[] = "berth-conformance-end";
// A probe's line saying what is wrong.
constexpr absl::string_view kProblem = "problem: ";
// Where a task's directory is in its own root (DRIVERS.md).
constexpr char kTaskDirInRoot[] = "/berth/task";
// The user namespace check maps this many ids.
constexpr uint32_t kUsernsSize = 65536;

// Prints the lines of the shell's own /proc/self/status the checks read.
constexpr char kStatusProbe[] =
    "while read -r key value; do case \"$key\" in "
    "CapEff:|CapBnd:|NoNewPrivs:|Seccomp:) echo \"$key $value\";; esac; "
    "done < /proc/self/status\n";

using Claim = bool (driver::IsolationCapabilities::*)() const;

// A skip naming the claim unless the driver makes it.
absl::Status NeedClaim(const Context& context, Claim claim,
                       absl::string_view name) {
  if ((context.capabilities()->isolation().*claim)()) return absl::OkStatus();
  return SkipCheck(absl::StrCat("the driver does not claim isolation.", name));
}

// `text` in single quotes for sh.
std::string ShellQuote(absl::string_view text) {
  return absl::StrCat("'", absl::StrReplaceAll(text, {{"'", "'\\''"}}), "'");
}

// A line of a probe that prints `problem` when `condition` (a shell
// command list) succeeds.
std::string ProblemIf(absl::string_view condition, absl::string_view problem) {
  return absl::StrCat("if ", condition, "; then echo ",
                      ShellQuote(absl::StrCat(kProblem, problem)), "; fi\n");
}

// A line of a probe that prints `problem` unless `condition` succeeds.
std::string ProblemUnless(absl::string_view condition,
                          absl::string_view problem) {
  return absl::StrCat("if ", condition, "; then :; else echo ",
                      ShellQuote(absl::StrCat(kProblem, problem)), "; fi\n");
}

// The shell task `hint` running `probe`, then printing the end line.
absl::StatusOr<driver::TaskConfig> ProbeTask(Context& context,
                                             absl::string_view hint,
                                             absl::string_view probe) {
  return context.ShellTask(hint,
                           absl::StrCat(probe, "echo ", kEndLine, "; exit 0"));
}

// Runs a ProbeTask to its end: the lines it printed before the end line.
// `what` names the task in errors ("a task with cap_drop ALL").
absl::StatusOr<std::vector<std::string>> RunProbe(
    Context& context, const driver::TaskConfig& task, absl::string_view what) {
  absl::StatusOr<driver::ExitResult> exit = RunToEnd(context, task);
  if (!exit.ok()) {
    return absl::Status(exit.status().code(),
                        absl::StrCat(what, ": ", exit.status().message()));
  }
  const std::string end = absl::StrCat(kEndLine, "\n");
  const absl::Time deadline = absl::Now() + kLogSettle;
  std::string out;
  while (true) {
    out = ReadHostFile(LogPath(task, "stdout")).value_or("");
    if (absl::StrContains(out, end) || absl::Now() > deadline) break;
    absl::SleepFor(absl::Milliseconds(50));
  }
  if (exit->exit_code() != 0 || exit->signal() != 0 ||
      !absl::StrContains(out, end)) {
    return Mismatch(absl::StrCat(
        what, " did not run its probe to the end (", DescribeExit(*exit),
        "): stdout ", Quote(out), ", stderr ",
        Quote(ReadHostFile(LogPath(task, "stderr")).value_or(""))));
  }
  out.resize(out.find(end));
  return absl::StrSplit(out, '\n', absl::SkipEmpty());
}

// The probe's problem lines, without the prefix.
std::vector<std::string> Problems(const std::vector<std::string>& lines) {
  std::vector<std::string> problems;
  for (const std::string& line : lines) {
    absl::string_view rest = line;
    if (absl::ConsumePrefix(&rest, kProblem)) problems.emplace_back(rest);
  }
  return problems;
}

// The value of the last line "KEY VALUE" of a probe.
std::optional<std::string> Field(const std::vector<std::string>& lines,
                                 absl::string_view key) {
  std::optional<std::string> value;
  for (const std::string& line : lines) {
    absl::string_view rest = line;
    if (absl::ConsumePrefix(&rest, key) && absl::ConsumePrefix(&rest, " ")) {
      value = std::string(rest);
    }
  }
  return value;
}

std::optional<uint64_t> ParseHex(absl::string_view text) {
  if (text.empty() || text.size() > 16) return std::nullopt;
  const std::string copy(text);
  char* end = nullptr;
  const uint64_t value = std::strtoull(copy.c_str(), &end, 16);
  if (*end != '\0') return std::nullopt;
  return value;
}

std::string Hex(uint64_t value) { return absl::StrCat("0x", absl::Hex(value)); }

// The suite's own bounding set: what the host lets any of its processes
// have (a task cannot get more).
absl::StatusOr<uint64_t> HostBoundingSet() {
  const std::optional<std::string> status = ReadHostFile("/proc/self/status");
  if (status.has_value()) {
    for (absl::string_view line : absl::StrSplit(*status, '\n')) {
      if (absl::ConsumePrefix(&line, "CapBnd:")) {
        if (std::optional<uint64_t> bounding =
                ParseHex(absl::StripAsciiWhitespace(line))) {
          return *bounding;
        }
      }
    }
  }
  return absl::InternalError("cannot read CapBnd of /proc/self/status");
}

// A Mismatch unless the probe's `key` (a /proc/self/status field) is `want`.
absl::Status ExpectStatusField(const std::vector<std::string>& lines,
                               absl::string_view key, absl::string_view want,
                               absl::string_view what) {
  const std::optional<std::string> got = Field(lines, key);
  if (!got.has_value()) {
    return Mismatch(
        absl::StrCat(what, ": its /proc/self/status has no ", key, " line"));
  }
  if (*got == want) return absl::OkStatus();
  return Mismatch(absl::StrCat(what, ": /proc/self/status ", key, " ", *got,
                               "; want ", want));
}

// A Mismatch unless the probe's CapEff is `want`.
absl::Status ExpectCapEff(const std::vector<std::string>& lines, uint64_t want,
                          absl::string_view why, absl::string_view what) {
  const std::optional<std::string> text = Field(lines, "CapEff:");
  const std::optional<uint64_t> got =
      text.has_value() ? ParseHex(*text) : std::nullopt;
  if (!got.has_value()) {
    return Mismatch(absl::StrCat(what, ": no CapEff in its /proc/self/status",
                                 text.has_value() ? " " + Quote(*text) : ""));
  }
  if (*got == want) return absl::OkStatus();
  return Mismatch(absl::StrCat(what, ": CapEff ", Hex(*got), "; want ",
                               Hex(want), " (", why, ")"));
}

absl::StatusOr<driver::TaskConfig> StatusTask(Context& context,
                                              absl::string_view hint) {
  return ProbeTask(context, hint, kStatusProbe);
}

absl::Status MakeDirectory(const std::string& path) {
  if (mkdir(path.c_str(), 0755) != 0) {
    return absl::ErrnoToStatus(errno, absl::StrCat("mkdir ", path));
  }
  return absl::OkStatus();
}

absl::Status WriteHostFile(const std::string& path, absl::string_view content) {
  const int fd =
      open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return absl::ErrnoToStatus(errno, absl::StrCat("open ", path));
  const bool written = write(fd, content.data(), content.size()) ==
                       static_cast<ssize_t>(content.size());
  close(fd);
  if (!written) return absl::InternalError(absl::StrCat("write ", path));
  return absl::OkStatus();
}

// Up to `max` names in the host directory `dir` (none when it is missing).
std::vector<std::string> SomeEntries(const std::string& dir, size_t max) {
  std::vector<std::string> names;
  DIR* stream = opendir(dir.c_str());
  if (stream == nullptr) return names;
  while (names.size() < max) {
    const dirent* entry = readdir(stream);
    if (entry == nullptr) break;
    const absl::string_view name = entry->d_name;
    if (name != "." && name != "..") names.emplace_back(name);
  }
  closedir(stream);
  return names;
}

absl::Status ProblemsToStatus(absl::string_view what,
                              const std::vector<std::string>& problems) {
  if (problems.empty()) return absl::OkStatus();
  return Mismatch(absl::StrCat(what, ": ", absl::StrJoin(problems, "; ")));
}

// A probe line: a problem when the task sees host path `path`.
std::string HiddenProbe(absl::string_view path, absl::string_view what) {
  const std::string quoted = ShellQuote(path);
  return ProblemIf(absl::StrCat("[ -e ", quoted, " ] || [ -L ", quoted, " ]"),
                   absl::StrCat("the task sees ", what, " ", path));
}

// --- The checks.

absl::Status OwnRoot(Context& context) {
  CONFORMANCE_RETURN_IF_ERROR(
      NeedClaim(context, &driver::IsolationCapabilities::own_root, "own_root"));
  char marker[] = "/tmp/berth-conformance-marker-XXXXXX";
  const int marker_fd = mkstemp(marker);
  if (marker_fd < 0) {
    return absl::ErrnoToStatus(errno, "cannot make a marker file in /tmp");
  }
  close(marker_fd);
  absl::Cleanup remove_marker = [&marker] { unlink(marker); };
  // Unique: the marker's name.
  const std::string token = strrchr(marker, '-') + 1;
  const std::string usr_probe = absl::StrCat("/usr/.berth-conformance-", token);

  std::string probe;
  probe += HiddenProbe(context.state_dir(), "the suite's state directory");
  probe += HiddenProbe(context.socket_dir(), "the plugin's socket directory");
  probe += HiddenProbe(marker, "a file the suite made in the host's /tmp");
  for (const char* dir : {"/root", "/home"}) {
    for (const std::string& name : SomeEntries(dir, 8)) {
      probe += HiddenProbe(absl::StrCat(dir, "/", name), "the host's");
    }
  }
  const std::string planted = absl::StrCat(kTaskDirInRoot, "/planted");
  probe += ProblemUnless(
      absl::StrCat("[ -f ", planted, " ] && read -r seen < ", planted,
                   " && [ \"$seen\" = ", token, " ]"),
      absl::StrCat("the file the suite put in the task directory before "
                   "StartTask is not at ",
                   planted));
  probe += absl::StrCat(
      "if (: > ", usr_probe, ") 2>/dev/null; then rm -f ", usr_probe, "; echo ",
      ShellQuote(absl::StrCat(kProblem, "the task could write ", usr_probe,
                              ": the host's system directories are not "
                              "read-only")),
      "; fi\n");

  CONFORMANCE_ASSIGN_OR_RETURN(driver::TaskConfig task,
                               ProbeTask(context, "own-root", probe));
  CONFORMANCE_RETURN_IF_ERROR(WriteHostFile(
      absl::StrCat(task.task_dir(), "/planted"), absl::StrCat(token, "\n")));
  CONFORMANCE_ASSIGN_OR_RETURN(
      std::vector<std::string> lines,
      RunProbe(context, task, "a task with the default isolation"));
  std::vector<std::string> problems = Problems(lines);
  if (context.capabilities()->fs_isolation() == driver::FS_ISOLATION_NONE) {
    problems.push_back(
        "the driver claims isolation.own_root but reports fs_isolation "
        "FS_ISOLATION_NONE");
  }
  return ProblemsToStatus("with isolation.own_root claimed", problems);
}

absl::Status Mounts(Context& context) {
  CONFORMANCE_RETURN_IF_ERROR(
      NeedClaim(context, &driver::IsolationCapabilities::mounts, "mounts"));
  // Outside the state directory: sources a node would be given by a user.
  std::string sources = absl::StrCat(context.work_dir(), "/mounts-XXXXXX");
  if (mkdtemp(sources.data()) == nullptr) {
    return absl::ErrnoToStatus(errno, absl::StrCat("mkdtemp ", sources));
  }
  const std::string rw = absl::StrCat(sources, "/rw");
  const std::string ro = absl::StrCat(sources, "/ro");
  for (const std::string& dir : {rw, ro}) {
    CONFORMANCE_RETURN_IF_ERROR(MakeDirectory(dir));
  }
  CONFORMANCE_RETURN_IF_ERROR(
      WriteHostFile(absl::StrCat(ro, "/planted"), "planted\n"));
  const std::string root_probe = absl::StrCat(
      "/.berth-conformance-", sources.substr(sources.rfind('-') + 1));

  std::string probe;
  probe += ProblemUnless(
      "echo written > /mnt/berth-rw/from-task",
      "cannot write in the read-write bind mount at /mnt/berth-rw");
  probe += ProblemUnless(
      "[ -f /mnt/berth-ro/planted ] && read -r seen < /mnt/berth-ro/planted "
      "&& [ \"$seen\" = planted ]",
      "the host file planted in the read-only bind mount's source is not at "
      "/mnt/berth-ro/planted");
  probe += ProblemIf("(: > /mnt/berth-ro/denied) 2>/dev/null",
                     "the task could write in the read_only bind mount at "
                     "/mnt/berth-ro");
  probe += ProblemUnless("echo tmp > /mnt/berth-tmpfs/file",
                         "cannot write in the tmpfs at /mnt/berth-tmpfs");
  probe +=
      "fstype=; while read -r dev point type rest; do "
      "[ \"$point\" = /mnt/berth-tmpfs ] && fstype=$type; "
      "done < /proc/self/mounts\n";
  probe += ProblemUnless(
      "[ \"$fstype\" = tmpfs ]",
      "/mnt/berth-tmpfs is not a tmpfs mount in /proc/self/mounts");
  probe += absl::StrCat(
      "if (: > ", root_probe, ") 2>/dev/null; then rm -f ", root_probe,
      "; echo ",
      ShellQuote(absl::StrCat(kProblem,
                              "with readonly_rootfs the task could "
                              "write ",
                              root_probe)),
      "; fi\n");
  probe += ProblemUnless("(: > /tmp/writable) 2>/dev/null",
                         "with readonly_rootfs /tmp is not writable");
  CONFORMANCE_ASSIGN_OR_RETURN(driver::TaskConfig task,
                               ProbeTask(context, "mounts", probe));

  driver::Isolation& isolation = *task.mutable_isolation();
  isolation.set_readonly_rootfs(true);
  driver::Mount* mount = isolation.add_mounts();
  mount->set_type(driver::MOUNT_TYPE_BIND);
  mount->set_source(rw);
  mount->set_destination("/mnt/berth-rw");
  mount = isolation.add_mounts();
  mount->set_type(driver::MOUNT_TYPE_BIND);
  mount->set_source(ro);
  mount->set_destination("/mnt/berth-ro");
  mount->set_read_only(true);
  mount = isolation.add_mounts();
  mount->set_type(driver::MOUNT_TYPE_TMPFS);
  mount->set_destination("/mnt/berth-tmpfs");

  CONFORMANCE_ASSIGN_OR_RETURN(
      std::vector<std::string> lines,
      RunProbe(context, task,
               "a task with readonly_rootfs, a read-write bind, a read-only "
               "bind and a tmpfs"));
  std::vector<std::string> problems = Problems(lines);
  const std::string written = absl::StrCat(rw, "/from-task");
  const std::optional<std::string> content = ReadHostFile(written);
  if (content != "written\n") {
    problems.push_back(absl::StrCat(
        "the file the task wrote at /mnt/berth-rw/from-task is not on the "
        "host at ",
        written,
        content.has_value() ? absl::StrCat(" (it holds ", Quote(*content), ")")
                            : ""));
  }
  return ProblemsToStatus("with isolation.mounts claimed", problems);
}

absl::Status Capabilities(Context& context) {
  CONFORMANCE_RETURN_IF_ERROR(NeedClaim(
      context, &driver::IsolationCapabilities::capabilities, "capabilities"));
  CONFORMANCE_ASSIGN_OR_RETURN(const uint64_t bounding, HostBoundingSet());
  const std::string within =
      absl::StrCat("within the host's bounding set ", Hex(bounding));

  CONFORMANCE_ASSIGN_OR_RETURN(driver::TaskConfig task,
                               StatusTask(context, "caps-default"));
  CONFORMANCE_ASSIGN_OR_RETURN(
      std::vector<std::string> lines,
      RunProbe(context, task, "a root task with the default isolation"));
  CONFORMANCE_RETURN_IF_ERROR(
      ExpectCapEff(lines, kDefaultCapabilities & bounding,
                   absl::StrCat("Docker's default set ",
                                Hex(kDefaultCapabilities), " ", within),
                   "a root task with the default isolation"));

  CONFORMANCE_ASSIGN_OR_RETURN(task, StatusTask(context, "caps-drop-all"));
  task.mutable_isolation()->add_cap_drop("ALL");
  CONFORMANCE_ASSIGN_OR_RETURN(
      lines, RunProbe(context, task, "a root task with cap_drop ALL"));
  CONFORMANCE_RETURN_IF_ERROR(
      ExpectCapEff(lines, 0, "none is left", "a root task with cap_drop ALL"));

  CONFORMANCE_ASSIGN_OR_RETURN(task, StatusTask(context, "caps-add"));
  task.mutable_isolation()->add_cap_drop("ALL");
  task.mutable_isolation()->add_cap_add("NET_ADMIN");
  const char* const added = "a root task with cap_drop ALL, cap_add NET_ADMIN";
  CONFORMANCE_ASSIGN_OR_RETURN(lines, RunProbe(context, task, added));
  CONFORMANCE_RETURN_IF_ERROR(
      ExpectCapEff(lines, kCapNetAdmin & bounding,
                   absl::StrCat("CAP_NET_ADMIN alone, ", within), added));

  CONFORMANCE_ASSIGN_OR_RETURN(task, StatusTask(context, "caps-nobody"));
  task.set_user("nobody");
  CONFORMANCE_ASSIGN_OR_RETURN(
      lines, RunProbe(context, task, "a task of user nobody"));
  return ExpectCapEff(lines, 0, "a user other than root keeps none",
                      "a task of user nobody");
}

absl::Status NoNewPrivileges(Context& context) {
  CONFORMANCE_RETURN_IF_ERROR(
      NeedClaim(context, &driver::IsolationCapabilities::no_new_privileges,
                "no_new_privileges"));
  CONFORMANCE_ASSIGN_OR_RETURN(driver::TaskConfig task,
                               StatusTask(context, "nnp-default"));
  const char* const by_default = "a task with the default isolation";
  CONFORMANCE_ASSIGN_OR_RETURN(std::vector<std::string> lines,
                               RunProbe(context, task, by_default));
  CONFORMANCE_RETURN_IF_ERROR(
      ExpectStatusField(lines, "NoNewPrivs:", "1", by_default));

  CONFORMANCE_ASSIGN_OR_RETURN(task, StatusTask(context, "nnp-allowed"));
  task.mutable_isolation()->set_allow_privilege_escalation(true);
  const char* const allowed = "a task with allow_privilege_escalation";
  CONFORMANCE_ASSIGN_OR_RETURN(lines, RunProbe(context, task, allowed));
  return ExpectStatusField(lines, "NoNewPrivs:", "0", allowed);
}

absl::Status Seccomp(Context& context) {
  CONFORMANCE_RETURN_IF_ERROR(
      NeedClaim(context, &driver::IsolationCapabilities::seccomp, "seccomp"));
  struct Case {
    const char* hint;
    driver::SeccompProfileType type;
    const char* want;
    const char* what;
  };
  for (const Case& c : {
           Case{"seccomp-default", driver::SECCOMP_PROFILE_TYPE_UNSPECIFIED,
                "2", "a task with the default isolation"},
           Case{"seccomp-runtime", driver::SECCOMP_PROFILE_TYPE_RUNTIME_DEFAULT,
                "2", "a task with seccomp RUNTIME_DEFAULT"},
           Case{"seccomp-unconfined", driver::SECCOMP_PROFILE_TYPE_UNCONFINED,
                "0", "a task with seccomp UNCONFINED"},
       }) {
    CONFORMANCE_ASSIGN_OR_RETURN(driver::TaskConfig task,
                                 StatusTask(context, c.hint));
    if (c.type != driver::SECCOMP_PROFILE_TYPE_UNSPECIFIED) {
      task.mutable_isolation()->mutable_seccomp()->set_type(c.type);
    }
    CONFORMANCE_ASSIGN_OR_RETURN(std::vector<std::string> lines,
                                 RunProbe(context, task, c.what));
    CONFORMANCE_RETURN_IF_ERROR(
        ExpectStatusField(lines, "Seccomp:", c.want, c.what));
  }

  // A profile whose effect a shell shows: sh sets $PPID from getppid() as
  // it starts, which this filter makes fail (-1).
  CONFORMANCE_ASSIGN_OR_RETURN(
      driver::TaskConfig task,
      ProbeTask(context, "seccomp-custom",
                absl::StrCat(kStatusProbe, "echo \"ppid $PPID\"\n")));
  driver::SeccompProfile& profile =
      *task.mutable_isolation()->mutable_seccomp();
  profile.set_type(driver::SECCOMP_PROFILE_TYPE_CUSTOM);
  profile.set_custom_profile_json(
      R"({"defaultAction": "SCMP_ACT_ALLOW", "syscalls": [{"names": )"
      R"(["getppid"], "action": "SCMP_ACT_ERRNO", "errnoRet": 1}]})");
  const char* const custom =
      "a task with a CUSTOM seccomp profile making getppid fail with EPERM";
  CONFORMANCE_ASSIGN_OR_RETURN(std::vector<std::string> lines,
                               RunProbe(context, task, custom));
  CONFORMANCE_RETURN_IF_ERROR(
      ExpectStatusField(lines, "Seccomp:", "2", custom));
  const std::optional<std::string> ppid = Field(lines, "ppid");
  if (ppid != "-1") {
    return Mismatch(absl::StrCat(
        custom, ": its shell's $PPID is ", Quote(ppid.value_or("")),
        "; want -1 (getppid failed): the profile is not the one applied"));
  }
  return absl::OkStatus();
}

absl::Status MaskedPaths(Context& context) {
  CONFORMANCE_RETURN_IF_ERROR(NeedClaim(
      context, &driver::IsolationCapabilities::masked_paths, "masked_paths"));
  std::string probe;
  struct stat st;
  if (stat("/proc/kcore", &st) == 0) {
    probe += ProblemIf("[ -s /proc/kcore ]",
                       "/proc/kcore is not masked (its size is not 0)");
  }
  // Opened for writing, nothing written: harmless where it is writable.
  probe += ProblemIf("(: >> /proc/sys/kernel/hostname) 2>/dev/null",
                     "/proc/sys is writable (/proc/sys/kernel/hostname "
                     "opened for writing)");
  probe +=
      "sysopts=; while read -r dev point type opts rest; do "
      "[ \"$point\" = /sys ] && sysopts=$opts; done < /proc/self/mounts\n";
  probe += ProblemUnless("case \"$sysopts\" in ro|ro,*) true;; *) false;; esac",
                         "/sys is not mounted read-only (/proc/self/mounts)");
  // The first three block devices by name, then how many more.
  probe +=
      "n=0; for f in /dev/* /dev/*/*; do if [ -b \"$f\" ]; then "
      "n=$((n + 1)); if [ $n -le 3 ]; then "
      "echo \"problem: $f is a block device\"; fi; fi; done\n"
      "if [ $n -gt 3 ]; then "
      "echo \"problem: and $((n - 3)) more block devices in /dev\"; fi\n";
  CONFORMANCE_ASSIGN_OR_RETURN(driver::TaskConfig task,
                               ProbeTask(context, "masked", probe));
  CONFORMANCE_ASSIGN_OR_RETURN(
      std::vector<std::string> lines,
      RunProbe(context, task, "a task with the default isolation"));
  return ProblemsToStatus("with isolation.masked_paths claimed",
                          Problems(lines));
}

absl::Status UserNamespaces(Context& context) {
  CONFORMANCE_RETURN_IF_ERROR(
      NeedClaim(context, &driver::IsolationCapabilities::user_namespaces,
                "user_namespaces"));
  const uint32_t base = context.options().userns_base;
  CONFORMANCE_ASSIGN_OR_RETURN(
      driver::TaskConfig task,
      ProbeTask(
          context, "userns",
          "read -r a b c < /proc/self/uid_map; echo \"uid_map $a $b $c\"\n"
          "read -r a b c < /proc/self/gid_map; echo \"gid_map $a $b $c\"\n"
          "echo \"uid $(id -u)\"\n"));
  driver::UserNamespace& userns =
      *task.mutable_isolation()->mutable_user_namespace();
  for (driver::IdMapping* mapping :
       {userns.add_uid_mappings(), userns.add_gid_mappings()}) {
    mapping->set_container_id(0);
    mapping->set_host_id(base);
    mapping->set_size(kUsernsSize);
  }
  const std::string what =
      absl::StrCat("a task whose user namespace maps 0 to ", base, " (",
                   kUsernsSize, " ids)");
  CONFORMANCE_ASSIGN_OR_RETURN(std::vector<std::string> lines,
                               RunProbe(context, task, what));
  const std::string want_map = absl::StrCat("0 ", base, " ", kUsernsSize);
  for (const char* key : {"uid_map", "gid_map"}) {
    const std::optional<std::string> got = Field(lines, key);
    if (got != want_map) {
      return Mismatch(absl::StrCat(what, ": /proc/self/", key, " is ",
                                   Quote(got.value_or("")), "; want ",
                                   Quote(want_map)));
    }
  }
  const std::optional<std::string> uid = Field(lines, "uid");
  if (uid != "0") {
    return Mismatch(absl::StrCat(what, ": `id -u` printed ",
                                 Quote(uid.value_or("")),
                                 "; want 0 (the namespace's root)"));
  }
  return absl::OkStatus();
}

absl::Status Privileged(Context& context) {
  CONFORMANCE_RETURN_IF_ERROR(NeedClaim(
      context, &driver::IsolationCapabilities::capabilities, "capabilities"));
  CONFORMANCE_ASSIGN_OR_RETURN(const uint64_t bounding, HostBoundingSet());
  const bool own_root = context.capabilities()->isolation().own_root();
  std::string probe = kStatusProbe;
  if (own_root) {
    probe += HiddenProbe(context.state_dir(), "the suite's state directory");
  }
  CONFORMANCE_ASSIGN_OR_RETURN(driver::TaskConfig task,
                               ProbeTask(context, "privileged", probe));
  task.mutable_isolation()->set_privileged(true);
  const char* const what = "a task with privileged";
  CONFORMANCE_ASSIGN_OR_RETURN(std::vector<std::string> lines,
                               RunProbe(context, task, what));
  CONFORMANCE_RETURN_IF_ERROR(ExpectCapEff(
      lines, bounding, "every capability: the host's bounding set", what));
  CONFORMANCE_RETURN_IF_ERROR(ExpectStatusField(lines, "Seccomp:", "0", what));
  // Privileged loosens privileges, not the root.
  return ProblemsToStatus(
      absl::StrCat(what,
                   " (isolation.own_root claimed: it keeps its own root)"),
      Problems(lines));
}

}  // namespace

std::vector<Check> IsolationChecks() {
  return {
      {"isolation_own_root",
       "isolation.own_root: the task sees neither the suite's state and "
       "socket directories, nor a file planted in the host's /tmp, nor the "
       "host's /root and /home; its task directory is at /berth/task; /usr "
       "is read-only",
       std::nullopt, true, &OwnRoot},
      {"isolation_mounts",
       "isolation.mounts: a read-write bind (the task's file is seen on the "
       "host), a read_only bind (a write fails), a tmpfs; readonly_rootfs "
       "makes / read-only and leaves /tmp writable",
       std::nullopt, true, &Mounts},
      {"isolation_capability_set",
       "isolation.capabilities: CapEff of root is Docker's default set "
       "0xa80425fb (within the host's bounding set); cap_drop ALL gives 0; "
       "cap_add NET_ADMIN over it gives 0x1000; user nobody has 0",
       std::nullopt, true, &Capabilities},
      {"isolation_no_new_privileges",
       "isolation.no_new_privileges: NoNewPrivs 1 by default, 0 with "
       "allow_privilege_escalation",
       std::nullopt, true, &NoNewPrivileges},
      {"isolation_seccomp",
       "isolation.seccomp: Seccomp 2 by default and with RUNTIME_DEFAULT, 0 "
       "with UNCONFINED; a CUSTOM profile failing getppid is applied",
       std::nullopt, true, &Seccomp},
      {"isolation_masked_paths",
       "isolation.masked_paths: /proc/kcore masked, /proc/sys and /sys "
       "read-only, no block device in /dev",
       std::nullopt, true, &MaskedPaths},
      {"isolation_user_namespaces",
       "isolation.user_namespaces: a task mapping 0 to --userns_base (65536 "
       "ids) has that uid_map and gid_map, and `id -u` 0",
       std::nullopt, true, &UserNamespaces},
      {"isolation_privileged",
       "isolation.capabilities: a privileged task has CapEff equal to the "
       "host's bounding set and Seccomp 0 (and still its own root with "
       "isolation.own_root)",
       std::nullopt, true, &Privileged},
  };
}

}  // namespace berth::conformance
