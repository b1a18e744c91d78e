// The machines of the kubelet CPU manager's tests
// (pkg/kubelet/cm/cpumanager/policy_test.go of Kubernetes v1.37.2) as
// Topology values, for the upstream tables ported as our tests: each CPU's
// core, socket and NUMA node as upstream lists them; a core's threads are
// siblings, so the core ids are the lowest thread as discovery names them.
// A machine with uncore caches gives each CPU an L3 cache of that id shared
// by the CPUs of the same uncore cache, so that the CPU manager names them
// as cadvisor does (the L3 id, or the socket where one L3 serves a whole
// NUMA node, which these machines number alike).
#ifndef TOPOLOGY_TESTS_MANAGER_UPSTREAM_MACHINES_H_
#define TOPOLOGY_TESTS_MANAGER_UPSTREAM_MACHINES_H_

#include <functional>

#include "topology/topology.h"

namespace topology::manager::upstream {

struct Place {
  int core;
  int socket;
  int node;
  int uncore = -1;  // no L3 cache
};

// `cpus` CPUs, CPU c at place(c); 64 GiB a node.
Topology MachineOf(int cpus, const std::function<Place(int)>& place);

// topoSingleSocketHT: 1 socket, 4 cores, 2 threads (CPU c and c+4).
Topology SingleSocketHT();
// topoDualSocketHT: 2 sockets of 3 cores, 2 threads; even cores on socket
// 0, odd on 1; CPU c and c+6 share core c.
Topology DualSocketHT();
// topoDualSocketNoHT: 2 sockets of 4 cores, one thread each.
Topology DualSocketNoHT();
// topoDualSocketMultiNumaPerSocketHT: 2 sockets, 4 nodes of 10 cores, 2
// threads (CPU c and c+40).
Topology DualSocketMultiNumaPerSocketHT();
// fakeTopoMultiSocketDualSocketPerNumaHT: 4 sockets, 2 nodes (two sockets
// a node), 10 cores a socket, 2 threads (CPU c and c+40).
Topology MultiSocketDualSocketPerNumaHT();
// topoDualSocketMultiNumaPerSocketHTType2: 40 cores, 2 threads (CPU c and
// c+40), CPU c on NUMA node c % 4 and socket (c % 4) % 2.
Topology DualSocketMultiNumaPerSocketHTType2();

// The uncore cache machines, each CPU c as policy_test.go lists it:
// topoDualSocketSingleNumaPerSocketSMTUncore: 2 sockets (a node each) of 96
// cores, 2 threads (c and c+192), uncore caches of 8 cores.
Topology DualSocketSingleNumaPerSocketSMTUncore();
// topoSingleSocketSingleNumaPerSocketSMTSmallUncore: 64 cores, 2 threads
// (c and c+64), uncore caches of 4 cores.
Topology SingleSocketSingleNumaPerSocketSMTSmallUncore();
// topoSingleSocketSingleNumaPerSocketNoSMTSmallUncore: 64 cores, one
// thread, uncore caches of 4.
Topology SingleSocketSingleNumaPerSocketNoSMTSmallUncore();
// topoSmallDualSocketSingleNumaPerSocketNoSMTUncore: 2 sockets (a node
// each) of 32 cores, one thread, uncore caches of 8.
Topology SmallDualSocketSingleNumaPerSocketNoSMTUncore();
// topoSmallSingleSocketSingleNumaPerSocketNoSMTUncore: 32 cores, one
// thread, uncore caches of 8.
Topology SmallSingleSocketSingleNumaPerSocketNoSMTUncore();
// topoLargeSingleSocketSingleNumaPerSocketSMTUncore: 128 cores, 2 threads
// (c and c+128), uncore caches of 8 cores.
Topology LargeSingleSocketSingleNumaPerSocketSMTUncore();
// topoDualSocketMultiNumaPerSocketUncore: 96 cores, 2 threads (c and c+96);
// by CPU, not core: nodes of 48 CPUs, sockets of 96, uncore caches of 8.
Topology DualSocketMultiNumaPerSocketUncore();
// topoDualSocketSubNumaPerSocketHTMonolithicUncore: 2 sockets of 60 cores,
// 2 threads (c and c+120), nodes of 30 cores, one uncore cache a socket.
Topology DualSocketSubNumaPerSocketHTMonolithicUncore();
// topoSingleSocketSingleNumaPerSocketPCoreHTMonolithicUncore: 16 cores,
// cores 8-15 with a second thread (CPUs 16-23), one uncore cache.
Topology SingleSocketSingleNumaPerSocketPCoreHTMonolithicUncore();
// topoLargeSingleSocketSingleNumaPerSocketUncore: 128 cores, one thread,
// uncore caches of 8.
Topology LargeSingleSocketSingleNumaPerSocketUncore();
// topoSingleSocketSingleNumaPerSocketUncore: 64 cores, one thread, one
// uncore cache.
Topology SingleSocketSingleNumaPerSocketUncore();

}  // namespace topology::manager::upstream

#endif  // TOPOLOGY_TESTS_MANAGER_UPSTREAM_MACHINES_H_
