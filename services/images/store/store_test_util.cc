#include "services/images/store/store_test_util.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "services/common/test_util.h"
#include "services/images/oci/digest.h"

namespace berth::images::store_testing {

absl::Status KillChildWhenReady(
    const std::function<void(const std::function<void()>& ready)>& child,
    absl::Duration delay) {
  int pipe_fds[2];
  if (pipe(pipe_fds) != 0) return absl::ErrnoToStatus(errno, "pipe");
  const pid_t pid = fork();
  if (pid < 0) return absl::ErrnoToStatus(errno, "fork");
  if (pid == 0) {
    close(pipe_fds[0]);
    child([&] { (void)!write(pipe_fds[1], "x", 1); });
    _exit(1);
  }
  close(pipe_fds[1]);
  char byte;
  const bool ready = read(pipe_fds[0], &byte, 1) == 1;
  close(pipe_fds[0]);
  if (ready) absl::SleepFor(delay);
  kill(pid, SIGKILL);
  int status = 0;
  waitpid(pid, &status, 0);
  if (!ready) {
    return absl::InternalError(
        absl::StrCat("the child ended before it was ready, status ", status));
  }
  return absl::OkStatus();
}

LayerStore::UnpackFunction FakeUnpack(std::string diff_id,
                                      std::atomic<int>* calls,
                                      absl::Notification* entered,
                                      absl::Notification* release) {
  return [=](int, const std::string& dest,
             const UnpackOptions&) -> absl::StatusOr<UnpackResult> {
    if (entered != nullptr) entered->Notify();
    if (release != nullptr) release->WaitForNotification();
    if (calls != nullptr) ++*calls;
    std::ofstream(absl::StrCat(dest, "/file")) << "content";
    UnpackResult result;
    result.diff_id = diff_id;
    result.unpacked_size = 7;
    result.entries = 1;
    return result;
  };
}

namespace {

std::string TestImagesDir() {
  return ::berth::testing::RunfilePath("tools/testimages/images");
}

}  // namespace

const nlohmann::json& TestImage(const std::string& image) {
  static const nlohmann::json* const index = new nlohmann::json(
      nlohmann::json::parse(::berth::testing::ReadFileOrEmpty(
          absl::StrCat(TestImagesDir(), "/images.json"))));
  return index->at(image);
}

std::string TestImageBlob(const std::string& image, const std::string& digest) {
  return ::berth::testing::ReadFileOrEmpty(absl::StrCat(
      TestImagesDir(), "/", image, "/blobs/sha256/", DigestHex(digest)));
}

}  // namespace berth::images::store_testing
