#include "synthetic_machines.h"

#include "topology/discovery.h"

namespace topology::testing {

Topology DiscoverDualSocketGpuMachine(const std::filesystem::path& root) {
  WriteDualSocketGpuMachine(root);
  DiscoveryOptions options;
  options.host_root = root;
  return *Discover(options);
}

}  // namespace topology::testing
