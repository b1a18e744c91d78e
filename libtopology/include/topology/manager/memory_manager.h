// The kubelet's Memory Manager (pkg/kubelet/cm/memorymanager), the fourth
// hint provider: policies None and Static, bit-exact to policy_static.go.
//
// StaticMemoryPolicy is the policy over a MemoryState it does not own, as
// upstream's staticPolicy over its state.State, so that the upstream test
// tables run against it unchanged: machine state per NUMA node and memory
// type (total, system reserved, allocatable, reserved, free, the number of
// assignments and the group of nodes the node is allocated with), and the
// memory blocks of each container. MemoryManager is the HintProvider the
// Topology Manager calls: it owns a MemoryState, reads the merged affinity
// from the Store and locks around the policy.
//
// Memory types are "memory" and "hugepages-<size>" ("hugepages-2Mi"); sizes
// are bytes. Only containers of Guaranteed pods get hints and memory.
//
// Thread safety: StaticMemoryPolicy is a value type whose methods are called
// with the state they change; MemoryManager locks an internal mutex.
#ifndef TOPOLOGY_MANAGER_MEMORY_MANAGER_H_
#define TOPOLOGY_MANAGER_MEMORY_MANAGER_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "topology/export.h"
#include "topology/manager/hint_provider.h"
#include "topology/manager/store.h"
#include "topology/numa_node.h"
#include "topology/status.h"
#include "topology/thread_annotations.h"

namespace topology::manager {

inline constexpr char kMemoryResource[] = "memory";
inline constexpr char kHugePagesPrefix[] = "hugepages-";
inline constexpr char kMemoryPolicyNone[] = "None";
inline constexpr char kMemoryPolicyStatic[] = "Static";

// "hugepages-<size>".
TOPOLOGY_EXPORT bool IsHugePagesResource(std::string_view name);
// "memory" or "hugepages-<size>".
TOPOLOGY_EXPORT bool IsMemoryResource(std::string_view name);

// One memory type on one NUMA node (state.MemoryTable), bytes.
struct MemoryTable {
  uint64_t total = 0;  // TotalMemSize
  uint64_t system_reserved = 0;
  uint64_t allocatable = 0;
  uint64_t reserved = 0;
  uint64_t free = 0;
  friend bool operator==(const MemoryTable&, const MemoryTable&) = default;
};

// One NUMA node (state.NUMANodeState).
struct MemoryNodeState {
  std::map<std::string, MemoryTable> memory = {};  // by memory type
  int assignments = 0;                             // NumberOfAssignments
  // Cells: the nodes this node is allocated with (itself alone when free).
  std::vector<int> cells = {};
  friend bool operator==(const MemoryNodeState&,
                         const MemoryNodeState&) = default;
};
using MemoryMachineState = std::map<int, MemoryNodeState>;

// Memory of one type a container holds on a group of nodes (state.Block).
struct MemoryBlock {
  std::vector<int> numa_affinity = {};
  std::string type = {};
  uint64_t size = 0;
  friend bool operator==(const MemoryBlock&, const MemoryBlock&) = default;
};
// pod uid -> container name -> blocks (state.ContainerMemoryAssignments).
using ContainerMemoryAssignments =
    std::map<std::string, std::map<std::string, std::vector<MemoryBlock>>>;

struct MemoryState {
  MemoryMachineState machine = {};
  ContainerMemoryAssignments assignments = {};
  // The container's blocks, or nullptr (GetMemoryBlocks' nil).
  const std::vector<MemoryBlock>* Blocks(const std::string& pod_uid,
                                         const std::string& container) const;
};

// --reserved-memory: node id -> memory type -> bytes (systemReservedMemory).
using ReservedMemory = std::map<int, std::map<std::string, uint64_t>>;
// One --reserved-memory entry as given ("0:memory=1Gi,hugepages-2Mi=2Mi").
struct MemoryReservation {
  int numa_node = 0;
  std::map<std::string, uint64_t> limits = {};
};

// validation_reserved_memory.go's validateReservedMemoryConfiguration, run
// on every kubelet configuration whatever the policy: each limit's type is
// memory or hugepages-<size> and not zero, and no NUMA node names a type
// twice. INVALID_ARGUMENT with the kubelet's words, every error joined as
// its aggregate error joins them ("[a, b]" for more than one).
TOPOLOGY_EXPORT Status ValidateReservedMemoryConfiguration(
    const std::vector<MemoryReservation>& reservations);

// memory_manager.go's validateReservedMemory: every node named exists, and
// per memory type the reservations add up to the Node Allocatable
// reservation of that type (kube-reserved + system-reserved + hard
// eviction). Errors carry the kubelet's words.
TOPOLOGY_EXPORT Status ValidateReservedMemory(
    const std::vector<NumaNode>& nodes,
    const std::map<std::string, uint64_t>& node_allocatable_reservation,
    const std::vector<MemoryReservation>& reservations);
// convertReserved: the entries by node (a later entry of a node and type
// replaces an earlier one); every node present, possibly empty.
TOPOLOGY_EXPORT ReservedMemory
ConvertReservedMemory(const std::vector<NumaNode>& nodes,
                      const std::vector<MemoryReservation>& reservations);

// The memory types a container asks for and their bytes
// (getRequestedResources): "memory" and every "hugepages-<size>" limit.
TOPOLOGY_EXPORT std::map<std::string, uint64_t> ContainerRequestedMemory(
    const Container& container);
// The pod's effective request per type (getPodRequestedResources): app and
// restartable init containers summed, at least each regular init container
// plus the restartable ones started before it.
TOPOLOGY_EXPORT std::map<std::string, uint64_t> PodRequestedMemory(
    const Pod& pod);

class TOPOLOGY_EXPORT StaticMemoryPolicy {
 public:
  // Memory an init container held that app containers of the same pod may
  // take again: pod uid -> mask string ("[0,1]") -> type -> bytes.
  using ReusableMemory =
      std::map<std::string,
               std::map<std::string, std::map<std::string, uint64_t>>>;

  // Fails like NewPolicyStatic when no node reserves any "memory".
  static StatusOr<StaticMemoryPolicy> Create(std::vector<NumaNode> nodes,
                                             ReservedMemory reserved);

  // validateState: an empty machine state becomes the default one (but not
  // with assignments); otherwise the state must equal the one rebuilt from
  // the assignments on this machine.
  Status Start(MemoryState& state) const;
  // The machine state with nothing assigned (getDefaultMachineState).
  MemoryMachineState DefaultMachineState() const;

  ProviderHints GetTopologyHints(const MemoryState& state, const Pod& pod,
                                 const Container& container) const;
  ProviderHints GetPodTopologyHints(const MemoryState& state,
                                    const Pod& pod) const;
  // Allocate after the Topology Manager's merge; `affinity` is its stored
  // hint for the container. Idempotent. Errors are the kubelet's.
  Status Allocate(MemoryState& state, const Pod& pod,
                  const Container& container, const TopologyHint& affinity);
  // Idempotent. Once the pod holds no memory, the memory its init
  // containers left for reuse goes too: a pod admitted again (by uid, as
  // the host's serve does and the kubelet never does) starts from nothing.
  void RemoveContainer(MemoryState& state, const std::string& pod_uid,
                       const std::string& container);

  const ReusableMemory& reusable_memory() const { return reusable_; }
  void set_reusable_memory(ReusableMemory reusable) {
    reusable_ = std::move(reusable);
  }
  const std::vector<NumaNode>& nodes() const { return nodes_; }
  const ReservedMemory& reserved() const { return reserved_; }

  // The kubelet's calculateHints for `requests` (exhaustive over every
  // subset of the nodes); keyed by type, absent when no mask fits.
  std::map<std::string, std::vector<TopologyHint>> CalculateHints(
      const MemoryMachineState& machine, const std::string& pod_uid,
      const std::map<std::string, uint64_t>& requests) const;
  // The same hints in compact form (HintFamily: the nodes free of pinned
  // memory as a weighted upward-closed family, the nodes holding memory
  // alone or in a group as extras); nullopt when no mask fits. Its Expand()
  // is CalculateHints' list.
  std::optional<HintFamily> CompactHints(
      const MemoryMachineState& machine, const std::string& pod_uid,
      const std::map<std::string, uint64_t>& requests) const;
  // Machines with more NUMA nodes than this get compact hints, and Allocate
  // searches them instead of listing every subset (8 by default: the
  // kubelet's own limit without max-allowable-numa-nodes).
  void set_exhaustive_limit(size_t nodes) { exhaustive_limit_ = nodes; }

 private:
  StaticMemoryPolicy(std::vector<NumaNode> nodes, ReservedMemory reserved)
      : nodes_(std::move(nodes)), reserved_(std::move(reserved)) {}
  uint64_t Reusable(const std::string& pod_uid, NumaMask mask,
                    const std::string& type) const;
  void UpdateReusable(const Pod& pod, const Container& container,
                      const std::vector<MemoryBlock>& blocks);
  void UpdateInitContainersBlocks(MemoryState& state, const Pod& pod,
                                  const Container& container,
                                  const std::vector<MemoryBlock>& blocks) const;
  StatusOr<TopologyHint> DefaultHint(
      const MemoryMachineState& machine, const std::string& pod_uid,
      const std::map<std::string, uint64_t>& requests) const;
  StatusOr<TopologyHint> ExtendHint(
      const MemoryMachineState& machine, const std::string& pod_uid,
      const std::map<std::string, uint64_t>& requests, NumaMask mask) const;

  // calculateHints' list or family for `requests`, and its best hint that
  // holds `base` (findBestHint over the members holding it).
  StatusOr<TopologyHint> BestHint(
      const MemoryMachineState& machine, const std::string& pod_uid,
      const std::map<std::string, uint64_t>& requests,
      std::optional<NumaMask> base) const;
  ProviderHints HintsFor(const MemoryMachineState& machine,
                         const std::string& pod_uid,
                         const std::map<std::string, uint64_t>& requests) const;
  bool Compact(const MemoryMachineState& machine) const {
    return machine.size() > exhaustive_limit_;
  }

  std::vector<NumaNode> nodes_;
  ReservedMemory reserved_;
  ReusableMemory reusable_;
  size_t exhaustive_limit_ = 8;
};

// True when a node of `mask` is already in a single-node allocation or a
// group other than `mask` (isAffinityViolatingNUMAAllocations).
TOPOLOGY_EXPORT bool IsAffinityViolatingNumaAllocations(
    const MemoryMachineState& machine, NumaMask mask);

class TOPOLOGY_EXPORT MemoryManager final : public HintProvider {
 public:
  struct Options {
    std::string policy = kMemoryPolicyNone;
    // --reserved-memory, as given.
    std::vector<MemoryReservation> reserved_memory = {};
    // kube-reserved + system-reserved + hard eviction, per memory type.
    std::map<std::string, uint64_t> node_allocatable_reservation = {};
  };
  // Fails where the kubelet refuses to start: an unknown policy; for
  // Static, reservations that do not add up or name a missing node, or no
  // reserved memory at all.
  static StatusOr<std::unique_ptr<MemoryManager>> Create(
      const Options& options, const std::vector<NumaNode>& nodes,
      const Store* store);

  bool is_static() const { return policy_ != nullptr; }
  const std::string& policy_name() const { return policy_name_; }

  ProviderHints GetTopologyHints(const Pod& pod,
                                 const Container& container) override;
  ProviderHints GetPodTopologyHints(const Pod& pod) override;
  Status Allocate(const Pod& pod, const Container& container) override;

  void RemoveContainer(const std::string& pod_uid,
                       const std::string& container);
  void RemovePod(const std::string& pod_uid);
  // Puts back the blocks of a container from a checkpoint, as validateState
  // would find them: every node and type must exist and the memory must fit
  // what is free. INVALID_ARGUMENT naming pod and container otherwise.
  Status Restore(const std::string& pod_uid, const std::string& container,
                 const std::vector<MemoryBlock>& blocks);
  // The container's blocks; empty when it holds none.
  std::vector<MemoryBlock> ContainerBlocks(const std::string& pod_uid,
                                           const std::string& container) const;
  MemoryState State() const;
  // The machine state with nothing assigned (Static); empty with None.
  MemoryMachineState Baseline() const;

  // Beyond the kubelet: why memory for `container` (nullptr: the whole pod,
  // pod scope) fits or not, one sentence a line: the request, each node's
  // free memory and who holds it, the single- vs cross-node rule where it
  // bars a set of nodes ("node 0 holds a single-node allocation of pod
  // default/small; a cross-node allocation [0,1] may not include it"), and
  // the sets of nodes that would hold it now. `name_of` turns a pod uid
  // into "namespace/name". Empty with None or for a pod that is not
  // Guaranteed.
  std::vector<std::string> Explain(
      const Pod& pod, const Container* container,
      const std::function<std::string(const std::string&)>& name_of) const;

 private:
  MemoryManager(std::string policy_name,
                std::unique_ptr<StaticMemoryPolicy> policy, const Store* store);

  const std::string policy_name_;
  const Store* const store_;
  mutable Mutex mutex_;
  // Null for the None policy.
  const std::unique_ptr<StaticMemoryPolicy> policy_
      TOPOLOGY_PT_GUARDED_BY(mutex_);
  MemoryState state_ TOPOLOGY_GUARDED_BY(mutex_);
};

}  // namespace topology::manager

#endif  // TOPOLOGY_MANAGER_MEMORY_MANAGER_H_
