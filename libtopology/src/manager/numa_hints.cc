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
      // Neighbours (devices in id order) mostly share their mask.
      if (!groups_.empty() && groups_.back().first == item) {
        ++groups_.back().second;
        continue;
      }
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

HintList GenerateHintList(const HintRequest& request, HintForm form) {
  const bool compact =
      form == HintForm::kCompact ||
      (form == HintForm::kAuto &&
       static_cast<int>(request.node_ids.size()) > kCompactHintsAboveNodes);
  if (!compact) return HintList(GenerateNumaHints(request));
  uint64_t universe_bits = 0;
  for (int id : request.node_ids) universe_bits |= uint64_t{1} << id;
  const NumaMask universe = NumaMask::FromBits(universe_bits);
  // Groups item masks (limited to the universe) into (mask, count).
  const auto group = [&](const std::vector<NumaMask>& masks,
                         std::vector<std::pair<NumaMask, int>>* out) {
    for (NumaMask m : masks) {
      const NumaMask in = m.And(universe);
      if (in.IsEmpty()) continue;
      auto it = std::find_if(out->begin(), out->end(),
                             [&](const auto& g) { return g.first == in; });
      if (it == out->end()) {
        out->emplace_back(in, 1);
      } else {
        ++it->second;
      }
    }
  };
  // The preferred size: the narrowest mask holding the request among all
  // items (the number of nodes when none does), as minAffinitySize.
  HintFamily all;
  all.universe = universe;
  all.request = request.request;
  group(request.all_items, &all.items);
  const int narrowest_of_all = all.NarrowestMemberSize();

  HintFamily family;
  family.universe = universe;
  family.request = request.request;
  family.preferred_size = narrowest_of_all > 0
                              ? narrowest_of_all
                              : static_cast<int>(request.node_ids.size());
  group(request.available_items, &family.items);
  for (NumaMask reusable : request.reusable_items) {
    if (reusable.IsEmpty()) continue;  // no topology: ignored
    const NumaMask in = reusable.And(universe);
    if (in.IsEmpty()) return HintList(std::vector<TopologyHint>{});
    family.required.push_back(in);
  }
  group(request.reusable_items, &family.items);
  if (!family.Contains(universe)) return HintList(std::vector<TopologyHint>{});
  return HintList::Family(std::move(family));
}

}  // namespace topology::manager
