#include "services/netns_hook/allocation_store.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "base/io.h"
#include "base/unique_fd.h"
#include "google/protobuf/util/json_util.h"

namespace berth::netns_hook {
namespace {

using nlohmann::json;

// A proto message as JSON (protobuf's JSON mapping), inside our record.
template <typename Message>
json ProtoToJson(const Message& message) {
  std::string text;
  google::protobuf::util::JsonPrintOptions options;
  options.preserve_proto_field_names = true;
  (void)google::protobuf::util::MessageToJsonString(message, &text, options);
  return json::parse(text, nullptr, /*allow_exceptions=*/false);
}

template <typename Message>
bool ProtoFromJson(const json& value, Message* message) {
  return google::protobuf::util::JsonStringToMessage(value.dump(), message)
      .ok();
}

absl::Status WriteFileAtomically(const std::string& path,
                                 const std::string& content) {
  const std::string temporary = path + ".tmp";
  base::UniqueFd fd(
      open(temporary.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600));
  if (!fd.valid())
    return absl::ErrnoToStatus(errno, absl::StrCat("creating ", temporary));
  if (absl::Status written = base::WriteAll(fd.get(), content, temporary);
      !written.ok()) {
    return written;
  }
  if (fsync(fd.get()) != 0) {
    return absl::ErrnoToStatus(errno, absl::StrCat("fsync ", temporary));
  }
  fd.reset();
  if (rename(temporary.c_str(), path.c_str()) != 0) {
    return absl::ErrnoToStatus(
        errno, absl::StrCat("renaming ", temporary, " to ", path));
  }
  // The rename itself must survive a crash too.
  const std::string dir = path.substr(0, path.find_last_of('/'));
  const base::UniqueFd dir_fd(
      open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (dir_fd.valid()) fsync(dir_fd.get());
  return absl::OkStatus();
}

}  // namespace

std::string PhaseName(AllocationRecord::Phase phase) {
  switch (phase) {
    case AllocationRecord::Phase::kCreating:
      return "creating";
    case AllocationRecord::Phase::kReady:
      return "ready";
    case AllocationRecord::Phase::kDeleting:
      return "deleting";
  }
  return "unknown";
}

absl::Status CheckAllocationId(absl::string_view id) {
  if (id.empty() || id.size() > 64 || id[0] == '.' || id[0] == '-') {
    return absl::InvalidArgumentError(absl::StrCat(
        "allocation_id \"", id,
        "\" must be 1 to 64 letters, digits, '.', '_' or '-', not starting "
        "with '.' or '-'"));
  }
  for (char c : id) {
    if (!absl::ascii_isalnum(c) && c != '.' && c != '_' && c != '-') {
      return absl::InvalidArgumentError(
          absl::StrCat("allocation_id \"", id, "\" has '", std::string(1, c),
                       "': only letters, digits, '.', '_' and '-'"));
    }
  }
  return absl::OkStatus();
}

json RecordToJson(const AllocationRecord& record) {
  json out;
  out["version"] = 1;
  out["allocation_id"] = record.allocation_id;
  out["mode"] = network::v1::NetworkMode_Name(record.mode);
  out["phase"] = PhaseName(record.phase);
  out["namespace_name"] = record.namespace_name;
  out["namespace_path"] = record.namespace_path;
  out["namespace_made"] = record.namespace_made;
  out["cni_network"] = record.cni_network;
  out["interface_name"] = record.interface_name;
  out["cni_added"] = record.cni_added;
  out["cni_result"] = record.cni_result;
  json mappings = json::array();
  for (const auto& mapping : record.port_mappings) {
    mappings.push_back(ProtoToJson(mapping));
  }
  out["port_mappings"] = mappings;
  out["dns"] = ProtoToJson(record.dns);
  out["hostname"] = record.hostname;
  out["created_at_unix_nanos"] = absl::ToUnixNanos(record.created_at);
  return out;
}

absl::StatusOr<AllocationRecord> RecordFromJson(const json& in) {
  AllocationRecord record;
  auto field = [&](const char* name, json::value_t type) -> const json* {
    auto it = in.find(name);
    if (it == in.end() || it->type() != type) return nullptr;
    return &*it;
  };
  auto bad = [](absl::string_view name) {
    return absl::InvalidArgumentError(
        absl::StrCat("field \"", name, "\" is missing or has the wrong type"));
  };
  if (!in.is_object()) return absl::InvalidArgumentError("not a JSON object");
  // 1 read from a file is unsigned; made in memory (RecordToJson), signed.
  if (auto version = in.find("version");
      version == in.end() || !version->is_number_integer() || *version != 1) {
    return bad("version");
  }
  for (const char* name :
       {"allocation_id", "mode", "phase", "namespace_name", "namespace_path",
        "cni_network", "interface_name", "hostname"}) {
    if (field(name, json::value_t::string) == nullptr) return bad(name);
  }
  for (const char* name : {"namespace_made", "cni_added"}) {
    if (field(name, json::value_t::boolean) == nullptr) return bad(name);
  }
  record.allocation_id = in["allocation_id"].get<std::string>();
  // It names files and namespaces the reconcile removes: never a path.
  if (absl::Status status = CheckAllocationId(record.allocation_id);
      !status.ok()) {
    return status;
  }
  if (!network::v1::NetworkMode_Parse(in["mode"].get<std::string>(),
                                      &record.mode)) {
    return bad("mode");
  }
  const std::string phase = in["phase"].get<std::string>();
  if (phase == "creating") {
    record.phase = AllocationRecord::Phase::kCreating;
  } else if (phase == "ready") {
    record.phase = AllocationRecord::Phase::kReady;
  } else if (phase == "deleting") {
    record.phase = AllocationRecord::Phase::kDeleting;
  } else {
    return bad("phase");
  }
  record.namespace_name = in["namespace_name"].get<std::string>();
  record.namespace_path = in["namespace_path"].get<std::string>();
  record.namespace_made = in["namespace_made"].get<bool>();
  record.cni_network = in["cni_network"].get<std::string>();
  record.interface_name = in["interface_name"].get<std::string>();
  record.cni_added = in["cni_added"].get<bool>();
  record.hostname = in["hostname"].get<std::string>();
  if (auto it = in.find("cni_result"); it != in.end()) {
    record.cni_result = *it;
  }
  if (auto it = in.find("port_mappings"); it != in.end() && it->is_array()) {
    for (const json& mapping : *it) {
      network::v1::PortMapping parsed;
      if (!ProtoFromJson(mapping, &parsed)) return bad("port_mappings");
      record.port_mappings.push_back(parsed);
    }
  }
  if (auto it = in.find("dns"); it != in.end() && !it->is_null()) {
    if (!ProtoFromJson(*it, &record.dns)) return bad("dns");
  }
  if (auto it = in.find("created_at_unix_nanos");
      it != in.end() && it->is_number_integer()) {
    record.created_at = absl::FromUnixNanos(it->get<int64_t>());
  }
  return record;
}

AllocationStore::AllocationStore(std::string dir) : dir_(std::move(dir)) {}

std::string AllocationStore::PathOf(absl::string_view allocation_id) const {
  return absl::StrCat(dir_, "/", allocation_id, ".json");
}

absl::Status AllocationStore::Prepare() const {
  std::string path;
  for (absl::string_view part : absl::StrSplit(dir_, '/', absl::SkipEmpty())) {
    absl::StrAppend(&path, "/", part);
    if (mkdir(path.c_str(), 0700) != 0 && errno != EEXIST) {
      return absl::ErrnoToStatus(
          errno, absl::StrCat("making the state directory ", path));
    }
  }
  DIR* dir = opendir(dir_.c_str());
  if (dir == nullptr) {
    return absl::ErrnoToStatus(errno, absl::StrCat("listing ", dir_));
  }
  std::vector<std::string> half_written;
  while (struct dirent* entry = readdir(dir)) {
    if (absl::EndsWith(entry->d_name, ".json.tmp")) {
      half_written.push_back(absl::StrCat(dir_, "/", entry->d_name));
    }
  }
  closedir(dir);
  for (const std::string& file : half_written) {
    if (unlink(file.c_str()) != 0 && errno != ENOENT) {
      return absl::ErrnoToStatus(
          errno, absl::StrCat("removing the half-written ", file));
    }
  }
  return absl::OkStatus();
}

absl::Status AllocationStore::Write(const AllocationRecord& record) const {
  if (absl::Status status = CheckAllocationId(record.allocation_id);
      !status.ok()) {
    return status;
  }
  return WriteFileAtomically(PathOf(record.allocation_id),
                             RecordToJson(record).dump(2) + "\n");
}

absl::StatusOr<std::optional<AllocationRecord>> AllocationStore::Read(
    absl::string_view allocation_id) const {
  const std::string path = PathOf(allocation_id);
  std::ifstream in(path);
  if (!in) {
    if (errno == ENOENT) return std::optional<AllocationRecord>();
    return absl::ErrnoToStatus(errno, absl::StrCat("reading ", path));
  }
  std::stringstream content;
  content << in.rdbuf();
  const json parsed =
      json::parse(content.str(), nullptr, /*allow_exceptions=*/false);
  absl::StatusOr<AllocationRecord> record = RecordFromJson(parsed);
  if (!record.ok()) {
    return absl::DataLossError(
        absl::StrCat(path, ": ", record.status().message()));
  }
  return std::optional<AllocationRecord>(*std::move(record));
}

absl::Status AllocationStore::Remove(absl::string_view allocation_id) const {
  const std::string path = PathOf(allocation_id);
  if (unlink(path.c_str()) != 0 && errno != ENOENT) {
    return absl::ErrnoToStatus(errno, absl::StrCat("removing ", path));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<AllocationRecord>> AllocationStore::List() const {
  std::vector<AllocationRecord> records;
  DIR* dir = opendir(dir_.c_str());
  if (dir == nullptr) {
    if (errno == ENOENT) return records;
    return absl::ErrnoToStatus(errno, absl::StrCat("listing ", dir_));
  }
  std::vector<std::string> ids;
  while (struct dirent* entry = readdir(dir)) {
    absl::string_view name = entry->d_name;
    if (absl::ConsumeSuffix(&name, ".json") && !name.empty()) {
      ids.emplace_back(name);
    }
  }
  closedir(dir);
  std::sort(ids.begin(), ids.end());
  for (const std::string& id : ids) {
    absl::StatusOr<std::optional<AllocationRecord>> record = Read(id);
    if (!record.ok()) return record.status();
    if (record->has_value()) records.push_back(**record);
  }
  return records;
}

}  // namespace berth::netns_hook
