#include "services/driver/common/init_spec.h"

#include <cerrno>
#include <cstdlib>
#include <cstring>

namespace berth::driver_common {
namespace {

void Put(std::string* out, const char* key, const std::string& value) {
  out->append(key);
  out->push_back('=');
  out->append(value);
  out->push_back('\0');
}

bool ParseUnsigned(const std::string& text, uint64_t* value) {
  if (text.empty() || text[0] < '0' || text[0] > '9') return false;
  errno = 0;
  char* end = nullptr;
  const unsigned long long parsed = std::strtoull(text.c_str(), &end, 10);
  if (errno != 0 || *end != '\0') return false;
  *value = parsed;
  return true;
}

bool ParseSigned(const std::string& text, int64_t* value) {
  if (text.empty()) return false;
  errno = 0;
  char* end = nullptr;
  const long long parsed = std::strtoll(text.c_str(), &end, 10);
  if (errno != 0 || *end != '\0') return false;
  *value = parsed;
  return true;
}

// Splits `line` at spaces into at most `max` fields (the last keeps the rest).
std::vector<std::string> Fields(const std::string& line, size_t max) {
  std::vector<std::string> fields;
  size_t start = 0;
  while (start <= line.size() && fields.size() + 1 < max) {
    const size_t space = line.find(' ', start);
    if (space == std::string::npos) break;
    fields.push_back(line.substr(start, space - start));
    start = space + 1;
  }
  fields.push_back(line.substr(start));
  return fields;
}

std::string WithoutNewline(const std::string& data) {
  if (!data.empty() && data.back() == '\n') {
    return data.substr(0, data.size() - 1);
  }
  return data;
}

}  // namespace

std::string EncodeInitSpec(const InitSpec& spec) {
  std::string out;
  Put(&out, "path", spec.path);
  for (const std::string& arg : spec.args) Put(&out, "arg", arg);
  for (const std::string& env : spec.env) Put(&out, "env", env);
  Put(&out, "uid", std::to_string(spec.uid));
  Put(&out, "gid", std::to_string(spec.gid));
  for (gid_t group : spec.groups) Put(&out, "group", std::to_string(group));
  Put(&out, "cwd", spec.cwd);
  Put(&out, "tty", spec.tty ? "1" : "0");
  Put(&out, "hostname", spec.hostname);
  Put(&out, "netns", spec.netns);
  for (const std::string& procs : spec.cgroup_procs) {
    Put(&out, "cgroup_procs", procs);
  }
  Put(&out, "log_dir", spec.log_dir);
  Put(&out, "log_max_bytes", std::to_string(spec.log_max_bytes));
  Put(&out, "log_max_files", std::to_string(spec.log_max_files));
  Put(&out, "exit_file", spec.exit_file);
  return out;
}

bool DecodeInitSpec(const std::string& data, InitSpec* spec,
                    std::string* error) {
  *spec = InitSpec();
  if (!data.empty() && data.back() != '\0') {
    *error = "the spec does not end with a NUL byte";
    return false;
  }
  size_t start = 0;
  while (start < data.size()) {
    const size_t end = data.find('\0', start);
    const std::string record = data.substr(start, end - start);
    start = end + 1;
    const size_t eq = record.find('=');
    if (eq == std::string::npos) {
      *error = "record without '=': " + record;
      return false;
    }
    const std::string key = record.substr(0, eq);
    const std::string value = record.substr(eq + 1);
    uint64_t number = 0;
    const auto need_number = [&]() {
      if (ParseUnsigned(value, &number)) return true;
      *error = key + " is not a number: " + value;
      return false;
    };
    if (key == "path") {
      spec->path = value;
    } else if (key == "arg") {
      spec->args.push_back(value);
    } else if (key == "env") {
      spec->env.push_back(value);
    } else if (key == "uid") {
      if (!need_number()) return false;
      spec->uid = static_cast<uid_t>(number);
    } else if (key == "gid") {
      if (!need_number()) return false;
      spec->gid = static_cast<gid_t>(number);
    } else if (key == "group") {
      if (!need_number()) return false;
      spec->groups.push_back(static_cast<gid_t>(number));
    } else if (key == "cwd") {
      spec->cwd = value;
    } else if (key == "tty") {
      spec->tty = value == "1";
    } else if (key == "hostname") {
      spec->hostname = value;
    } else if (key == "netns") {
      spec->netns = value;
    } else if (key == "cgroup_procs") {
      spec->cgroup_procs.push_back(value);
    } else if (key == "log_dir") {
      spec->log_dir = value;
    } else if (key == "log_max_bytes") {
      if (!need_number()) return false;
      spec->log_max_bytes = number;
    } else if (key == "log_max_files") {
      if (!need_number()) return false;
      spec->log_max_files = static_cast<uint32_t>(number);
    } else if (key == "exit_file") {
      spec->exit_file = value;
    } else {
      *error = "unknown key " + key;
      return false;
    }
  }
  if (spec->path.empty() || spec->args.empty()) {
    *error = "path and arg are required";
    return false;
  }
  return true;
}

std::string EncodeExitRecord(const ExitRecord& record) {
  return "berth-exit v1 " + std::to_string(record.exit_code) + " " +
         std::to_string(record.signal) + " " +
         std::to_string(record.exited_at_unix_nanos) + "\n";
}

bool DecodeExitRecord(const std::string& data, ExitRecord* record) {
  const std::vector<std::string> fields = Fields(WithoutNewline(data), 5);
  if (fields.size() != 5 || fields[0] != "berth-exit" || fields[1] != "v1") {
    return false;
  }
  int64_t code = 0, signal = 0, nanos = 0;
  if (!ParseSigned(fields[2], &code) || !ParseSigned(fields[3], &signal) ||
      !ParseSigned(fields[4], &nanos)) {
    return false;
  }
  record->exit_code = static_cast<int>(code);
  record->signal = static_cast<int>(signal);
  record->exited_at_unix_nanos = nanos;
  return true;
}

std::string EncodeInitReport(const InitReport& report) {
  switch (report.kind) {
    case InitReport::Kind::kStarted:
      return "started\n";
    case InitReport::Kind::kExited:
      return "exit " + std::to_string(report.wait_status) + "\n";
    case InitReport::Kind::kFailed:
      break;
  }
  std::string what = report.what;
  for (char& c : what) {
    if (c == '\n') c = ' ';
  }
  return "error " + std::to_string(report.error_number) + " " + what + "\n";
}

bool DecodeInitReport(const std::string& data, InitReport* report) {
  *report = InitReport();
  const std::string line = WithoutNewline(data);
  if (line == "started") {
    report->kind = InitReport::Kind::kStarted;
    return true;
  }
  const std::vector<std::string> fields = Fields(line, 3);
  int64_t number = 0;
  if (fields.size() == 2 && fields[0] == "exit" &&
      ParseSigned(fields[1], &number)) {
    report->kind = InitReport::Kind::kExited;
    report->wait_status = static_cast<int>(number);
    return true;
  }
  if (fields.size() == 3 && fields[0] == "error" &&
      ParseSigned(fields[1], &number)) {
    report->kind = InitReport::Kind::kFailed;
    report->error_number = static_cast<int>(number);
    report->what = fields[2];
    return true;
  }
  return false;
}

}  // namespace berth::driver_common
