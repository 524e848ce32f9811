#include "services/node/id_ranges.h"

#include <pwd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace berth::node {
namespace {

constexpr uint64_t kIdLimit = uint64_t{1} << 32;  // uid 2^32 - 1 is invalid
constexpr uint32_t kFirstUnprivileged = 65536;

bool Overlaps(uint64_t a_start, uint64_t a_end, uint64_t b_start,
              uint64_t b_end) {
  return a_start < b_end && b_start < a_end;
}

// The first `size` ids of `pool` that overlap no span of `used`.
std::optional<uint32_t> FirstFit(std::vector<IdSpan> pool,
                                 const std::vector<IdSpan>& used,
                                 uint32_t size) {
  std::sort(pool.begin(), pool.end(),
            [](const IdSpan& a, const IdSpan& b) { return a.start < b.start; });
  for (const IdSpan& span : pool) {
    uint64_t pos = span.start;
    while (pos + size <= span.end()) {
      const IdSpan* blocker = nullptr;
      for (const IdSpan& taken : used) {
        if (Overlaps(pos, pos + size, taken.start, taken.end())) {
          blocker = &taken;
          break;
        }
      }
      if (blocker == nullptr) return static_cast<uint32_t>(pos);
      pos = blocker->end();
    }
  }
  return std::nullopt;
}

// A missing file is an empty one.
absl::StatusOr<std::string> ReadIfExists(const std::string& path) {
  std::ifstream in(path);
  if (!in) {
    if (errno == ENOENT) return std::string();
    return absl::ErrnoToStatus(errno, absl::StrCat("reading ", path));
  }
  std::stringstream content;
  content << in.rdbuf();
  return content.str();
}

std::string PoolSize(const std::vector<IdSpan>& pool) {
  uint64_t total = 0;
  for (const IdSpan& span : pool) total += span.count;
  return absl::StrCat(total);
}

}  // namespace

absl::StatusOr<std::vector<IdSpan>> ParseSubIds(absl::string_view content,
                                                absl::string_view path,
                                                absl::string_view user,
                                                std::optional<uid_t> uid) {
  std::vector<IdSpan> spans;
  int number = 0;
  for (absl::string_view line : absl::StrSplit(content, '\n')) {
    ++number;
    line = absl::StripAsciiWhitespace(line);
    if (line.empty() || line[0] == '#') continue;
    const std::vector<absl::string_view> fields = absl::StrSplit(line, ':');
    const absl::string_view name = fields[0];
    uint32_t name_uid = 0;
    const bool ours =
        name == user || (uid.has_value() && absl::SimpleAtoi(name, &name_uid) &&
                         name_uid == *uid);
    if (!ours) continue;
    uint32_t start = 0, count = 0;
    if (fields.size() != 3 || !absl::SimpleAtoi(fields[1], &start) ||
        !absl::SimpleAtoi(fields[2], &count) || count == 0 ||
        uint64_t{start} + count > kIdLimit - 1) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ":", number, ": \"", line,
                       "\" is not NAME:START:COUNT with ids below 2^32 - 1"));
    }
    spans.push_back({start, count});
  }
  return spans;
}

absl::StatusOr<std::unique_ptr<IdRangeAllocator>> IdRangeAllocator::Create(
    const Options& options) {
  if (options.size == 0) {
    return absl::InvalidArgumentError("--userns_size must be at least 1");
  }
  if (options.base != 0) {
    if (options.base < kFirstUnprivileged) {
      return absl::InvalidArgumentError(
          absl::StrCat("--userns_base ", options.base, " is below ",
                       kFirstUnprivileged, " (the host's own users' ids)"));
    }
    if (options.count < options.size ||
        uint64_t{options.base} + options.count > kIdLimit - 1) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--userns_count ", options.count, " with --userns_base ",
          options.base, ": must hold at least one range of --userns_size ",
          options.size, " and end below 2^32 - 1"));
    }
    const std::vector<IdSpan> pool = {{options.base, options.count}};
    return std::make_unique<IdRangeAllocator>(
        pool, pool, options.size,
        absl::StrCat("--userns_base ", options.base, " --userns_count ",
                     options.count));
  }
  std::optional<uid_t> uid;
  struct passwd entry, *found = nullptr;
  char buffer[4096];
  if (getpwnam_r(options.subid_user.c_str(), &entry, buffer, sizeof(buffer),
                 &found) == 0 &&
      found != nullptr) {
    uid = found->pw_uid;
  }
  std::vector<IdSpan> pools[2];
  const std::string* paths[2] = {&options.subuid_path, &options.subgid_path};
  for (int i = 0; i < 2; ++i) {
    absl::StatusOr<std::string> content = ReadIfExists(*paths[i]);
    if (!content.ok()) return content.status();
    absl::StatusOr<std::vector<IdSpan>> spans =
        ParseSubIds(*content, *paths[i], options.subid_user, uid);
    if (!spans.ok()) return spans.status();
    pools[i] = *std::move(spans);
  }
  return std::make_unique<IdRangeAllocator>(
      std::move(pools[0]), std::move(pools[1]), options.size,
      absl::StrCat("user ", options.subid_user, " in ", options.subuid_path,
                   " and ", options.subgid_path, " (--userns_subid_user)"));
}

IdRangeAllocator::IdRangeAllocator(std::vector<IdSpan> uids,
                                   std::vector<IdSpan> gids, uint32_t size,
                                   std::string source)
    : uid_pool_(std::move(uids)),
      gid_pool_(std::move(gids)),
      size_(size),
      source_(std::move(source)) {}

absl::StatusOr<IdRange> IdRangeAllocator::Allocate(const std::string& task_id) {
  absl::MutexLock lock(&mu_);
  if (auto it = allocated_.find(task_id); it != allocated_.end()) {
    return it->second;
  }
  if (uid_pool_.empty() || gid_pool_.empty()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "task ", task_id, ": --userns auto needs subordinate ids of ", source_,
        ", and ", uid_pool_.empty() ? "the uid" : "the gid",
        " file has none (add a line such as \"berth:100000:65536000\" to "
        "both, or start berth-node with --userns_base)"));
  }
  std::vector<IdSpan> used_uids, used_gids;
  for (const auto& [id, range] : allocated_) {
    used_uids.push_back({range.uid_start, range.size});
    used_gids.push_back({range.gid_start, range.size});
  }
  const std::optional<uint32_t> uid = FirstFit(uid_pool_, used_uids, size_);
  const std::optional<uint32_t> gid = FirstFit(gid_pool_, used_gids, size_);
  if (!uid.has_value() || !gid.has_value()) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "task ", task_id, ": no free range of ", size_, " ",
        !uid ? "uid" : "gid", "s left in ", source_, " (", allocated_.size(),
        " tasks hold one; ", PoolSize(uid_pool_), " uids, ",
        PoolSize(gid_pool_), " gids)"));
  }
  const IdRange range{*uid, *gid, size_};
  allocated_[task_id] = range;
  return range;
}

void IdRangeAllocator::Release(const std::string& task_id) {
  absl::MutexLock lock(&mu_);
  allocated_.erase(task_id);
}

absl::Status IdRangeAllocator::Restore(const std::string& task_id,
                                       const IdRange& range) {
  absl::MutexLock lock(&mu_);
  for (const auto& [id, other] : allocated_) {
    if (id == task_id) continue;
    if (Overlaps(range.uid_start, uint64_t{range.uid_start} + range.size,
                 other.uid_start, uint64_t{other.uid_start} + other.size) ||
        Overlaps(range.gid_start, uint64_t{range.gid_start} + range.size,
                 other.gid_start, uint64_t{other.gid_start} + other.size)) {
      return absl::AlreadyExistsError(absl::StrCat(
          "task ", task_id, ": its user namespace range (uids ",
          range.uid_start, "+", range.size, ", gids ", range.gid_start, "+",
          range.size, ") overlaps task ", id, "'s"));
    }
  }
  allocated_[task_id] = range;
  return absl::OkStatus();
}

}  // namespace berth::node
