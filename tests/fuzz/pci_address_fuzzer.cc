// Fuzzes PciAddress::Parse: parsed addresses print and parse back unchanged,
// and the canonical form's fast path agrees with the general parser (the
// same text behind a leading zero of the domain takes the general path;
// text starting with a blank is trimmed first, so not compared).
#include <cctype>
#include <cstdint>
#include <string>
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
  if (size == 12 && std::isxdigit(static_cast<unsigned char>(text[0]))) {
    auto general = topology::PciAddress::Parse("0" + std::string(text));
    FUZZ_CHECK(general.ok() == address.ok());
    FUZZ_CHECK(!address.ok() || *general == *address);
  }
  return 0;
}
