#include "upstream_machines.h"

#include <cstdint>
#include <map>
#include <utility>

namespace topology::manager::upstream {

Topology MachineOf(int cpus, const std::function<Place(int)>& place) {
  Topology::Parts parts;
  std::map<int, CpuSet> node_cpus;
  std::map<int, CpuSet> core_cpus;
  std::map<int, CpuSet> uncore_cpus;
  for (int cpu = 0; cpu < cpus; ++cpu) {
    node_cpus[place(cpu).node].Add(cpu);
    core_cpus[place(cpu).core].Add(cpu);
    if (place(cpu).uncore >= 0) uncore_cpus[place(cpu).uncore].Add(cpu);
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
    if (place(cpu).uncore >= 0) {
      info.l3_cache_id = place(cpu).uncore;
      info.l3_shared = uncore_cpus[place(cpu).uncore];
    }
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

Topology DualSocketMultiNumaPerSocketHTType2() {
  return MachineOf(80, [](int cpu) {
    return Place{cpu % 40, cpu % 4 % 2, cpu % 4};
  });
}

Topology DualSocketSingleNumaPerSocketSMTUncore() {
  return MachineOf(384, [](int cpu) {
    const int core = cpu % 192;
    return Place{core, core / 96, core / 96, core / 8};
  });
}

Topology SingleSocketSingleNumaPerSocketSMTSmallUncore() {
  return MachineOf(128, [](int cpu) {
    const int core = cpu % 64;
    return Place{core, 0, 0, core / 4};
  });
}

Topology SingleSocketSingleNumaPerSocketNoSMTSmallUncore() {
  return MachineOf(64, [](int cpu) { return Place{cpu, 0, 0, cpu / 4}; });
}

Topology SmallDualSocketSingleNumaPerSocketNoSMTUncore() {
  return MachineOf(64, [](int cpu) {
    return Place{cpu, cpu / 32, cpu / 32, cpu / 8};
  });
}

Topology SmallSingleSocketSingleNumaPerSocketNoSMTUncore() {
  return MachineOf(32, [](int cpu) { return Place{cpu, 0, 0, cpu / 8}; });
}

Topology LargeSingleSocketSingleNumaPerSocketSMTUncore() {
  return MachineOf(256, [](int cpu) {
    const int core = cpu % 128;
    return Place{core, 0, 0, core / 8};
  });
}

Topology DualSocketMultiNumaPerSocketUncore() {
  return MachineOf(192, [](int cpu) {
    return Place{cpu % 96, cpu / 96, cpu / 48, cpu / 8};
  });
}

Topology DualSocketSubNumaPerSocketHTMonolithicUncore() {
  return MachineOf(240, [](int cpu) {
    const int core = cpu % 120;
    return Place{core, core / 60, core / 30, core / 60};
  });
}

Topology SingleSocketSingleNumaPerSocketPCoreHTMonolithicUncore() {
  return MachineOf(24, [](int cpu) {
    return Place{cpu < 16 ? cpu : cpu - 8, 0, 0, 0};
  });
}

Topology LargeSingleSocketSingleNumaPerSocketUncore() {
  return MachineOf(128, [](int cpu) { return Place{cpu, 0, 0, cpu / 8}; });
}

Topology SingleSocketSingleNumaPerSocketUncore() {
  return MachineOf(64, [](int cpu) { return Place{cpu, 0, 0, 0}; });
}

}  // namespace topology::manager::upstream
