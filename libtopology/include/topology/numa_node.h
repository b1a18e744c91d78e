// NumaNode: one online NUMA node as the kernel reports it.
//
// Thread safety: a value type.
#ifndef TOPOLOGY_NUMA_NODE_H_
#define TOPOLOGY_NUMA_NODE_H_

#include <cstdint>

#include "topology/cpu_set.h"

namespace topology {

struct NumaNode {
  // The kernel's node id. Ids may be sparse (0, 8, 250-255).
  int id = 0;
  // CPUs of the node; empty for CPU-less nodes (CXL, GPU or HBM memory).
  CpuSet cpus = {};
  // MemTotal of the node in bytes; 0 when unknown.
  uint64_t memory_bytes = 0;
  // For a CPU-less node: the CPUs nearest to its memory (the HMAT
  // initiators, else the nodes nearest in the SLIT, else what hwloc
  // computes, e.g. a GPU's local CPUs); empty when unknown. Empty for nodes
  // with CPUs, whose own CPUs are nearest.
  CpuSet near_cpus = {};

  bool has_cpus() const { return !cpus.empty(); }
};

}  // namespace topology

#endif  // TOPOLOGY_NUMA_NODE_H_
