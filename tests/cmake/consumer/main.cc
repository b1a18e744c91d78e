// Links against an installed libtopology and uses its public API only.
#include <iostream>

#include "topology/cost_model.h"
#include "topology/discovery.h"

int main() {
  auto address = topology::PciAddress::Parse("0000:3b:00.0");
  auto cpus = topology::CpuSet::ParseList("0-3");
  topology::Topology empty;
  const topology::CostModel model(empty);
  if (!address.ok() || !cpus.ok() || cpus->Count() != 4) return 1;
  std::cout << "consumer ok: " << address->ToString() << " "
            << topology::CostLevelLabel(topology::CostLevel::kSameSwitch)
            << "\n";
  return 0;
}
