// The one merge algorithm shared by every policy (the kubelet's HintMerger):
// flattening provider output, the single-numa-node filter, the
// bestNonPreferredAffinityCount, mask comparison, and the two engines.
#ifndef TOPOLOGY_SRC_MANAGER_HINT_MERGER_H_
#define TOPOLOGY_SRC_MANAGER_HINT_MERGER_H_

#include <optional>
#include <string>
#include <vector>

#include "topology/manager/hint_provider.h"
#include "topology/manager/numa_info.h"
#include "topology/manager/policy.h"

#include "family_search.h"

namespace topology::manager::internal {

// One flattened hint list: explicit hints, or a compact family.
struct FlatList {
  std::vector<TopologyHint> hints;
  std::optional<HintFamily> family;
  // The resource whose hints these are ("" for a provider without any), so
  // that a rejection can name it.
  std::string resource = {};
};
using HintLists = std::vector<FlatList>;

// One list per (provider, resource), in provider order and, within a
// provider, resource-name order. An empty provider and a nil list become
// [(nil, preferred)]; an empty list becomes [(nil, not preferred)].
HintLists FlattenProviderHints(const std::vector<ProviderHints>& providers);

// Keeps only preferred hints whose mask is nil or a single node (a family
// becomes its preferred single-node members). A list may become empty.
HintLists FilterSingleNumaNodeHints(const HintLists& lists);

// Max over lists of the popcount of the list's narrowest non-nil mask (a
// family's narrowest member).
int BestNonPreferredAffinityCount(const HintLists& lists);

class HintMerger {
 public:
  // `use_closest`: break equal-count ties by average NUMA distance
  // (prefer-closest-numa-nodes; never for single-numa-node). REQUIRES:
  // numa.has_distances() when use_closest. `numa` must outlive the merger.
  HintMerger(const NumaInfo& numa, bool use_closest);

  // The best merged hint of `lists`, or (default affinity, not preferred)
  // when no permutation yields a non-empty mask.
  TopologyHint Merge(const HintLists& lists, MergeEngine engine,
                     MergeExplanation* explanation) const;

  // The kubelet's CompareNUMAAffinityMasks: true when `candidate` replaces
  // `current` (never for identical masks).
  bool MaskBeats(NumaMask candidate, NumaMask current) const;

 private:
  // The kubelet's HintMerger.compare: the hint that is best after seeing
  // `candidate` with `current` best so far (nullptr = none yet).
  const TopologyHint* Compare(const TopologyHint* current,
                              const TopologyHint* candidate,
                              int best_count) const;
  // True when non-preferred `candidate` beats non-preferred `current`.
  bool NonPreferredBeats(NumaMask candidate, NumaMask current,
                         int best_count) const;

  TopologyHint ReferenceMerge(const HintLists& lists, int best_count,
                              MergeExplanation* explanation) const;
  // `found`, when given, says whether some permutation gave a non-empty
  // mask (false: the answer is the default affinity for want of one).
  TopologyHint FastMerge(const HintLists& lists, int best_count,
                         MergeExplanation* explanation,
                         bool* found = nullptr) const;
  // FastMerge of lists some of whose families have extras (the memory
  // manager's): the extras are disjoint from every other member, so a
  // permutation that mixes them ANDs to nothing; the answer is the best of
  // one merge with the families' upward-closed parts and one per extra.
  TopologyHint SplitMerge(const HintLists& lists, int best_count,
                          MergeExplanation* explanation) const;
  // The best merged mask of size `size` or more within `within`, reachable
  // through `families` (see family_search.h); nullopt if none or the budget
  // ran out.
  std::optional<NumaMask> BestFamilyResult(
      NumaMask within, int best_count,
      const std::vector<const HintFamily*>& families, SearchBudget* budget,
      int64_t* examined) const;

  const NumaInfo& numa_;
  bool use_closest_;
};

}  // namespace topology::manager::internal

#endif  // TOPOLOGY_SRC_MANAGER_HINT_MERGER_H_
