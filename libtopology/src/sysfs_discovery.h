// The sysfs readers behind Discover(): NUMA nodes with their distance matrix,
// and PCI devices with their locality and PCIe path.
#ifndef TOPOLOGY_SRC_SYSFS_DISCOVERY_H_
#define TOPOLOGY_SRC_SYSFS_DISCOVERY_H_

#include <string>
#include <vector>

#include "topology/numa_node.h"
#include "topology/pci_device.h"
#include "topology/sysfs_reader.h"

#include "libpci_scanner.h"

namespace topology::internal {

struct NumaFacts {
  std::vector<NumaNode> nodes;              // increasing id
  std::vector<std::vector<int>> distances;  // empty when unusable
};

// Reads devices/system/node. A kernel without NUMA (no node directory) is
// reported as one node 0 holding every online CPU. Problems go to `warnings`.
NumaFacts ReadNumaFacts(const SysfsReader& reader,
                        std::vector<std::string>* warnings);

// Reads every entry of bus/pci/devices: locality, driver, IOMMU group,
// SR-IOV, link and PCIe path, and class and ids when `read_identity` (else
// they are left for libpci). Affinity is resolved against `nodes`. A
// device directory that cannot be opened for want of resources (no file
// descriptors, no memory: UNAVAILABLE) fails the whole read, since
// skipping it would report a present device as removed; one that is gone
// or unreadable is skipped with a warning.
StatusOr<std::vector<PciDevice>> ReadPciDevices(
    const SysfsReader& reader, const std::vector<std::string>& entries,
    bool read_identity, const std::vector<NumaNode>& nodes,
    std::vector<std::string>* warnings);

// Reads class and ids of `devices` from sysfs (when libpci could not).
void ReadPciIdentity(const SysfsReader& reader, std::vector<PciDevice>* devices,
                     std::vector<std::string>* warnings);

// Copies libpci's class, ids and slot into the matching devices.
void ApplyLibpciIdentity(const std::vector<LibpciIdentity>& identities,
                         std::vector<PciDevice>* devices);

}  // namespace topology::internal

#endif  // TOPOLOGY_SRC_SYSFS_DISCOVERY_H_
