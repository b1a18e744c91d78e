// The object from what the exporter read: libtopology's NUMA nodes, CPUs,
// SLIT and memory; the kubelet's settings, its pod resources answers and
// its Memory Manager's state; the node's ResourceSlices and the cluster's
// DeviceClasses.
//
// Per zone (NUMA node):
//   cpu          capacity: its CPUs; allocatable: those GetAllocatableResources
//                names (all of them when it names none: the None policy);
//                available: allocatable less the CPUs pods hold exclusively.
//   memory,      under the Memory Manager's Static policy its state's total,
//   hugepages-*  allocatable and free for the node: a block over several
//                nodes is counted once, split as the manager split it;
//                a gone pod's memory, which the manager frees at the next
//                admission, is free.
//                Otherwise the node's own (sysfs) for all three: nothing is
//                set aside or pinned per node.
//   devices      each device plugin resource, counted on the nodes its
//                devices report, less those pods hold.
//   DRA classes  each DeviceClass, counted on the node of its devices'
//                resource.kubernetes.io/numaNode, less those pods' claims
//                hold (podresources' dynamic_resources).
// A device without a NUMA node is counted on the node when the machine has
// one node (it can be nowhere else); otherwise it is left out, and a note
// says so.
#ifndef TOPOLOGY_NRT_BUILD_H_
#define TOPOLOGY_NRT_BUILD_H_

#include <set>
#include <string>
#include <vector>

#include "topology/topology.h"

#include "node_inputs.h"
#include "node_resources.h"
#include "nrt_object.h"

namespace topology::nrt {

struct Inputs {
  const Topology* topology = nullptr;
  KubeletSettings kubelet = {};
  const NodeResources* resources = nullptr;
  // The Memory Manager's state; nullptr when not read.
  const MemoryManagerState* memory = nullptr;
  // The UIDs of the pods the kubelet still has (their directories below
  // its root); nullptr: all of them. The Memory Manager releases a gone
  // pod's memory only at its next admission (removeStaleState); until
  // then its state holds it, and the object counts it free.
  const std::set<std::string>* live_pods = nullptr;
  const std::vector<DraDevice>* dra_devices = nullptr;  // nullptr: none
  const std::vector<ClassSelector>* classes = nullptr;  // nullptr: none
  std::string node_name = {};
  std::string node_uid = {};
  std::string fingerprint_method = "all";
};

struct Built {
  NodeTopology object = {};
  // What was left out and why ("2 devices of example.com/nic report no
  // NUMA node; left out"), sorted, for the log.
  std::vector<std::string> notes = {};
};

Built Build(const Inputs& inputs);

}  // namespace topology::nrt

#endif  // TOPOLOGY_NRT_BUILD_H_
