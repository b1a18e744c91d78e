#include "hint_merger.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <optional>
#include <string>
#include <unordered_set>

#include "family_search.h"

namespace topology::manager::internal {

namespace {

// "the hint list of example.com/gpu is empty (...): <what follows>".
std::string EmptyListReason(const FlatList& list, const char* follows) {
  return (list.resource.empty()
              ? std::string("a hint list is empty")
              : "the hint list of " + list.resource +
                    " is empty (no set of NUMA nodes the policy allows holds "
                    "what is asked)") +
         ": " + follows;
}

}  // namespace

HintLists FlattenProviderHints(const std::vector<ProviderHints>& providers) {
  HintLists lists;
  for (const ProviderHints& provider : providers) {
    if (provider.empty()) {
      lists.push_back({{TopologyHint{std::nullopt, true}}, std::nullopt});
      continue;
    }
    for (const auto& [resource, hints] : provider) {
      if (!hints.has_value()) {
        lists.push_back(
            {{TopologyHint{std::nullopt, true}}, std::nullopt, resource});
      } else if (hints.is_family()) {
        lists.push_back({{}, hints.family(), resource});
      } else if (hints->empty()) {
        lists.push_back(
            {{TopologyHint{std::nullopt, false}}, std::nullopt, resource});
      } else {
        lists.push_back({*hints, std::nullopt, resource});
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
    if (list.family) {
      if (list.family->preferred_size == 1) {
        NumaMask nodes = list.family->universe;
        for (NumaMask e : list.family->extras) nodes = nodes.Or(e);
        for (int id : nodes.Ids()) {
          const NumaMask single = NumaMask::FromBits(uint64_t{1} << id);
          if (list.family->Contains(single)) kept.push_back({single, true});
        }
      }
    } else {
      for (const TopologyHint& hint : list.hints) {
        if (!hint.preferred) continue;
        if (!hint.affinity.has_value() || hint.affinity->Count() == 1) {
          kept.push_back(hint);
        }
      }
    }
    filtered.push_back({std::move(kept), std::nullopt, list.resource});
  }
  return filtered;
}

int BestNonPreferredAffinityCount(const HintLists& lists) {
  int best = 0;
  for (const auto& list : lists) {
    if (list.family) {
      best = std::max(best, list.family->NarrowestMemberSize());
      continue;
    }
    std::optional<NumaMask> narrowest;
    for (const TopologyHint& hint : list.hints) {
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
    for (const auto& list : lists) {
      permutations *= list.family
                          ? std::pow(2.0, list.family->universe.Count()) - 1
                          : static_cast<double>(list.hints.size());
    }
    explanation->permutations = permutations;
  }
  if (engine == MergeEngine::kReference) {
    return ReferenceMerge(lists, best_count, explanation);
  }
  for (const FlatList& list : lists) {
    if (list.family && !list.family->extras.empty()) {
      return SplitMerge(lists, best_count, explanation);
    }
  }
  return FastMerge(lists, best_count, explanation);
}

TopologyHint HintMerger::SplitMerge(const HintLists& lists, int best_count,
                                    MergeExplanation* explanation) const {
  const NumaMask all = numa_.DefaultAffinity();
  std::vector<size_t> coupled;
  for (size_t i = 0; i < lists.size(); ++i) {
    if (lists[i].family && !lists[i].family->extras.empty()) {
      coupled.push_back(i);
    }
  }
  const HintFamily& family = *lists[coupled[0]].family;
  const bool same = std::all_of(coupled.begin(), coupled.end(), [&](size_t i) {
    return *lists[i].family == family;
  });
  if (!same) {
    // Not one provider's lists: merged as the explicit lists they stand for.
    HintLists expanded = lists;
    for (size_t i : coupled) {
      expanded[i].hints = expanded[i].family->Expand();
      expanded[i].family.reset();
    }
    return FastMerge(expanded, best_count, explanation);
  }
  std::optional<TopologyHint> best;
  int64_t examined = 0;
  const auto run = [&](const HintLists& sub) {
    MergeExplanation part;
    bool found = false;
    TopologyHint hint = FastMerge(sub, best_count, &part, &found);
    examined += part.candidates_examined;
    if (!found) return;
    const TopologyHint* current = best ? &*best : nullptr;
    if (Compare(current, &hint, best_count) == &hint) best = hint;
  };
  // The upward-closed part in every coupled list.
  HintFamily upward = family;
  upward.extras.clear();
  if (!upward.universe.IsEmpty() && upward.Contains(upward.universe)) {
    HintLists sub = lists;
    for (size_t i : coupled) sub[i].family = upward;
    run(sub);
  }
  // Each extra, the same in every coupled list: one list of it says as much.
  for (NumaMask extra : family.extras) {
    HintLists sub;
    bool placed = false;
    for (size_t i = 0; i < lists.size(); ++i) {
      if (lists[i].family && !lists[i].family->extras.empty()) {
        if (!placed) {
          sub.push_back(
              {{TopologyHint{extra, extra.Count() == family.preferred_size}},
               std::nullopt,
               lists[i].resource});
          placed = true;
        }
        continue;
      }
      sub.push_back(lists[i]);
    }
    run(sub);
  }
  if (explanation) {
    explanation->candidates_examined = examined;
    explanation->reason =
        best ? std::string("the best of ") +
                   std::to_string(family.extras.size() + 1) +
                   " merges: the nodes free of pinned memory, and each "
                   "allocation already on its nodes"
             : "no permutation gave a non-empty mask: default affinity";
  }
  return best ? *best : TopologyHint{all, false};
}

// Exactly the kubelet: every permutation (one hint per list, first list
// outermost), merged and folded through Compare.
TopologyHint HintMerger::ReferenceMerge(const HintLists& flat, int best_count,
                                        MergeExplanation* explanation) const {
  // Families are expanded to the kubelet's explicit lists first.
  std::vector<std::vector<TopologyHint>> lists;
  for (const FlatList& list : flat) {
    lists.push_back(list.family ? list.family->Expand() : list.hints);
  }
  const NumaMask all = numa_.DefaultAffinity();
  for (size_t i = 0; i < lists.size(); ++i) {
    if (lists[i].empty()) {
      if (explanation) {
        explanation->reason = EmptyListReason(flat[i], "no permutation");
      }
      return TopologyHint{all, false};
    }
  }
  std::optional<TopologyHint> best;
  TopologyHint merged;
  std::vector<size_t> index(lists.size(), 0);
  int64_t examined = 0;
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
//     list: a depth-first search over distinct partial ANDs of the explicit
//     lists, visiting each (list, partial mask) once and pruning partial masks
//     whose count cannot reach the best count found so far; families then
//     cut each partial mask down as far as they can (family_search.h).
TopologyHint HintMerger::FastMerge(const HintLists& lists, int best_count,
                                   MergeExplanation* explanation,
                                   bool* found) const {
  if (found != nullptr) *found = false;
  const NumaMask all = numa_.DefaultAffinity();
  int64_t examined = 0;
  SearchBudget budget;
  const auto finish = [&](TopologyHint hint, std::string reason) {
    if (explanation) {
      explanation->candidates_examined = examined;
      if (budget.exhausted) {
        reason += " (search budget exhausted: best result found so far)";
      }
      explanation->reason = std::move(reason);
    }
    return hint;
  };
  if (lists.empty()) {
    if (found != nullptr) *found = !all.IsEmpty();
    return all.IsEmpty()
               ? finish(TopologyHint{all, false},
                        "no hint lists, but no NUMA nodes: default affinity")
               : finish(TopologyHint{all, true},
                        "no hint lists: the default affinity, preferred");
  }
  std::vector<const FlatList*> explicit_lists;
  std::vector<const HintFamily*> families;
  NumaMask family_universe = all;
  for (const FlatList& list : lists) {
    if (list.family) {
      families.push_back(&*list.family);
      family_universe = family_universe.And(list.family->universe);
    } else if (list.hints.empty()) {
      return finish(TopologyHint{all, false},
                    EmptyListReason(list, "nothing can be satisfied"));
    } else {
      explicit_lists.push_back(&list);
    }
  }

  // Step 2: preferred results.
  std::optional<NumaMask> best_preferred;
  const auto consider_preferred = [&](NumaMask merged) {
    ++examined;
    if (merged.IsEmpty()) return;
    if (!best_preferred || MaskBeats(merged, *best_preferred)) {
      best_preferred = merged;
    }
  };
  // A family's preferred hints are its members of its preferred size; all
  // families must agree on that size for a common preferred mask to exist.
  bool families_can_agree = true;
  int family_size = -1;
  for (const HintFamily* f : families) {
    if (f->NarrowestMemberSize() != f->preferred_size ||
        (family_size >= 0 && family_size != f->preferred_size)) {
      families_can_agree = false;
    }
    family_size = f->preferred_size;
  }
  const auto in_families = [&](uint64_t raw) {
    const NumaMask m = NumaMask::FromBits(raw);
    for (const HintFamily* f : families) {
      if (m.Count() != f->preferred_size || !f->Contains(m)) return false;
    }
    return true;
  };
  struct ListSets {
    std::unordered_set<uint64_t> preferred;  // raw masks of preferred hints
    bool preferred_nil = false;
  };
  std::vector<ListSets> sets(explicit_lists.size());
  for (size_t i = 0; i < explicit_lists.size(); ++i) {
    for (const TopologyHint& hint : explicit_lists[i]->hints) {
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
    return in_families(raw);
  };
  if (families_can_agree) {
    // Drive from the smallest set of an explicit list that has no preferred
    // nil hint; without one, from the families' members.
    const ListSets* driver = nullptr;
    for (const ListSets& s : sets) {
      if (!s.preferred_nil && (driver == nullptr ||
                               s.preferred.size() < driver->preferred.size())) {
        driver = &s;
      }
    }
    if (driver != nullptr) {
      for (uint64_t raw : driver->preferred) {
        if (offered_by_all(raw)) {
          consider_preferred(all.And(NumaMask::FromBits(raw)));
        }
      }
    } else if (!families.empty()) {
      // Members of the common size in increasing numeric order: with the
      // narrowest comparison the first one found is the best.
      ForEachSubset(
          family_universe, family_size,
          [&](NumaMask m) {
            if (!offered_by_all(m.bits())) return true;
            consider_preferred(all.And(m));
            return use_closest_;
          },
          &budget);
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
  }
  if (best_preferred) {
    if (found != nullptr) *found = true;
    return finish(TopologyHint{*best_preferred, true},
                  "preferred: every hint list offers this mask (or any node) "
                  "as preferred, and it is the best such mask");
  }

  // Step 3: the best non-preferred AND.
  std::vector<std::vector<uint64_t>> masks(explicit_lists.size());
  for (size_t i = 0; i < explicit_lists.size(); ++i) {
    std::unordered_set<uint64_t> distinct;
    for (const TopologyHint& hint : explicit_lists[i]->hints) {
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

  // With families, the result lies inside their common universe.
  const uint64_t reach = families.empty() ? all.bits() : family_universe.bits();
  std::optional<NumaMask> best;
  const auto offer = [&](NumaMask candidate) {
    ++examined;
    if (!best || NonPreferredBeats(candidate, *best, best_count))
      best = candidate;
  };
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
      if (families.empty()) {
        offer(NumaMask::FromBits(partial));
      } else if (auto z = BestFamilyResult(NumaMask::FromBits(partial & reach),
                                           best_count, families, &budget,
                                           &examined)) {
        offer(*z);
      }
      return;
    }
    for (uint64_t mask : masks[level]) {
      const uint64_t next = partial & mask;
      if (next == 0) continue;
      if (!can_improve(std::popcount(next & reach))) continue;
      if (!visited[level].insert(next).second) continue;
      search(level + 1, next);
    }
  };
  search(0, all.bits());
  if (best) {
    if (found != nullptr) *found = true;
    return finish(TopologyHint{*best, false},
                  "no mask is preferred by every hint list; this is the best "
                  "non-preferred AND of one mask per list");
  }
  return finish(TopologyHint{all, false},
                "every combination of masks is empty: default affinity");
}

std::optional<NumaMask> HintMerger::BestFamilyResult(
    NumaMask within, int best_count,
    const std::vector<const HintFamily*>& families, SearchBudget* budget,
    int64_t* examined) const {
  if (within.IsEmpty()) return std::nullopt;
  // Fewer nodes than B: the whole set is the best (most nodes below B), and
  // it is reachable: every family keeps its whole universe.
  if (within.Count() < best_count) return within;
  // Reachable results are upward-closed inside `within`; try sizes from B up
  // (B is tier 0, larger sizes are tier 2, narrower first).
  for (int size = std::max(best_count, 1); size <= within.Count(); ++size) {
    std::optional<NumaMask> best;
    const bool finished = ForEachSubset(
        within, size,
        [&](NumaMask z) {
          ++*examined;
          const NumaMask drop = NumaMask::FromBits(within.bits() & ~z.bits());
          if (!Assignable(drop, families, budget)) return !budget->exhausted;
          if (!best || MaskBeats(z, *best)) best = z;
          // Increasing numeric order: the first hit is the narrowest.
          return use_closest_;
        },
        budget);
    if (best) return best;
    if (!finished || budget->exhausted) return std::nullopt;
  }
  return within;
}

}  // namespace topology::manager::internal
