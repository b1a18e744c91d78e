// HintFamily: a hint list in compact form. The kubelet's device and CPU
// managers list every mask of their NUMA nodes that can hold the request;
// that set is upward-closed (a wider mask holds at least as much), so it is
// fully described by the items and the request: 2^N masks need not be
// written down. On 64 NUMA nodes the list could not be written at all.
//
// Members: every non-empty mask M of `universe` that meets every `required`
// mask, for which the items meeting M number at least `request`, and whose
// nodes weigh at least each `weighted` request (the memory manager's free
// bytes per memory type); and, beside those, each of `extras` (the memory
// manager's nodes already holding memory alone or in a group: pairwise
// disjoint, and disjoint from `universe`). Preferred: members with exactly
// `preferred_size` nodes.
//
// Thread safety: a value type.
#ifndef TOPOLOGY_MANAGER_HINT_FAMILY_H_
#define TOPOLOGY_MANAGER_HINT_FAMILY_H_

#include <cstdint>
#include <utility>
#include <vector>

#include "topology/export.h"
#include "topology/manager/numa_mask.h"
#include "topology/manager/topology_hint.h"

namespace topology::manager {

struct TOPOLOGY_EXPORT HintFamily {
  // The nodes the generator combines (the kubelet's node list).
  NumaMask universe = {};
  // Distinct item masks (already limited to `universe`, never empty) and how
  // many items have each.
  std::vector<std::pair<NumaMask, int>> items = {};
  // Masks a member must meet (reusable items with topology).
  std::vector<NumaMask> required = {};
  int request = 0;
  int preferred_size = 0;
  // A member's nodes weigh at least `request` by `weight` (indexed by node
  // id, 64 entries).
  struct Weighted {
    std::vector<uint64_t> weight = {};
    uint64_t request = 0;
    friend bool operator==(const Weighted&, const Weighted&) = default;
  };
  std::vector<Weighted> weighted = {};
  // Members outside the upward-closed part (see above).
  std::vector<NumaMask> extras = {};

  // Items meeting `mask`.
  int Coverage(NumaMask mask) const;
  // Whether `mask` meets every weighted request.
  bool WeighsEnough(NumaMask mask) const;
  // Whether `mask` is a member.
  bool Contains(NumaMask mask) const;
  // True when every item and required mask is a single node and nothing is
  // weighted, so that excluding nodes costs a sum of per-node counts.
  bool SingleNodeItems() const;
  // The popcount of the narrowest member (extras included), or 0 when there
  // is none.
  int NarrowestMemberSize() const;
  // The same over the upward-closed part only (extras left out).
  int NarrowestUpwardMemberSize() const;
  // The kubelet's explicit list: every member in IterateMasks order over
  // the universe and the extras' nodes. Exponential in the universe; for
  // tests and the reference engine.
  std::vector<TopologyHint> Expand() const;

  friend bool operator==(const HintFamily&, const HintFamily&) = default;
};

// The fewest nodes of `within` that weigh at least every request (an exact
// bounded search); the size of `within` when the search runs out.
TOPOLOGY_EXPORT int NarrowestWeighedSize(
    const std::vector<HintFamily::Weighted>& weighted, NumaMask within);

}  // namespace topology::manager

#endif  // TOPOLOGY_MANAGER_HINT_FAMILY_H_
