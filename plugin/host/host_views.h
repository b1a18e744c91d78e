// The host's views: status (JSON) and the NodeResourceTopology object,
// rendered from one typed snapshot of the state. The renderers read
// nothing else and hold no lock.
#ifndef TOPOLOGY_HOST_HOST_VIEWS_H_
#define TOPOLOGY_HOST_HOST_VIEWS_H_

#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "topology/cpu_set.h"
#include "topology/manager/device_manager.h"
#include "topology/manager/memory_explanation.h"
#include "topology/manager/topology_manager.h"
#include "topology/topology.h"

#include "plugin_registry.h"
#include "pod_result.h"

namespace topology::host {

struct ResourceSnapshot {
  std::string name = {};
  std::vector<manager::Device> devices = {};  // sorted by id
  std::vector<std::string> in_use = {};       // sorted
  bool connected = false;                     // a plugin serves it now
  std::string plugin = {};   // the plugin's socket file name; empty: none
  std::string socket = {};   // the plugin's socket path; empty: none
  std::string problem = {};  // why not connected, or what was refused
};

struct HostSnapshot {
  const Topology* topology = nullptr;  // NUMA nodes, CPUs, distances
  std::string node_name = {};
  std::string policy = {};
  std::string scope = {};
  // max-allowable-numa-nodes (the NodeResourceTopology's
  // topologyManagerMaxNUMANodes).
  int max_numa_nodes = 8;
  bool pod_policies = false;  // "dynamic": each pod's own
  std::string cpu_policy = {};
  std::string memory_policy = {};
  // The memory manager's state with the Static policy; nullopt with None.
  std::optional<manager::MemoryState> memory = {};
  CpuSet reserved_cpus = {};
  CpuSet shared_cpus = {};
  std::vector<ResourceSnapshot> resources = {};  // by name
  std::vector<PodResult> pods = {};              // by uid
};

// The Memory Manager's explanation in words, one sentence a line: the
// request, each node's free memory and who holds it, the sets of nodes the
// single- vs cross-node rule bars ("node 0 holds a single-node allocation
// of pod default/small (c); a cross-node allocation [0,1] may not include
// it"), and the sets of nodes that would hold it now. Sizes in one unit,
// the largest that holds each exactly. `name_of` turns a pod uid into
// "namespace/name".
std::vector<std::string> MemoryExplanationLines(
    const manager::MemoryExplanation& explanation,
    const std::function<std::string(const std::string&)>& name_of);

// One merge of an admission's explanation, as replies show it: each
// provider's hints (at most 64 a resource), the merged hint, the decision
// and its reason, and the Memory Manager's lines for it (when any).
nlohmann::json MergeTraceJson(const manager::MergeTrace& trace,
                              const std::vector<std::string>& memory);

// A plugin's ContainerAllocateResponse (as the device manager keeps it,
// serialized) as replies show it: envs, mounts, devices, annotations, CDI
// devices; null when absent or unreadable.
nlohmann::json AllocateResponseJson(const std::string& bytes);

// Each registered resource (`plugins`, the registry's) with its devices and
// those in use (`devices`, the device manager's snapshot), by name.
std::vector<ResourceSnapshot> ResourceSnapshots(
    std::vector<PluginRegistry::PluginState> plugins,
    std::map<std::string, manager::DeviceManager::ResourceSnapshot> devices);

// A resource's counts as the kubelet's node status has them.
struct ResourceView {
  size_t capacity = 0;
  size_t allocatable = 0;  // healthy devices of a connected plugin
  bool stopped = false;    // no plugin serves it now
  std::string endpoint;    // socket path of the current plugin
};
std::map<std::string, ResourceView> ResourceViews(const HostSnapshot& snapshot);

nlohmann::json StatusJson(const HostSnapshot& snapshot);
// topology.node.k8s.io/v1alpha2 NodeResourceTopology.
nlohmann::json NodeResourceTopologyJson(const HostSnapshot& snapshot);

}  // namespace topology::host

#endif  // TOPOLOGY_HOST_HOST_VIEWS_H_
