// A fuzz target that crashes on purpose: the machinery's own test (see
// BUILD.bazel). Never part of `tools/dev fuzz all`.

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // Compared byte by byte, so that libFuzzer's coverage leads it there from a
  // seed one byte away ("CRASh").
  if (size >= 5 && data[0] == 'C' && data[1] == 'R' && data[2] == 'A' &&
      data[3] == 'S' && data[4] == 'H') {
    std::abort();
  }
  return 0;
}
