// Replays a fuzz target's inputs without libFuzzer: the main of every
// <name>_corpus_test made by berth_fuzz_target (tools/fuzz/fuzz.bzl).
//
//   replay PATH...
//
// Each PATH is a file (one input) or a directory (each regular file in it,
// in name order, one input each; not recursive). Every input is read whole
// and handed to LLVMFuzzerTestOneInput once. A crash (an abort, a failed
// CHECK, a sanitizer report) ends the process, naming the input on stderr
// first; an input that cannot be read, a directory holding no input or no
// PATH at all is an error too (exit 1): a corpus test that replays nothing
// proves nothing.

#include <dirent.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <memory>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);
// Optional, as in libFuzzer.
extern "C" int LLVMFuzzerInitialize(int* argc, char*** argv)
    __attribute__((weak));

namespace {

bool ReadFile(const std::string& path, std::string* out) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return false;
  out->assign(std::istreambuf_iterator<char>(in),
              std::istreambuf_iterator<char>());
  return !in.bad();
}

// Appends the inputs named by `path`; false (with a message) on an error.
bool Collect(const std::string& path, std::vector<std::string>* inputs) {
  struct stat st;
  if (stat(path.c_str(), &st) != 0) {
    std::fprintf(stderr, "replay: %s: %s\n", path.c_str(),
                 std::strerror(errno));
    return false;
  }
  if (!S_ISDIR(st.st_mode)) {
    inputs->push_back(path);
    return true;
  }
  DIR* dir = opendir(path.c_str());
  if (dir == nullptr) {
    std::fprintf(stderr, "replay: %s: %s\n", path.c_str(),
                 std::strerror(errno));
    return false;
  }
  std::vector<std::string> found;
  while (struct dirent* entry = readdir(dir)) {
    std::string child = path + "/" + entry->d_name;
    struct stat child_st;
    if (stat(child.c_str(), &child_st) == 0 && S_ISREG(child_st.st_mode)) {
      found.push_back(child);
    }
  }
  closedir(dir);
  if (found.empty()) {
    std::fprintf(stderr, "replay: directory %s holds no input\n", path.c_str());
    return false;
  }
  std::sort(found.begin(), found.end());
  inputs->insert(inputs->end(), found.begin(), found.end());
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  if (LLVMFuzzerInitialize != nullptr) LLVMFuzzerInitialize(&argc, &argv);
  std::vector<std::string> inputs;
  for (int i = 1; i < argc; ++i) {
    // libFuzzer's flags (-runs=..., -max_len=...) are accepted and ignored, so
    // that a command line meant for the fuzz binary replays too.
    if (argv[i][0] == '-') continue;
    if (!Collect(argv[i], &inputs)) return 1;
  }
  if (inputs.empty()) {
    std::fprintf(stderr,
                 "replay: no input given: pass seed files or directories "
                 "(berth_fuzz_target's corpus is empty?)\n");
    return 1;
  }
  std::string data;
  for (const std::string& input : inputs) {
    if (!ReadFile(input, &data)) {
      std::fprintf(stderr, "replay: cannot read %s\n", input.c_str());
      return 1;
    }
    // Said before the call, so that a crash's report follows the input's name.
    std::fprintf(stderr, "replay: %s (%zu bytes)\n", input.c_str(),
                 data.size());
    // A copy of exactly `size` bytes on the heap, as libFuzzer hands it: a read
    // past its end is caught under ASan.
    // Never null, even when empty, as libFuzzer's.
    std::unique_ptr<uint8_t[]> copy(new uint8_t[data.size()]);
    std::memcpy(copy.get(), data.data(), data.size());
    LLVMFuzzerTestOneInput(copy.get(), data.size());
  }
  std::fprintf(stderr, "replay: %zu input(s) replayed, none crashed\n",
               inputs.size());
  return 0;
}
