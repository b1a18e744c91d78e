#include "family_search.h"

#include <algorithm>
#include <climits>
#include <set>

namespace topology::manager::internal {
namespace {

NumaMask Bit(int id) { return NumaMask::FromBits(uint64_t{1} << id); }

// Single-node families: giving up a node costs its items' count, and a
// family can give up nodes while the cost stays within its slack and none
// is required. A multiple-knapsack feasibility, solved by depth-first search
// over nodes (hardest first) with memoised failed (node, slacks) states.
class KnapsackAssigner {
 public:
  KnapsackAssigner(NumaMask drop,
                   const std::vector<const HintFamily*>& families,
                   SearchBudget* budget)
      : budget_(budget) {
    const size_t k = families.size();
    slack_.resize(k);
    for (size_t i = 0; i < k; ++i) {
      slack_[i] =
          families[i]->Coverage(families[i]->universe) - families[i]->request;
    }
    for (int node : drop.Ids()) {
      std::vector<int> cost(k, -1);  // -1: this family cannot give it up
      for (size_t i = 0; i < k; ++i) {
        const HintFamily& f = *families[i];
        const bool required =
            std::any_of(f.required.begin(), f.required.end(),
                        [&](NumaMask r) { return r.IsSet(node); });
        if (!required) cost[i] = f.Coverage(Bit(node));
      }
      costs_.push_back(std::move(cost));
    }
    // Hardest nodes (fewest and costliest options) first.
    std::sort(costs_.begin(), costs_.end(), [](const auto& a, const auto& b) {
      const auto options = [](const std::vector<int>& c) {
        return std::count_if(c.begin(), c.end(), [](int x) { return x >= 0; });
      };
      const auto cheapest = [](const std::vector<int>& c) {
        int best = INT32_MAX;
        for (int x : c) {
          if (x >= 0) best = std::min(best, x);
        }
        return best;
      };
      if (options(a) != options(b)) return options(a) < options(b);
      return cheapest(a) > cheapest(b);
    });
  }

  bool Run() { return Assign(0); }

 private:
  bool Assign(size_t index) {
    if (index == costs_.size()) return true;
    if (!budget_->Spend()) return false;
    std::vector<int> key = slack_;
    key.push_back(static_cast<int>(index));
    if (failed_.count(key)) return false;
    const std::vector<int>& cost = costs_[index];
    // Cheapest family first keeps slack for the nodes still to come.
    std::vector<size_t> order;
    for (size_t i = 0; i < cost.size(); ++i) {
      if (cost[i] >= 0 && cost[i] <= slack_[i]) order.push_back(i);
    }
    std::sort(order.begin(), order.end(),
              [&](size_t a, size_t b) { return cost[a] < cost[b]; });
    for (size_t i : order) {
      slack_[i] -= cost[i];
      const bool ok = Assign(index + 1);
      slack_[i] += cost[i];
      if (ok) return true;
      if (budget_->exhausted) return false;
    }
    failed_.insert(std::move(key));
    return false;
  }

  SearchBudget* budget_;
  std::vector<int> slack_;
  std::vector<std::vector<int>> costs_;
  std::set<std::vector<int>> failed_;
};

// Any families: depth-first over nodes, checking membership directly.
bool AssignGeneral(const std::vector<int>& nodes, size_t index,
                   std::vector<NumaMask>& given,
                   const std::vector<const HintFamily*>& families,
                   SearchBudget* budget) {
  if (index == nodes.size()) return true;
  if (!budget->Spend()) return false;
  for (size_t i = 0; i < families.size(); ++i) {
    const NumaMask next = given[i].Or(Bit(nodes[index]));
    const NumaMask kept =
        NumaMask::FromBits(families[i]->universe.bits() & ~next.bits());
    if (!families[i]->Contains(kept)) continue;
    const NumaMask before = given[i];
    given[i] = next;
    const bool ok = AssignGeneral(nodes, index + 1, given, families, budget);
    given[i] = before;
    if (ok) return true;
    if (budget->exhausted) return false;
  }
  return false;
}

}  // namespace

bool Assignable(NumaMask drop, const std::vector<const HintFamily*>& families,
                SearchBudget* budget) {
  if (drop.IsEmpty()) return true;
  if (families.empty()) return false;
  const bool single =
      std::all_of(families.begin(), families.end(),
                  [](const HintFamily* f) { return f->SingleNodeItems(); });
  if (single) return KnapsackAssigner(drop, families, budget).Run();
  std::vector<NumaMask> given(families.size());
  return AssignGeneral(drop.Ids(), 0, given, families, budget);
}

bool ForEachSubset(NumaMask within, int size,
                   const std::function<bool(NumaMask)>& visit,
                   SearchBudget* budget) {
  const std::vector<int> ids = within.Ids();
  const int n = static_cast<int>(ids.size());
  if (size <= 0 || size > n) return true;
  // Gosper's hack over positions in `ids`: increasing positions are
  // increasing numeric masks, since ids ascend.
  uint64_t positions = size == 64 ? ~uint64_t{0} : (uint64_t{1} << size) - 1;
  while (n == 64 || (positions >> n) == 0) {
    if (!budget->Spend()) return false;
    uint64_t bits = 0;
    for (uint64_t p = positions; p != 0; p &= p - 1) {
      bits |= uint64_t{1} << ids[static_cast<size_t>(std::countr_zero(p))];
    }
    if (!visit(NumaMask::FromBits(bits))) return true;
    const uint64_t lowest = positions & (~positions + 1);
    const uint64_t ripple = positions + lowest;
    if (ripple == 0) break;  // the last combination of 64 positions
    positions = (((ripple ^ positions) >> 2) / lowest) | ripple;
  }
  return true;
}

}  // namespace topology::manager::internal
