// The hint generator shared by the device and CPU providers: the kubelet's
// generateDeviceTopologyHints and generateCPUTopologyHints are one algorithm
// over "items" (devices or CPUs) that are local to a set of NUMA nodes.
//
// Thread safety: pure functions.
#ifndef TOPOLOGY_MANAGER_NUMA_HINTS_H_
#define TOPOLOGY_MANAGER_NUMA_HINTS_H_

#include <vector>

#include "topology/export.h"
#include "topology/manager/hint_provider.h"
#include "topology/manager/numa_mask.h"
#include "topology/manager/topology_hint.h"

namespace topology::manager {

struct HintRequest {
  // The NUMA nodes to combine, in the kubelet's order.
  std::vector<int> node_ids = {};
  // Every registered item's NUMA nodes, free or not, healthy or not (they
  // decide which masks are preferred). An empty mask = no topology.
  std::vector<NumaMask> all_items = {};
  // Items free to allocate now.
  std::vector<NumaMask> available_items = {};
  // Items the container may reuse (from init containers); a mask must meet
  // every one of them that has topology.
  std::vector<NumaMask> reusable_items = {};
  int request = 0;
};

// Every mask of IterateMasks(node_ids) for which reusable items (with
// topology) all meet the mask and reusable + available items meeting it are
// at least `request`; preferred iff its popcount is the smallest of any mask
// holding `request` items of all_items (the number of nodes if none does).
// An item "meets" a mask if any of its nodes is in it.
TOPOLOGY_EXPORT std::vector<TopologyHint> GenerateNumaHints(
    const HintRequest& request);

// How GenerateHintList writes its answer.
enum class HintForm {
  kEnumerated,  // the kubelet's explicit list (2^N masks examined)
  kCompact,     // a HintFamily with the same members
  kAuto,        // compact above kCompactHintsAboveNodes nodes
};
inline constexpr int kCompactHintsAboveNodes = 20;

// The hints of GenerateNumaHints as a HintList: explicit, or a HintFamily
// holding exactly the same hints without enumerating them (an empty explicit
// list when nothing fits).
TOPOLOGY_EXPORT HintList GenerateHintList(const HintRequest& request,
                                          HintForm form);

}  // namespace topology::manager

#endif  // TOPOLOGY_MANAGER_NUMA_HINTS_H_
