#include "services/common/refusal_log.h"

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"

namespace berth {

RefusalLog::RefusalLog(std::string socket_path, std::string allowed,
                       Options options)
    : socket_path_(std::move(socket_path)),
      allowed_(std::move(allowed)),
      options_(std::move(options)) {}

std::map<uid_t, RefusalLog::Entry>::iterator RefusalLog::IdlestEntry(
    absl::Time now) {
  auto idlest = uids_.end();
  for (auto it = uids_.begin(); it != uids_.end(); ++it) {
    const Entry& entry = it->second;
    if (entry.counted != 0 || now - entry.last_line < options_.interval) {
      continue;
    }
    if (idlest == uids_.end() || entry.last_line < idlest->second.last_line) {
      idlest = it;
    }
  }
  return idlest;
}

std::vector<std::string> RefusalLog::Refused(const PeerCredentials& peer) {
  const absl::Time now = options_.now();
  const std::string every = absl::FormatDuration(options_.interval);
  auto it = uids_.find(peer.uid);
  if (it == uids_.end()) {
    const size_t max_uids = std::max<size_t>(options_.max_uids, 1);
    if (uids_.size() >= max_uids) {
      auto idlest = IdlestEntry(now);
      if (idlest != uids_.end()) uids_.erase(idlest);
    }
    if (uids_.size() < max_uids) {
      Entry& entry = uids_[peer.uid];
      entry.last_line = now;
      entry.last_peer = peer;
      return {absl::StrCat("socket ", socket_path_, ": refusing the calls of ",
                           peer.ToString(), " (allowed: ", allowed_,
                           "); its further refusals are counted and logged at "
                           "most once every ",
                           every)};
    }
    // The table is full of uids refused lately: count this one with the
    // other untracked uids.
    if (!overflow_used_) {
      overflow_used_ = true;
      overflow_.last_line = now;
      overflow_.last_peer = peer;
      return {absl::StrCat(
          "socket ", socket_path_, ": refusing the calls of ", peer.ToString(),
          " (allowed: ", allowed_, "); ", uids_.size(),
          " other uids were refused lately: the refusals of uids beyond them "
          "are counted together and logged at most once every ",
          every)};
    }
    ++overflow_.counted;
    overflow_.last_peer = peer;
    if (now - overflow_.last_line < options_.interval) return {};
    return {Summarize(&overflow_, /*overflow=*/true, now)};
  }
  Entry& entry = it->second;
  ++entry.counted;
  entry.last_peer = peer;
  if (now - entry.last_line < options_.interval) return {};
  return {Summarize(&entry, /*overflow=*/false, now)};
}

std::string RefusalLog::Summarize(Entry* entry, bool overflow, absl::Time now) {
  const std::string connections =
      entry->counted == 1 ? "connection" : "connections";
  const std::string since = absl::FormatDuration(
      absl::Trunc(now - entry->last_line, absl::Seconds(1)));
  std::string line =
      overflow
          ? absl::StrCat("socket ", socket_path_, ": ", entry->counted,
                         " more ", connections,
                         " of untracked uids refused in the last ", since,
                         " (the last of ", entry->last_peer.ToString(), ")")
          : absl::StrCat("socket ", socket_path_, ": uid ",
                         entry->last_peer.uid, ": ", entry->counted, " more ",
                         connections, " refused in the last ", since,
                         " (the last of pid ", entry->last_peer.pid, ")");
  entry->counted = 0;
  entry->last_line = now;
  return line;
}

std::vector<std::string> RefusalLog::Take(bool due_only) {
  const absl::Time now = options_.now();
  auto taken = [&](const Entry& entry) {
    return entry.counted > 0 &&
           (!due_only || now - entry.last_line >= options_.interval);
  };
  std::vector<std::string> lines;
  for (auto& [uid, entry] : uids_) {
    if (taken(entry)) {
      lines.push_back(Summarize(&entry, /*overflow=*/false, now));
    }
  }
  if (taken(overflow_)) {
    lines.push_back(Summarize(&overflow_, /*overflow=*/true, now));
  }
  return lines;
}

absl::Time RefusalLog::NextDue() const {
  absl::Time due = absl::InfiniteFuture();
  for (const auto& [uid, entry] : uids_) {
    if (entry.counted > 0) {
      due = std::min(due, entry.last_line + options_.interval);
    }
  }
  if (overflow_.counted > 0) {
    due = std::min(due, overflow_.last_line + options_.interval);
  }
  return due;
}

}  // namespace berth
