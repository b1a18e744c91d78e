#include "topology/manager/hint_family.h"

#include <algorithm>

#include "topology/manager/hint_provider.h"

namespace topology::manager {

int HintFamily::Coverage(NumaMask mask) const {
  int count = 0;
  for (const auto& [item, n] : items) {
    if (!item.And(mask).IsEmpty()) count += n;
  }
  return count;
}

bool HintFamily::Contains(NumaMask mask) const {
  if (mask.IsEmpty() || !mask.IsSubsetOf(universe)) return false;
  for (NumaMask r : required) {
    if (r.And(mask).IsEmpty()) return false;
  }
  return Coverage(mask) >= request;
}

bool HintFamily::SingleNodeItems() const {
  for (const auto& [item, n] : items) {
    if (item.Count() != 1) return false;
  }
  for (NumaMask r : required) {
    if (r.Count() != 1) return false;
  }
  return true;
}

int HintFamily::NarrowestMemberSize() const {
  if (!Contains(universe)) return 0;
  // Required single nodes must be in every member; beyond them, the search
  // adds nodes by decreasing weight (exact for single-node items, where
  // coverage is additive; a bounded exhaustive search otherwise).
  const std::vector<int> ids = universe.Ids();
  if (SingleNodeItems()) {
    NumaMask base;
    for (NumaMask r : required) base = base.Or(r);
    std::vector<std::pair<int, int>> weights;  // (weight, node)
    for (int id : ids) {
      if (base.IsSet(id)) continue;
      weights.emplace_back(Coverage(NumaMask::FromBits(uint64_t{1} << id)), id);
    }
    std::sort(weights.rbegin(), weights.rend());
    NumaMask mask = base;
    size_t next = 0;
    while (mask.IsEmpty() || Coverage(mask) < request) {
      mask = mask.Or(NumaMask::FromBits(uint64_t{1} << weights[next++].second));
    }
    return mask.Count();
  }
  for (int size = 1; size <= static_cast<int>(ids.size()); ++size) {
    bool found = false;
    // Combinations of `size` ids.
    std::vector<size_t> pick(static_cast<size_t>(size));
    for (size_t i = 0; i < pick.size(); ++i) pick[i] = i;
    while (!found) {
      uint64_t bits = 0;
      for (size_t p : pick) bits |= uint64_t{1} << ids[p];
      found = Contains(NumaMask::FromBits(bits));
      size_t i = pick.size();
      while (i > 0 && pick[i - 1] == ids.size() - pick.size() + (i - 1)) --i;
      if (i == 0) break;
      ++pick[i - 1];
      for (size_t j = i; j < pick.size(); ++j) pick[j] = pick[j - 1] + 1;
    }
    if (found) return size;
  }
  return 0;
}

std::vector<TopologyHint> HintFamily::Expand() const {
  std::vector<TopologyHint> hints;
  IterateMasks(universe.Ids(), [&](NumaMask mask) {
    if (Contains(mask)) {
      hints.push_back(TopologyHint{mask, mask.Count() == preferred_size});
    }
  });
  return hints;
}

HintList HintList::Family(HintFamily family) {
  HintList list;
  list.nil_ = false;
  list.family_ = std::make_shared<const HintFamily>(std::move(family));
  return list;
}

std::vector<TopologyHint> HintList::Expand() const {
  return family_ ? family_->Expand() : hints_;
}

}  // namespace topology::manager
