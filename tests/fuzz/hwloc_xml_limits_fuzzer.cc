// Fuzzes the hwloc XML pre-scan that runs before hwloc sees a file. Its
// limits are monotone: what passes tight limits passes the defaults.
#include <cstdint>
#include <string_view>

#include "fuzz_check.h"
#include "hwloc_xml_limits.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const bool loose = topology::internal::CheckHwlocXmlLimits(text).ok();
  topology::internal::HwlocXmlLimits tight;
  tight.max_depth = 4;
  tight.max_objects = 8;
  tight.max_elements = 16;
  tight.max_children = 4;
  tight.max_os_index = 7;
  tight.max_distance_objects = 2;
  const bool strict = topology::internal::CheckHwlocXmlLimits(text, tight).ok();
  FUZZ_CHECK(!strict || loose);
  return 0;
}
