#include "services/node/cli/commands.h"

#include <cstdlib>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "services/common/service_main.h"
#include "services/node/cli/cli.h"
#include "services/node/cli/command_table.h"

namespace berth::cli {

std::optional<std::string> ProcessEnv(const std::string& name) {
  const char* value = std::getenv(name.c_str());
  if (value == nullptr) return std::nullopt;
  return std::string(value);
}

std::string ResolveNodeSocket(const std::string& socket_flag,
                              const CliEnvironment& env) {
  if (!socket_flag.empty()) return socket_flag;
  auto lookup = [&](const char* name) -> std::string {
    if (!env.getenv) return "";
    return env.getenv(name).value_or("");
  };
  if (std::string socket = lookup("BERTH_NODE_SOCKET"); !socket.empty()) {
    return socket;
  }
  if (std::string dir = lookup("BERTH_RUNTIME_DIR"); !dir.empty()) {
    return absl::StrCat(dir, "/node.sock");
  }
  return absl::StrCat(kDefaultRuntimeDir, "/node.sock");
}

int RunCli(const std::vector<std::string>& args, const CliEnvironment& env) {
  auto out = [&](absl::string_view text) {
    BestEffortWrite(env.stdout_fd, text);
  };
  auto err = [&](absl::string_view text) {
    BestEffortWrite(env.stderr_fd, text);
  };
  std::string socket_flag;
  size_t i = 0;
  for (; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (arg == "-h" || arg == "--help") {
      out(TopUsage());
      return kExitOk;
    }
    if (arg == "--version") {
      out(absl::StrCat("berth ", kVersion, "\n"));
      return kExitOk;
    }
    if (arg == "--socket") {
      if (i + 1 == args.size()) {
        err("berth: flag --socket needs a value (PATH); see 'berth --help'\n");
        return kExitUsage;
      }
      socket_flag = args[++i];
      if (socket_flag.empty()) {
        err("berth: --socket is empty; see 'berth --help'\n");
        return kExitUsage;
      }
      continue;
    }
    if (arg.rfind("--socket=", 0) == 0) {
      socket_flag = arg.substr(std::string("--socket=").size());
      if (socket_flag.empty()) {
        err("berth: --socket is empty; see 'berth --help'\n");
        return kExitUsage;
      }
      continue;
    }
    if (arg.size() > 1 && arg[0] == '-') {
      err(absl::StrCat("berth: unknown flag ", arg, "; see 'berth --help'\n"));
      return kExitUsage;
    }
    break;
  }
  if (i == args.size()) {
    err(TopUsage());
    return kExitUsage;
  }

  std::string name = args[i++];
  if (name == "__complete") {
    Cli cli(env, ResolveNodeSocket(socket_flag, env));
    return cli.CompleteNames(
        std::vector<std::string>(args.begin() + i, args.end()));
  }
  if (name == "help") {
    if (i == args.size()) {
      out(TopUsage());
      return kExitOk;
    }
    if (IsCommandGroup(args[i]) && i + 1 == args.size()) {
      out(GroupUsage(args[i]));
      return kExitOk;
    }
    name = args[i] == "node" ? "node status" : args[i];
    if (IsCommandGroup(args[i])) name = absl::StrCat(args[i], " ", args[i + 1]);
    const CommandInfo* command = FindCommand(name);
    if (command == nullptr) {
      err(absl::StrCat("berth: unknown command \"", name,
                       "\"; see 'berth --help'\n"));
      return kExitUsage;
    }
    out(CommandUsage(*command));
    return kExitOk;
  }
  if (name == "node") {
    if (i == args.size() || args[i] == "-h" || args[i] == "--help") {
      std::string usage = CommandUsage(*FindCommand("node status"));
      if (i == args.size()) {
        err(usage);
        return kExitUsage;
      }
      out(usage);
      return kExitOk;
    }
    if (args[i] != "status") {
      err(absl::StrCat("berth node: unknown command \"", args[i],
                       "\"; see 'berth node --help'\n"));
      return kExitUsage;
    }
    name = "node status";
    ++i;
  }
  if (IsCommandGroup(name)) {
    const std::string group = name;
    if (i == args.size()) {
      err(GroupUsage(group));
      return kExitUsage;
    }
    if (args[i] == "-h" || args[i] == "--help") {
      out(GroupUsage(group));
      return kExitOk;
    }
    name = absl::StrCat(group, " ", args[i]);
    if (FindCommand(name) == nullptr) {
      err(absl::StrCat("berth ", group, ": unknown command \"", args[i],
                       "\"; see 'berth ", group, " --help'\n"));
      return kExitUsage;
    }
    ++i;
  }
  const CommandInfo* command = FindCommand(name);
  if (command == nullptr) {
    err(absl::StrCat("berth: unknown command \"", name,
                     "\"; see 'berth --help'\n"));
    return kExitUsage;
  }
  Cli cli(env, ResolveNodeSocket(socket_flag, env));
  return cli.Dispatch(*command,
                      std::vector<std::string>(args.begin() + i, args.end()));
}

}  // namespace berth::cli
