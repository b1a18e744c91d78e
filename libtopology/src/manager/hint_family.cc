#include "topology/manager/hint_family.h"

#include <algorithm>
#include <bit>
#include <functional>

#include "topology/manager/hint_provider.h"

namespace topology::manager {

int NarrowestWeighedSize(const std::vector<HintFamily::Weighted>& weighted,
                         NumaMask within) {
  // The fewest nodes of `within` that weigh enough by every weight: by
  // increasing size, a depth-first search over nodes in decreasing order of
  // the first weight, cut when even the heaviest remaining nodes cannot
  // reach a request. Exact; fast when few nodes suffice, which is when it
  // matters (the preferred size of a memory request).
  std::vector<int> ids = within.Ids();
  const auto weight = [](const HintFamily::Weighted& w, int id) {
    return static_cast<size_t>(id) < w.weight.size()
               ? w.weight[static_cast<size_t>(id)]
               : 0;
  };
  if (weighted.empty()) return ids.empty() ? 0 : 1;
  std::sort(ids.begin(), ids.end(), [&](int a, int b) {
    return weight(weighted[0], a) > weight(weighted[0], b);
  });
  const size_t n = ids.size();
  // suffix_best[k][i][j]: the sum of the j heaviest nodes among ids[i..] by
  // weight k, for the bound.
  std::vector<std::vector<std::vector<uint64_t>>> best(weighted.size());
  for (size_t k = 0; k < weighted.size(); ++k) {
    best[k].assign(n + 1, std::vector<uint64_t>(n + 1, 0));
    for (size_t i = n; i-- > 0;) {
      std::vector<uint64_t> values;
      for (size_t m = i; m < n; ++m)
        values.push_back(weight(weighted[k], ids[m]));
      std::sort(values.rbegin(), values.rend());
      uint64_t sum = 0;
      for (size_t j = 1; j <= values.size(); ++j) {
        if (__builtin_add_overflow(sum, values[j - 1], &sum)) sum = UINT64_MAX;
        best[k][i][j] = sum;
      }
      for (size_t j = values.size() + 1; j <= n; ++j) best[k][i][j] = sum;
    }
  }
  std::vector<uint64_t> sums(weighted.size(), 0);
  int64_t steps = 0;
  constexpr int64_t kMaxSteps = 5'000'000;
  const std::function<bool(size_t, size_t)> pick = [&](size_t from,
                                                       size_t left) -> bool {
    if (++steps > kMaxSteps) return false;
    bool done = true;
    for (size_t k = 0; k < weighted.size(); ++k) {
      if (sums[k] < weighted[k].request) done = false;
    }
    if (done) return true;
    if (left == 0 || from >= n) return false;
    for (size_t k = 0; k < weighted.size(); ++k) {
      uint64_t reach = 0;
      if (__builtin_add_overflow(sums[k], best[k][from][left], &reach)) {
        reach = UINT64_MAX;
      }
      if (reach < weighted[k].request) return false;
    }
    for (size_t i = from; i < n; ++i) {
      std::vector<uint64_t> saved = sums;
      for (size_t k = 0; k < weighted.size(); ++k) {
        if (__builtin_add_overflow(sums[k], weight(weighted[k], ids[i]),
                                   &sums[k])) {
          sums[k] = UINT64_MAX;
        }
      }
      const bool ok = pick(i + 1, left - 1);
      sums = std::move(saved);
      if (ok) return true;
      if (steps > kMaxSteps) return false;
    }
    return false;
  };
  for (size_t size = 1; size <= n; ++size) {
    std::fill(sums.begin(), sums.end(), 0);
    if (pick(0, size)) return static_cast<int>(size);
    if (steps > kMaxSteps) break;
  }
  // Not found, or the search ran out: the whole set is a member when any
  // is (callers check that first).
  return static_cast<int>(n);
}

int HintFamily::Coverage(NumaMask mask) const {
  int count = 0;
  for (const auto& [item, n] : items) {
    if (!item.And(mask).IsEmpty()) count += n;
  }
  return count;
}

bool HintFamily::WeighsEnough(NumaMask mask) const {
  for (const Weighted& w : weighted) {
    uint64_t sum = 0;
    for (uint64_t bits = mask.bits(); bits != 0; bits &= bits - 1) {
      const auto id = static_cast<size_t>(std::countr_zero(bits));
      const uint64_t value = id < w.weight.size() ? w.weight[id] : 0;
      if (__builtin_add_overflow(sum, value, &sum)) sum = UINT64_MAX;
    }
    if (sum < w.request) return false;
  }
  return true;
}

bool HintFamily::Contains(NumaMask mask) const {
  if (std::find(extras.begin(), extras.end(), mask) != extras.end()) {
    return !mask.IsEmpty();
  }
  if (mask.IsEmpty() || !mask.IsSubsetOf(universe)) return false;
  for (NumaMask r : required) {
    if (r.And(mask).IsEmpty()) return false;
  }
  return Coverage(mask) >= request && WeighsEnough(mask);
}

bool HintFamily::SingleNodeItems() const {
  if (!weighted.empty()) return false;
  for (const auto& [item, n] : items) {
    if (item.Count() != 1) return false;
  }
  for (NumaMask r : required) {
    if (r.Count() != 1) return false;
  }
  return true;
}

int HintFamily::NarrowestMemberSize() const {
  int extra = 0;
  for (NumaMask e : extras) {
    if (!e.IsEmpty() && (extra == 0 || e.Count() < extra)) extra = e.Count();
  }
  const int member = NarrowestUpwardMemberSize();
  if (member == 0) return extra;
  return extra == 0 ? member : std::min(member, extra);
}

int HintFamily::NarrowestUpwardMemberSize() const {
  if (!Contains(universe) || universe.IsEmpty()) return 0;
  // Required single nodes must be in every member; beyond them, the search
  // adds nodes by decreasing weight (exact for single-node items, where
  // coverage is additive; a bounded exhaustive search otherwise).
  const std::vector<int> ids = universe.Ids();
  if (!weighted.empty() && items.empty() && required.empty()) {
    return NarrowestWeighedSize(weighted, universe);
  }
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
  NumaMask nodes = universe;
  for (NumaMask e : extras) nodes = nodes.Or(e);
  IterateMasks(nodes.Ids(), [&](NumaMask mask) {
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
