// make-sysfs-fixture NAME DIR: writes a named synthetic machine below DIR.
#include <iostream>

#include "synthetic_machines.h"

int main(int argc, char** argv) {
  if (argc != 3) {
    std::cerr << "usage: make-sysfs-fixture NAME DIR\nnames:";
    for (const auto& name : topology::testing::MachineNames())
      std::cerr << " " << name;
    std::cerr << "\n";
    return 2;
  }
  try {
    if (!topology::testing::WriteMachine(argv[1], argv[2])) {
      std::cerr << "make-sysfs-fixture: unknown machine \"" << argv[1]
                << "\"\n";
      return 2;
    }
  } catch (const std::exception& e) {
    std::cerr << "make-sysfs-fixture: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
