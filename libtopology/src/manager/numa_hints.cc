#include "topology/manager/numa_hints.h"

#include <algorithm>

namespace topology::manager {
namespace {

// Counts items meeting `mask`. Items are grouped by distinct node mask first,
// so a mask costs one AND per distinct item mask, not per item.
class ItemCounts {
 public:
  explicit ItemCounts(const std::vector<NumaMask>& items) {
    for (NumaMask item : items) {
      if (item.IsEmpty()) continue;
      auto it = std::find_if(groups_.begin(), groups_.end(),
                             [&](const auto& g) { return g.first == item; });
      if (it == groups_.end()) {
        groups_.emplace_back(item, 1);
      } else {
        ++it->second;
      }
    }
  }
  int Meeting(NumaMask mask) const {
    int count = 0;
    for (const auto& [item, n] : groups_) {
      if (!item.And(mask).IsEmpty()) count += n;
    }
    return count;
  }

 private:
  std::vector<std::pair<NumaMask, int>> groups_;
};

}  // namespace

std::vector<TopologyHint> GenerateNumaHints(const HintRequest& request) {
  const ItemCounts all(request.all_items);
  const ItemCounts available(request.available_items);
  std::vector<NumaMask> reusable;
  for (NumaMask item : request.reusable_items) {
    if (!item.IsEmpty()) reusable.push_back(item);
  }
  int min_affinity_size = static_cast<int>(request.node_ids.size());
  std::vector<TopologyHint> hints;
  IterateMasks(request.node_ids, [&](NumaMask mask) {
    if (all.Meeting(mask) >= request.request &&
        mask.Count() < min_affinity_size) {
      min_affinity_size = mask.Count();
    }
    for (NumaMask item : reusable) {
      if (item.And(mask).IsEmpty()) return;
    }
    const int matching =
        static_cast<int>(reusable.size()) + available.Meeting(mask);
    if (matching < request.request) return;
    hints.push_back(TopologyHint{mask, false});
  });
  for (TopologyHint& hint : hints) {
    hint.preferred = hint.affinity->Count() == min_affinity_size;
  }
  return hints;
}

}  // namespace topology::manager
