// TopologyHint: a NUMA affinity (or nil, meaning "any node") and whether it
// is preferred. The zero value is (nil, false).
//
// Thread safety: a value type.
#ifndef TOPOLOGY_MANAGER_TOPOLOGY_HINT_H_
#define TOPOLOGY_MANAGER_TOPOLOGY_HINT_H_

#include <optional>
#include <string>

#include "topology/export.h"
#include "topology/manager/numa_mask.h"

namespace topology::manager {

struct TopologyHint {
  std::optional<NumaMask> affinity = {};  // nullopt = nil
  bool preferred = false;

  // "{[0,1] preferred}" / "{nil not-preferred}".
  TOPOLOGY_EXPORT std::string ToString() const;

  friend bool operator==(const TopologyHint&, const TopologyHint&) = default;
};

}  // namespace topology::manager

#endif  // TOPOLOGY_MANAGER_TOPOLOGY_HINT_H_
