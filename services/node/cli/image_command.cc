// `berth image`: pull, import, ls, inspect, rm, prune and tag over
// berth.image.v1.ImageService, which berth-node forwards on node.sock; and
// the pull before `berth run` (cli.h).

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <variant>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "base/proto_time.h"
#include "base/unique_fd.h"
#include "berth/image/v1/image.grpc.pb.h"
#include "berth/image/v1/image.pb.h"
#include "grpcpp/client_context.h"
#include "grpcpp/support/status.h"
#include "grpcpp/support/sync_stream.h"
#include "services/images/oci/reference.h"
#include "services/node/cli/cli.h"
#include "services/node/cli/cli_args.h"
#include "services/node/cli/commands.h"
#include "services/node/cli/image_output.h"
#include "services/node/cli/table.h"
#include "services/node/cli/task_spec_flags.h"
#include "services/node/cli/terminal.h"

namespace berth::cli {
namespace {

namespace imagepb = ::berth::image::v1;

// Bytes of an archive sent in one ImportImageRequest.
constexpr size_t kImportChunkBytes = 1 << 20;

// Fills `buffer` from `fd` up to its size or the end of the file; the bytes
// read, or -1 with errno.
ssize_t ReadChunk(int fd, std::string* buffer) {
  size_t filled = 0;
  while (filled < buffer->size()) {
    const ssize_t n =
        read(fd, buffer->data() + filled, buffer->size() - filled);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return -1;
    if (n == 0) break;
    filled += static_cast<size_t>(n);
  }
  return static_cast<ssize_t>(filled);
}

// Reads one line from `fd` (without its newline); empty at the end.
std::string ReadLine(int fd) {
  std::string line;
  char c;
  while (true) {
    const ssize_t n = read(fd, &c, 1);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0 || c == '\n') return line;
    line += c;
  }
}

// Cancels a call when SIGINT or SIGTERM arrives while it lives (from a thread
// of its own); the signals' actions are back once it is destroyed.
class CancelOnSignal {
 public:
  explicit CancelOnSignal(grpc::ClientContext* context) {
    absl::StatusOr<std::unique_ptr<SignalPipe>> signals =
        SignalPipe::Install({SIGINT, SIGTERM});
    int stop_pipe[2];
    if (!signals.ok() || pipe2(stop_pipe, O_CLOEXEC) != 0) return;
    signals_ = *std::move(signals);
    stop_read_.reset(stop_pipe[0]);
    stop_write_.reset(stop_pipe[1]);
    thread_ = std::thread([this, context] {
      while (true) {
        pollfd fds[2] = {{stop_read_.get(), POLLIN, 0},
                         {signals_->read_fd(), POLLIN, 0}};
        if (poll(fds, 2, -1) < 0) {
          if (errno == EINTR) continue;
          return;
        }
        if (fds[0].revents != 0) return;
        if (std::vector<int> arrived = signals_->Drain(); !arrived.empty()) {
          signal_ = arrived[0];
          context->TryCancel();
          return;
        }
      }
    });
  }

  ~CancelOnSignal() {
    if (thread_.joinable()) {
      BestEffortWrite(stop_write_.get(), "x");
      thread_.join();
    }
  }

  // The signal that cancelled the call; 0 if none did.
  int signal() const { return signal_; }

 private:
  std::unique_ptr<SignalPipe> signals_;
  base::UniqueFd stop_read_;
  base::UniqueFd stop_write_;
  std::atomic<int> signal_{0};
  std::thread thread_;
};

}  // namespace

std::variant<imagepb::Image, int> Cli::PullImage(
    const std::string& reference, const imagepb::Platform* platform, int fd,
    PullDisplay display, const std::string& digest_before) {
  grpc::ClientContext context;
  imagepb::PullImageRequest request;
  request.set_reference(reference);
  if (platform != nullptr) *request.mutable_platform() = *platform;
  const bool terminal = display == PullDisplay::kTerminal ||
                        (display == PullDisplay::kAuto && isatty(fd) == 1);
  const std::optional<driver::v1::TerminalSize> size = TerminalSizeOf(fd);
  PullProgressPrinter printer(terminal, size.has_value() ? size->columns() : 0);

  int cancelled = 0;
  grpc::Status status;
  std::optional<imagepb::Image> image;
  {
    CancelOnSignal cancel(&context);
    std::unique_ptr<grpc::ClientReader<imagepb::PullImageProgress>> reader =
        images_->PullImage(&context, request);
    imagepb::PullImageProgress progress;
    while (reader->Read(&progress)) {
      if (display != PullDisplay::kQuiet) {
        BestEffortWrite(fd, printer.Update(progress));
      }
      if (progress.has_image()) image = progress.image();
    }
    status = reader->Finish();
    cancelled = cancel.signal();
  }
  if (cancelled != 0) {
    Fail(absl::StrCat("pull of ", reference, " cancelled"));
    return 128 + cancelled;
  }
  if (!status.ok()) return NodeError(status);
  if (!image.has_value()) {
    return Fail(absl::StrCat("the pull of ", reference,
                             " ended without the image stored"));
  }
  if (display != PullDisplay::kQuiet) {
    BestEffortWrite(fd,
                    PullSummary(*image, !digest_before.empty() &&
                                            image->digest() == digest_before));
  }
  return *std::move(image);
}

int Cli::EnsureImage(const std::string& reference, PullPolicy policy,
                     bool quiet) {
  grpc::ClientContext context;
  SetDeadline(&context);
  imagepb::InspectImageRequest request;
  request.set_reference(reference);
  imagepb::InspectImageResponse stored;
  grpc::Status status = images_->InspectImage(&context, request, &stored);
  if (status.ok() && policy != PullPolicy::kAlways) return kExitOk;
  if (!status.ok()) {
    if (status.error_code() != grpc::StatusCode::NOT_FOUND) {
      return NodeError(status);
    }
    if (policy == PullPolicy::kNever) {
      return Fail(absl::StrCat(status.error_message(), " (--pull=never)"));
    }
    if (!quiet)
      Err(absl::StrCat("Unable to find image '", reference, "' locally\n"));
  }
  std::variant<imagepb::Image, int> pulled =
      PullImage(reference, nullptr, env_.stderr_fd,
                quiet ? PullDisplay::kQuiet : PullDisplay::kAuto,
                stored.image().digest());
  if (const int* code = std::get_if<int>(&pulled)) return *code;
  return kExitOk;
}

int Cli::ImagePull(const ParsedArgs& args) {
  if (args.positional.size() != 1) {
    return UsageError("image pull", "takes exactly one REFERENCE");
  }
  PullDisplay display = PullDisplay::kAuto;
  if (args.Has("progress")) {
    const std::string mode = args.Value("progress");
    if (mode == "tty") {
      display = PullDisplay::kTerminal;
    } else if (mode == "plain") {
      display = PullDisplay::kPlain;
    } else if (mode != "auto") {
      return UsageError(
          "image pull",
          absl::StrCat("--progress \"", mode, "\" must be auto, tty or plain"));
    }
  }
  if (args.Has("quiet")) display = PullDisplay::kQuiet;
  std::optional<imagepb::Platform> platform;
  if (args.Has("platform")) {
    absl::StatusOr<imagepb::Platform> parsed =
        ParsePlatform(args.Value("platform"));
    if (!parsed.ok()) {
      return UsageError("image pull", absl::StrCat("--platform: ",
                                                   parsed.status().message()));
    }
    platform = *std::move(parsed);
  }
  const std::string& reference = args.positional[0];
  if (absl::StatusOr<images::Reference> parsed =
          images::ParseReference(reference);
      !parsed.ok()) {
    return UsageError("image pull", parsed.status().message());
  }
  if (!Connect()) return Unreachable();
  // What the name pointed to before: "up to date" when the pull brings the
  // same.
  std::string digest_before;
  {
    grpc::ClientContext context;
    SetDeadline(&context);
    imagepb::InspectImageRequest request;
    request.set_reference(reference);
    imagepb::InspectImageResponse stored;
    if (images_->InspectImage(&context, request, &stored).ok()) {
      digest_before = stored.image().digest();
    }
  }
  std::variant<imagepb::Image, int> pulled =
      PullImage(reference, platform.has_value() ? &*platform : nullptr,
                env_.stdout_fd, display, digest_before);
  if (const int* code = std::get_if<int>(&pulled)) return *code;
  Out(absl::StrCat(std::get<imagepb::Image>(pulled).name(), "\n"));
  return kExitOk;
}

int Cli::ImageImport(const ParsedArgs& args) {
  if (args.positional.size() != 1) {
    return UsageError("image import", "takes exactly one FILE (- for stdin)");
  }
  const std::string& path = args.positional[0];
  imagepb::ImportImageRequest first;
  first.mutable_options()->set_name(args.Value("name"));
  if (args.Has("platform")) {
    absl::StatusOr<imagepb::Platform> platform =
        ParsePlatform(args.Value("platform"));
    if (!platform.ok()) {
      return UsageError(
          "image import",
          absl::StrCat("--platform: ", platform.status().message()));
    }
    *first.mutable_options()->mutable_platform() = *std::move(platform);
  }
  base::UniqueFd file;
  if (path != "-") {
    file.reset(open(path.c_str(), O_RDONLY | O_CLOEXEC));
    if (!file.valid()) {
      return UsageError("image import", absl::StrCat("cannot open ", path, ": ",
                                                     std::strerror(errno)));
    }
  }
  const int fd = path == "-" ? env_.stdin_fd : file.get();
  if (!Connect()) return Unreachable();

  grpc::ClientContext context;
  imagepb::ImportImageResponse response;
  std::unique_ptr<grpc::ClientWriter<imagepb::ImportImageRequest>> writer =
      images_->ImportImage(&context, &response);
  bool sending = writer->Write(first);
  std::string buffer(kImportChunkBytes, '\0');
  imagepb::ImportImageRequest chunk;
  while (sending) {
    const ssize_t n = ReadChunk(fd, &buffer);
    if (n < 0) {
      const std::string why = std::strerror(errno);
      context.TryCancel();
      writer->Finish();
      return Fail(absl::StrCat("cannot read ", path == "-" ? "stdin" : path,
                               ": ", why));
    }
    if (n == 0) break;
    chunk.set_chunk(buffer.data(), static_cast<size_t>(n));
    // A failed write: the service ended the call, Finish says why.
    sending = writer->Write(chunk);
  }
  writer->WritesDone();
  grpc::Status status = writer->Finish();
  if (!status.ok()) return NodeError(status);
  for (const imagepb::Image& image : response.images()) {
    Out(absl::StrCat("Imported ", image.name(), " ", image.digest(), "\n"));
  }
  return kExitOk;
}

int Cli::ImageList(const ParsedArgs& args) {
  if (int code = NoArguments("image ls", args); code != kExitOk) return code;
  if (!Connect()) return Unreachable();
  grpc::ClientContext context;
  SetDeadline(&context);
  imagepb::ListImagesResponse response;
  grpc::Status status =
      images_->ListImages(&context, imagepb::ListImagesRequest(), &response);
  if (!status.ok()) return NodeError(status);

  if (args.Has("json")) {
    if (response.images().empty()) {
      Out("{\n \"images\": []\n}\n");
      return kExitOk;
    }
    return PrintJson(response, /*pretty=*/true);
  }
  const bool no_trunc = args.Has("no-trunc");
  auto image_id = [no_trunc](const imagepb::Image& image) {
    return no_trunc ? image.config_digest()
                    : ShortDigest(image.config_digest());
  };
  if (args.Has("quiet")) {
    // An image of several names once.
    std::set<std::string> printed;
    for (const imagepb::Image& image : response.images()) {
      if (printed.insert(image.config_digest()).second) {
        Out(absl::StrCat(image_id(image), "\n"));
      }
    }
    return kExitOk;
  }
  const bool digests = args.Has("digests");
  std::vector<std::string> header = {"REPOSITORY", "TAG"};
  if (digests) header.push_back("DIGEST");
  header.insert(header.end(), {"IMAGE ID", "CREATED", "SIZE"});
  Table table(std::move(header));
  const absl::Time now = env_.now();
  for (const imagepb::Image& image : response.images()) {
    const RepositoryTag name = SplitImageName(image.name());
    std::vector<std::string> row = {name.repository, name.tag};
    if (digests) {
      row.push_back(image.digest().empty() ? "<none>" : image.digest());
    }
    row.push_back(image_id(image));
    row.push_back(image.has_created()
                      ? HumanAgo(base::FromProtoTimestamp(image.created()), now)
                      : "N/A");
    row.push_back(DecimalBytes(image.size()));
    table.AddRow(std::move(row));
  }
  Out(table.Render());
  return kExitOk;
}

int Cli::ImageInspect(const ParsedArgs& args) {
  if (args.positional.empty()) {
    return UsageError("image inspect", "at least one REFERENCE is required");
  }
  if (!Connect()) return Unreachable();
  int code = kExitOk;
  const int failed =
      ForEachName(args.positional, [&](const std::string& reference) {
        grpc::ClientContext context;
        SetDeadline(&context);
        imagepb::InspectImageRequest request;
        request.set_reference(reference);
        imagepb::InspectImageResponse response;
        grpc::Status status =
            images_->InspectImage(&context, request, &response);
        if (status.ok()) {
          if (int printed = PrintJson(response.image(), /*pretty=*/true);
              printed != kExitOk) {
            code = printed;
          }
        }
        return status;
      });
  return failed != kExitOk ? failed : code;
}

int Cli::ImageRemove(const ParsedArgs& args) {
  if (args.positional.empty()) {
    return UsageError("image rm", "at least one REFERENCE is required");
  }
  if (!Connect()) return Unreachable();
  return ForEachName(args.positional, [&](const std::string& reference) {
    grpc::ClientContext context;
    SetDeadline(&context, absl::Minutes(1));
    imagepb::RemoveImageRequest request;
    request.set_reference(reference);
    request.set_force(args.Has("force"));
    imagepb::RemoveImageResponse response;
    grpc::Status status = images_->RemoveImage(&context, request, &response);
    for (const std::string& name : response.untagged()) {
      Out(absl::StrCat("Untagged: ", FamiliarName(name), "\n"));
    }
    for (const std::string& digest : response.deleted()) {
      Out(absl::StrCat("Deleted: ", digest, "\n"));
    }
    return status;
  });
}

int Cli::ImagePrune(const ParsedArgs& args) {
  if (int code = NoArguments("image prune", args); code != kExitOk) {
    return code;
  }
  if (!Connect()) return Unreachable();
  const bool all = args.Has("all");
  if (!args.Has("force")) {
    Out(all ? "WARNING! This will remove every image no task uses, and the "
              "blobs and layers nothing uses.\n"
            : "WARNING! This will remove the blobs and layers no image and "
              "no task uses.\n");
    Out("Are you sure you want to continue? [y/N] ");
    const std::string answer = absl::AsciiStrToLower(
        absl::StripAsciiWhitespace(ReadLine(env_.stdin_fd)));
    if (answer != "y" && answer != "yes") return kExitOk;
  }
  grpc::ClientContext context;
  SetDeadline(&context, absl::Minutes(5));
  imagepb::PruneImagesRequest request;
  request.set_all(all);
  imagepb::PruneImagesResponse response;
  grpc::Status status = images_->PruneImages(&context, request, &response);
  if (!status.ok()) return NodeError(status);
  if (!response.untagged().empty() || !response.deleted().empty()) {
    Out("Deleted Images:\n");
    for (const std::string& name : response.untagged()) {
      Out(absl::StrCat("untagged: ", FamiliarName(name), "\n"));
    }
    for (const std::string& digest : response.deleted()) {
      Out(absl::StrCat("deleted: ", digest, "\n"));
    }
    Out("\n");
  }
  Out(absl::StrCat("Total reclaimed space: ",
                   DecimalBytes(response.reclaimed_bytes()), "\n"));
  return kExitOk;
}

int Cli::ImageTag(const ParsedArgs& args) {
  if (args.positional.size() != 2) {
    return UsageError("image tag", "takes exactly a SOURCE and a TARGET");
  }
  if (!Connect()) return Unreachable();
  grpc::ClientContext context;
  SetDeadline(&context);
  imagepb::TagImageRequest request;
  request.set_source(args.positional[0]);
  request.set_target(args.positional[1]);
  imagepb::TagImageResponse response;
  grpc::Status status = images_->TagImage(&context, request, &response);
  if (!status.ok()) return NodeError(status);
  return kExitOk;
}

}  // namespace berth::cli
