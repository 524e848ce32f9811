#include "services/node/cli/command_table.h"

#include <algorithm>
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

const FlagSpec kPlatformFlag = {
    "platform", 0, "OS/ARCH[/VARIANT]",
    "The platform to choose from a multi-platform image (default: the "
    "node's)"};

// The commands of `berth image`, by subcommand, in the order its help lists
// them, with one line each.
const std::vector<std::pair<const char*, const char*>> kImageSummaries = {
    {"pull", "Pull an image from its registry"},
    {"import", "Import an OCI layout or archive, or a docker save archive"},
    {"ls", "List images"},
    {"inspect", "Show images as JSON"},
    {"rm", "Remove images"},
    {"prune", "Remove what no image or task uses"},
    {"tag", "Give an image another name"},
};

}  // namespace

const std::vector<CommandInfo>& Commands() {
  static const std::vector<CommandInfo>* const kCommands = new std::vector<
      CommandInfo>{
      {"run",
       "[FLAGS] IMAGE [COMMAND [ARGS...]]\n       berth run [FLAGS] -- COMMAND "
       "[ARGS...]",
       "Run a command as a new task: in IMAGE's file system (pulled first\n"
       "when the node does not have it; COMMAND replaces the image's Cmd), "
       "or,\n"
       "with the command after --, on the host's binaries without an image.\n"
       "Without -d, shows its output (stdout to stdout, stderr to stderr) and\n"
       "exits with the task's exit code (128+N when signal N killed it; 125\n"
       "when it could not be started).",
       RunFlagSpecs(), PositionalMode::kStopAtFirst},
      {"ps",
       "[FLAGS]",
       "List the tasks: running ones, or all with -a.",
       {{"all", 'a', "", "Show every task, not only running ones"},
        {"filter", 'f', "KEY=VALUE",
         "Show only the tasks that match: label=K or label=K=V, name=NAME, "
         "id=PREFIX, status=STATE, health=starting|healthy|unhealthy|none "
         "(repeatable: every key must match, one of a key's values)",
         true},
        {"format", 0, "TEMPLATE",
         "Print each task with a Go-template-like TEMPLATE, e.g. "
         "'{{.ID}} {{.Names}} {{.Status}}', or 'table TEMPLATE' with a "
         "header ('json': one JSON object a line)"},
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
      {"attach",
       "[FLAGS] TASK",
       "Join a running task's input and output (as it was started: -i for\n"
       "stdin, -t for a terminal, this one in raw mode and resized with it),\n"
       "showing its output from now on (the first attach of a run also what\n"
       "it wrote before). The detach keys (default Ctrl-P Ctrl-Q) leave it\n"
       "running; exits with the task's exit code once it ends.",
       {DetachKeysFlagSpec(),
        {"no-stdin", 0, "", "Do not pass stdin to the task"},
        kHelpFlag}},
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
      {"completion",
       "bash|zsh",
       "Print the shell completion script for bash or zsh (commands, flags,\n"
       "task and image names). Load it in the running shell:\n"
       "  bash: source <(berth completion bash)\n"
       "  zsh:  source <(berth completion zsh)\n"
       "or install it where the shell looks for completions.",
       {kHelpFlag}},
      {"node status",
       "[FLAGS]",
       "Show the node's services and driver plugins and whether each is\n"
       "healthy; exits 1 when one is not.",
       {{"json", 0, "", "Print the GetNodeStatusResponse in protobuf JSON"},
        kHelpFlag}},
      {"image pull",
       "[FLAGS] REFERENCE",
       "Pull an image (\"busybox\", \"registry:5000/team/app:1.2\",\n"
       "\"name@sha256:...\") into the node's store, showing each layer's\n"
       "progress: redrawn in place on a terminal, a line per change "
       "otherwise.\n"
       "Ctrl-C cancels the pull.",
       {{"quiet", 'q', "", "Print only the image's name once stored"},
        {"progress", 0, "MODE",
         "auto (default: tty on a terminal), tty (redrawn in place) or plain "
         "(a line per change)"},
        kPlatformFlag,
        kHelpFlag},
       PositionalMode::kInterspersed,
       {"pull"}},
      {"image import",
       "[FLAGS] FILE|-",
       "Import the images of an OCI image layout or archive, or of a\n"
       "`docker save` archive (a tar, gzip-compressed or not; '-' reads\n"
       "stdin), and print each image's name and digest.",
       {{"name", 0, "NAME",
         "Name for an image the archive leaves unnamed (or for its only "
         "image)"},
        kPlatformFlag,
        kHelpFlag}},
      {"image ls",
       "[FLAGS]",
       "List the node's images: repository, tag, image id (of the image's\n"
       "configuration), when it was built and the size it takes stored.",
       {{"quiet", 'q', "", "Print only the image ids"},
        {"digests", 0, "", "Show each image's digest"},
        {"no-trunc", 0, "", "Show whole image ids"},
        {"json", 0, "", "Print the ListImagesResponse in protobuf JSON"},
        kHelpFlag},
       PositionalMode::kInterspersed,
       {"images", "image list"}},
      {"image inspect",
       "REFERENCE...",
       "Print images (name, digest or unique image id prefix) as indented\n"
       "JSON (protobuf JSON mapping), one object each.",
       {kHelpFlag}},
      {"image rm",
       "[FLAGS] REFERENCE...",
       "Remove image names; the layers and blobs nothing uses any more are\n"
       "deleted. Goes on after a failure and exits 1 if any failed.",
       {{"force", 'f', "", "Remove the name even when a task runs on it"},
        kHelpFlag},
       PositionalMode::kInterspersed,
       {"rmi", "image remove"}},
      {"image prune",
       "[FLAGS]",
       "Delete the blobs and layers no image and no task uses; with -a, also\n"
       "every image no task uses. Asks first unless -f.",
       {{"all", 'a', "", "Also remove every image no task uses"},
        {"force", 'f', "", "Do not ask for confirmation"},
        kHelpFlag}},
      {"image tag",
       "SOURCE TARGET",
       "Give the image SOURCE the name TARGET as well.",
       {kHelpFlag}},
  };
  return *kCommands;
}

const CommandInfo* FindCommand(absl::string_view name) {
  for (const CommandInfo& command : Commands()) {
    if (command.name == name) return &command;
    for (const std::string& alias : command.aliases) {
      if (alias == name) return &command;
    }
  }
  return nullptr;
}

bool IsCommandGroup(absl::string_view word) { return word == "image"; }

std::string GroupUsage(absl::string_view group) {
  std::string usage = absl::StrCat(
      "usage: berth ", group,
      " COMMAND [ARGS...]\n"
      "\n"
      "Manage the node's images (berth-images, reached through berth-node).\n"
      "\n"
      "Commands:\n");
  for (const auto& [name, summary] : kImageSummaries) {
    absl::StrAppend(&usage, absl::StrFormat("  %-9s %s\n", name, summary));
  }
  absl::StrAppend(&usage, "\nRun 'berth ", group,
                  " COMMAND --help' for more about a command.\n");
  return usage;
}

std::string CommandUsage(const CommandInfo& command) {
  std::string aliases;
  for (const std::string& alias : command.aliases) {
    absl::StrAppend(&aliases, aliases.empty() ? "\n\nAliases: " : ", ",
                    "berth ", alias);
  }
  // Grouped flags come with their groups' headings.
  const bool grouped =
      std::any_of(command.flags.begin(), command.flags.end(),
                  [](const FlagSpec& flag) { return !flag.group.empty(); });
  return absl::StrCat("usage: berth ", command.name, " ", command.synopsis,
                      "\n\n", command.description, aliases, "\n\n",
                      grouped ? "" : "Flags:\n", FormatFlagHelp(command.flags));
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
      {"attach", "Join a running task's input and output"},
      {"stats", "Show the resource usage of tasks"},
      {"stop", "Stop tasks"},
      {"rm", "Remove tasks"},
      {"events", "Show the node's events as they happen"},
      {"completion", "Print the shell completion script (bash, zsh)"},
      {"node status", "Show the node's services and plugins"},
  };
  for (const auto& [name, summary] : kSummaries) {
    absl::StrAppend(&usage, absl::StrFormat("  %-13s %s\n", name, summary));
  }
  absl::StrAppend(&usage, "\nImages (berth image --help):\n");
  for (const auto& [name, summary] : kImageSummaries) {
    absl::StrAppend(&usage,
                    absl::StrFormat("  image %-7s %s\n", name, summary));
  }
  absl::StrAppend(&usage,
                  "  (docker's spellings too: berth images, berth pull, "
                  "berth rmi)\n");
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
