#include "topology/manager/numa_info.h"

#include <algorithm>
#include <set>
#include <string>

namespace topology::manager {

StatusOr<NumaInfo> NumaInfo::Create(
    std::vector<int> node_ids,
    std::optional<std::map<int, std::vector<int>>> distances) {
  NumaInfo info;
  std::set<int> seen;
  uint64_t all = 0;
  for (int id : node_ids) {
    if (id < 0 || id >= NumaMask::kMaxNodes) {
      return InvalidArgumentError("NUMA node id " + std::to_string(id) +
                                  " out of range 0-63");
    }
    if (!seen.insert(id).second) {
      return InvalidArgumentError("duplicate NUMA node id " +
                                  std::to_string(id));
    }
    all |= uint64_t{1} << id;
  }
  info.node_ids_ = std::move(node_ids);
  info.all_ = NumaMask::FromBits(all);
  if (distances.has_value()) {
    info.distance_.assign(
        static_cast<size_t>(NumaMask::kMaxNodes) * NumaMask::kMaxNodes, 0);
    for (int from : info.node_ids_) {
      const auto row = distances->find(from);
      if (row == distances->end()) {
        return InvalidArgumentError("no distances for NUMA node " +
                                    std::to_string(from));
      }
      for (int to : info.node_ids_) {
        if (to >= static_cast<int>(row->second.size())) {
          return InvalidArgumentError(
              "distance row of NUMA node " + std::to_string(from) +
              " has no entry for node " + std::to_string(to));
        }
        info.distance_[static_cast<size_t>(from) * NumaMask::kMaxNodes +
                       static_cast<size_t>(to)] =
            row->second[static_cast<size_t>(to)];
      }
    }
    info.has_distances_ = true;
  }
  return info;
}

StatusOr<NumaInfo> NumaInfo::FromTopology(const Topology& topology) {
  std::vector<int> ids = topology.NumaNodeIds();
  std::optional<std::map<int, std::vector<int>>> rows;
  if (topology.has_distances()) {
    rows.emplace();
    const int max_id = ids.empty() ? 0 : ids.back();
    for (int from : ids) {
      std::vector<int> row(static_cast<size_t>(max_id) + 1, 0);
      for (int to : ids) {
        row[static_cast<size_t>(to)] = topology.Distance(from, to).value_or(0);
      }
      (*rows)[from] = std::move(row);
    }
  }
  return Create(std::move(ids), std::move(rows));
}

int NumaInfo::Distance(int from, int to) const {
  return distance_[static_cast<size_t>(from) * NumaMask::kMaxNodes +
                   static_cast<size_t>(to)];
}

double NumaInfo::AverageDistance(NumaMask mask) const {
  const std::vector<int> ids = mask.Ids();
  if (ids.empty()) return 0;
  double sum = 0;
  for (int i : ids) {
    for (int j : ids) sum += Distance(i, j);
  }
  return sum / static_cast<double>(ids.size() * ids.size());
}

}  // namespace topology::manager
