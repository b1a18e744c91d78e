// Fuzzes the PCIe capability walk over raw configuration space and the sysfs
// path parser: bounded, never reads out of range.
#include <cstdint>
#include <string_view>

#include "fuzz_check.h"
#include "pci_path.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  (void)topology::internal::ParsePciePortType(bytes);
  const auto path = topology::internal::ParsePciPath(bytes);
  FUZZ_CHECK(path.bridges_root_first.size() == path.bridge_dirs.size());
  return 0;
}
