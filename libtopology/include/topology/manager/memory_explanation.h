// Why memory for a container fits on the machine or not, as data: what the
// Static policy sees (the request, each node's free memory and who holds
// it), the sets of nodes the single- versus cross-node rule bars, and the
// sets that would hold the request now. Beyond the kubelet, which says only
// "insufficient memory"; the caller renders it (the host in words).
#ifndef TOPOLOGY_MANAGER_MEMORY_EXPLANATION_H_
#define TOPOLOGY_MANAGER_MEMORY_EXPLANATION_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "topology/manager/memory_state.h"
#include "topology/manager/numa_mask.h"

namespace topology::manager {

struct MemoryExplanation {
  // A container that holds memory on a node.
  struct Holder {
    std::string pod_uid;
    std::string container;
  };
  struct Node {
    int id = 0;
    // Per requested type, the node's table; a type the node lacks is absent.
    std::map<std::string, MemoryTable> memory = {};
    int assignments = 0;
    std::vector<int> cells = {};  // its group (one node: single-node)
    std::vector<Holder> holders = {};
  };
  // A set of nodes whose free memory would suffice, barred by the rule
  // because `node` holds a single-node allocation (`group` empty) or is in
  // the cross-node group `group` that is not the set.
  struct Barred {
    int node = 0;
    std::vector<int> group = {};
    NumaMask set = {};
    friend bool operator==(const Barred&, const Barred&) = default;
  };
  // Where it fits now: each set on a small machine, with its preference,
  // or on a large one (more than 8 nodes) the compact family's parts.
  struct Fit {
    NumaMask set = {};
    bool preferred = false;
  };

  std::optional<std::string> container;  // nullopt: the whole pod
  std::map<std::string, uint64_t> requests = {};
  std::vector<Node> nodes = {};  // by id
  // At most 4, in the order found; on a large machine only sets whose
  // nodes are each listed (the nodes holding memory are named instead).
  std::vector<Barred> barred = {};
  bool large = false;  // more than 8 nodes
  bool fits_nowhere = false;
  std::vector<Fit> fits = {};             // small machines
  std::vector<NumaMask> fit_extras = {};  // large machines: the family's
  std::optional<NumaMask> fit_universe;   // its upward-closed part
  int narrowest = 0;                      // of that part, in nodes
  int preferred_size = 0;
};

}  // namespace topology::manager

#endif  // TOPOLOGY_MANAGER_MEMORY_EXPLANATION_H_
