// Searches over HintFamily lists for the fast merge engine.
//
// With families, a merged result is Z = S AND m_1 AND ... AND m_k for
// explicit picks S and family members m_i. Because families are
// upward-closed, Z (a subset of W = S and every family's universe) is
// reachable iff the nodes W \ Z can be split among the families so that each
// family, without its share, still has a member: family i can give up the
// set D iff (universe_i \ D) is a member. That test ("assignable") and the
// ordered enumeration of candidate masks live here.
#ifndef TOPOLOGY_SRC_MANAGER_FAMILY_SEARCH_H_
#define TOPOLOGY_SRC_MANAGER_FAMILY_SEARCH_H_

#include <functional>
#include <optional>
#include <vector>

#include "topology/manager/hint_family.h"

namespace topology::manager::internal {

// A budget of search steps shared by one merge; exhausted searches report
// it so the merger can say so.
struct SearchBudget {
  int64_t steps_left = 2'000'000;
  bool exhausted = false;
  bool Spend(int64_t steps = 1) {
    steps_left -= steps;
    if (steps_left < 0) exhausted = true;
    return !exhausted;
  }
};

// Whether the nodes of `drop` can be split among `families` so that each
// still has a member without its share. REQUIRES: `drop` lies inside every
// family's universe.
bool Assignable(NumaMask drop, const std::vector<const HintFamily*>& families,
                SearchBudget* budget);

// Calls `visit` for every subset of `within` with `size` nodes in increasing
// numeric order until it returns false. Returns false if the budget ran out.
bool ForEachSubset(NumaMask within, int size,
                   const std::function<bool(NumaMask)>& visit,
                   SearchBudget* budget);

}  // namespace topology::manager::internal

#endif  // TOPOLOGY_SRC_MANAGER_FAMILY_SEARCH_H_
