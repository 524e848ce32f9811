// What the programs of tools/bench share: the figures they measure, printed in
// one line format that exec_driver.sh collects across rounds, and a byte
// pattern that a receiver checks without keeping what it received.
//
// Every program prints, on stdout, one line per timed repetition as it is
// measured and one line per figure at its end:
//
//   sample NAME VALUE UNIT
//   median NAME VALUE UNIT n=N min=MIN max=MAX
//
// NAME has no spaces (e.g. "driver_start"); UNIT is "ms" or "MB/s" (10^6
// bytes per second). Anything else a program prints starts with another word.

#ifndef TOOLS_BENCH_FIGURES_H_
#define TOOLS_BENCH_FIGURES_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/string_view.h"

namespace berth::bench {

// The samples of one figure.
class Figure {
 public:
  Figure(std::string name, std::string unit)
      : name_(std::move(name)), unit_(std::move(unit)) {}

  // Records one repetition and prints its "sample" line (flushed at once, so
  // that a reader sees progress and what was measured before a failure).
  void Add(double value);

  const std::string& name() const { return name_; }
  const std::vector<double>& samples() const { return samples_; }

  // The median (the mean of the two middle samples for an even count); 0
  // without samples.
  double Median() const;

  // "median NAME VALUE UNIT n=N min=MIN max=MAX"; "" without samples.
  std::string MedianLine() const;

 private:
  const std::string name_;
  const std::string unit_;
  std::vector<double> samples_;
};

// The median of `values`, as Figure::Median.
double Median(std::vector<double> values);

// A stream of bytes that the receiving side checks as it arrives: byte i of
// the stream is Block()[i % kPeriod], pseudo-random bytes. The period is not a
// multiple of any power of two, so a lost, repeated or reordered frame of any
// usual size shows as a mismatch.
class StreamPattern {
 public:
  static constexpr size_t kPeriod = (size_t{1} << 20) + 7;

  StreamPattern();

  // Writes the bytes [offset, offset + size) of the stream to `out`.
  void Fill(uint64_t offset, char* out, size_t size) const;

  // Whether `data` equals the bytes [offset, offset + data.size()).
  bool Matches(uint64_t offset, absl::string_view data) const;

 private:
  std::string block_;
};

// "1 GiB", "4 MiB", "1000 B": for messages.
std::string FormatBytes(uint64_t bytes);

}  // namespace berth::bench

#endif  // TOOLS_BENCH_FIGURES_H_
