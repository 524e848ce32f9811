// The unacknowledged output of one stream of a process (stdout or stderr):
// bytes read from the process's pipe, kept with their offsets until the
// client acknowledges them, and bounded, so that a full window stops the
// reading of the pipe (the kernel then holds the rest and the process
// blocks: back-pressure).

#ifndef SERVICES_AGENT_OUTPUT_WINDOW_H_
#define SERVICES_AGENT_OUTPUT_WINDOW_H_

#include <cstddef>
#include <cstdint>
#include <deque>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace berth::agent {

// Frames of output are at most this large. Larger frames cost gRPC less per
// byte (each message is a few syscalls and wake-ups on two hops); the
// process's pipes are made as large (kOutputPipeBytes) so that one read can
// fill one.
inline constexpr size_t kMaxOutputFrameBytes = 128 * 1024;
inline constexpr int kOutputPipeBytes = 256 * 1024;

// Offsets count bytes since the process started. The window holds
// [start_offset(), end_offset()); end_offset() - start_offset() never
// exceeds the capacity. Thread-compatible: the caller locks.
class OutputWindow {
 public:
  // `name` ("stdout") names the stream in errors.
  OutputWindow(std::string name, size_t capacity);

  OutputWindow(const OutputWindow&) = delete;
  OutputWindow& operator=(const OutputWindow&) = delete;

  // The first byte still held (everything before was acknowledged).
  uint64_t start_offset() const { return start_offset_; }
  // The offset after the last byte read from the process.
  uint64_t end_offset() const { return start_offset_ + buffered_; }
  size_t buffered() const { return buffered_; }
  size_t capacity() const { return capacity_; }
  // How many more bytes may be read from the pipe: 0 means stop reading.
  size_t room() const { return capacity_ - buffered_; }

  // The process's end of the stream is closed (end of file): no more bytes.
  bool closed() const { return closed_; }
  void Close() { closed_ = true; }

  // Appends bytes read from the process: at most room() (more is a bug and
  // is cut to room(), with a log). Small pieces are merged into the last
  // chunk; a large one is moved in as it is.
  void Append(std::string data);

  // The client has all bytes before `offset`: drops them. An offset before
  // start_offset() changes nothing; one beyond end_offset() is OUT_OF_RANGE.
  absl::Status Ack(uint64_t offset);

  // Whether sending may resume at `offset`: OUT_OF_RANGE, naming the stream
  // and the range held, when it was dropped or not read yet.
  absl::Status CheckResume(uint64_t offset) const;

  // Up to `max_bytes` bytes from `offset` on (from one chunk, so at most
  // kMaxOutputFrameBytes), appended to `out`; returns how many. 0 when
  // `offset` is end_offset() or outside the window.
  size_t CopyFrom(uint64_t offset, size_t max_bytes, std::string* out) const;

 private:
  struct Chunk {
    uint64_t offset;
    std::string data;
  };

  const std::string name_;
  const size_t capacity_;
  uint64_t start_offset_ = 0;  // of chunks_.front(), after trimming
  size_t buffered_ = 0;
  bool closed_ = false;
  // Contiguous; each at most kMaxOutputFrameBytes. The front chunk may start
  // before start_offset_ (partly acknowledged): front_skip_ bytes of it.
  std::deque<Chunk> chunks_;
};

}  // namespace berth::agent

#endif  // SERVICES_AGENT_OUTPUT_WINDOW_H_
