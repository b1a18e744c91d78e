#include "topology/cost_model.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <string>
#include <string_view>
#include <utility>

namespace topology {
namespace {

uint64_t AddressKey(const PciAddress& a) {
  return (uint64_t{a.domain} << 16) | (uint64_t{a.bus} << 8) |
         (uint64_t{a.device} << 3) | a.function;
}

int RoundedRatio(int numerator, int denominator, int scale) {
  return static_cast<int>(
      std::lround(static_cast<double>(scale) * numerator / denominator));
}

}  // namespace

std::string_view CostLevelLabel(CostLevel level) {
  switch (level) {
    case CostLevel::kSelf:
      return "X";
    case CostLevel::kSameBoard:
      return "BRD";
    case CostLevel::kSameSwitch:
      return "PIX";
    case CostLevel::kMultipleSwitches:
      return "PXB";
    case CostLevel::kSameHostBridge:
      return "PHB";
    case CostLevel::kSameNumaNode:
      return "NODE";
    case CostLevel::kCrossNuma:
      return "SYS";
  }
  return "?";
}

CostModel::CostModel(const Topology& topology) : topology_(topology) {
  const auto& devices = topology_.pci_devices();
  path_of_.reserve(devices.size());
  addresses_.reserve(devices.size());
  std::unordered_map<std::string_view, int> bridge_ids;
  // Distinct paths by (host bridge, hops); neighbours mostly share theirs,
  // so the last one is compared before the map is searched.
  std::map<std::pair<int, std::vector<PciAddress>>, int> path_ids;
  PathInfo path;
  for (size_t i = 0; i < devices.size(); ++i) {
    const PciDevice& d = devices[i];
    addresses_.push_back(d.address);
    index_by_address_[AddressKey(d.address)] = i;
    path.host_bridge = -1;
    path.hops.clear();
    if (!d.host_bridge.empty()) {
      path.host_bridge =
          bridge_ids
              .try_emplace(d.host_bridge, static_cast<int>(bridge_ids.size()))
              .first->second;
    }
    // Walk root first; a switch (upstream port + downstream port) is one hop
    // named by its upstream port.
    const size_t n = d.upstream_bridges.size();
    for (size_t k = n; k-- > 0;) {
      const bool is_upstream =
          k < d.upstream_is_switch.size() && d.upstream_is_switch[k];
      path.hops.push_back(d.upstream_bridges[k]);
      if (is_upstream && k > 0) --k;  // skip its downstream port
    }
    if (!path_of_.empty()) {
      const int last = path_of_.back();
      const PathInfo& previous = paths_[static_cast<size_t>(last)];
      if (previous.host_bridge == path.host_bridge &&
          previous.hops == path.hops) {
        path_of_.push_back(last);
        continue;
      }
    }
    const auto [it, added] = path_ids.try_emplace(
        {path.host_bridge, path.hops}, static_cast<int>(paths_.size()));
    if (added) paths_.push_back(path);
    path_of_.push_back(it->second);
  }
  host_bridge_count_ = bridge_ids.size();
}

int CostModel::RemoteCost(int slit) const {
  const int max = topology_.MaxDistance();
  if (max <= 10) return kCrossNumaMinCost;
  const int span = kMaxCost - kCrossNumaMinCost;
  return std::clamp(kCrossNumaMinCost + RoundedRatio(slit - 10, max - 10, span),
                    kCrossNumaMinCost, kMaxCost);
}

int CostModel::UnknownCrossCost() const {
  const auto ids = topology_.NumaNodeIds();
  if (!topology_.has_distances() || ids.size() < 2) {
    return (kCrossNumaMinCost + kMaxCost) / 2;
  }
  int64_t sum = 0;
  int64_t count = 0;
  for (int a : ids) {
    for (int b : ids) {
      if (a == b) continue;
      sum += RemoteCost(topology_.Distance(a, b).value_or(10));
      ++count;
    }
  }
  return static_cast<int>(
      std::lround(static_cast<double>(sum) / static_cast<double>(count)));
}

int CostModel::NodeSetCost(const std::vector<int>& a,
                           const std::vector<int>& b) const {
  int best = std::numeric_limits<int>::max();
  for (int x : a) {
    for (int y : b) {
      if (x == y) return kSameNumaNodeCost;
      const std::optional<int> slit = topology_.Distance(x, y);
      best = std::min(
          best, slit ? RemoteCost(*slit) : (kCrossNumaMinCost + kMaxCost) / 2);
    }
  }
  return best;
}

DeviceCost CostModel::BetweenIndexes(size_t a, size_t b) const {
  const auto& devices = topology_.pci_devices();
  const PciDevice& da = devices[a];
  const PciDevice& db = devices[b];
  if (a == b) return {CostLevel::kSelf, kSelfCost, true};
  if (da.address.SameSlot(db.address)) {
    return {CostLevel::kSameBoard, kSameBoardCost, true};
  }
  if (!da.host_bridge.empty() && da.host_bridge == db.host_bridge) {
    const auto& ha = PathHops(a);
    const auto& hb = PathHops(b);
    size_t common = 0;
    while (common < ha.size() && common < hb.size() &&
           ha[common] == hb[common]) {
      ++common;
    }
    if (common == 0) {
      return {CostLevel::kSameHostBridge, kSameHostBridgeCost, true};
    }
    const size_t traversed = (ha.size() - common) + (hb.size() - common) + 1;
    if (traversed <= 1) return {CostLevel::kSameSwitch, kSameSwitchCost, true};
    return {CostLevel::kMultipleSwitches, kMultipleSwitchesCost, true};
  }
  return AcrossHostBridges(da.numa_nodes, db.numa_nodes);
}

DeviceCost CostModel::AcrossHostBridges(const std::vector<int>& a,
                                        const std::vector<int>& b) const {
  if (topology_.numa_nodes().size() <= 1) {
    return {CostLevel::kSameNumaNode, kSameNumaNodeCost, true};
  }
  if (a.empty() || b.empty()) {
    return {CostLevel::kCrossNuma, UnknownCrossCost(), false};
  }
  const int cost = NodeSetCost(a, b);
  if (cost == kSameNumaNodeCost) {
    return {CostLevel::kSameNumaNode, kSameNumaNodeCost, true};
  }
  return {CostLevel::kCrossNuma, cost, true};
}

StatusOr<DeviceCost> CostModel::Between(const PciAddress& a,
                                        const PciAddress& b) const {
  const auto ia = index_by_address_.find(AddressKey(a));
  if (ia == index_by_address_.end()) {
    return NotFoundError("no PCI device " + a.ToString() + " in " +
                         topology_.source());
  }
  const auto ib = index_by_address_.find(AddressKey(b));
  if (ib == index_by_address_.end()) {
    return NotFoundError("no PCI device " + b.ToString() + " in " +
                         topology_.source());
  }
  return BetweenIndexes(ia->second, ib->second);
}

StatusOr<int> CostModel::NodeToNode(int a, int b) const {
  if (topology_.FindNumaNode(a) == nullptr) {
    return NotFoundError("no NUMA node " + std::to_string(a));
  }
  if (topology_.FindNumaNode(b) == nullptr) {
    return NotFoundError("no NUMA node " + std::to_string(b));
  }
  if (a == b) return 0;
  const std::optional<int> slit = topology_.Distance(a, b);
  if (!slit) return kMaxCost / 2;
  const int max = topology_.MaxDistance();
  if (max <= 10) return 1;
  return std::clamp(RoundedRatio(*slit - 10, max - 10, kMaxCost), 1, kMaxCost);
}

StatusOr<int> CostModel::DeviceToNode(const PciAddress& device,
                                      int node) const {
  const auto it = index_by_address_.find(AddressKey(device));
  if (it == index_by_address_.end()) {
    return NotFoundError("no PCI device " + device.ToString() + " in " +
                         topology_.source());
  }
  if (topology_.FindNumaNode(node) == nullptr) {
    return NotFoundError("no NUMA node " + std::to_string(node));
  }
  const PciDevice& d = topology_.pci_devices()[it->second];
  std::vector<int> candidates = d.numa_nodes;
  const bool known = !candidates.empty();
  if (!known) candidates = topology_.NumaNodeIds();
  int best = std::numeric_limits<int>::max();
  int64_t sum = 0;
  for (int from : candidates) {
    const int cost = NodeToNode(from, node).value_or(kMaxCost);
    best = std::min(best, cost);
    sum += cost;
  }
  if (known) return best;
  return static_cast<int>(std::lround(static_cast<double>(sum) /
                                      static_cast<double>(candidates.size())));
}

}  // namespace topology
