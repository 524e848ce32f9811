#include "tools/bench/figures.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/string_view.h"

namespace berth::bench {

double Median(std::vector<double> values) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const size_t middle = values.size() / 2;
  if (values.size() % 2 == 1) return values[middle];
  return (values[middle - 1] + values[middle]) / 2;
}

void Figure::Add(double value) {
  samples_.push_back(value);
  std::printf("sample %s %.4f %s\n", name_.c_str(), value, unit_.c_str());
  std::fflush(stdout);
}

double Figure::Median() const { return bench::Median(samples_); }

std::string Figure::MedianLine() const {
  if (samples_.empty()) return "";
  const auto [min, max] = std::minmax_element(samples_.begin(), samples_.end());
  return absl::StrFormat("median %s %.4f %s n=%d min=%.4f max=%.4f", name_,
                         Median(), unit_, samples_.size(), *min, *max);
}

StreamPattern::StreamPattern() : block_(kPeriod, '\0') {
  // xorshift64*: cheap, and no byte pattern a pipe or socket could fake.
  uint64_t state = 0x9E3779B97F4A7C15ULL;
  for (size_t i = 0; i < block_.size(); i += 8) {
    state ^= state >> 12;
    state ^= state << 25;
    state ^= state >> 27;
    uint64_t word = state * 0x2545F4914F6CDD1DULL;
    for (size_t j = i; j < i + 8 && j < block_.size(); ++j) {
      block_[j] = static_cast<char>(word & 0xff);
      word >>= 8;
    }
  }
}

void StreamPattern::Fill(uint64_t offset, char* out, size_t size) const {
  while (size > 0) {
    const size_t position = offset % kPeriod;
    const size_t length = std::min(size, kPeriod - position);
    std::memcpy(out, block_.data() + position, length);
    out += length;
    offset += length;
    size -= length;
  }
}

bool StreamPattern::Matches(uint64_t offset, absl::string_view data) const {
  while (!data.empty()) {
    const size_t position = offset % kPeriod;
    const size_t length = std::min(data.size(), kPeriod - position);
    if (std::memcmp(data.data(), block_.data() + position, length) != 0) {
      return false;
    }
    data.remove_prefix(length);
    offset += length;
  }
  return true;
}

std::string FormatBytes(uint64_t bytes) {
  if (bytes >= (uint64_t{1} << 30) && bytes % (uint64_t{1} << 30) == 0) {
    return absl::StrCat(bytes >> 30, " GiB");
  }
  if (bytes >= (uint64_t{1} << 20) && bytes % (uint64_t{1} << 20) == 0) {
    return absl::StrCat(bytes >> 20, " MiB");
  }
  if (bytes >= (uint64_t{1} << 10) && bytes % (uint64_t{1} << 10) == 0) {
    return absl::StrCat(bytes >> 10, " KiB");
  }
  return absl::StrCat(bytes, " B");
}

}  // namespace berth::bench
