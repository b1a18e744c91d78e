// Fuzzes CpuSet::ParseList: never crashes or hangs; a parsed set prints to a
// list that parses back to the same set.
#include <cstdint>
#include <string_view>

#include "topology/cpu_set.h"

#include "fuzz_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto set = topology::CpuSet::ParseList(text);
  if (set.ok()) {
    auto again = topology::CpuSet::ParseList(set->ToList());
    FUZZ_CHECK(again.ok());
    FUZZ_CHECK(*again == *set);
  } else {
    FUZZ_CHECK(!set.status().message().empty());
  }
  return 0;
}
