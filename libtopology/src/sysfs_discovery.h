// The sysfs readers behind Discover(): NUMA nodes with their distance matrix,
// and PCI devices with their locality and PCIe path.
#ifndef TOPOLOGY_SRC_SYSFS_DISCOVERY_H_
#define TOPOLOGY_SRC_SYSFS_DISCOVERY_H_

#include <string>
#include <vector>

#include "libpci_scanner.h"
#include "topology/numa_node.h"
#include "topology/pci_device.h"
#include "topology/sysfs_reader.h"

namespace topology::internal {

struct NumaFacts {
  std::vector<NumaNode> nodes;  // increasing id
  std::vector<std::vector<int>> distances;  // empty when unusable
};

// Reads devices/system/node. A kernel without NUMA (no node directory) is
// reported as one node 0 holding every online CPU. Problems go to `warnings`.
NumaFacts ReadNumaFacts(const SysfsReader& reader,
                        std::vector<std::string>* warnings);

// Reads every entry of bus/pci/devices. `identities`, when not null, holds
// libpci's view of class and ids; otherwise they are read from sysfs.
// Affinity is resolved against `nodes`.
std::vector<PciDevice> ReadPciDevices(
    const SysfsReader& reader, const std::vector<std::string>& entries,
    const std::vector<LibpciIdentity>* identities,
    const std::vector<NumaNode>& nodes, std::vector<std::string>* warnings);

}  // namespace topology::internal

#endif  // TOPOLOGY_SRC_SYSFS_DISCOVERY_H_
