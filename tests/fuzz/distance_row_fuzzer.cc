// Fuzzes the NUMA distance-row, node meminfo and hugepages-entry parsers.
#include <cstdint>
#include <string_view>

#include "fuzz_check.h"
#include "kernel_text.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto row = topology::internal::ParseDistanceRow(text);
  if (row.ok()) {
    FUZZ_CHECK(!row->empty());
    for (int d : *row) FUZZ_CHECK(d > 0);
  }
  (void)topology::internal::ParseNodeMemTotal(text);
  if (auto page = topology::internal::ParseHugePagesDirName(text); page.ok()) {
    FUZZ_CHECK(*page > 0 && *page % 1024 == 0);
  }
  (void)topology::internal::ParseDecimal(text);
  (void)topology::internal::ParseHex(text, 24);
  return 0;
}
