// A task's /etc/hosts, /etc/hostname and /etc/resolv.conf, as docker makes
// them: written by the node for each run, afresh, in <task dir>/etc (the
// node's: made empty before the run), and bound read-write at /etc/hosts,
// /etc/hostname and /etc/resolv.conf in the task's root, for a driver that
// gives tasks their own root and takes mounts (IsolationCapabilities
// own_root and mounts). A mount of the user's own at one of those paths
// wins: that file is not bound.
//
// hosts: the localhost lines, then the task's addresses with its host name
// when it has a network of its own, then spec.extra_hosts in their order.
// hostname: the task's host name (TaskHostname).
// resolv.conf: the host's /etc/resolv.conf, without its loopback name
// servers for a task in a network namespace of its own (they answer on the
// host's loopback, which the task does not reach), with what
// spec.network.dns gives in place of its own: servers replace its name
// servers, searches its search domains, options its options (as docker's
// --dns, --dns-search and --dns-option do).

#ifndef SERVICES_NODE_TASK_ETC_FILES_H_
#define SERVICES_NODE_TASK_ETC_FILES_H_

#include <sys/types.h>

#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "berth/driver/v1/driver.pb.h"
#include "berth/network/v1/network.pb.h"
#include "berth/node/v1/node.pb.h"

namespace berth::node {

// The directory of the files in the task directory.
inline constexpr char kTaskEtcDir[] = "etc";

// The contents of the three files.
struct TaskEtcFiles {
  std::string hosts;
  std::string hostname;
  std::string resolv_conf;
};

// `network`: the task's network when it has one of its own (its addresses
// are listed), null for the host's. `host_resolv_conf`: the host's
// /etc/resolv.conf as read.
TaskEtcFiles MakeTaskEtcFiles(const v1::TaskSpec& spec,
                              const std::string& hostname,
                              const network::v1::NetworkStatus* network,
                              absl::string_view host_resolv_conf);

// The hosts file alone (see above).
std::string HostsFile(const v1::TaskSpec& spec, const std::string& hostname,
                      const network::v1::NetworkStatus* network);

// resolv.conf from the host's and `dns` (see above).
std::string ResolvConf(const network::v1::DnsConfig& dns,
                       absl::string_view host_resolv_conf, bool own_network);

// Writes the files into <task_dir>/etc, which must not exist yet (made
// 0755), each made new (O_EXCL, O_NOFOLLOW) 0644 and owned by `uid`:`gid`
// (the task's root as the host sees it).
absl::Status WriteTaskEtcFiles(const std::string& task_dir,
                               const TaskEtcFiles& files, uid_t uid = 0,
                               gid_t gid = 0);

// Adds read-write bind mounts of <task_dir>/etc/{hosts,hostname,resolv.conf}
// at /etc/... to `isolation`, each unless one of its mounts already has that
// destination.
void AddTaskEtcMounts(const std::string& task_dir,
                      driver::v1::Isolation* isolation);

// Whether the node gives a task of a driver claiming `caps` these files.
bool WantsTaskEtcFiles(const driver::v1::DriverCapabilities& caps);

}  // namespace berth::node

#endif  // SERVICES_NODE_TASK_ETC_FILES_H_
