// PciAddress: a PCI function address (domain:bus:device.function).
//
// Domains are 32-bit: VMD, Hyper-V and some VMs use domains wider than 16
// bits ("10000:00:04.0"). Thread safety: a value type.
#ifndef TOPOLOGY_PCI_ADDRESS_H_
#define TOPOLOGY_PCI_ADDRESS_H_

#include <compare>
#include <cstdint>
#include <string>
#include <string_view>

#include "topology/export.h"
#include "topology/status.h"

namespace topology {

struct TOPOLOGY_EXPORT PciAddress {
  uint32_t domain = 0;
  uint8_t bus = 0;
  uint8_t device = 0;    // 0..31
  uint8_t function = 0;  // 0..7

  // Parses "DDDD:BB:DD.F" (1 to 8 hex digits of domain) or "BB:DD.F"
  // (domain 0). Hex is case-insensitive. Fails with INVALID_ARGUMENT that
  // quotes the text and says which part is wrong.
  static StatusOr<PciAddress> Parse(std::string_view text);

  // Lower-case "dddd:bb:dd.f", the domain at least 4 digits wide.
  std::string ToString() const;

  // True when both name functions of one physical device (same
  // domain:bus:device).
  bool SameSlot(const PciAddress& other) const {
    return domain == other.domain && bus == other.bus && device == other.device;
  }

  // NOLINTNEXTLINE(modernize-use-nullptr): clang-tidy 14 misreads defaulted <=>
  friend auto operator<=>(const PciAddress&, const PciAddress&) = default;
};

}  // namespace topology

#endif  // TOPOLOGY_PCI_ADDRESS_H_
