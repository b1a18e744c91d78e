// The PCIe path of a device: parsing the canonical sysfs path into the host
// bridge and the chain of bridges, and telling switch ports apart.
#ifndef TOPOLOGY_SRC_PCI_PATH_H_
#define TOPOLOGY_SRC_PCI_PATH_H_

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "topology/pci_address.h"

namespace topology::internal {

struct PciPath {
  // "pciDDDD:BB", or empty when the path shows no host bridge (a trimmed
  // recording with plain directories).
  std::string host_bridge;
  // Bridges from the root port down to the device's parent (root first). The
  // device itself is not included.
  std::vector<PciAddress> bridges_root_first;
  // The canonical directory of each bridge, relative to the sysfs root.
  std::vector<std::string> bridge_dirs;
};

// Parses a canonical device path relative to the sysfs root
// ("devices/pci0000:17/0000:17:00.0/0000:18:00.0/0000:1b:00.0"). Components
// that are not PCI addresses (pci_bus, port services "0000:17:00.0:pcie001")
// are skipped. The last PCI component is the device itself.
PciPath ParsePciPath(std::string_view canonical_path);

// PCIe port types from the Express capability (PCI_EXP_FLAGS_TYPE).
enum class PciePortType {
  kEndpoint = 0,
  kLegacyEndpoint = 1,
  kRootPort = 4,
  kUpstreamPort = 5,
  kDownstreamPort = 6,
  kPcieToPciBridge = 7,
  kPciToPcieBridge = 8,
  kRootComplexEndpoint = 9,
  kRootComplexEventCollector = 10,
};

// Reads the port type from raw configuration space by walking the capability
// list. nullopt when the capability is not readable (unprivileged reads and
// recordings only hold 64 bytes) or the list is malformed. Never reads past
// `config`.
std::optional<PciePortType> ParsePciePortType(std::string_view config);

// For each bridge of a root-first chain, whether it is the upstream port of a
// PCIe switch. `port_types[i]` is the bridge's type when known. Known types
// decide; otherwise the chain's shape decides: below the root port, bridges
// pair up as (upstream port, downstream port), since Linux shows one switch as
// an upstream port whose children are downstream ports.
std::vector<bool> MarkSwitchUpstreamPorts(
    const std::vector<std::optional<PciePortType>>& port_types);

}  // namespace topology::internal

#endif  // TOPOLOGY_SRC_PCI_PATH_H_
