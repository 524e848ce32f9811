// Fuzzes the attach socket's framing (attach_hub.h): what a caller sends is
// the input after its first byte.
//
// Always: the bytes through AttachFrameReader, fed in pieces whose sizes
// the first byte chooses; every frame it returns encodes back to exactly
// the bytes it took, and the payload decoders (hello, resize, exit) agree
// with the encoders.
//
// When the first byte is odd, also through a real AttachHub: a caller
// connects to its listening socket (an abstract Unix socket, so no file is
// made), sends the bytes and half-closes; the hub's stdin pipe must then
// have received exactly the stdin frames' bytes up to a stdin close, a bad
// hello or a frame that is not one (which drops the caller), and what the
// caller got back must be well-formed output frames.

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "services/driver/common/attach_hub.h"
#include "tools/fuzz/fuzz_util.h"

namespace {

using ::berth::driver_common::AttachFrameReader;
using ::berth::driver_common::AttachFrameType;
using ::berth::driver_common::AttachHub;
using ::berth::driver_common::AttachStream;

void Check(bool condition) {
  if (!condition) std::abort();
}

// The frames of `bytes`, fed `piece` bytes at a time; `*consumed` is how
// many bytes whole frames took; `*malformed` whether the stream stopped at
// something that is not a frame.
struct Frame {
  AttachFrameType type;
  std::string payload;
};

std::vector<Frame> ReadFrames(const std::string& bytes, size_t piece,
                              size_t* consumed, bool* malformed) {
  AttachFrameReader reader;
  std::vector<Frame> frames;
  std::string encoded;
  *malformed = false;
  for (size_t at = 0; at < bytes.size() && !*malformed; at += piece) {
    reader.Feed(bytes.data() + at, std::min(piece, bytes.size() - at));
    Frame frame;
    while (reader.Next(&frame.type, &frame.payload, malformed)) {
      Check(frame.payload.size() <=
            berth::driver_common::kAttachMaxPayloadBytes);
      berth::driver_common::AppendAttachFrames(
          &encoded, frame.type, frame.payload.data(), frame.payload.size());
      frames.push_back(frame);
    }
  }
  // Whole frames are the input's start, as they were sent.
  Check(bytes.compare(0, encoded.size(), encoded) == 0);
  *consumed = encoded.size();
  if (*malformed) {
    Check(bytes.size() - *consumed >= berth::driver_common::kAttachHeaderBytes);
  }
  return frames;
}

void CheckDecoders(const Frame& frame) {
  uint32_t rows = 0, columns = 0;
  const std::string& payload = frame.payload;
  bool send_stdin = false;
  if (berth::driver_common::DecodeAttachHello(payload, &send_stdin, &rows,
                                              &columns)) {
    const std::string again =
        berth::driver_common::EncodeAttachHello(send_stdin, rows, columns);
    Check(again.compare(6, 8, payload, 1, 8) == 0);
  } else {
    Check(payload.size() != 9);
  }
  if (berth::driver_common::DecodeAttachSize(payload, &rows, &columns)) {
    Check(berth::driver_common::EncodeAttachResize(rows, columns).substr(5) ==
          payload);
  } else {
    Check(payload.size() != 8);
  }
  int32_t code = 0, signal = 0;
  if (berth::driver_common::DecodeAttachExit(payload, &code, &signal)) {
    Check(berth::driver_common::EncodeAttachExit(code, signal).substr(5) ==
          payload);
  }
}

// What the hub must have written to the program's stdin for `frames`, and
// whether the caller's stream ends there (a close, a bad hello).
std::string ExpectedStdin(const std::vector<Frame>& frames, bool* closed) {
  std::string stdin_bytes;
  *closed = false;
  for (const Frame& frame : frames) {
    if (frame.type == AttachFrameType::kStdinClose) {
      *closed = true;
      break;
    }
    if (frame.type == AttachFrameType::kHello && frame.payload.size() != 9) {
      break;  // the hub drops the caller
    }
    if (frame.type == AttachFrameType::kStdin) stdin_bytes += frame.payload;
  }
  return stdin_bytes;
}

void Drain(int fd, std::string* out, bool* eof) {
  char buffer[65536];
  while (true) {
    const ssize_t n = read(fd, buffer, sizeof(buffer));
    if (n > 0) {
      out->append(buffer, static_cast<size_t>(n));
      continue;
    }
    if (n == 0 && eof != nullptr) *eof = true;
    return;
  }
}

void Poll(AttachHub* hub) {
  std::vector<struct pollfd> fds;
  const size_t count = hub->AddPollFds(&fds);
  if (poll(fds.data(), fds.size(), 0) < 0) return;
  hub->HandlePoll(fds.data(), count);
}

void FuzzHub(const std::string& sent, const std::vector<Frame>& frames) {
  static int counter = 0;
  const int listener = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  Check(listener >= 0);
  struct sockaddr_un address;
  std::memset(&address, 0, sizeof(address));
  address.sun_family = AF_UNIX;
  const int name_length =
      std::snprintf(address.sun_path + 1, sizeof(address.sun_path) - 1,
                    "berth-attach-fuzz-%d-%d", getpid(), counter++);
  const socklen_t length =
      static_cast<socklen_t>(offsetof(struct sockaddr_un, sun_path) + 1 +
                             static_cast<size_t>(name_length));
  Check(bind(listener, reinterpret_cast<struct sockaddr*>(&address), length) ==
        0);
  Check(listen(listener, 4) == 0);
  int stdin_pipe[2];
  Check(pipe2(stdin_pipe, O_CLOEXEC | O_NONBLOCK) == 0);

  std::vector<std::pair<uint32_t, uint32_t>> resizes;
  AttachHub::Options options;
  options.listen_fd = listener;
  options.stdin_fd = stdin_pipe[1];
  options.on_resize = [&resizes](uint32_t rows, uint32_t columns) {
    resizes.emplace_back(rows, columns);
  };
  std::string received_stdin;
  bool stdin_eof = false;
  std::string received;
  {
    AttachHub hub(options);
    hub.Output(AttachStream::kStdout, "before", 6);
    const int caller = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    Check(caller >= 0);
    Check(connect(caller, reinterpret_cast<struct sockaddr*>(&address),
                  length) == 0);
    Check(fcntl(caller, F_SETFL, O_NONBLOCK) == 0);
    size_t written = 0;
    bool half_closed = false;
    for (int round = 0; round < 10000; ++round) {
      if (written < sent.size()) {
        const ssize_t n = send(caller, sent.data() + written,
                               sent.size() - written, MSG_NOSIGNAL);
        if (n > 0) written += static_cast<size_t>(n);
        if (n < 0 && errno != EAGAIN) written = sent.size();  // dropped
      } else if (!half_closed) {
        shutdown(caller, SHUT_WR);
        half_closed = true;
      }
      Poll(&hub);
      Drain(stdin_pipe[0], &received_stdin, &stdin_eof);
      Drain(caller, &received, nullptr);
      if (round == 1) hub.Output(AttachStream::kStderr, "during", 6);
      if (half_closed && round > 2 && hub.client_count() == 0) break;
    }
    Check(hub.client_count() == 0);  // the caller's end of file drops it
    hub.Exit(7, 0);
    hub.Flush(0);
    Drain(stdin_pipe[0], &received_stdin, &stdin_eof);
    Drain(caller, &received, nullptr);
    close(caller);
  }  // the hub closes the listener and the stdin pipe's write end
  Drain(stdin_pipe[0], &received_stdin, &stdin_eof);
  close(stdin_pipe[0]);

  bool closed = false;
  const std::string expected = ExpectedStdin(frames, &closed);
  Check(received_stdin == expected);
  for (const auto& [rows, columns] : resizes) Check(rows != 0 && columns != 0);

  // What came back: the holder's frames only, none cut.
  size_t consumed = 0;
  bool malformed = false;
  const std::vector<Frame> back =
      ReadFrames(received, 4096, &consumed, &malformed);
  Check(!malformed);
  for (const Frame& frame : back) {
    Check(frame.type == AttachFrameType::kStdout ||
          frame.type == AttachFrameType::kStderr ||
          frame.type == AttachFrameType::kExit);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string sent(berth::fuzz::AsText(data, size).substr(1));
  const size_t piece = 1 + data[0] / 2;  // 1..128 bytes at a time
  size_t consumed = 0;
  bool malformed = false;
  const std::vector<Frame> frames =
      ReadFrames(sent, piece, &consumed, &malformed);
  for (const Frame& frame : frames) CheckDecoders(frame);
  // The same frames whatever the pieces.
  size_t consumed_whole = 0;
  bool malformed_whole = false;
  const std::vector<Frame> whole =
      ReadFrames(sent, sent.size() + 1, &consumed_whole, &malformed_whole);
  Check(whole.size() == frames.size() && consumed_whole == consumed &&
        malformed_whole == malformed);
  if ((data[0] & 1) != 0) FuzzHub(sent, frames);
  return 0;
}
