// images_snapshot_bench: snapshot prepare + release through berth-images, as
// berth-node calls it (issue 16, point 7): a separate process, over its
// socket.
//
//   images_snapshot_bench --socket=RUNTIME_DIR/images.sock --reference=IMAGE
//                         [--cycles=20] [--warmup=2] [--id_prefix=bench-PID]
//
//   snapshot_prepare_release  PrepareSnapshot(id, reference) of a fresh id,
//                             then ReleaseSnapshot(id): the two calls, each
//                             from its start until its response is back.
//   snapshot_prepare, snapshot_release   the two calls alone.
//
// Between the two calls, untimed, the answer is checked: an absolute rootfs
// that is a directory holding the image's /bin; after the release, the rootfs
// must be gone. The channel is dialed once (DialUnix, waiting up to
// --dial_timeout), as berth-node keeps one; every call has a deadline of
// --call_timeout. Ids are <id_prefix>-<n>; --warmup untimed cycles come
// first. Prints a "sample" line per timed cycle and a "median" line per
// figure at the end (tools/bench/figures.h), in ms. Any failure ends the
// program with exit code 1 and a line on stderr naming the call, the id and
// the error, after releasing the snapshot of the failed cycle; 2 on a usage
// error.

#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <utility>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "berth/image/v1/image.grpc.pb.h"
#include "glog/logging.h"
#include "grpcpp/client_context.h"
#include "services/common/dial.h"
#include "tools/bench/figures.h"

ABSL_FLAG(std::string, socket, "",
          "berth-images' socket (<runtime_dir>/images.sock).");
ABSL_FLAG(std::string, reference, "",
          "The image the snapshots are of (stored already).");
ABSL_FLAG(int, cycles, 20, "Timed prepare + release cycles.");
ABSL_FLAG(int, warmup, 2, "Untimed cycles before the timed ones.");
ABSL_FLAG(std::string, id_prefix, "",
          "Snapshot ids are <id_prefix>-<n>; default bench-<pid>.");
ABSL_FLAG(absl::Duration, call_timeout, absl::Seconds(60),
          "Deadline of each RPC.");
ABSL_FLAG(absl::Duration, dial_timeout, absl::Seconds(10),
          "How long to wait for --socket to accept a connection.");

namespace berth::bench {
namespace {

namespace ipb = ::berth::image::v1;
using Clock = std::chrono::steady_clock;

double MsSince(Clock::time_point start, Clock::time_point end) {
  return std::chrono::duration<double, std::milli>(end - start).count();
}

bool IsDirectory(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

bool Exists(const std::string& path) {
  struct stat st;
  return lstat(path.c_str(), &st) == 0;
}

class SnapshotCycles {
 public:
  SnapshotCycles(std::unique_ptr<ipb::ImageService::Stub> stub,
                 std::string reference)
      : stub_(std::move(stub)), reference_(std::move(reference)) {}

  // One cycle; `timed` adds its samples to the figures.
  absl::Status Cycle(const std::string& id, bool timed) {
    ipb::PrepareSnapshotRequest prepare;
    prepare.set_id(id);
    prepare.set_reference(reference_);
    ipb::PrepareSnapshotResponse prepared;
    grpc::ClientContext prepare_context;
    SetDeadline(&prepare_context);
    const Clock::time_point t0 = Clock::now();
    const grpc::Status prepare_status =
        stub_->PrepareSnapshot(&prepare_context, prepare, &prepared);
    const Clock::time_point t1 = Clock::now();
    if (!prepare_status.ok()) {
      Release(id);  // whatever a half-done prepare left
      return Error("PrepareSnapshot", id, prepare_status);
    }
    const std::string& rootfs = prepared.rootfs();
    if (rootfs.empty() || rootfs[0] != '/' || !IsDirectory(rootfs) ||
        !IsDirectory(absl::StrCat(rootfs, "/bin"))) {
      Release(id);
      return absl::FailedPreconditionError(absl::StrCat(
          "PrepareSnapshot of ", id, " answered rootfs \"", rootfs,
          "\", not an absolute directory holding the image's /bin"));
    }

    ipb::ReleaseSnapshotRequest release;
    release.set_id(id);
    ipb::ReleaseSnapshotResponse released;
    grpc::ClientContext release_context;
    SetDeadline(&release_context);
    const Clock::time_point t2 = Clock::now();
    const grpc::Status release_status =
        stub_->ReleaseSnapshot(&release_context, release, &released);
    const Clock::time_point t3 = Clock::now();
    if (!release_status.ok()) {
      return Error("ReleaseSnapshot", id, release_status);
    }
    if (Exists(rootfs)) {
      return absl::FailedPreconditionError(
          absl::StrCat("ReleaseSnapshot of ", id, " returned but its rootfs ",
                       rootfs, " is still there"));
    }
    if (timed) {
      prepare_release_.Add(MsSince(t0, t1) + MsSince(t2, t3));
      prepare_ms_.Add(MsSince(t0, t1));
      release_ms_.Add(MsSince(t2, t3));
    }
    return absl::OkStatus();
  }

  void PrintMedians() const {
    for (const Figure* figure :
         {&prepare_release_, &prepare_ms_, &release_ms_}) {
      std::printf("%s\n", figure->MedianLine().c_str());
    }
  }

 private:
  static void SetDeadline(grpc::ClientContext* context) {
    context->set_deadline(
        absl::ToChronoTime(absl::Now() + absl::GetFlag(FLAGS_call_timeout)));
  }

  static absl::Status Error(const char* call, const std::string& id,
                            const grpc::Status& status) {
    return absl::UnavailableError(
        absl::StrCat(call, " of ", id, ": ", status.error_message(), " (code ",
                     static_cast<int>(status.error_code()), ")"));
  }

  void Release(const std::string& id) {
    ipb::ReleaseSnapshotRequest release;
    release.set_id(id);
    ipb::ReleaseSnapshotResponse released;
    grpc::ClientContext context;
    SetDeadline(&context);
    stub_->ReleaseSnapshot(&context, release, &released);
  }

  std::unique_ptr<ipb::ImageService::Stub> stub_;
  const std::string reference_;
  Figure prepare_release_{"snapshot_prepare_release", "ms"};
  Figure prepare_ms_{"snapshot_prepare", "ms"};
  Figure release_ms_{"snapshot_release", "ms"};
};

int Fail(const absl::Status& status) {
  std::fprintf(stderr, "images_snapshot_bench: FAILED: %s\n",
               std::string(status.message()).c_str());
  return 1;
}

int Main() {
  const std::string socket = absl::GetFlag(FLAGS_socket);
  const std::string reference = absl::GetFlag(FLAGS_reference);
  const int cycles = absl::GetFlag(FLAGS_cycles);
  const int warmup = absl::GetFlag(FLAGS_warmup);
  if (socket.empty() || reference.empty()) {
    std::fprintf(stderr,
                 "images_snapshot_bench: --socket and --reference are "
                 "required\n");
    return 2;
  }
  if (cycles < 1 || warmup < 0) {
    std::fprintf(stderr,
                 "images_snapshot_bench: --cycles must be >= 1, --warmup "
                 ">= 0\n");
    return 2;
  }
  std::string id_prefix = absl::GetFlag(FLAGS_id_prefix);
  if (id_prefix.empty()) id_prefix = absl::StrCat("bench-", getpid());
  absl::StatusOr<std::shared_ptr<grpc::Channel>> channel =
      DialUnix(socket, absl::GetFlag(FLAGS_dial_timeout));
  if (!channel.ok()) {
    return Fail(absl::Status(
        channel.status().code(),
        absl::StrCat("dialing berth-images: ", channel.status().message())));
  }
  SnapshotCycles side(ipb::ImageService::NewStub(*channel), reference);
  for (int n = 0; n < warmup + cycles; ++n) {
    if (absl::Status status =
            side.Cycle(absl::StrCat(id_prefix, "-", n), n >= warmup);
        !status.ok()) {
      return Fail(status);
    }
  }
  side.PrintMedians();
  return 0;
}

}  // namespace
}  // namespace berth::bench

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "Times PrepareSnapshot + ReleaseSnapshot through berth-images.\n"
      "usage: images_snapshot_bench --socket=RUNTIME_DIR/images.sock "
      "--reference=IMAGE [--cycles=20] [--warmup=2] [--id_prefix=P]");
  absl::ParseCommandLine(argc, argv);
  FLAGS_logtostderr = true;
  google::InitGoogleLogging(argv[0]);
  return berth::bench::Main();
}
