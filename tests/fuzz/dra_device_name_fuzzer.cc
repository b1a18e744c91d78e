// Fuzzes the DRA driver's reader of a device name from a claim's
// allocation (what the API server says the scheduler chose): never crashes;
// what it accepts names an address whose own name is exactly the input.
#include <cstdint>
#include <string_view>

#include "topology/dra_attributes.h"

#include "fuzz_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const auto address = topology::dra::AddressOfPciDeviceName(text);
  if (address) {
    FUZZ_CHECK(topology::dra::PciDeviceName(*address) == text);
  }
  return 0;
}
