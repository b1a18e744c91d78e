// topology-sysfs-fixture NAME DIR: writes a named synthetic machine below
// DIR (DIR/sys, and DIR/proc and DIR/dev where the machine has them), for
// running a plugin or topology-info with --host-root DIR.
#include <cstring>
#include <filesystem>
#include <iostream>
#include <string>

#include "topology/testing/machines.h"

namespace {

void Usage(std::ostream& out) {
  out << "usage: topology-sysfs-fixture NAME DIR   write machine NAME below "
         "DIR\n"
         "       topology-sysfs-fixture --list      the machines, one a "
         "line\n"
         "DIR must not exist or be empty. Then: topology-info --host-root "
         "DIR, or a plugin with --host-root DIR.\nmachines:\n";
  for (const auto& machine : topology::testing::Machines()) {
    out << "  " << machine.name << "  " << machine.description << "\n";
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 2 && (std::strcmp(argv[1], "--help") == 0 ||
                    std::strcmp(argv[1], "-h") == 0)) {
    Usage(std::cout);
    return 0;
  }
  if (argc == 2 && std::strcmp(argv[1], "--list") == 0) {
    for (const auto& machine : topology::testing::Machines()) {
      std::cout << machine.name << "\t" << machine.description << "\n";
    }
    return 0;
  }
  if (argc == 2 && std::strcmp(argv[1], "--version") == 0) {
    std::cout << "topology-sysfs-fixture (libtopology test kit)\n";
    return 0;
  }
  if (argc != 3) {
    Usage(std::cerr);
    return 2;
  }
  const std::string name = argv[1];
  const std::filesystem::path dir = argv[2];
  try {
    // Writing into a tree that exists would mix two machines.
    if (std::filesystem::exists(dir) && !std::filesystem::is_empty(dir)) {
      std::cerr << "topology-sysfs-fixture: " << dir.string()
                << " exists and is not empty\n";
      return 2;
    }
    if (!topology::testing::WriteMachine(name, dir)) {
      std::cerr << "topology-sysfs-fixture: unknown machine \"" << name
                << "\" (--list shows them)\n";
      return 2;
    }
  } catch (const std::exception& e) {
    std::cerr << "topology-sysfs-fixture: " << e.what() << "\n";
    return 1;
  }
  std::cout << dir.string() << "\n";
  return 0;
}
