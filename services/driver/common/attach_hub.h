// The task's side of AttachTask: the process that holds a task's stdio
// (berth-task-init run for the exec driver, berth-shim for the sandbox
// driver) serves attached callers on a listening Unix socket the driver made
// at <task_dir>/.berth/attach.sock (attach_client.h) and passed to it.
//
// The protocol on that socket, both ways a sequence of frames:
//   TYPE (1 byte) LENGTH (4 bytes, big-endian) PAYLOAD (LENGTH <= 32 KiB)
// From the caller (the driver's relay):
//   'H' hello       FLAGS (1 byte, bit 0: the caller sends stdin) ROWS COLS
//                   (4 bytes big-endian each; 0 0: no size). First frame.
//   'I' stdin       bytes for the program's stdin
//   'C' stdin close the program reads end-of-file (a terminal: its EOF
//                   character, when in canonical mode)
//   'R' resize      ROWS COLS (4 bytes big-endian each), a terminal's size
// From the holder:
//   'O' stdout      bytes the program wrote to stdout (a terminal: all)
//   'E' stderr      bytes the program wrote to stderr
//   'X' exit        CODE SIGNAL (4 bytes big-endian each, signed), last;
//                   then the holder closes the connection.
// The first caller that connects in a run first gets what the program wrote
// before it (its latest kAttachReplayBytes, each stream's bytes tagged, in
// order); later callers only what is written after they connected.
//
// AttachHub is the holder's side: poll-driven, no threads, no allocation
// beyond its buffers; plain C++ and libc only (berth-task-init links it
// statically, without Abseil, glog or protobuf). The program's output never
// waits for a caller: a caller more than kAttachMaxBacklogBytes behind is
// disconnected.

#ifndef SERVICES_DRIVER_COMMON_ATTACH_HUB_H_
#define SERVICES_DRIVER_COMMON_ATTACH_HUB_H_

#include <poll.h>

#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace berth::driver_common {

// The socket's name in the task's private directory (<task_dir>/.berth).
inline constexpr char kAttachSocketName[] = "attach.sock";

// Frame types (see above).
enum class AttachFrameType : uint8_t {
  kHello = 'H',
  kStdin = 'I',
  kStdinClose = 'C',
  kResize = 'R',
  kStdout = 'O',
  kStderr = 'E',
  kExit = 'X',
};

inline constexpr size_t kAttachHeaderBytes = 5;
inline constexpr size_t kAttachMaxPayloadBytes = 32 * 1024;
// What the first caller of a run gets of the output written before it.
inline constexpr size_t kAttachReplayBytes = 1 << 20;
// A caller further behind than this is disconnected.
inline constexpr size_t kAttachMaxBacklogBytes = 4 << 20;
// Stdin queued towards the program before the hub stops reading callers.
inline constexpr size_t kAttachMaxStdinBytes = 64 * 1024;

// Appends frames of `type` carrying `data` to `out`: one per
// kAttachMaxPayloadBytes (one empty frame for empty data).
void AppendAttachFrames(std::string* out, AttachFrameType type,
                        const char* data, size_t size);
std::string EncodeAttachHello(bool send_stdin, uint32_t rows, uint32_t columns);
std::string EncodeAttachResize(uint32_t rows, uint32_t columns);
std::string EncodeAttachExit(int32_t exit_code, int32_t signal);

// Payload decoders; false when the payload has the wrong size.
bool DecodeAttachHello(const std::string& payload, bool* send_stdin,
                       uint32_t* rows, uint32_t* columns);
bool DecodeAttachSize(const std::string& payload, uint32_t* rows,
                      uint32_t* columns);
bool DecodeAttachExit(const std::string& payload, int32_t* exit_code,
                      int32_t* signal);

// Splits received bytes into frames.
class AttachFrameReader {
 public:
  void Feed(const char* data, size_t size);
  // The next whole frame: true with its type and payload; false when none
  // is complete yet, or (with *malformed) when the stream is not frames.
  bool Next(AttachFrameType* type, std::string* payload, bool* malformed);

 private:
  std::string buffer_;
  size_t offset_ = 0;
};

// Which output stream a piece of output came from.
enum class AttachStream { kStdout, kStderr };

class AttachHub {
 public:
  struct Options {
    // The listening socket (SOCK_STREAM, AF_UNIX), owned by the hub; made
    // non-blocking by it. -1: no callers (the hub only keeps output).
    int listen_fd = -1;
    // The write end of the program's stdin pipe, owned by the hub (closed
    // on a stdin close, or with the hub). -1 for none.
    int stdin_fd = -1;
    // The program's terminal (a pty master), not owned: stdin goes there
    // when `stdin_fd` is -1 and `terminal_stdin` is set; resizes apply to
    // it. -1 for none.
    int terminal_fd = -1;
    bool terminal_stdin = false;
    // Called with each terminal size a caller sends (its hello's, a
    // resize), for a holder whose terminal is elsewhere (berth-shim sends
    // it up to the agent); besides terminal_fd's. Empty: none.
    std::function<void(uint32_t rows, uint32_t columns)> on_resize;
    size_t replay_bytes = kAttachReplayBytes;
    size_t max_backlog_bytes = kAttachMaxBacklogBytes;
  };

  explicit AttachHub(const Options& options);
  ~AttachHub();
  AttachHub(const AttachHub&) = delete;
  AttachHub& operator=(const AttachHub&) = delete;

  // Appends a pollfd for each descriptor the hub waits on to `fds` and
  // returns how many; pass the same entries, after poll(2), to HandlePoll
  // before calling AddPollFds again.
  size_t AddPollFds(std::vector<struct pollfd>* fds);
  void HandlePoll(const struct pollfd* fds, size_t count);

  // The program wrote `data`: to every caller (and kept for the first, if
  // none has come yet). Never blocks.
  void Output(AttachStream stream, const char* data, size_t size);

  // The program ended: every caller gets the exit frame, no caller is
  // accepted any more, and callers are closed once their output is written.
  void Exit(int exit_code, int signal);

  // After Exit: writes what callers have not been sent yet for at most
  // `timeout_ms`, then closes them all.
  void Flush(int timeout_ms);

  // Callers connected now.
  size_t client_count() const;
  // Bytes of output kept for the first caller.
  size_t replay_size() const { return replay_size_; }
  // Whether the program's stdin is still open.
  bool stdin_open() const;

 private:
  struct Client;
  // What an entry AddPollFds appended stands for.
  struct Polled {
    enum class Kind { kListen, kStdin, kClient } kind;
    Client* client;
  };

  void Accept();
  void ReadClient(Client* client);
  void HandleFrame(Client* client, AttachFrameType type,
                   const std::string& payload);
  void Resize(uint32_t rows, uint32_t columns);
  void QueueStdin(const std::string& data);
  void CloseStdin();
  void WriteStdin();
  // Sends what the client has queued; false when it is gone.
  bool WriteClient(Client* client);
  void Queue(Client* client, const std::string& frames);
  void Drop(Client* client);
  void RemoveDropped();

  Options options_;
  int stdin_target_ = -1;  // where stdin is written (stdin_fd or terminal)
  bool stdin_closed_ = false;
  bool stdin_close_pending_ = false;
  std::string stdin_pending_;
  std::vector<std::unique_ptr<Client>> clients_;
  bool first_client_seen_ = false;
  bool exited_ = false;
  std::deque<std::pair<AttachStream, std::string>> replay_;
  size_t replay_size_ = 0;
  std::vector<Polled> polled_;
};

}  // namespace berth::driver_common

#endif  // SERVICES_DRIVER_COMMON_ATTACH_HUB_H_
