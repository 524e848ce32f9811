// `berth completion bash|zsh` and the hidden `berth __complete tasks|images`
// the scripts call (completion.h).

#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "berth/image/v1/image.pb.h"
#include "berth/node/v1/node.pb.h"
#include "grpcpp/client_context.h"
#include "grpcpp/support/status.h"
#include "services/node/cli/cli.h"
#include "services/node/cli/completion.h"
#include "services/node/cli/image_output.h"

namespace berth::cli {

int Cli::Completion(const ParsedArgs& args) {
  if (args.positional.size() != 1) {
    return UsageError("completion", "takes one SHELL: bash or zsh");
  }
  absl::StatusOr<std::string> script = CompletionScript(args.positional[0]);
  if (!script.ok()) return UsageError("completion", script.status().message());
  Out(*script);
  return kExitOk;
}

int Cli::CompleteNames(const std::vector<std::string>& args) {
  if (args.size() != 1 || (args[0] != "tasks" && args[0] != "images")) {
    Err("usage: berth __complete tasks|images\n");
    return kExitUsage;
  }
  // Quietly: a completion offers nothing when the node is down.
  if (!Connect()) return kExitError;
  grpc::ClientContext context;
  SetDeadline(&context);
  std::set<std::string> printed;
  auto print = [&](const std::string& name) {
    if (!name.empty() && printed.insert(name).second) {
      Out(absl::StrCat(name, "\n"));
    }
  };
  if (args[0] == "tasks") {
    node::v1::ListTasksRequest request;
    request.set_all(true);
    node::v1::ListTasksResponse response;
    if (!stub_->ListTasks(&context, request, &response).ok()) {
      return kExitError;
    }
    for (const node::v1::Task& task : response.tasks()) {
      print(task.spec().name());
    }
    return kExitOk;
  }
  image::v1::ListImagesResponse response;
  if (!images_->ListImages(&context, image::v1::ListImagesRequest(), &response)
           .ok()) {
    return kExitError;
  }
  // As `berth image ls` shows them: busybox:latest, not
  // docker.io/library/busybox:latest.
  for (const image::v1::Image& image : response.images()) {
    print(FamiliarName(image.name()));
  }
  return kExitOk;
}

}  // namespace berth::cli
