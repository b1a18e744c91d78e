// Store: where hint providers read back the affinity the manager chose.
//
// Thread safety: implementations document their own.
#ifndef TOPOLOGY_MANAGER_STORE_H_
#define TOPOLOGY_MANAGER_STORE_H_

#include <string>

#include "topology/manager/topology_hint.h"

namespace topology::manager {

class Store {
 public:
  virtual ~Store() = default;
  // The hint stored for (pod uid, container), or the zero hint (nil, false).
  virtual TopologyHint GetAffinity(const std::string& pod_uid,
                                   const std::string& container) const = 0;
};

}  // namespace topology::manager

#endif  // TOPOLOGY_MANAGER_STORE_H_
