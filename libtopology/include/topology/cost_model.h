// CostModel: how far apart two PCI devices, or a device and a NUMA node, are.
//
// Levels follow `nvidia-smi topo -m` for any PCI device; costs are integers
// normalised to 0..100 (0 = the same device). docs/cost-model.md gives the
// formulas.
//
// Thread safety: immutable after construction; const methods may be called
// concurrently.
#ifndef TOPOLOGY_COST_MODEL_H_
#define TOPOLOGY_COST_MODEL_H_

#include <string_view>
#include <unordered_map>
#include <vector>

#include "topology/export.h"
#include "topology/pci_address.h"
#include "topology/status.h"
#include "topology/topology.h"

namespace topology {

// Nearest first.
enum class CostLevel {
  kSelf,              // X: the same function
  kSameBoard,         // BRD: functions of one device (domain:bus:device)
  kSameSwitch,        // PIX: at most one PCIe bridge or switch between them
  kMultipleSwitches,  // PXB: several switches, no host bridge crossed
  kSameHostBridge,    // PHB: through the host bridge (root complex)
  kSameNumaNode,      // NODE: different host bridges of one NUMA node
  kCrossNuma,         // SYS: across the interconnect between NUMA nodes
};

// "X", "BRD", "PIX", "PXB", "PHB", "NODE" or "SYS".
TOPOLOGY_EXPORT std::string_view CostLevelLabel(CostLevel level);

struct DeviceCost {
  CostLevel level = CostLevel::kSelf;
  int cost = 0;  // 0..100
  // False when a device's NUMA node is unknown and the level across host
  // bridges is therefore assumed (kCrossNuma at the mean remote cost).
  bool locality_known = true;
};

class TOPOLOGY_EXPORT CostModel {
 public:
  // Fixed points of the scale.
  static constexpr int kSelfCost = 0;
  static constexpr int kSameBoardCost = 10;
  static constexpr int kSameSwitchCost = 20;
  static constexpr int kMultipleSwitchesCost = 30;
  static constexpr int kSameHostBridgeCost = 40;
  static constexpr int kSameNumaNodeCost = 50;
  static constexpr int kCrossNumaMinCost = 60;
  static constexpr int kMaxCost = 100;

  // Keeps a reference to `topology`. REQUIRES: it outlives the model.
  explicit CostModel(const Topology& topology);

  // Cost between two devices of the topology. Fails with NOT_FOUND naming an
  // address that is not in the topology.
  StatusOr<DeviceCost> Between(const PciAddress& a, const PciAddress& b) const;

  // Cost between devices by index into topology.pci_devices().
  // REQUIRES: both indexes are in range.
  DeviceCost BetweenIndexes(size_t a, size_t b) const;

  // Cost from a device to a NUMA node: 0 when the node is local to it,
  // 100 * (SLIT - 10) / (max SLIT - 10) (at least 1) when remote, and the mean
  // over all nodes when the device's locality is unknown. Fails with
  // NOT_FOUND for an unknown address or node.
  StatusOr<int> DeviceToNode(const PciAddress& device, int node) const;

  // Cost between two NUMA nodes on the same 0..100 scale (0 = same node).
  // Fails with NOT_FOUND for an unknown node.
  StatusOr<int> NodeToNode(int a, int b) const;

  const Topology& topology() const { return topology_; }

  // The path of a device below its host bridge, root first: one hop per
  // PCIe switch (named by its upstream port) or lone bridge.
  // REQUIRES: index is in range.
  const std::vector<PciAddress>& PathHops(size_t index) const {
    return paths_[static_cast<size_t>(path_of_[index])].hops;
  }

  // A dense id of the device's place below the host bridges: devices with
  // the same host bridge and the same PathHops() share it (the functions of
  // one board, the VFs of one PF), so callers that walk devices in address
  // order handle a path once per run of devices instead of once per device.
  // REQUIRES: index is in range.
  int PathId(size_t index) const { return path_of_[index]; }

  // The devices' addresses, in the topology's order (ascending): a compact
  // copy for searches that need nothing else of each device.
  const std::vector<PciAddress>& Addresses() const { return addresses_; }

  // A dense id (0 .. HostBridgeCount() - 1) of the device's host bridge, or
  // -1 when it has none: devices on one host bridge share it, so callers
  // group them by an index instead of by name.
  // REQUIRES: index is in range.
  int HostBridgeId(size_t index) const {
    return paths_[static_cast<size_t>(path_of_[index])].host_bridge;
  }
  size_t HostBridgeCount() const { return host_bridge_count_; }

  // The cost between two devices on different (or unknown) host bridges
  // whose NUMA affinities are `a` and `b` (empty = unknown).
  DeviceCost AcrossHostBridges(const std::vector<int>& a,
                               const std::vector<int>& b) const;

 private:
  // A device's path below its host bridge, one hop per PCIe switch (keyed
  // by its upstream port) or lone bridge; shared by the devices on it.
  struct PathInfo {
    std::vector<PciAddress> hops = {};  // root first
    int host_bridge = -1;
  };

  int RemoteCost(int slit) const;
  int NodeSetCost(const std::vector<int>& a, const std::vector<int>& b) const;
  int UnknownCrossCost() const;

  const Topology& topology_;
  std::vector<PathInfo> paths_;  // distinct paths, by PathId()
  std::vector<int> path_of_;     // per device: its PathId()
  std::vector<PciAddress> addresses_;
  size_t host_bridge_count_ = 0;
  std::unordered_map<uint64_t, size_t> index_by_address_;
};

}  // namespace topology

#endif  // TOPOLOGY_COST_MODEL_H_
