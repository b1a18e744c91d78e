// The test kit's named machines (topology/testing/machines.h), and the one
// the tests discover most.
#ifndef TOPOLOGY_TESTS_TESTING_SYNTHETIC_MACHINES_H_
#define TOPOLOGY_TESTS_TESTING_SYNTHETIC_MACHINES_H_

#include <filesystem>

#include "topology/testing/machines.h"
#include "topology/topology.h"

namespace topology::testing {

// Writes the dual-socket 8-GPU machine below `root` and discovers it.
Topology DiscoverDualSocketGpuMachine(const std::filesystem::path& root);

}  // namespace topology::testing

#endif  // TOPOLOGY_TESTS_TESTING_SYNTHETIC_MACHINES_H_
