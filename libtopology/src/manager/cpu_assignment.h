// The kubelet CPU manager's choice of CPUs (pkg/kubelet/cm/cpumanager,
// cpu_assignment.go, takeByTopologyNUMAPacked), ported to give the same
// answer for the same machine and free CPUs.
//
// The machine is described as the kubelet's CPUTopology describes it: each
// CPU's core (the lowest CPU id of its threads, unique on the machine),
// socket (physical package) and NUMA node, and the counts the kubelet
// derives its "per core" and "per socket" sizes from (CPUs / cores, CPUs /
// sockets: averages, as upstream has them).
//
// The order, upstream's "topology-aware best fit": whole NUMA nodes and
// whole sockets (the larger of the two first), then whole cores, then
// single CPUs; each level ordered by how few free CPUs it has (the most
// used first, to pack), ties by id; NUMA nodes inside sockets or sockets
// inside NUMA nodes as the machine nests them. With the spread strategy
// (the distribute-cpus-across-cores option) whole cores are not taken and
// single CPUs are ordered by socket, then id.
#ifndef TOPOLOGY_MANAGER_CPU_ASSIGNMENT_H_
#define TOPOLOGY_MANAGER_CPU_ASSIGNMENT_H_

#include <map>
#include <string>

#include "topology/cpu_set.h"
#include "topology/status.h"

namespace topology::manager {

struct CpuDetail {
  int core = 0;
  int socket = 0;
  int numa_node = 0;
};

struct CpuTopologyView {
  std::map<int, CpuDetail> cpus;
  int num_cpus = 0;
  int num_cores = 0;
  int num_sockets = 0;
  // As the kubelet counts them: the NUMA nodes that have CPUs (upstream's
  // tables leave it 0 for some machines; then sockets come second).
  int num_numa_nodes = 0;

  int CpusPerCore() const { return num_cores == 0 ? 0 : num_cpus / num_cores; }
  int CpusPerSocket() const {
    return num_sockets == 0 ? 0 : num_cpus / num_sockets;
  }
};

enum class CpuSorting { kPacked, kSpread };

// `count` CPUs of `available` (CPUs of `topology`) as the kubelet takes
// them. RESOURCE_EXHAUSTED with the kubelet's message ("not enough cpus
// available to satisfy request: requested=N, available=M") when
// `available` is too small.
StatusOr<CpuSet> TakeByTopologyNumaPacked(const CpuTopologyView& topology,
                                          const CpuSet& available, int count,
                                          CpuSorting sorting);

}  // namespace topology::manager

#endif  // TOPOLOGY_MANAGER_CPU_ASSIGNMENT_H_
