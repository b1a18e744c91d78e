#include "upstream_machines.h"

#include <cstdint>
#include <map>
#include <utility>

namespace topology::manager::upstream {

Topology MachineOf(int cpus, const std::function<Place(int)>& place) {
  Topology::Parts parts;
  std::map<int, CpuSet> node_cpus;
  std::map<int, CpuSet> core_cpus;
  for (int cpu = 0; cpu < cpus; ++cpu) {
    node_cpus[place(cpu).node].Add(cpu);
    core_cpus[place(cpu).core].Add(cpu);
  }
  for (const auto& [id, set] : node_cpus) {
    NumaNode node;
    node.id = id;
    node.cpus = set;
    node.memory_bytes = uint64_t{64} << 30;
    parts.numa_nodes.push_back(node);
  }
  for (int cpu = 0; cpu < cpus; ++cpu) {
    CpuInfo info;
    info.id = cpu;
    info.package_id = place(cpu).socket;
    info.core_id = place(cpu).core;
    info.numa_node = place(cpu).node;
    info.thread_siblings = core_cpus[place(cpu).core];
    parts.cpus.push_back(info);
  }
  parts.source = "policy_test.go";
  return Topology(std::move(parts));
}

Topology SingleSocketHT() {
  return MachineOf(8, [](int cpu) { return Place{cpu % 4, 0, 0}; });
}

Topology DualSocketHT() {
  return MachineOf(12, [](int cpu) {
    const int core = cpu % 6;
    return Place{core, core % 2, core % 2};
  });
}

Topology DualSocketNoHT() {
  return MachineOf(8, [](int cpu) { return Place{cpu, cpu / 4, cpu / 4}; });
}

Topology DualSocketMultiNumaPerSocketHT() {
  return MachineOf(80, [](int cpu) {
    const int core = cpu % 40;
    return Place{core, core / 20, core / 10};
  });
}

Topology MultiSocketDualSocketPerNumaHT() {
  return MachineOf(80, [](int cpu) {
    const int core = cpu % 40;
    return Place{core, core / 10, core / 20};
  });
}

}  // namespace topology::manager::upstream
