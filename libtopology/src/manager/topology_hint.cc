#include "topology/manager/topology_hint.h"

namespace topology::manager {

std::string TopologyHint::ToString() const {
  return "{" + (affinity ? affinity->ToString() : std::string("nil")) +
         (preferred ? " preferred}" : " not-preferred}");
}

}  // namespace topology::manager
