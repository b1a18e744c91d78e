// The kubelet CPU manager's choice of CPUs (pkg/kubelet/cm/cpumanager,
// cpu_assignment.go: takeByTopologyNUMAPacked and
// takeByTopologyNUMADistributed), ported to give the same answer for the
// same machine and free CPUs.
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
// single CPUs are ordered by socket, then id. With prefer-align-cpus-by-
// uncorecache, whole uncore caches (L3 groups) and then the fewest of them
// come between sockets and cores.
//
// The distributed form (distribute-cpus-across-numa) spreads a request
// over the fewest NUMA nodes evenly, in groups of `group_size` CPUs,
// choosing the nodes that leave the free CPUs most balanced.
#ifndef TOPOLOGY_MANAGER_CPU_ASSIGNMENT_H_
#define TOPOLOGY_MANAGER_CPU_ASSIGNMENT_H_

#include <map>
#include <string>

#include "topology/cpu_set.h"
#include "topology/status.h"
#include "topology/topology.h"

namespace topology::manager {

struct CpuDetail {
  int core = 0;
  int socket = 0;
  int numa_node = 0;
  // The uncore cache (L3 group) as cadvisor names it: the L3 cache's id
  // where it is shared by part of a NUMA node's CPUs, else the socket.
  int uncore = 0;
};

struct CpuTopologyView {
  std::map<int, CpuDetail> cpus;
  int num_cpus = 0;
  int num_cores = 0;
  int num_sockets = 0;
  // As the kubelet counts them: the NUMA nodes that have CPUs (upstream's
  // tables leave it 0 for some machines; then sockets come second).
  int num_numa_nodes = 0;
  int num_uncore_caches = 0;

  int CpusPerCore() const { return num_cores == 0 ? 0 : num_cpus / num_cores; }
  int CpusPerSocket() const {
    return num_sockets == 0 ? 0 : num_cpus / num_sockets;
  }
  int CpusPerUncore() const {
    return num_uncore_caches == 0 ? 0 : num_cpus / num_uncore_caches;
  }
};

// The kubelet's CPUTopology of a machine: what cpumanager/topology.Discover
// makes of the MachineInfo cadvisor reads from the same sysfs (tested
// against both on the test kit's machines).
CpuTopologyView DiscoverCpuTopology(const Topology& topology);

enum class CpuSorting { kPacked, kSpread };

struct TakeOptions {
  CpuSorting sorting = CpuSorting::kPacked;
  // prefer-align-cpus-by-uncorecache (packed form only).
  bool prefer_uncore = false;
};

// `count` CPUs of `available` (CPUs of `topology`) as the kubelet takes
// them. RESOURCE_EXHAUSTED with the kubelet's message ("not enough cpus
// available to satisfy request: requested=N, available=M") when
// `available` is too small.
StatusOr<CpuSet> TakeByTopologyNumaPacked(const CpuTopologyView& topology,
                                          const CpuSet& available, int count,
                                          TakeOptions options);

// takeByTopologyNUMADistributed: `count` CPUs spread over NUMA nodes in
// groups of `group_size` (the threads of a core under full-pcpus-only,
// else 1); with `align_by_socket`, nodes of one socket are preferred.
// Where the kubelet's own loop would never end (remainder CPUs no chosen
// node can give in whole groups), INTERNAL instead.
StatusOr<CpuSet> TakeByTopologyNumaDistributed(const CpuTopologyView& topology,
                                               const CpuSet& available,
                                               int count, int group_size,
                                               CpuSorting sorting,
                                               bool align_by_socket);

}  // namespace topology::manager

#endif  // TOPOLOGY_MANAGER_CPU_ASSIGNMENT_H_
