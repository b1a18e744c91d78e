#include "topology/topology.h"

#include <algorithm>
#include <iterator>
#include <numeric>
#include <string>
#include <utility>

namespace topology {

std::string_view NumaSourceName(NumaSource source) {
  switch (source) {
    case NumaSource::kSysfs:
      return "sysfs";
    case NumaSource::kLocalCpus:
      return "local_cpus";
    case NumaSource::kBridge:
      return "bridge";
    case NumaSource::kSingleNode:
      return "single_node";
    case NumaSource::kUnknown:
      return "unknown";
  }
  return "unknown";
}

Topology::Topology(Parts parts) : parts_(std::move(parts)) {
  // Sort nodes by id and permute the distance matrix to match.
  const size_t n = parts_.numa_nodes.size();
  std::vector<size_t> order(n);
  std::iota(order.begin(), order.end(), size_t{0});
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return parts_.numa_nodes[a].id < parts_.numa_nodes[b].id;
  });
  std::vector<NumaNode> nodes;
  nodes.reserve(n);
  for (size_t i : order) nodes.push_back(std::move(parts_.numa_nodes[i]));
  parts_.numa_nodes = std::move(nodes);
  if (parts_.distances.size() == n && n > 0) {
    std::vector<std::vector<int>> matrix(n, std::vector<int>(n, 0));
    for (size_t i = 0; i < n; ++i) {
      for (size_t j = 0; j < n; ++j) {
        matrix[i][j] = parts_.distances[order[i]][order[j]];
      }
    }
    parts_.distances = std::move(matrix);
  } else {
    parts_.distances.clear();
  }

  std::sort(parts_.cpus.begin(), parts_.cpus.end(),
            [](const CpuInfo& a, const CpuInfo& b) { return a.id < b.id; });
  std::sort(parts_.pci_devices.begin(), parts_.pci_devices.end(),
            [](const PciDevice& a, const PciDevice& b) {
              return a.address < b.address;
            });
  for (const NumaNode& node : parts_.numa_nodes) {
    all_cpus_ = all_cpus_.Union(node.cpus);
  }
  for (const CpuInfo& cpu : parts_.cpus) all_cpus_.Add(cpu.id);
}

const NumaNode* Topology::FindNumaNode(int id) const {
  const int index = NodeIndex(id);
  return index < 0 ? nullptr : &parts_.numa_nodes[static_cast<size_t>(index)];
}

std::vector<int> Topology::NumaNodeIds() const {
  std::vector<int> ids;
  ids.reserve(parts_.numa_nodes.size());
  for (const NumaNode& node : parts_.numa_nodes) ids.push_back(node.id);
  return ids;
}

int Topology::NodeIndex(int id) const {
  const auto it = std::lower_bound(
      parts_.numa_nodes.begin(), parts_.numa_nodes.end(), id,
      [](const NumaNode& node, int value) { return node.id < value; });
  if (it == parts_.numa_nodes.end() || it->id != id) return -1;
  return static_cast<int>(it - parts_.numa_nodes.begin());
}

std::optional<int> Topology::Distance(int from, int to) const {
  if (parts_.distances.empty()) return std::nullopt;
  const int i = NodeIndex(from);
  const int j = NodeIndex(to);
  if (i < 0 || j < 0) return std::nullopt;
  return parts_.distances[static_cast<size_t>(i)][static_cast<size_t>(j)];
}

int Topology::MaxDistance() const {
  int max = 10;
  for (const auto& row : parts_.distances) {
    for (int d : row) max = std::max(max, d);
  }
  return max;
}

const PciDevice* Topology::FindDevice(const PciAddress& address) const {
  const auto it = std::lower_bound(
      parts_.pci_devices.begin(), parts_.pci_devices.end(), address,
      [](const PciDevice& d, const PciAddress& a) { return d.address < a; });
  if (it == parts_.pci_devices.end() || it->address != address) return nullptr;
  return &*it;
}

std::string BinaryQuantity(uint64_t bytes) {
  static constexpr const char* kSuffixes[] = {"",   "Ki", "Mi", "Gi",
                                              "Ti", "Pi", "Ei"};
  size_t suffix = 0;
  while (bytes != 0 && bytes % 1024 == 0 && suffix + 1 < std::size(kSuffixes)) {
    bytes /= 1024;
    ++suffix;
  }
  return std::to_string(bytes) + kSuffixes[suffix];
}

std::string HugePagesResourceName(uint64_t page_size_bytes) {
  return "hugepages-" + BinaryQuantity(page_size_bytes);
}

}  // namespace topology
