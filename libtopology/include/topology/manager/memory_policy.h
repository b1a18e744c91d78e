// The Memory Manager's policy interface (memorymanager/policy.go) and its
// None policy (policy_none.go): a policy decides over a MemoryState it does
// not own, so that upstream's test tables run against it unchanged.
//
// Only containers of Guaranteed pods get hints and memory.
#ifndef TOPOLOGY_MANAGER_MEMORY_POLICY_H_
#define TOPOLOGY_MANAGER_MEMORY_POLICY_H_

#include <cstdint>
#include <map>
#include <string>
#include <string_view>

#include "topology/export.h"
#include "topology/manager/hint_provider.h"
#include "topology/manager/memory_state.h"
#include "topology/manager/pod.h"
#include "topology/manager/topology_hint.h"
#include "topology/status.h"

namespace topology::manager {

// The memory types a container asks for and their bytes
// (getRequestedResources): "memory" and every "hugepages-<size>" limit.
TOPOLOGY_EXPORT std::map<std::string, uint64_t> ContainerRequestedMemory(
    const Container& container);
// The pod's effective request per type (getPodRequestedResources): app and
// restartable init containers summed, at least each regular init container
// plus the restartable ones started before it.
TOPOLOGY_EXPORT std::map<std::string, uint64_t> PodRequestedMemory(
    const Pod& pod);

// What Start checks beyond validateState; both off by default.
struct MemoryStartChecks {
  // Beyond the kubelet (KEP-6232, opt-in): a node's regular memory total
  // may differ from the recorded one by up to this many bytes (a reboot
  // moves the kernel image between nodes); huge pages never.
  uint64_t drift_tolerance = 0;
  // When not null: the first difference validateState found (upstream
  // logs it), or the tolerated drift, in words.
  std::string* difference = nullptr;
};

class TOPOLOGY_EXPORT MemoryPolicy {
 public:
  virtual ~MemoryPolicy() = default;

  virtual std::string_view Name() const = 0;
  // validateState: the state read at start checked against this machine.
  Status Start(MemoryState& state) const { return Start(state, {}); }
  virtual Status Start(MemoryState& state,
                       const MemoryStartChecks& checks) const = 0;
  virtual ProviderHints GetTopologyHints(const MemoryState& state,
                                         const Pod& pod,
                                         const Container& container) const = 0;
  virtual ProviderHints GetPodTopologyHints(const MemoryState& state,
                                            const Pod& pod) const = 0;
  // After the Topology Manager's merge; `affinity` is its stored hint for
  // the container. Idempotent.
  virtual Status Allocate(MemoryState& state, const Pod& pod,
                          const Container& container,
                          const TopologyHint& affinity) = 0;
  // Idempotent.
  virtual void RemoveContainer(MemoryState& state, const std::string& pod_uid,
                               const std::string& container) = 0;
};

// policy_none.go: no hints, no memory, nothing to check.
class TOPOLOGY_EXPORT NoneMemoryPolicy final : public MemoryPolicy {
 public:
  using MemoryPolicy::Start;
  std::string_view Name() const override { return kMemoryPolicyNone; }
  Status Start(MemoryState& /*state*/,
               const MemoryStartChecks& /*checks*/) const override {
    return OkStatus();
  }
  ProviderHints GetTopologyHints(
      const MemoryState& /*state*/, const Pod& /*pod*/,
      const Container& /*container*/) const override {
    return {};
  }
  ProviderHints GetPodTopologyHints(const MemoryState& /*state*/,
                                    const Pod& /*pod*/) const override {
    return {};
  }
  Status Allocate(MemoryState& /*state*/, const Pod& /*pod*/,
                  const Container& /*container*/,
                  const TopologyHint& /*affinity*/) override {
    return OkStatus();
  }
  void RemoveContainer(MemoryState& /*state*/, const std::string& /*pod_uid*/,
                       const std::string& /*container*/) override {}
};

}  // namespace topology::manager

#endif  // TOPOLOGY_MANAGER_MEMORY_POLICY_H_
