#include "topology/manager/topology_hint.h"

namespace topology::manager {

std::string TopologyHint::ToString() const {
  // Appended rather than "{" + std::string&&: GCC 12 at -O3 reports a false
  // -Wrestrict overlap in the inlined insert() of operator+.
  std::string out = "{";
  out += affinity ? affinity->ToString() : std::string("nil");
  out += preferred ? " preferred}" : " not-preferred}";
  return out;
}

}  // namespace topology::manager
