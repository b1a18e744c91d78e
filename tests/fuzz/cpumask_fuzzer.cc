// Fuzzes CpuSet::ParseMask: never crashes; ids stay below kMaxCpus.
#include <cstdint>
#include <string_view>

#include "topology/cpu_set.h"

#include "fuzz_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto set = topology::CpuSet::ParseMask(text);
  if (set.ok()) {
    for (int id : set->Ids())
      FUZZ_CHECK(id >= 0 && id < topology::CpuSet::kMaxCpus);
    auto list = topology::CpuSet::ParseList(set->ToList());
    FUZZ_CHECK(list.ok() && *list == *set);
  }
  return 0;
}
