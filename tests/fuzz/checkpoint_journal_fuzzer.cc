// Fuzzes the checkpoint journal's replay: never crashes or throws; the
// applied prefix is whole lines; damage is named; what it applied, written
// again as records, replays to the same checkpoint.
#include <cstdint>
#include <string>
#include <string_view>

#include "checkpoint.h"
#include "fuzz_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  topology::host::Checkpoint checkpoint;
  const auto replay = topology::host::ReplayJournal(text, checkpoint);
  // Zeros after the records are space written ahead, not damage.
  const std::string_view records = topology::host::JournalRecords(text);
  FUZZ_CHECK(records.find_last_not_of('\0') + 1 == records.size());
  FUZZ_CHECK(replay.valid_bytes <= records.size());
  FUZZ_CHECK(replay.valid_bytes == 0 || text[replay.valid_bytes - 1] == '\n');
  FUZZ_CHECK(replay.damage.empty() == (replay.valid_bytes == records.size()));
  FUZZ_CHECK(!replay.torn_tail || !replay.damage.empty());
  std::string again;
  for (const auto& pod : checkpoint.pods) {
    again += topology::host::EncodeAdmitRecord(pod);
  }
  for (const auto& [name, healthy] : checkpoint.registered) {
    again += topology::host::EncodeResourceRecord(name, healthy);
  }
  if (checkpoint.memory) {
    again += topology::host::EncodeMemoryRecord(*checkpoint.memory);
  }
  topology::host::Checkpoint rebuilt;
  const auto second = topology::host::ReplayJournal(again, rebuilt);
  FUZZ_CHECK(second.damage.empty());
  FUZZ_CHECK(topology::host::EncodeCheckpoint(rebuilt) ==
             topology::host::EncodeCheckpoint(checkpoint));
  return 0;
}
