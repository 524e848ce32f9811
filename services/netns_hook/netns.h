// Named network namespaces as files, the way `ip netns` keeps them: each
// file in a directory is a bind mount of a network namespace, which keeps the
// namespace alive with no process in it (issue 6, point 2).

#ifndef SERVICES_NETNS_HOOK_NETNS_H_
#define SERVICES_NETNS_HOOK_NETNS_H_

#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace berth::netns_hook {

// Named network namespaces: files in a directory (default /var/run/netns,
// ip netns's) each bind-mounted over a network namespace, which keeps it
// alive without any process in it. Thread-safe: every method may be called
// from any thread (the service serves gRPC on many). Calls for the same name
// at once are safe for the file system (no mount is ever stacked twice) but
// their outcome is one of the orders; the service locks per allocation.
class NamespaceDir {
 public:
  explicit NamespaceDir(std::string dir = "/var/run/netns");

  // Makes the directory (0755) if missing and, as ip netns does, a shared
  // mount point (bound to itself first when it is not a mount point), so
  // that namespaces mounted in it later show in other mount namespaces that
  // receive propagation (e.g. tasks' private-slave mounts). Idempotent: the
  // directory is bound to itself at most once, even by concurrent callers
  // (an exclusive flock on it, which ip netns takes too).
  absl::Status Prepare() const;

  const std::string& dir() const { return dir_; }
  // dir() + "/" + name; no check of the name.
  std::string PathOf(absl::string_view name) const;

  // Makes namespace `name` with loopback up. A vfork-style child (sharing
  // our memory, making system calls only, all signals blocked) is cloned
  // into a new network namespace, brings "lo" up (SIOCSIFFLAGS) and
  // bind-mounts its /proc/self/ns/net over dir/name (made empty, 0444), then
  // exits; none of our threads ever changes namespace. ALREADY_EXISTS naming
  // the path if a namespace is mounted there already; INVALID_ARGUMENT for an
  // empty name, a name with '/', "." or "..", or longer than NAME_MAX. A
  // plain file left at the path by a crash is reused. On any failure nothing
  // is left (no file, no mount, no process). Call Prepare() first for the
  // namespace to propagate to other mount namespaces.
  absl::Status Create(absl::string_view name) const;

  // Whether dir/name is a mounted network namespace (nsfs, of type net).
  bool Exists(absl::string_view name) const;

  // Unmounts (MNT_DETACH) and unlinks dir/name; OK when absent (idempotent).
  // A plain file left by a crash between making the file and mounting it is
  // removed too. The namespace itself goes when its last user (a process in
  // it, an open file of it, another mount of it) does.
  absl::Status Remove(absl::string_view name) const;

  // The names in the directory starting with `prefix`, sorted: mounted
  // namespaces and plain files left by a crash alike. Empty when the
  // directory does not exist.
  absl::StatusOr<std::vector<std::string>> List(absl::string_view prefix) const;

 private:
  std::string dir_;
};

// Runs `fn` in a forked child that has joined the network namespace at
// `path` (setns), and returns the child's exit code (fn's return value,
// & 0xff); the caller's threads never change namespace. For probes and
// tests (e.g. listen or connect inside a namespace). The child is a fork of
// a possibly multithreaded process: `fn` must not take locks another thread
// may hold (malloc is fine with glibc; logging is not). NOT_FOUND when there
// is nothing at `path`, INVALID_ARGUMENT when it is not a network
// namespace, INTERNAL when the child is killed by a signal.
absl::StatusOr<int> RunInNamespace(const std::string& path,
                                   const std::function<int()>& fn);

}  // namespace berth::netns_hook

#endif  // SERVICES_NETNS_HOOK_NETNS_H_
