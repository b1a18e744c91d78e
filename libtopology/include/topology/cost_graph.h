// Multi-resource selection on a cost graph (the cost-based device selection
// design): a request for several resource types at once (e.g. 2 GPUs + 1 NIC
// + 4 CPUs) is answered with the set of instances whose summed pairwise cost
// (within and across types) is smallest.
//
// Instances are PCI devices, or CPU-like units on a NUMA node. Costs come
// from the CostModel (device-device, device-node, node-node) plus optional
// extra costs between devices supplied by a plugin (e.g. NVLink lowering the
// cost of a GPU pair); a pair never costs less than 0.
//
// Instances of one type that are interchangeable (the same cost to every
// other instance) form one compound node of the graph. The solver runs a
// multi-start greedy walk, improves it by simulated annealing with a seeded
// generator (same input, same answer), and, for small graphs, an exact
// branch-and-bound search that serves as the quality oracle.
//
// Thread safety: CostGraphSelector is immutable; Select may run concurrently.
#ifndef TOPOLOGY_COST_GRAPH_H_
#define TOPOLOGY_COST_GRAPH_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "topology/cost_model.h"
#include "topology/export.h"
#include "topology/pci_address.h"
#include "topology/status.h"

namespace topology {

// One instance of a resource type.
struct TOPOLOGY_EXPORT GraphInstance {
  std::optional<PciAddress> device = {};  // a PCI device, or
  int numa_node = -1;                     // a unit on this NUMA node (CPU)

  std::string ToString() const;  // "0000:3b:00.0" or "numa:1"
  friend bool operator==(const GraphInstance&, const GraphInstance&) = default;
};

struct ResourceRequest {
  std::string name = {};
  int count = 0;
  std::vector<GraphInstance> pool = {};
};

struct ExtraCost {
  PciAddress a = {};
  PciAddress b = {};
  int cost = 0;  // added to the model's cost of the pair (may be negative)
};

enum class GraphSolver {
  kAnnealing,  // greedy, then simulated annealing (default)
  kGreedy,     // the greedy walk only
  kExact,      // branch and bound; fails with RESOURCE_EXHAUSTED when too big
};

struct GraphRequest {
  std::vector<ResourceRequest> resources = {};
  std::vector<ExtraCost> extra_costs = {};
  GraphSolver solver = GraphSolver::kAnnealing;
  uint64_t seed = 1;
  int annealing_steps = 20000;
};

struct GraphSelection {
  // Per resource name, the chosen instances (sorted).
  std::map<std::string, std::vector<GraphInstance>> selection = {};
  int64_t cost = 0;
  std::vector<int> numa_nodes = {};  // union over the chosen instances
  int64_t greedy_cost = 0;           // the greedy walk's cost (annealing start)
  // The best rejected alternative: the cheapest selection one unit away
  // (one instance swapped for another of its type); -1 when there is none.
  int64_t runner_up_cost = -1;
  std::string runner_up = {};  // "gpu: 0000:1b:00.0 instead of 0000:3d:00.0"
  std::string explanation = {};
};

class TOPOLOGY_EXPORT CostGraphSelector {
 public:
  // REQUIRES: `model` outlives the selector.
  explicit CostGraphSelector(const CostModel& model);

  // Fails with INVALID_ARGUMENT naming the resource or instance for: no
  // resources, a duplicate resource name, a count below 1 or above its pool,
  // an instance listed twice, a NUMA node that does not exist; NOT_FOUND for
  // a device not in the topology; RESOURCE_EXHAUSTED when the exact solver
  // would exceed its budget.
  StatusOr<GraphSelection> Select(const GraphRequest& request) const;

 private:
  const CostModel& model_;
};

}  // namespace topology

#endif  // TOPOLOGY_COST_GRAPH_H_
