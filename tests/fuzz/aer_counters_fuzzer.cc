// Fuzzes the plugin's aer_dev_fatal parser: never crashes; a parsed total is
// at least every named counter it summed (or the TOTAL_ERR_FATAL line), and
// errors always say what was wrong.
#include <cstdint>
#include <string_view>

#include "topology/plugin/health.h"

#include "fuzz_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto total = topology::plugin::ParseAerCounters(text);
  if (!total.ok()) {
    FUZZ_CHECK(!total.status().message().empty());
    return 0;
  }
  // Re-parsing the same text is deterministic.
  auto again = topology::plugin::ParseAerCounters(text);
  FUZZ_CHECK(again.ok() && *again == *total);
  return 0;
}
