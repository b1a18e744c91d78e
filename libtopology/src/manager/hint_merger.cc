#include "hint_merger.h"

#include <algorithm>
#include <optional>
#include <unordered_set>

namespace topology::manager::internal {

HintLists FlattenProviderHints(const std::vector<ProviderHints>& providers) {
  HintLists lists;
  for (const ProviderHints& provider : providers) {
    if (provider.empty()) {
      lists.push_back({TopologyHint{std::nullopt, true}});
      continue;
    }
    for (const auto& [resource, hints] : provider) {
      if (!hints.has_value()) {
        lists.push_back({TopologyHint{std::nullopt, true}});
      } else if (hints->empty()) {
        lists.push_back({TopologyHint{std::nullopt, false}});
      } else {
        lists.push_back(*hints);
      }
    }
  }
  return lists;
}

HintLists FilterSingleNumaNodeHints(const HintLists& lists) {
  HintLists filtered;
  filtered.reserve(lists.size());
  for (const auto& list : lists) {
    std::vector<TopologyHint> kept;
    for (const TopologyHint& hint : list) {
      if (!hint.preferred) continue;
      if (!hint.affinity.has_value() || hint.affinity->Count() == 1) {
        kept.push_back(hint);
      }
    }
    filtered.push_back(std::move(kept));
  }
  return filtered;
}

int BestNonPreferredAffinityCount(const HintLists& lists) {
  int best = 0;
  for (const auto& list : lists) {
    std::optional<NumaMask> narrowest;
    for (const TopologyHint& hint : list) {
      if (!hint.affinity) continue;
      if (!narrowest || hint.affinity->IsNarrowerThan(*narrowest)) {
        narrowest = hint.affinity;
      }
    }
    if (narrowest) best = std::max(best, narrowest->Count());
  }
  return best;
}

HintMerger::HintMerger(const NumaInfo& numa, bool use_closest)
    : numa_(numa), use_closest_(use_closest) {}

bool HintMerger::MaskBeats(NumaMask candidate, NumaMask current) const {
  if (candidate == current) return false;
  if (!use_closest_ || candidate.Count() != current.Count()) {
    return candidate.IsNarrowerThan(current);
  }
  const double a = numa_.AverageDistance(candidate);
  const double b = numa_.AverageDistance(current);
  if (a != b) return a < b;
  return candidate.IsLessThan(current);
}

bool HintMerger::NonPreferredBeats(NumaMask candidate, NumaMask current,
                                   int best_count) const {
  const int c = current.Count();
  const int k = candidate.Count();
  if (c > best_count) return MaskBeats(candidate, current);
  if (c == best_count) return k == best_count && MaskBeats(candidate, current);
  // c < best_count
  if (k > best_count) return false;
  if (k == best_count) return true;
  if (k != c) return k > c;
  return MaskBeats(candidate, current);
}

const TopologyHint* HintMerger::Compare(const TopologyHint* current,
                                        const TopologyHint* candidate,
                                        int best_count) const {
  if (candidate->affinity->Count() == 0) return current;
  if (current == nullptr) return candidate;
  if (!current->preferred && candidate->preferred) return candidate;
  if (current->preferred && !candidate->preferred) return current;
  if (current->preferred) {
    return MaskBeats(*candidate->affinity, *current->affinity) ? candidate
                                                               : current;
  }
  return NonPreferredBeats(*candidate->affinity, *current->affinity, best_count)
             ? candidate
             : current;
}

TopologyHint HintMerger::Merge(const HintLists& lists, MergeEngine engine,
                               MergeExplanation* explanation) const {
  const int best_count = BestNonPreferredAffinityCount(lists);
  if (explanation != nullptr) {
    explanation->hint_lists = static_cast<int>(lists.size());
    explanation->best_non_preferred_count = best_count;
    double permutations = 1;
    for (const auto& list : lists)
      permutations *= static_cast<double>(list.size());
    explanation->permutations = permutations;
  }
  return engine == MergeEngine::kReference
             ? ReferenceMerge(lists, best_count, explanation)
             : FastMerge(lists, best_count, explanation);
}

// Exactly the kubelet: every permutation (one hint per list, first list
// outermost), merged and folded through Compare.
TopologyHint HintMerger::ReferenceMerge(const HintLists& lists, int best_count,
                                        MergeExplanation* explanation) const {
  const NumaMask all = numa_.DefaultAffinity();
  for (const auto& list : lists) {
    if (list.empty()) {
      if (explanation)
        explanation->reason = "a hint list is empty: no permutation";
      return TopologyHint{all, false};
    }
  }
  std::optional<TopologyHint> best;
  TopologyHint merged;
  std::vector<size_t> index(lists.size(), 0);
  long examined = 0;
  while (true) {
    // mergePermutation
    bool preferred = true;
    std::optional<NumaMask> first;
    NumaMask mask = all;
    for (size_t i = 0; i < lists.size(); ++i) {
      const TopologyHint& hint = lists[i][index[i]];
      if (hint.affinity) {
        if (!first) first = hint.affinity;
        if (*hint.affinity != *first) preferred = false;
        mask = mask.And(*hint.affinity);
      }
      if (!hint.preferred) preferred = false;
    }
    merged = TopologyHint{mask, preferred};
    ++examined;
    const TopologyHint* current = best ? &*best : nullptr;
    if (Compare(current, &merged, best_count) == &merged) best = merged;
    // Next permutation: the last list varies fastest.
    size_t i = lists.size();
    while (i > 0) {
      if (++index[i - 1] < lists[i - 1].size()) break;
      index[i - 1] = 0;
      --i;
    }
    if (i == 0) break;
  }
  if (explanation) {
    explanation->candidates_examined = examined;
    explanation->reason =
        best ? (best->preferred
                    ? "walked every permutation; the best is preferred"
                    : "walked every permutation; none is preferred, the best "
                      "non-preferred mask was chosen against the best count")
             : "no permutation gave a non-empty mask: default affinity";
  }
  return best ? *best : TopologyHint{all, false};
}

// The same answer without the cross product (docs/topology-manager.md):
//  1. Compare() is an order on merged hints in which preferred beats
//     non-preferred, so the fold returns the best element of the set of
//     merged results whatever the iteration order.
//  2. A permutation is preferred only if every hint is preferred and all its
//     non-nil masks are identical: the preferred results are the masks m
//     that every list offers as a preferred hint with mask m or a preferred
//     nil hint (and the default affinity if every list has the latter).
//  3. Otherwise every result is non-preferred and is the AND of one mask per
//     list: a depth-first search over distinct partial ANDs, visiting each
//     (list, partial mask) once and pruning partial masks whose count
//     cannot reach the best count found so far.
TopologyHint HintMerger::FastMerge(const HintLists& lists, int best_count,
                                   MergeExplanation* explanation) const {
  const NumaMask all = numa_.DefaultAffinity();
  long examined = 0;
  const auto finish = [&](TopologyHint hint, const char* reason) {
    if (explanation) {
      explanation->candidates_examined = examined;
      explanation->reason = reason;
    }
    return hint;
  };
  if (lists.empty()) {
    return all.IsEmpty()
               ? finish(TopologyHint{all, false},
                        "no hint lists, but no NUMA nodes: default affinity")
               : finish(TopologyHint{all, true},
                        "no hint lists: the default affinity, preferred");
  }
  for (const auto& list : lists) {
    if (list.empty()) {
      return finish(TopologyHint{all, false},
                    "a hint list is empty: nothing can be satisfied");
    }
  }

  // Step 2: preferred results.
  struct ListSets {
    std::unordered_set<uint64_t> preferred;  // raw masks of preferred hints
    bool preferred_nil = false;
  };
  std::vector<ListSets> sets(lists.size());
  for (size_t i = 0; i < lists.size(); ++i) {
    for (const TopologyHint& hint : lists[i]) {
      if (!hint.preferred) continue;
      if (hint.affinity) {
        sets[i].preferred.insert(hint.affinity->bits());
      } else {
        sets[i].preferred_nil = true;
      }
    }
  }
  const auto offered_by_all = [&](uint64_t raw) {
    for (const ListSets& s : sets) {
      if (!s.preferred_nil && s.preferred.count(raw) == 0) return false;
    }
    return true;
  };
  std::optional<NumaMask> best_preferred;
  const auto consider_preferred = [&](NumaMask merged) {
    ++examined;
    if (merged.IsEmpty()) return;
    if (!best_preferred || MaskBeats(merged, *best_preferred)) {
      best_preferred = merged;
    }
  };
  // Drive from the smallest set of a list that has no preferred nil hint.
  const ListSets* driver = nullptr;
  for (const ListSets& s : sets) {
    if (!s.preferred_nil &&
        (driver == nullptr || s.preferred.size() < driver->preferred.size())) {
      driver = &s;
    }
  }
  if (driver != nullptr) {
    for (uint64_t raw : driver->preferred) {
      if (offered_by_all(raw))
        consider_preferred(all.And(NumaMask::FromBits(raw)));
    }
  } else {
    consider_preferred(all);  // every list picks its preferred nil hint
    std::unordered_set<uint64_t> seen;
    for (const ListSets& s : sets) {
      for (uint64_t raw : s.preferred) {
        if (seen.insert(raw).second && offered_by_all(raw)) {
          consider_preferred(all.And(NumaMask::FromBits(raw)));
        }
      }
    }
  }
  if (best_preferred) {
    return finish(TopologyHint{*best_preferred, true},
                  "preferred: every hint list offers this mask (or any node) "
                  "as preferred, and it is the best such mask");
  }

  // Step 3: the best non-preferred AND.
  std::vector<std::vector<uint64_t>> masks(lists.size());
  for (size_t i = 0; i < lists.size(); ++i) {
    std::unordered_set<uint64_t> distinct;
    for (const TopologyHint& hint : lists[i]) {
      const uint64_t effective =
          hint.affinity ? (hint.affinity->bits() & all.bits()) : all.bits();
      if (effective != 0) distinct.insert(effective);
    }
    if (distinct.empty()) {
      return finish(TopologyHint{all, false},
                    "every mask of a hint list misses the machine's nodes: "
                    "default affinity");
    }
    masks[i].assign(distinct.begin(), distinct.end());
    // Wide masks first: they keep partial ANDs alive and find a good
    // candidate early, which sharpens the pruning.
    std::sort(masks[i].begin(), masks[i].end(), [](uint64_t a, uint64_t b) {
      const int ca = std::popcount(a);
      const int cb = std::popcount(b);
      return ca != cb ? ca > cb : a < b;
    });
  }
  std::sort(masks.begin(), masks.end(),
            [](const auto& a, const auto& b) { return a.size() < b.size(); });

  std::optional<NumaMask> best;
  std::vector<std::unordered_set<uint64_t>> visited(masks.size());
  // A partial AND with `count` bits only has results with at most `count`
  // bits: it cannot beat a best at the target count B from below it, nor a
  // best below B with more bits.
  const auto can_improve = [&](int count) {
    if (!best) return true;
    const int c = best->Count();
    if (c == best_count) return count >= best_count;
    if (c < best_count) return count >= c;
    return true;
  };
  const std::function<void(size_t, uint64_t)> search = [&](size_t level,
                                                           uint64_t partial) {
    if (level == masks.size()) {
      ++examined;
      const NumaMask candidate = NumaMask::FromBits(partial);
      if (!best || NonPreferredBeats(candidate, *best, best_count)) {
        best = candidate;
      }
      return;
    }
    for (uint64_t mask : masks[level]) {
      const uint64_t next = partial & mask;
      if (next == 0) continue;
      if (!can_improve(std::popcount(next))) continue;
      if (!visited[level].insert(next).second) continue;
      search(level + 1, next);
    }
  };
  search(0, all.bits());
  if (best) {
    return finish(TopologyHint{*best, false},
                  "no mask is preferred by every hint list; this is the best "
                  "non-preferred AND of one mask per list");
  }
  return finish(TopologyHint{all, false},
                "every combination of masks is empty: default affinity");
}

}  // namespace topology::manager::internal
