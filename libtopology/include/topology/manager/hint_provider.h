// HintProvider: a source of topology hints per resource (the kubelet's CPU,
// memory and device managers), and the shapes its answers take.
//
// The three "no information" shapes are distinct, as in the kubelet:
//  * an empty ProviderHints map: the provider does not care;
//  * a resource mapped to std::nullopt (a nil list): no NUMA preference;
//  * a resource mapped to an empty vector: the request cannot be satisfied.
//
// Thread safety: implementations are called from one admission at a time.
#ifndef TOPOLOGY_MANAGER_HINT_PROVIDER_H_
#define TOPOLOGY_MANAGER_HINT_PROVIDER_H_

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "topology/manager/pod.h"
#include "topology/manager/topology_hint.h"
#include "topology/status.h"

namespace topology::manager {

// nullopt = a nil list.
using HintList = std::optional<std::vector<TopologyHint>>;
// Resource name -> hints; iterated in name order (the merge result does not
// depend on the order).
using ProviderHints = std::map<std::string, HintList>;

class HintProvider {
 public:
  virtual ~HintProvider() = default;
  // Hints for one container (container scope).
  virtual ProviderHints GetTopologyHints(const Pod& pod,
                                         const Container& container) = 0;
  // Hints for the whole pod (pod scope), from its effective requests.
  virtual ProviderHints GetPodTopologyHints(const Pod& pod) = 0;
  // Allocates for `container` after a successful merge, reading the stored
  // affinity from the Store it was given. A failure rejects the pod with
  // reason UnexpectedAdmissionError.
  virtual Status Allocate(const Pod& pod, const Container& container) = 0;
};

}  // namespace topology::manager

#endif  // TOPOLOGY_MANAGER_HINT_PROVIDER_H_
