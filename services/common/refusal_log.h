// What a UnixGrpcServer logs of the connections it refuses (peers whose uid
// may not call its socket), so that a local user who connects in a loop
// cannot flood berth's logs.

#ifndef SERVICES_COMMON_REFUSAL_LOG_H_
#define SERVICES_COMMON_REFUSAL_LOG_H_

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "services/common/peer_credentials.h"

namespace berth {

// Decides the log lines of refused connections:
// - the first refusal of a uid is one line naming the uid, gid and pid, the
//   socket and who is allowed;
// - later refusals of that uid are counted, and a count is logged at most
//   once per `interval` ("uid U: N more connections refused in the last
//   1m"), when a refusal comes after the interval or when TakeDue is called
//   after it (the server calls it when NextDue has come);
// - at most `max_uids` uids are tracked. A uid that comes when the table is
//   full takes the place of the one idle longest (nothing counted since its
//   last line, which is at least `interval` old; the uid gets a first line
//   again if it comes back), or, when none is idle, is counted with the
//   other untracked uids: one first line, then a summary at most once per
//   interval. So whatever peers do, about max_uids + 1 first lines and as
//   many summaries are logged per interval at the most, and memory stays
//   bounded.
//
// Not thread-safe: one thread uses it (the server's accept thread, and
// Shutdown once that thread is joined).
class RefusalLog {
 public:
  struct Options {
    // How often, at most, the refusals of one uid after its first are logged
    // (as a count).
    absl::Duration interval = absl::Seconds(60);
    // How many uids are tracked, at the most (at least 1).
    size_t max_uids = 64;
    // The clock. Tests give a fake one.
    std::function<absl::Time()> now = [] { return absl::Now(); };
  };

  // `socket_path` and `allowed` (SocketAccess::Describe) are named in the
  // lines.
  RefusalLog(std::string socket_path, std::string allowed, Options options);

  RefusalLog(const RefusalLog&) = delete;
  RefusalLog& operator=(const RefusalLog&) = delete;

  // Records the refusal of a connection of `peer`; returns the lines to log
  // for it now (none for most).
  std::vector<std::string> Refused(const PeerCredentials& peer);

  // The counts whose interval has passed (one line each); they start over.
  std::vector<std::string> TakeDue() { return Take(/*due_only=*/true); }

  // When TakeDue will next have a line; absl::InfiniteFuture() when nothing
  // is counted.
  absl::Time NextDue() const;

  // Every count, due or not (one line each), e.g. when the server stops.
  std::vector<std::string> TakeAll() { return Take(/*due_only=*/false); }

  // How many uids are tracked now (at most max_uids).
  size_t tracked_uids() const { return uids_.size(); }

 private:
  struct Entry {
    // When the last line about this entry was logged.
    absl::Time last_line;
    // Refusals since that line.
    int64_t counted = 0;
    // The last refused peer.
    PeerCredentials last_peer;
  };

  // The summaries of the counts (whose interval has passed, if `due_only`).
  std::vector<std::string> Take(bool due_only);
  // The summary line of `entry`, which `overflow` says is the untracked
  // uids' (else the uid's), as of `now`; starts its count over.
  std::string Summarize(Entry* entry, bool overflow, absl::Time now);
  // A tracked uid whose place a new uid may take (see the class comment),
  // or uids_.end().
  std::map<uid_t, Entry>::iterator IdlestEntry(absl::Time now);

  const std::string socket_path_;
  const std::string allowed_;
  const Options options_;
  std::map<uid_t, Entry> uids_;
  // The uids refused while the table was full, together.
  bool overflow_used_ = false;
  Entry overflow_;
};

}  // namespace berth

#endif  // SERVICES_COMMON_REFUSAL_LOG_H_
