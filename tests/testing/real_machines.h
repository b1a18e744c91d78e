// Access to the recorded real machines in tests/data/real-machines (hwloc's
// recordings, BSD-3-Clause; see the README there), or in the folder named by
// $TOPOLOGY_REAL_MACHINES, which lets more recordings be run the same way.
#ifndef TOPOLOGY_TESTS_TESTING_REAL_MACHINES_H_
#define TOPOLOGY_TESTS_TESTING_REAL_MACHINES_H_

#include <filesystem>
#include <optional>
#include <string>

namespace topology::testing {

// The folder holding the recordings, or nullopt.
std::optional<std::filesystem::path> RealMachinesDir();

// Unpacks `tarball` (a name in RealMachinesDir()) into the build tree's
// fixture cache, once, and returns the host root it contains; nullopt on
// failure.
std::optional<std::filesystem::path> UnpackRealMachine(
    const std::string& tarball);

}  // namespace topology::testing

#endif  // TOPOLOGY_TESTS_TESTING_REAL_MACHINES_H_
