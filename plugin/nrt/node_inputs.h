// What the exporter reads from outside, parsed with bounds and checked
// accessors into plain values: the kubelet's configuration (its file, or
// its configz answer), the Memory Manager's state file, the node's
// ResourceSlices and the cluster's DeviceClasses. Every parser names what
// and where on a malformed input and never throws; each has a fuzz target.
#ifndef TOPOLOGY_NRT_NODE_INPUTS_H_
#define TOPOLOGY_NRT_NODE_INPUTS_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "topology/manager/memory_state.h"
#include "topology/status.h"

namespace topology::nrt {

// A kubelet configuration, a state file or a list of at most this size is
// read; a larger one is refused.
inline constexpr size_t kMaxConfigBytes = size_t{1} << 20;
inline constexpr size_t kMaxStateBytes = size_t{16} << 20;
inline constexpr size_t kMaxListBytes = size_t{64} << 20;

// The kubelet's settings the object publishes.
struct KubeletSettings {
  std::string policy = "none";      // topologyManagerPolicy
  std::string scope = "container";  // topologyManagerScope
  int max_numa_nodes = 8;           // max-allowable-numa-nodes
  std::string cpu_policy = "none";
  std::string memory_policy = "None";
  friend bool operator==(const KubeletSettings&,
                         const KubeletSettings&) = default;
};

// A KubeletConfiguration (kubelet.config.k8s.io/v1beta1) in YAML or JSON,
// or the kubelet's configz answer ({"kubeletconfig": {...}}). Fields the
// kubelet defaults are defaulted as it defaults them; a value the kubelet
// would refuse (an unknown policy or scope, a bad policy option) is
// INVALID_ARGUMENT naming `where` and the field.
StatusOr<KubeletSettings> ParseKubeletConfig(std::string_view text,
                                             std::string_view where);

// The Memory Manager's checkpoint (memory_manager_state, formats v1 to
// v3: the v3 "data" payload when present): its policy, the machine state
// per NUMA node and the blocks pods hold. INVALID_ARGUMENT naming `where` and
// the field.
struct MemoryManagerState {
  std::string policy = {};
  manager::MemoryMachineState machine = {};
  // Every block each pod (by UID) holds: its containers' ("entries") and
  // its own ("podEntries", pod-level resources).
  std::map<std::string, std::vector<manager::MemoryBlock>> blocks = {};
};
StatusOr<MemoryManagerState> ParseMemoryManagerState(std::string_view text,
                                                     std::string_view where);

// One device of a ResourceSlice of the node, with the attributes a class
// selector reads (qualified "domain/name" keys; a slice's unqualified name
// is qualified with its driver, as the scheduler does).
struct DraDevice {
  std::string driver = {};
  std::string pool = {};
  std::string name = {};
  std::optional<int> numa_node = {};  // resource.kubernetes.io/numaNode
  // An attribute's value as CEL compares it: a string, an integer or a
  // boolean, in its JSON spelling ("\"abc\"", "4", "true"); versions as
  // strings.
  std::map<std::string, std::string> attributes = {};
};
inline constexpr char kNumaNodeAttribute[] = "resource.kubernetes.io/numaNode";

// The devices of a ResourceSliceList (resource.k8s.io/v1) that belong to
// `node` (spec.nodeName), in list order. A pool seen in slices of two
// generations counts only its newest generation, as the scheduler does.
StatusOr<std::vector<DraDevice>> ParseResourceSlices(std::string_view list,
                                                     std::string_view node);

// A DeviceClass's selectors as the exporter evaluates them: a conjunction
// of equalities on device.driver and device.attributes["domain"].name (the
// selectors generated classes and most hand-written ones use). A class
// with any other expression keeps `unsupported` (why), and its devices are
// not counted.
struct ClassSelector {
  std::string name = {};  // the DeviceClass's
  std::optional<std::string> driver = {};
  std::map<std::string, std::string> attributes =
      {};  // qualified -> JSON value
  std::string unsupported = {};
};
StatusOr<std::vector<ClassSelector>> ParseDeviceClasses(std::string_view list);
// Parses one CEL expression into `selector` (conjunctions accumulate);
// false, with selector->unsupported set, for anything else.
bool ParseCelSelector(std::string_view expression, ClassSelector* selector);
bool Matches(const ClassSelector& selector, const DraDevice& device);

}  // namespace topology::nrt

#endif  // TOPOLOGY_NRT_NODE_INPUTS_H_
