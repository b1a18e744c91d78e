// The kubelet's Memory Manager (pkg/kubelet/cm/memorymanager,
// memory_manager.go): the fourth hint provider. It checks the reserved
// memory configuration at start, chooses the policy (memory_policy.h: None;
// memory_policy_static.h: Static), owns the state (memory_state.h), reads
// the merged affinity from the Topology Manager's Store and locks around the
// policy. Restore is the one restart rule: the policy's validateState with
// the recorded state.
//
// Thread safety: MemoryManager locks an internal mutex.
#ifndef TOPOLOGY_MANAGER_MEMORY_MANAGER_H_
#define TOPOLOGY_MANAGER_MEMORY_MANAGER_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "topology/export.h"
#include "topology/manager/hint_provider.h"
#include "topology/manager/memory_explanation.h"
#include "topology/manager/memory_policy.h"
#include "topology/manager/memory_policy_static.h"
#include "topology/manager/memory_state.h"
#include "topology/manager/store.h"
#include "topology/numa_node.h"
#include "topology/status.h"
#include "topology/thread_annotations.h"

namespace topology::manager {

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

class TOPOLOGY_EXPORT MemoryManager final : public HintProvider {
 public:
  struct Options {
    std::string policy = kMemoryPolicyNone;
    // --reserved-memory, as given.
    std::vector<MemoryReservation> reserved_memory = {};
    // kube-reserved + system-reserved + hard eviction, per memory type.
    std::map<std::string, uint64_t> node_allocatable_reservation = {};
    // Beyond the kubelet (KEP-6232, opt-in): at Restore, a node's regular
    // memory total may differ from the recorded one by up to this many
    // bytes; 0 compares exactly, as the kubelet does.
    uint64_t drift_tolerance = 0;
  };
  // Fails where the kubelet refuses to start: an unknown policy; for
  // Static, reservations that do not add up or name a missing node, or no
  // reserved memory at all.
  static StatusOr<std::unique_ptr<MemoryManager>> Create(
      const Options& options, const std::vector<NumaNode>& nodes,
      const Store* store);

  bool is_static() const { return static_policy_ != nullptr; }
  const std::string& policy_name() const { return policy_name_; }

  ProviderHints GetTopologyHints(const Pod& pod,
                                 const Container& container) override;
  ProviderHints GetPodTopologyHints(const Pod& pod) override;
  Status Allocate(const Pod& pod, const Container& container) override;

  void RemoveContainer(const std::string& pod_uid,
                       const std::string& container);
  void RemovePod(const std::string& pod_uid);

  // The restart (the kubelet's start from its state file): the policy's
  // Start (validateState) with the recorded state, once, before any
  // admission. `recorded_policy` is the policy the record was written
  // under; `recorded.machine` the machine as recorded (each node's total,
  // system reserved and allocatable per type: the groups, assignments,
  // reserved and free bytes are rebuilt from `recorded.assignments`; empty:
  // a record from before the machine was kept, taken as this machine);
  // `recorded.assignments` every container's blocks. Refuses
  // (FAILED_PRECONDITION, the kubelet's words and, beyond them, the first
  // difference) another policy, another machine beyond the drift
  // tolerance, blocks on nodes or types this machine lacks, blocks that do
  // not fit what is free, or a manager that already holds memory.
  // `drift`, when not null, receives the tolerated drift in words (empty:
  // none).
  Status Restore(const std::string& recorded_policy,
                 const MemoryState& recorded, std::string* drift = nullptr);
  // The container's blocks; empty when it holds none.
  std::vector<MemoryBlock> ContainerBlocks(const std::string& pod_uid,
                                           const std::string& container) const;
  MemoryState State() const;
  // The machine state with nothing assigned (Static); empty with None.
  MemoryMachineState Baseline() const;

  // Beyond the kubelet: why memory for `container` (nullptr: the whole pod,
  // pod scope) fits or not, as data (memory_explanation.h): the request,
  // each node's free memory and who holds it, the sets of nodes the single-
  // vs cross-node rule bars, the sets that would hold it now. nullopt with
  // None or for a pod that is not Guaranteed.
  std::optional<MemoryExplanation> Explain(const Pod& pod,
                                           const Container* container) const;

 private:
  MemoryManager(std::string policy_name, std::unique_ptr<MemoryPolicy> policy,
                StaticMemoryPolicy* static_policy, uint64_t drift_tolerance,
                const Store* store);

  const std::string policy_name_;
  const uint64_t drift_tolerance_;
  const Store* const store_;
  mutable Mutex mutex_;
  const std::unique_ptr<MemoryPolicy> policy_ TOPOLOGY_PT_GUARDED_BY(mutex_);
  // policy_ when it is Static (the explanations read its hints); else null.
  StaticMemoryPolicy* const static_policy_ TOPOLOGY_PT_GUARDED_BY(mutex_);
  MemoryState state_ TOPOLOGY_GUARDED_BY(mutex_);
};

}  // namespace topology::manager

#endif  // TOPOLOGY_MANAGER_MEMORY_MANAGER_H_
