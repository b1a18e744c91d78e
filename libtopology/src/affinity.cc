#include "affinity.h"

#include <algorithm>
#include <string>

namespace topology::internal {
namespace {

std::string NodeListText(const std::vector<int>& nodes) {
  std::string out;
  for (int id : nodes) {
    if (!out.empty()) out += ',';
    out += std::to_string(id);
  }
  return out;
}

}  // namespace

AffinityResolver::AffinityResolver(const std::vector<NumaNode>& nodes)
    : nodes_(nodes) {
  for (const NumaNode& node : nodes_) all_cpus_ = all_cpus_.Union(node.cpus);
}

std::vector<int> AffinityResolver::NodesMeeting(const CpuSet& cpus) const {
  std::vector<int> out;
  for (const NumaNode& node : nodes_) {
    if (node.cpus.Intersects(cpus)) out.push_back(node.id);
  }
  return out;
}

std::optional<std::pair<std::vector<int>, NumaSource>> AffinityResolver::Direct(
    const LocalityFacts& facts, std::vector<std::string>* conflicts) const {
  // Local CPUs are informative only when they single out part of the
  // machine: the kernel prints every CPU for numa_node -1.
  std::vector<int> from_cpus;
  if (facts.local_cpus.has_value() && !facts.local_cpus->empty() &&
      !all_cpus_.IsSubsetOf(*facts.local_cpus)) {
    from_cpus = NodesMeeting(*facts.local_cpus);
  }
  if (facts.numa_node.has_value() && *facts.numa_node >= 0) {
    const int id = *facts.numa_node;
    const auto it = std::find_if(nodes_.begin(), nodes_.end(),
                                 [&](const NumaNode& n) { return n.id == id; });
    if (it == nodes_.end()) {
      conflicts->push_back("numa_node " + std::to_string(id) +
                           " is not an online NUMA node; ignored");
    } else {
      if (!from_cpus.empty() && std::find(from_cpus.begin(), from_cpus.end(),
                                          id) == from_cpus.end()) {
        conflicts->push_back("numa_node " + std::to_string(id) +
                             " but local CPUs " + facts.local_cpus->ToList() +
                             " lie on node(s) " + NodeListText(from_cpus) +
                             "; numa_node wins");
      }
      return std::make_pair(std::vector<int>{id}, NumaSource::kSysfs);
    }
  }
  if (!from_cpus.empty()) {
    return std::make_pair(std::move(from_cpus), NumaSource::kLocalCpus);
  }
  return std::nullopt;
}

Affinity AffinityResolver::Resolve(
    const LocalityFacts& device,
    const std::vector<LocalityFacts>& bridges_nearest_first) const {
  Affinity affinity;
  if (auto direct = Direct(device, &affinity.conflicts)) {
    affinity.nodes = std::move(direct->first);
    affinity.source = direct->second;
    return affinity;
  }
  for (const LocalityFacts& bridge : bridges_nearest_first) {
    std::vector<std::string> ignored;  // a bridge's own conflicts are its own
    if (auto from_bridge = Direct(bridge, &ignored)) {
      affinity.nodes = std::move(from_bridge->first);
      affinity.source = NumaSource::kBridge;
      return affinity;
    }
  }
  // Nothing said, on a machine with one node, or one node with CPUs beside
  // CPU-less memory (HBM, CXL): PCIe hangs off the CPUs, so there is
  // nowhere else to be (the most common shape: one-socket servers and most
  // VMs). hwloc places such devices there too.
  const NumaNode* only = nodes_.size() == 1 ? &nodes_.front() : nullptr;
  int with_cpus = 0;
  for (const NumaNode& node : nodes_) {
    if (node.has_cpus()) {
      ++with_cpus;
      only = &node;
    }
  }
  if (only != nullptr && (nodes_.size() == 1 || with_cpus == 1)) {
    affinity.nodes = {only->id};
    affinity.source = NumaSource::kSingleNode;
  }
  return affinity;
}

}  // namespace topology::internal
