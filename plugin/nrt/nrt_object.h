// The NodeResourceTopology object (topology.node.k8s.io/v1alpha2) as
// topology-aware schedulers read it: one a node, named after it, its zones
// the node's NUMA nodes (type Node) with their SLIT costs and resources
// (capacity, allocatable, available), and the attributes the scheduler
// reads first (topologyManagerPolicy, topologyManagerScope,
// topologyManagerMaxNUMANodes, the pod fingerprint and its method). The
// exporter and `topology-manager status --format nrt` render through
// Render(); neither builds the JSON by hand.
#ifndef TOPOLOGY_NRT_NRT_OBJECT_H_
#define TOPOLOGY_NRT_NRT_OBJECT_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "topology/manager/memory_state.h"
#include "topology/numa_node.h"

namespace topology::nrt {

inline constexpr char kApiVersion[] = "topology.node.k8s.io/v1alpha2";
inline constexpr char kKind[] = "NodeResourceTopology";
// The collection's path below the API server's root.
inline constexpr char kCollectionPath[] =
    "/apis/topology.node.k8s.io/v1alpha2/noderesourcetopologies";
inline constexpr char kMaxNumaNodesAttribute[] = "topologyManagerMaxNUMANodes";

// One resource of one zone: counts (CPUs, devices) or bytes (memory, huge
// pages), published as decimal quantity strings.
struct ZoneResource {
  std::string name = {};
  uint64_t capacity = 0;
  uint64_t allocatable = 0;
  uint64_t available = 0;
  friend bool operator==(const ZoneResource&, const ZoneResource&) = default;
};

// One NUMA node: zone "node-<id>", type Node.
struct Zone {
  int id = 0;
  std::vector<std::pair<int, int>> costs = {};  // (node id, SLIT distance)
  std::vector<ZoneResource> resources = {};     // in publishing order
  friend bool operator==(const Zone&, const Zone&) = default;
};

struct NodeTopology {
  std::string node_name = {};
  // The Node's UID: the owner reference (the object goes with its Node);
  // empty when the Node could not be read.
  std::string node_uid = {};
  std::string policy = "none";      // the kubelet's topologyManagerPolicy
  std::string scope = "container";  // topologyManagerScope
  // max-allowable-numa-nodes of topologyManagerPolicyOptions (the
  // kubelet's default 8 when unset); 0 leaves the attribute out.
  int max_numa_nodes = 0;
  std::string fingerprint = {};         // "pfp0v001..."; empty leaves it out
  std::string fingerprint_method = {};  // "all" or "with-exclusive-resources"
  std::vector<Zone> zones = {};         // by node id
  friend bool operator==(const NodeTopology&, const NodeTopology&) = default;
};

// The deprecated topologyPolicies value older schedulers fall back to
// ("SingleNUMANodeContainerLevel", "None", ...), as the API's constants
// name policy and scope.
std::string TopologyPolicyName(const std::string& policy,
                               const std::string& scope);

// The object as the API server stores it (no resourceVersion).
nlohmann::json Render(const NodeTopology& topology);

// A zone's `memory` and `hugepages-<size>`: under the Memory Manager's
// Static policy, its state for the node (`state`: total, allocatable, and
// free as available); otherwise (`state` null, or a type it lacks) the
// node's own size for all three: nothing set aside or pinned per node.
void AppendMemoryResources(const NumaNode& node,
                           const manager::MemoryNodeState* state,
                           std::vector<ZoneResource>* out);

}  // namespace topology::nrt

#endif  // TOPOLOGY_NRT_NRT_OBJECT_H_
