// Enumeration and identity of PCI functions through libpci, pointed at
// <host root>/sys/bus/pci and kept from ending the process.
//
// libpci's error hook is declared no-return and its default calls exit(1),
// e.g. on a device directory without a vendor file. Two guards keep a linked
// plugin alive: every file libpci would treat as mandatory is checked first
// (a tree that fails the check is not given to libpci at all), and the error
// hook jumps back out of libpci should anything else go wrong.
#ifndef TOPOLOGY_SRC_LIBPCI_SCANNER_H_
#define TOPOLOGY_SRC_LIBPCI_SCANNER_H_

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "topology/pci_address.h"
#include "topology/status.h"

namespace topology::internal {

struct LibpciIdentity {
  PciAddress address;
  uint32_t class_code = 0;  // 24-bit
  uint16_t vendor_id = 0;
  uint16_t device_id = 0;
  uint16_t subsystem_vendor_id = 0;
  uint16_t subsystem_device_id = 0;
  uint8_t revision = 0;
  std::optional<std::string> physical_slot;
};

// Checks that libpci can scan <host_root>/sys/bus/pci/devices without calling
// its error hook or blocking: every entry name round-trips as libpci prints it,
// the files it must open exist, and none of the files it may open is a FIFO
// or device node. Fails with FAILED_PRECONDITION naming the first offender.
// (Oversized values are left to the error-hook guard.)
Status CheckLibpciCanScan(const std::filesystem::path& host_root,
                          const std::vector<std::string>& entries);

// Scans <host_root>/sys/bus/pci with libpci; `expected_devices` sizes the
// result buffer (a larger tree costs a second scan). Fails with UNAVAILABLE
// carrying libpci's own message if its error hook fires anyway.
StatusOr<std::vector<LibpciIdentity>> ScanWithLibpci(
    const std::filesystem::path& host_root, size_t expected_devices);

}  // namespace topology::internal

#endif  // TOPOLOGY_SRC_LIBPCI_SCANNER_H_
