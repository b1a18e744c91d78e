// The Memory Manager's Static policy (memorymanager/policy_static.go),
// bit-exact: hints per memory type over every set of NUMA nodes, the
// single- vs cross-node rule, init containers' memory reused by app
// containers, and validateState at start.
//
// Thread safety: a value type whose methods are called with the state they
// change (MemoryManager locks around it).
#ifndef TOPOLOGY_MANAGER_MEMORY_POLICY_STATIC_H_
#define TOPOLOGY_MANAGER_MEMORY_POLICY_STATIC_H_

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "topology/export.h"
#include "topology/manager/hint_family.h"
#include "topology/manager/memory_policy.h"
#include "topology/manager/memory_state.h"
#include "topology/manager/numa_mask.h"
#include "topology/numa_node.h"
#include "topology/status.h"

namespace topology::manager {

// --reserved-memory: node id -> memory type -> bytes (systemReservedMemory).
using ReservedMemory = std::map<int, std::map<std::string, uint64_t>>;

class TOPOLOGY_EXPORT StaticMemoryPolicy final : public MemoryPolicy {
 public:
  using MemoryPolicy::Start;
  // Memory an init container held that app containers of the same pod may
  // take again: pod uid -> mask string ("[0,1]") -> type -> bytes.
  using ReusableMemory =
      std::map<std::string,
               std::map<std::string, std::map<std::string, uint64_t>>>;

  // Fails like NewPolicyStatic when no node reserves any "memory".
  static StatusOr<StaticMemoryPolicy> Create(std::vector<NumaNode> nodes,
                                             ReservedMemory reserved);

  std::string_view Name() const override { return kMemoryPolicyStatic; }
  // validateState: an empty machine state becomes the default one (but not
  // with assignments); otherwise the state must equal the one rebuilt from
  // the assignments on this machine (within `checks.drift_tolerance`), and
  // becomes that one.
  Status Start(MemoryState& state,
               const MemoryStartChecks& checks) const override;
  // updateExpectedMachineState over every container: each block's memory
  // reserved on its nodes in order, as much as is free on each, the nodes'
  // assignments counted and grouped. The kubelet's errors for a node or a
  // memory type the machine lacks. `unfit`, when not null, receives the
  // first block that needed more than was free (the kubelet does not look).
  static Status UpdateExpectedMachineState(
      MemoryMachineState& machine,
      const ContainerMemoryAssignments& assignments,
      std::string* unfit = nullptr);
  // The machine state with nothing assigned (getDefaultMachineState).
  MemoryMachineState DefaultMachineState() const;

  ProviderHints GetTopologyHints(const MemoryState& state, const Pod& pod,
                                 const Container& container) const override;
  ProviderHints GetPodTopologyHints(const MemoryState& state,
                                    const Pod& pod) const override;
  // Allocate after the Topology Manager's merge; `affinity` is its stored
  // hint for the container. Idempotent. Errors are the kubelet's.
  Status Allocate(MemoryState& state, const Pod& pod,
                  const Container& container,
                  const TopologyHint& affinity) override;
  // Idempotent. Once the pod holds no memory, the memory its init
  // containers left for reuse goes too: a pod admitted again (by uid, as
  // the host's serve does and the kubelet never does) starts from nothing.
  void RemoveContainer(MemoryState& state, const std::string& pod_uid,
                       const std::string& container) override;

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

}  // namespace topology::manager

#endif  // TOPOLOGY_MANAGER_MEMORY_POLICY_STATIC_H_
