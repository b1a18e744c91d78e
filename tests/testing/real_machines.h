// Access to the recorded real machines in shared/fixtures/real-machines
// (found at ../shared/fixtures/real-machines from the source tree, or at
// $TOPOLOGY_REAL_MACHINES). Tests skip with a clear message when absent.
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
