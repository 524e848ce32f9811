#include "services/node/cli/command_table.h"

#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/string_view.h"
#include "services/node/cli/cli_args.h"
#include "services/node/cli/task_spec_flags.h"

namespace berth::cli {
namespace {

const FlagSpec kHelpFlag = {"help", 'h', "", "Print this help"};

}  // namespace

const std::vector<CommandInfo>& Commands() {
  static const std::vector<CommandInfo>* const kCommands = new std::vector<
      CommandInfo>{
      {"run", "[FLAGS] [--] COMMAND [ARGS...]",
       "Run a command as a new task. Without -d, shows its output (stdout to\n"
       "stdout, stderr to stderr) and exits with the task's exit code (128+N\n"
       "when signal N killed it; 125 when it could not be started).",
       RunFlagSpecs(), PositionalMode::kStopAtFirst},
      {"ps",
       "[FLAGS]",
       "List the tasks: running ones, or all with -a.",
       {{"all", 'a', "", "Show every task, not only running ones"},
        {"json", 0, "", "Print the ListTasksResponse in protobuf JSON"},
        {"quiet", 'q', "", "Print only the (short) task ids"},
        kHelpFlag}},
      {"inspect",
       "TASK",
       "Print a task (id, unique id prefix or name) as JSON (protobuf JSON\n"
       "mapping).",
       {kHelpFlag}},
      {"logs",
       "[FLAGS] TASK",
       "Print a task's output: its stdout to stdout, its stderr to stderr.",
       {{"follow", 'f', "", "Keep printing new output until the task ends"},
        {"tail", 0, "N",
         "Start N lines before the end ('all': from the start)"},
        kHelpFlag}},
      {"exec",
       "[FLAGS] TASK [--] COMMAND [ARGS...]",
       "Run a command inside a running task and exit with its exit code\n"
       "(128+N when signal N killed it).",
       {{"interactive", 'i', "", "Pass stdin to the command"},
        {"tty", 't', "",
         "Give the command a terminal (with -i: this terminal in raw mode, "
         "resized with it)"},
        kHelpFlag},
       PositionalMode::kStopAtFirst},
      {"stats",
       "[FLAGS] [TASK...]",
       "Show the resource usage of tasks (every running task when none is\n"
       "named) in a table refreshed in place, until they end or Ctrl-C.",
       {{"no-stream", 0, "", "Print one sample of each task and exit"},
        {"json", 0, "",
         "Print samples as JSON lines (berth.stats.v1.TaskResourceUsage)"},
        kHelpFlag}},
      {"stop",
       "[FLAGS] TASK...",
       "Stop tasks: their stop signal, then SIGKILL after the timeout. A\n"
       "stopped task is not restarted.",
       {{"timeout", 't', "SECONDS",
         "Time between the stop signal and SIGKILL (default 5)"},
        {"signal", 's', "SIGNAL", "Stop signal (default SIGTERM)"},
        kHelpFlag}},
      {"rm",
       "[FLAGS] TASK...",
       "Remove stopped tasks and everything kept of them.",
       {{"force", 'f', "", "Stop a running task first"}, kHelpFlag}},
      {"events",
       "[FLAGS] [TASK...]",
       "Print the node's events as they happen (tasks created, started,\n"
       "exited, restarting, failed, removed; plugins up), of the named tasks\n"
       "only when some are given, until Ctrl-C.",
       {{"json", 0, "",
         "Print events as JSON lines (berth.node.v1.EventsResponse)"},
        kHelpFlag}},
      {"node status",
       "[FLAGS]",
       "Show the node's services and driver plugins and whether each is\n"
       "healthy; exits 1 when one is not.",
       {{"json", 0, "", "Print the GetNodeStatusResponse in protobuf JSON"},
        kHelpFlag}},
  };
  return *kCommands;
}

const CommandInfo* FindCommand(absl::string_view name) {
  for (const CommandInfo& command : Commands()) {
    if (command.name == name) return &command;
  }
  return nullptr;
}

std::string CommandUsage(const CommandInfo& command) {
  return absl::StrCat("usage: berth ", command.name, " ", command.synopsis,
                      "\n\n", command.description, "\n\nFlags:\n",
                      FormatFlagHelp(command.flags));
}

std::string TopUsage() {
  std::string usage =
      "usage: berth [--socket=PATH] COMMAND [ARGS...]\n"
      "\n"
      "The command line of berth-node: runs tasks on this node and looks "
      "after them.\n"
      "\n"
      "Commands:\n";
  const std::vector<std::pair<const char*, const char*>> kSummaries = {
      {"run", "Run a command as a new task"},
      {"ps", "List tasks"},
      {"inspect", "Show a task as JSON"},
      {"logs", "Show a task's output"},
      {"exec", "Run a command inside a running task"},
      {"stats", "Show the resource usage of tasks"},
      {"stop", "Stop tasks"},
      {"rm", "Remove tasks"},
      {"events", "Show the node's events as they happen"},
      {"node status", "Show the node's services and plugins"},
  };
  for (const auto& [name, summary] : kSummaries) {
    absl::StrAppend(&usage, absl::StrFormat("  %-13s %s\n", name, summary));
  }
  absl::StrAppend(
      &usage,
      "\nGlobal flags:\n"
      "  --socket=PATH   berth-node's socket (default: $BERTH_NODE_SOCKET, "
      "else\n"
      "                  $BERTH_RUNTIME_DIR/node.sock, else "
      "/run/berth/node.sock)\n"
      "  -h, --help      Print this help\n"
      "  --version       Print berth's version\n"
      "\nRun 'berth COMMAND --help' for more about a command.\n");
  return usage;
}

}  // namespace berth::cli
