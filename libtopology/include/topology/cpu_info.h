// CpuInfo: where one logical CPU sits (package, die, core, thread siblings).
//
// Thread safety: a value type.
#ifndef TOPOLOGY_CPU_INFO_H_
#define TOPOLOGY_CPU_INFO_H_

#include <optional>

#include "topology/cpu_set.h"

namespace topology {

struct CpuInfo {
  // Linux CPU number.
  int id = 0;
  // physical_package_id; -1 when the architecture does not report it.
  int package_id = -1;
  // core_id, unique only inside a package; -1 when unknown.
  int core_id = -1;
  // The NUMA node whose cpulist holds this CPU, if any.
  std::optional<int> numa_node = {};
  // CPUs sharing this CPU's core (SMT siblings), itself included.
  CpuSet thread_siblings = {};
  // The CPU's level 3 cache: its id as sysfs numbers it (cache/indexN/id)
  // and the CPUs sharing it; -1 and empty when not known.
  int l3_cache_id = -1;
  CpuSet l3_shared = {};
};

}  // namespace topology

#endif  // TOPOLOGY_CPU_INFO_H_
