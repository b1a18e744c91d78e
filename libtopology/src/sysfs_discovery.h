// The sysfs readers behind Discover(): NUMA nodes with their distance matrix,
// and PCI devices with their locality and PCIe path.
#ifndef TOPOLOGY_SRC_SYSFS_DISCOVERY_H_
#define TOPOLOGY_SRC_SYSFS_DISCOVERY_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "topology/cpu_info.h"
#include "topology/numa_node.h"
#include "topology/pci_device.h"
#include "topology/sysfs_reader.h"

#include "libpci_scanner.h"

namespace topology::internal {

struct NumaFacts {
  std::vector<NumaNode> nodes;              // increasing id
  std::vector<std::vector<int>> distances;  // empty when unusable
  // Per node (parallel to `nodes`): the initiator nodes of
  // nodeN/access0/initiators (HMAT), empty when absent.
  std::vector<std::vector<int>> initiators;
  // cpu/online, else the cpuN directories; nullopt when neither exists.
  std::optional<CpuSet> online_cpus;
  // False on a kernel without NUMA (no devices/system/node).
  bool has_node_directory = true;
};

// What hwloc's Linux back-end computed for the same host root.
struct HwlocMachine {
  struct Node {
    // hwloc's locality of the node: its own CPUs, or for a CPU-less node
    // the CPUs hwloc attaches it to.
    CpuSet cpus;
    uint64_t memory_bytes = 0;
  };
  std::vector<CpuInfo> cpus;  // one per PU (online CPU)
  CpuSet online;              // the topology's CPU set
  std::map<int, Node> nodes;  // by OS index; nodes hwloc dropped are absent
};

// Reads devices/system/node and the online CPUs as the kernel lists them:
// nodes from node/online, else the nodeN directories; one node 0 when there
// is no node directory. Problems go to `warnings`, naming the file.
NumaFacts ReadNumaFacts(const SysfsReader& reader,
                        std::vector<std::string>* warnings);

// Turns the raw facts into the nodes libtopology reports (docs/sysfs.md):
// offline or absent CPUs leave the node lists, memory missing from sysfs
// comes from hwloc, contradictory firmware data (every node the same CPUs,
// a uniform SLIT) collapses to one node as in hwloc, and CPU-less nodes get
// the CPUs near them. `hwloc` may be null (no host root, or hwloc failed).
void ReconcileNumaFacts(const SysfsReader& reader, const HwlocMachine* hwloc,
                        NumaFacts* facts, std::vector<std::string>* warnings);

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

// Fills each device's os_devices from sysfs class/{net,block,infiniband,drm,
// dma,ve,bxi}: one link read per entry; partitions, DRM connectors and entries
// not below a PCI function are skipped.
void ReadOsDevices(const SysfsReader& reader, std::vector<PciDevice>* devices);

// Reads class and ids of `devices` from sysfs (when libpci could not).
void ReadPciIdentity(const SysfsReader& reader, std::vector<PciDevice>* devices,
                     std::vector<std::string>* warnings);

// Copies libpci's class, ids and slot into the matching devices.
void ApplyLibpciIdentity(const std::vector<LibpciIdentity>& identities,
                         std::vector<PciDevice>* devices);

}  // namespace topology::internal

#endif  // TOPOLOGY_SRC_SYSFS_DISCOVERY_H_
