// Fuzzes PciAddress::Parse: parsed addresses print and parse back unchanged.
#include <cstdint>
#include <string_view>

#include "topology/pci_address.h"

#include "fuzz_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto address = topology::PciAddress::Parse(text);
  if (address.ok()) {
    FUZZ_CHECK(address->device < 32 && address->function < 8);
    auto again = topology::PciAddress::Parse(address->ToString());
    FUZZ_CHECK(again.ok() && *again == *address);
  }
  return 0;
}
