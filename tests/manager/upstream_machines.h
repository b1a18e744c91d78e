// The machines of the kubelet CPU manager's tests
// (pkg/kubelet/cm/cpumanager/policy_test.go of Kubernetes v1.37.2) as
// Topology values, for the upstream tables ported as our tests: each CPU's
// core, socket and NUMA node as upstream lists them; a core's threads are
// siblings, so the core ids are the lowest thread as discovery names them.
#ifndef TOPOLOGY_TESTS_MANAGER_UPSTREAM_MACHINES_H_
#define TOPOLOGY_TESTS_MANAGER_UPSTREAM_MACHINES_H_

#include <functional>

#include "topology/topology.h"

namespace topology::manager::upstream {

struct Place {
  int core;
  int socket;
  int node;
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

}  // namespace topology::manager::upstream

#endif  // TOPOLOGY_TESTS_MANAGER_UPSTREAM_MACHINES_H_
