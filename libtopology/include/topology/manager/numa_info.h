// NumaInfo: the NUMA node ids the manager works with and, when known, their
// distances (rows indexed by node id, as the kubelet reads them).
//
// Thread safety: immutable after construction.
#ifndef TOPOLOGY_MANAGER_NUMA_INFO_H_
#define TOPOLOGY_MANAGER_NUMA_INFO_H_

#include <map>
#include <optional>
#include <vector>

#include "topology/export.h"
#include "topology/manager/numa_mask.h"
#include "topology/status.h"
#include "topology/topology.h"

namespace topology::manager {

class TOPOLOGY_EXPORT NumaInfo {
 public:
  // `distances`, when set, maps each node id to its row indexed by node id
  // (row[j] = distance to node j). Fails with INVALID_ARGUMENT for ids
  // outside 0..63, duplicate ids, or a row that misses a node.
  static StatusOr<NumaInfo> Create(
      std::vector<int> node_ids,
      std::optional<std::map<int, std::vector<int>>> distances);

  // From a discovered topology (its node ids and SLIT matrix).
  static StatusOr<NumaInfo> FromTopology(const Topology& topology);

  const std::vector<int>& node_ids() const { return node_ids_; }
  // The mask of every node: the kubelet's "default affinity".
  NumaMask DefaultAffinity() const { return all_; }
  bool has_distances() const { return has_distances_; }
  // REQUIRES: has_distances() and both ids are nodes.
  int Distance(int from, int to) const;
  // Average over all ordered pairs of the mask's nodes, self-pairs included:
  // sum(d(i,j)) / |S|^2; 0 for an empty mask. REQUIRES: has_distances().
  double AverageDistance(NumaMask mask) const;

 private:
  std::vector<int> node_ids_;
  NumaMask all_;
  bool has_distances_ = false;
  // distance_[i * 64 + j]
  std::vector<int> distance_;
};

}  // namespace topology::manager

#endif  // TOPOLOGY_MANAGER_NUMA_INFO_H_
