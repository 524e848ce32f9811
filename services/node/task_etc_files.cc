#include "services/node/task_etc_files.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "base/unique_fd.h"

namespace berth::node {
namespace {

constexpr const char* kEtcFileNames[] = {"hosts", "hostname", "resolv.conf"};

// A name server on the loopback (127.0.0.0/8, ::1), which a task in a
// network namespace of its own does not reach.
bool IsLoopback(const std::string& address) {
  // A scoped IPv6 address ("fe80::1%eth0") is not one.
  in_addr v4;
  if (inet_pton(AF_INET, address.c_str(), &v4) == 1) {
    return (ntohl(v4.s_addr) >> 24) == 127;
  }
  in6_addr v6;
  if (inet_pton(AF_INET6, address.c_str(), &v6) == 1) {
    return IN6_IS_ADDR_LOOPBACK(&v6);
  }
  return false;
}

absl::Status WriteNew(int dir_fd, const char* name, const std::string& text,
                      uid_t uid, gid_t gid, const std::string& dir) {
  base::UniqueFd fd(openat(dir_fd, name,
                           O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
                           0644));
  if (!fd.valid()) {
    return absl::ErrnoToStatus(errno, absl::StrCat("making ", dir, "/", name));
  }
  size_t written = 0;
  while (written < text.size()) {
    const ssize_t n =
        write(fd.get(), text.data() + written, text.size() - written);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      return absl::ErrnoToStatus(errno,
                                 absl::StrCat("writing ", dir, "/", name));
    }
    written += static_cast<size_t>(n);
  }
  // The umask must not narrow it; the task's root (mapped) owns it.
  if (fchmod(fd.get(), 0644) != 0 ||
      ((uid != 0 || gid != 0) && fchown(fd.get(), uid, gid) != 0)) {
    return absl::ErrnoToStatus(
        errno, absl::StrCat("setting the owner of ", dir, "/", name));
  }
  return absl::OkStatus();
}

}  // namespace

std::string HostsFile(const v1::TaskSpec& spec, const std::string& hostname,
                      const network::v1::NetworkStatus* network) {
  std::string hosts =
      "127.0.0.1\tlocalhost\n"
      "::1\tlocalhost ip6-localhost ip6-loopback\n"
      "fe00::0\tip6-localnet\n"
      "ff00::0\tip6-mcastprefix\n"
      "ff02::1\tip6-allnodes\n"
      "ff02::2\tip6-allrouters\n";
  if (network != nullptr && !hostname.empty()) {
    for (const network::v1::InterfaceAddress& address : network->addresses()) {
      // "172.26.64.2/20" → "172.26.64.2".
      const std::string ip = address.cidr().substr(0, address.cidr().find('/'));
      if (ip.empty()) continue;
      absl::StrAppend(&hosts, ip, "\t", hostname, "\n");
    }
  }
  for (const v1::HostEntry& entry : spec.extra_hosts()) {
    absl::StrAppend(&hosts, entry.ip(), "\t", entry.hostname(), "\n");
  }
  return hosts;
}

std::string ResolvConf(const network::v1::DnsConfig& dns,
                       absl::string_view host_resolv_conf, bool own_network) {
  std::vector<std::string> servers, searches, options, others;
  for (absl::string_view line : absl::StrSplit(host_resolv_conf, '\n')) {
    absl::string_view trimmed = absl::StripAsciiWhitespace(line);
    if (trimmed.empty() || trimmed[0] == '#' || trimmed[0] == ';') continue;
    std::vector<std::string> words =
        absl::StrSplit(trimmed, absl::ByAnyChar(" \t"), absl::SkipEmpty());
    const std::string keyword = words[0];
    words.erase(words.begin());
    if (keyword == "nameserver") {
      if (words.empty()) continue;
      if (own_network && IsLoopback(words[0])) continue;
      servers.push_back(words[0]);
    } else if (keyword == "search" || keyword == "domain") {
      // The last of them wins (resolv.conf(5)).
      searches = std::move(words);
    } else if (keyword == "options") {
      options.insert(options.end(), words.begin(), words.end());
    } else {
      others.push_back(std::string(trimmed));
    }
  }
  if (dns.servers_size() > 0) {
    servers.assign(dns.servers().begin(), dns.servers().end());
  }
  if (dns.searches_size() > 0) {
    searches.assign(dns.searches().begin(), dns.searches().end());
  }
  if (dns.options_size() > 0) {
    options.assign(dns.options().begin(), dns.options().end());
  }
  std::string text;
  for (const std::string& server : servers) {
    absl::StrAppend(&text, "nameserver ", server, "\n");
  }
  if (!searches.empty()) {
    absl::StrAppend(&text, "search ", absl::StrJoin(searches, " "), "\n");
  }
  if (!options.empty()) {
    absl::StrAppend(&text, "options ", absl::StrJoin(options, " "), "\n");
  }
  for (const std::string& line : others) absl::StrAppend(&text, line, "\n");
  return text;
}

TaskEtcFiles MakeTaskEtcFiles(const v1::TaskSpec& spec,
                              const std::string& hostname,
                              const network::v1::NetworkStatus* network,
                              absl::string_view host_resolv_conf) {
  TaskEtcFiles files;
  files.hosts = HostsFile(spec, hostname, network);
  files.hostname = absl::StrCat(hostname, "\n");
  files.resolv_conf =
      ResolvConf(spec.network().dns(), host_resolv_conf, network != nullptr);
  return files;
}

absl::Status WriteTaskEtcFiles(const std::string& task_dir,
                               const TaskEtcFiles& files, uid_t uid,
                               gid_t gid) {
  base::UniqueFd task_fd(
      open(task_dir.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!task_fd.valid()) {
    return absl::ErrnoToStatus(errno, absl::StrCat("opening ", task_dir));
  }
  const std::string dir = absl::StrCat(task_dir, "/", kTaskEtcDir);
  if (mkdirat(task_fd.get(), kTaskEtcDir, 0755) != 0) {
    return absl::ErrnoToStatus(errno, absl::StrCat("making ", dir));
  }
  base::UniqueFd dir_fd(
      openat(task_fd.get(), kTaskEtcDir,
             O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!dir_fd.valid()) {
    return absl::ErrnoToStatus(errno, absl::StrCat("opening ", dir));
  }
  if (fchmod(dir_fd.get(), 0755) != 0) {
    return absl::ErrnoToStatus(errno, absl::StrCat("chmod ", dir));
  }
  const std::pair<const char*, const std::string*> contents[] = {
      {kEtcFileNames[0], &files.hosts},
      {kEtcFileNames[1], &files.hostname},
      {kEtcFileNames[2], &files.resolv_conf},
  };
  for (const auto& [name, text] : contents) {
    if (absl::Status s = WriteNew(dir_fd.get(), name, *text, uid, gid, dir);
        !s.ok()) {
      return s;
    }
  }
  return absl::OkStatus();
}

void AddTaskEtcMounts(const std::string& task_dir,
                      driver::v1::Isolation* isolation) {
  for (const char* name : kEtcFileNames) {
    const std::string destination = absl::StrCat("/etc/", name);
    bool taken = false;
    for (const driver::v1::Mount& mount : isolation->mounts()) {
      if (mount.destination() == destination) taken = true;
    }
    if (taken) continue;
    driver::v1::Mount* mount = isolation->add_mounts();
    mount->set_type(driver::v1::MOUNT_TYPE_BIND);
    mount->set_source(absl::StrCat(task_dir, "/", kTaskEtcDir, "/", name));
    mount->set_destination(destination);
    mount->set_read_only(false);
  }
}

bool WantsTaskEtcFiles(const driver::v1::DriverCapabilities& caps) {
  return caps.isolation().own_root() && caps.isolation().mounts();
}

}  // namespace berth::node
