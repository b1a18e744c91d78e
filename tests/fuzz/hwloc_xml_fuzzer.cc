// Fuzzes the hwloc XML version probe and the format 3.0 -> 2.0 rewrite.
#include <cstdint>
#include <string>
#include <string_view>

#include "fuzz_check.h"
#include "hwloc_xml_v3.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  (void)topology::internal::HwlocXmlVersion(text);
  auto converted = topology::internal::ConvertHwlocXml3To2(text);
  if (converted.ok()) {
    // The rewrite only removes or shortens: ids and infos go, osdev types
    // become one digit.
    FUZZ_CHECK(converted->size() <= text.size() + 8);
    FUZZ_CHECK(converted->find("<topology") != std::string::npos);
  }
  return 0;
}
