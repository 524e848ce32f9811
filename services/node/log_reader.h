// A task's output as its driver keeps it: <log_dir>/stdout.log and
// stderr.log, each with rotations NAME.log.1 (newest) ... NAME.log.N
// (oldest). Reads the last lines, then follows new output across
// rotations.

#ifndef SERVICES_NODE_LOG_READER_H_
#define SERVICES_NODE_LOG_READER_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "berth/node/v1/node.pb.h"

namespace berth::node {

struct LogReadOptions {
  // The current run's output.
  std::string log_dir;
  // Earlier runs' (a task restarted by its policy), oldest first: read
  // before log_dir, never followed.
  std::vector<std::string> earlier_log_dirs;
  // Which streams; empty means both.
  std::vector<v1::LogStream> streams;
  // The last this many lines of each stream; 0 means all that is kept.
  uint64_t tail_lines = 0;
  // Keep reading new output while `running()` says the task runs.
  bool follow = false;
  std::function<bool()> running;
  // Polled between reads; true ends the read quietly.
  std::function<bool()> cancelled;
  // Waits up to the given time between reads, returning early when the task
  // ends (so that the read ends with it, not a poll interval later); unset:
  // sleeps.
  std::function<void(absl::Duration)> wait;
  absl::Duration poll_interval = absl::Milliseconds(100);
};

// Calls `write` with each piece read, in order within a stream (at most
// 32 KiB each); a false return ends the read. Returns once everything
// asked was written, when following: once the task ended and its files are
// drained.
absl::Status ReadTaskLogs(
    const LogReadOptions& options,
    const std::function<bool(v1::LogStream, absl::string_view)>& write);

}  // namespace berth::node

#endif  // SERVICES_NODE_LOG_READER_H_
