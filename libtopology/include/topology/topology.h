// Topology: an immutable snapshot of one machine's NUMA nodes, distance
// matrix, CPUs and PCI devices.
//
// Build one with Discover() (a host root) or LoadHwlocXml() (an hwloc export).
// A rescan produces a new snapshot; snapshots are never mutated, so one may be
// shared between threads freely.
#ifndef TOPOLOGY_TOPOLOGY_H_
#define TOPOLOGY_TOPOLOGY_H_

#include <optional>
#include <string>
#include <vector>

#include "topology/cpu_info.h"
#include "topology/cpu_set.h"
#include "topology/export.h"
#include "topology/numa_node.h"
#include "topology/pci_address.h"
#include "topology/pci_device.h"

namespace topology {

class TOPOLOGY_EXPORT Topology {
 public:
  // Everything a snapshot holds; the constructor sorts and indexes it.
  struct Parts {
    std::vector<NumaNode> numa_nodes = {};
    // distances[i][j]: SLIT distance from numa_nodes[i] to numa_nodes[j] in
    // the order of numa_nodes as given. Empty when the machine has none.
    std::vector<std::vector<int>> distances = {};
    std::vector<CpuInfo> cpus = {};
    std::vector<PciDevice> pci_devices = {};
    // Degraded results and skipped inputs, one sentence each.
    std::vector<std::string> warnings = {};
    // Where the snapshot came from, for messages ("host root /x").
    std::string source = {};
  };

  Topology() = default;
  // REQUIRES: distances is empty or square with numa_nodes.size() rows.
  explicit Topology(Parts parts);

  // Online NUMA nodes in increasing id order.
  const std::vector<NumaNode>& numa_nodes() const { return parts_.numa_nodes; }
  // Returns the node with `id`, or nullptr.
  const NumaNode* FindNumaNode(int id) const;
  // Ids of numa_nodes() in order.
  std::vector<int> NumaNodeIds() const;

  // True when a SLIT matrix is known.
  bool has_distances() const { return !parts_.distances.empty(); }
  // SLIT distance between two node ids; nullopt when either is unknown or
  // there is no matrix.
  std::optional<int> Distance(int from, int to) const;
  // Largest SLIT value in the matrix (10 when there is none).
  int MaxDistance() const;

  // CPUs in increasing id order.
  const std::vector<CpuInfo>& cpus() const { return parts_.cpus; }
  // The union of every node's CPUs and every known CPU.
  const CpuSet& AllCpus() const { return all_cpus_; }

  // PCI devices in increasing address order.
  const std::vector<PciDevice>& pci_devices() const {
    return parts_.pci_devices;
  }
  // Returns the device at `address`, or nullptr.
  const PciDevice* FindDevice(const PciAddress& address) const;

  const std::vector<std::string>& warnings() const { return parts_.warnings; }
  const std::string& source() const { return parts_.source; }

 private:
  int NodeIndex(int id) const;

  Parts parts_;
  CpuSet all_cpus_;
};

}  // namespace topology

#endif  // TOPOLOGY_TOPOLOGY_H_
