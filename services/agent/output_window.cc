#include "services/agent/output_window.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "glog/logging.h"

namespace berth::agent {

OutputWindow::OutputWindow(std::string name, size_t capacity)
    : name_(std::move(name)), capacity_(capacity) {}

void OutputWindow::Append(std::string data) {
  if (data.size() > room()) {
    LOG(DFATAL) << name_ << ": appending " << data.size()
                << " bytes to a window with room for " << room();
    data.resize(room());
  }
  size_t used = 0;
  // Merge a small piece into the last chunk while it has space.
  if (!chunks_.empty()) {
    Chunk& last = chunks_.back();
    const size_t space = kMaxOutputFrameBytes > last.data.size()
                             ? kMaxOutputFrameBytes - last.data.size()
                             : 0;
    if (space > 0 && data.size() < kMaxOutputFrameBytes / 2) {
      used = std::min(space, data.size());
      last.data.append(data, 0, used);
    }
  }
  const uint64_t end = end_offset();
  buffered_ += used;
  uint64_t offset = end + used;
  if (used == data.size()) return;
  if (used == 0 && data.size() <= kMaxOutputFrameBytes) {
    buffered_ += data.size();
    chunks_.push_back(Chunk{offset, std::move(data)});
    return;
  }
  for (size_t at = used; at < data.size(); at += kMaxOutputFrameBytes) {
    const size_t n = std::min(kMaxOutputFrameBytes, data.size() - at);
    chunks_.push_back(Chunk{offset, data.substr(at, n)});
    offset += n;
    buffered_ += n;
  }
}

absl::Status OutputWindow::Ack(uint64_t offset) {
  if (offset > end_offset()) {
    return absl::OutOfRangeError(
        absl::StrCat(name_, " acknowledged up to offset ", offset,
                     ", beyond the ", end_offset(), " bytes read"));
  }
  if (offset <= start_offset_) return absl::OkStatus();
  while (!chunks_.empty()) {
    const Chunk& front = chunks_.front();
    if (front.offset + front.data.size() > offset) break;
    chunks_.pop_front();
  }
  buffered_ -= offset - start_offset_;
  start_offset_ = offset;
  return absl::OkStatus();
}

absl::Status OutputWindow::CheckResume(uint64_t offset) const {
  if (offset < start_offset_ || offset > end_offset()) {
    return absl::OutOfRangeError(absl::StrCat(
        name_, " offset ", offset, " is not held: the agent holds [",
        start_offset_, ", ", end_offset(), ")"));
  }
  return absl::OkStatus();
}

size_t OutputWindow::CopyFrom(uint64_t offset, size_t max_bytes,
                              std::string* out) const {
  if (offset < start_offset_ || offset >= end_offset()) return 0;
  // Chunks are few (capacity / chunk size): a scan from the front is cheap.
  for (const Chunk& chunk : chunks_) {
    const uint64_t chunk_end = chunk.offset + chunk.data.size();
    if (offset >= chunk_end) continue;
    const size_t at = static_cast<size_t>(offset - chunk.offset);
    const size_t n = std::min(max_bytes, chunk.data.size() - at);
    out->append(chunk.data, at, n);
    return n;
  }
  return 0;
}

}  // namespace berth::agent
