// Preferred allocation for one resource: choose exactly k of the available
// devices, every must-include device among them, minimising the summed
// pairwise CostModel cost. Ties go to the choice that leaves the largest
// groups (boards, switches, host bridges, NUMA nodes) untouched, then to the
// lowest addresses, so the answer is deterministic and keeps room for later
// requests.
//
// Exact: the costs of one NUMA group form a tree (a pair's cost is decided
// by the deepest group holding both), minimised by dynamic programming over
// that tree; the NUMA groups, whose pairwise costs follow the SLIT, are
// combined by an exhaustive search over how many devices each gives. When
// that search would exceed its budget (dozens of NUMA groups with devices
// and a large k) a multi-start greedy refined by moves between groups is
// used instead and the result says so (docs/device-selection.md gives the
// measured gap).
//
// Thread safety: a DeviceSelector is immutable; Select may run concurrently.
#ifndef TOPOLOGY_DEVICE_SELECTION_H_
#define TOPOLOGY_DEVICE_SELECTION_H_

#include <string>
#include <vector>

#include "topology/cost_model.h"
#include "topology/export.h"
#include "topology/pci_address.h"
#include "topology/status.h"

namespace topology {

struct SelectionRequest {
  std::vector<PciAddress> available = {};
  std::vector<PciAddress> must_include = {};
  int size = 0;
  // Also find the best rejected alternative for the explanation (costs one
  // extra selection per chosen device). Default: false.
  bool explain = false;
  // Steps the search over NUMA groups may take before the heuristic takes
  // over (0 forces the heuristic, to measure it). Default: 400,000.
  int64_t group_search_budget = 400000;
};

struct Selection {
  std::vector<PciAddress> devices = {};  // sorted
  int cost = 0;                          // summed pairwise cost
  std::vector<int> numa_nodes = {};      // union of the devices' affinities
  bool exact = true;                     // false when the heuristic was used
  // With SelectionRequest::explain: why this set won.
  std::string explanation = {};
  // The cheapest set that differs (cost -1 when there is none).
  std::vector<PciAddress> runner_up = {};
  int runner_up_cost = -1;
};

class TOPOLOGY_EXPORT DeviceSelector {
 public:
  // REQUIRES: `model` outlives the selector.
  explicit DeviceSelector(const CostModel& model);

  // Fails with INVALID_ARGUMENT (naming the address or number) when a device
  // is listed twice, a must-include device is not available, size < 1, size
  // exceeds the available devices, or fewer than the must-include devices;
  // with NOT_FOUND for an address that is not in the topology. Never returns
  // a partial answer.
  StatusOr<Selection> Select(const SelectionRequest& request) const;

 private:
  const CostModel& model_;
};

}  // namespace topology

#endif  // TOPOLOGY_DEVICE_SELECTION_H_
