// Where this build's source tree and programs are.
//
// The paths are compiled into one small generated object
// (build_paths_table.inc), not into the tests' compile flags: a test's
// object is then the same wherever the tree is checked out, and a compiler
// cache serves it to every clone.
#ifndef TOPOLOGY_TESTS_TESTING_BUILD_PATHS_H_
#define TOPOLOGY_TESTS_TESTING_BUILD_PATHS_H_

#include <string>
#include <string_view>

namespace topology::testing {

// The repository's top directory.
const std::string& SourceDir();

// Where recorded machines are unpacked, once per build tree.
const std::string& FixtureCacheDir();

// The path of the program this build makes for the CMake target `target`
// (e.g. "topology-manager"). A target this build does not make ends the
// test program with a message naming it.
const std::string& ProgramPath(std::string_view target);

}  // namespace topology::testing

#endif  // TOPOLOGY_TESTS_TESTING_BUILD_PATHS_H_
