// What berth-proxy keeps across its own restart, in <state_dir>: the
// sandboxes it knows and, for every started process, the binding of its
// token to it, so that a shim reconnecting after a restart (ShimHello.resume)
// is re-attached to its process. One small file per record, written
// atomically (a temporary file renamed over it), 0600 in a 0700 directory:
// a session record holds its token.

#ifndef SERVICES_PROXY_STATE_STORE_H_
#define SERVICES_PROXY_STATE_STORE_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace berth {
namespace proxy {

class StateStore {
 public:
  struct SandboxRecord {
    std::string sandbox_id;
    std::string target;  // "unix:PATH"
  };
  struct SessionRecord {
    std::string token;
    std::string sandbox_id;
    std::string container_id;
    std::string process_id;
  };
  struct State {
    std::vector<SandboxRecord> sandboxes;
    std::vector<SessionRecord> sessions;
  };

  // Makes `dir`, dir/sandboxes and dir/sessions (0700) if missing; the
  // error names the directory.
  static absl::StatusOr<StateStore> Open(const std::string& dir);

  absl::Status PutSandbox(const SandboxRecord& record) const;
  void RemoveSandbox(const std::string& sandbox_id) const;
  absl::Status PutSession(const SessionRecord& record) const;
  void RemoveSession(const std::string& process_id) const;
  // Every record; a record that cannot be read is skipped with a warning.
  State Load() const;

  const std::string& dir() const { return dir_; }

 private:
  explicit StateStore(std::string dir) : dir_(std::move(dir)) {}
  std::string dir_;
};

}  // namespace proxy
}  // namespace berth

#endif  // SERVICES_PROXY_STATE_STORE_H_
