// Fuzzes berth-proxy's state files (StateStore: one record a file, a field
// a line, C-escaped), which it reads back after its own restart:
//  - the input as is, as a sandbox record and a session record: Load must
//    not crash and gives at most one of each;
//  - the input split at NUL bytes into fields, stored with PutSandbox (two
//    fields) or PutSession (four) into another store: Load must give the
//    very record back (escaping round-trips, whatever the bytes).
// Everything under a fresh temporary directory, removed after the run.

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "services/proxy/state_store.h"
#include "tools/fuzz/fuzz_files.h"
#include "tools/fuzz/fuzz_util.h"

namespace {

using berth::fuzz::CreateFile;
using berth::fuzz::Require;
using berth::proxy::StateStore;

StateStore OpenStore(const std::string& dir) {
  absl::StatusOr<StateStore> store = StateStore::Open(dir);
  Require(store.ok(), store.status().ToString());
  return *std::move(store);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  berth::fuzz::QuietLogging();  // skipped records warn
  if (size > (16 << 10)) return 0;
  const absl::string_view input = berth::fuzz::AsText(data, size);
  const berth::fuzz::ScopedTempDir temp("berth-proxy-state-fuzz");
  const std::string& dir = temp.path();

  // The bytes as they might be found after a crash or by tampering.
  {
    const StateStore store = OpenStore(dir + "/raw");
    const std::string name = absl::BytesToHexString("fuzz");
    CreateFile(absl::StrCat(store.dir(), "/sandboxes/", name), input);
    CreateFile(absl::StrCat(store.dir(), "/sessions/", name), input);
    const StateStore::State state = store.Load();
    Require(state.sandboxes.size() <= 1 && state.sessions.size() <= 1,
            "one file gave several records");
  }

  // The bytes as fields: what is stored is what is loaded.
  const std::vector<std::string> fields = absl::StrSplit(input, '\0');
  if (fields.size() == 2 || fields.size() == 4) {
    const StateStore store = OpenStore(dir + "/fields");
    if (fields.size() == 2) {
      const StateStore::SandboxRecord record{fields[0], fields[1]};
      // A file name is the id's hex: an id over 127 bytes cannot be one.
      if (store.PutSandbox(record).ok()) {
        const StateStore::State state = store.Load();
        Require(state.sandboxes.size() == 1,
                absl::StrCat("a stored sandbox record is not loaded: ",
                             absl::CHexEscape(input)));
        Require(state.sandboxes[0].sandbox_id == record.sandbox_id &&
                    state.sandboxes[0].target == record.target,
                "a sandbox record loads as another");
      }
    } else {
      const StateStore::SessionRecord record{fields[0], fields[1], fields[2],
                                             fields[3]};
      if (store.PutSession(record).ok()) {
        const StateStore::State state = store.Load();
        Require(state.sessions.size() == 1,
                absl::StrCat("a stored session record is not loaded: ",
                             absl::CHexEscape(input)));
        const StateStore::SessionRecord& loaded = state.sessions[0];
        Require(loaded.token == record.token &&
                    loaded.sandbox_id == record.sandbox_id &&
                    loaded.container_id == record.container_id &&
                    loaded.process_id == record.process_id,
                "a session record loads as another");
      }
    }
  }
  return 0;
}
