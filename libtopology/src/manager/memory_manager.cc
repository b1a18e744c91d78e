// MemoryManager (memory_manager.go): policy choice, the reserved-memory
// checks done at start, the requests of containers and pods, and the
// HintProvider around StaticMemoryPolicy.
#include "topology/manager/memory_manager.h"

#include <algorithm>
#include <set>
#include <string>

namespace topology::manager {
namespace {

// A mask holds 64 nodes; above 8 the hints are compact (HintFamily) and
// Allocate searches them instead of listing every subset.
constexpr size_t kMaxStaticNodes = NumaMask::kMaxNodes;

}  // namespace

bool IsHugePagesResource(std::string_view name) {
  return name.starts_with(kHugePagesPrefix) &&
         name.size() > std::string_view(kHugePagesPrefix).size();
}

bool IsMemoryResource(std::string_view name) {
  return name == kMemoryResource || IsHugePagesResource(name);
}

const std::vector<MemoryBlock>* MemoryState::Blocks(
    const std::string& pod_uid, const std::string& container) const {
  const auto pod = assignments.find(pod_uid);
  if (pod == assignments.end()) return nullptr;
  const auto it = pod->second.find(container);
  return it == pod->second.end() ? nullptr : &it->second;
}

std::map<std::string, uint64_t> ContainerRequestedMemory(
    const Container& container) {
  std::map<std::string, uint64_t> out;
  for (const auto& [name, value] : container.limits) {
    if (!IsMemoryResource(name) || value < 0) continue;
    out[name] = static_cast<uint64_t>(value);
  }
  return out;
}

std::map<std::string, uint64_t> PodRequestedMemory(const Pod& pod) {
  // Only types the app containers ask for, as upstream.
  std::map<std::string, uint64_t> out;
  for (const Container& c : pod.containers) {
    for (const auto& [type, size] : ContainerRequestedMemory(c)) {
      out.try_emplace(type, 0);
    }
  }
  for (auto& entry : out) {
    const std::string& type = entry.first;
    entry.second = static_cast<uint64_t>(
        EffectiveRequest(pod, [&](const Container& c) -> int64_t {
          const auto it = c.limits.find(type);
          return it == c.limits.end() ? 0 : it->second;
        }));
  }
  return out;
}

Status ValidateReservedMemoryConfiguration(
    const std::vector<MemoryReservation>& reservations) {
  // Every error, joined as the kubelet's aggregate error joins them.
  std::vector<std::string> errors;
  std::map<int, std::set<std::string>> seen;
  for (const MemoryReservation& reservation : reservations) {
    const std::string node = std::to_string(reservation.numa_node);
    std::set<std::string>& types = seen[reservation.numa_node];
    for (const auto& [type, size] : reservation.limits) {
      if (!IsMemoryResource(type)) {
        errors.push_back("invalid configuration: the limit type \"" + type +
                         "\" for NUMA node " + node +
                         " is not supported, only [memory "
                         "hugepages-<HugePageSize>] is accepted");
      }
      if (size == 0) {
        errors.push_back(
            "invalid configuration: reserved memory may not be zero for NUMA "
            "node " +
            node + " and resource \"" + type + "\"");
      }
      if (!types.insert(type).second) {
        errors.push_back(
            "invalid configuration: the reserved memory has a duplicate value "
            "for NUMA node " +
            node + " and resource \"" + type + "\"");
      }
    }
  }
  if (errors.empty()) return OkStatus();
  // utilerrors' aggregate: each message once, in order; brackets around
  // more than one.
  std::set<std::string> said;
  std::string joined;
  for (const std::string& error : errors) {
    if (!said.insert(error).second) continue;
    joined += (said.size() > 1 ? ", " : "") + error;
  }
  return InvalidArgumentError(said.size() == 1 ? joined : "[" + joined + "]");
}

Status ValidateReservedMemory(
    const std::vector<NumaNode>& nodes,
    const std::map<std::string, uint64_t>& node_allocatable_reservation,
    const std::vector<MemoryReservation>& reservations) {
  std::set<int> ids;
  for (const NumaNode& node : nodes) ids.insert(node.id);
  std::map<std::string, uint64_t> total;
  for (const MemoryReservation& reservation : reservations) {
    if (!ids.contains(reservation.numa_node)) {
      return InvalidArgumentError(
          "the reserved memory configuration references a NUMA node " +
          std::to_string(reservation.numa_node) +
          " that does not exist on this machine");
    }
    for (const auto& [type, size] : reservation.limits) {
      // The kubelet adds Quantities without bound; a sum past 2^64 bytes
      // is refused here rather than saturated into a false equality.
      if (__builtin_add_overflow(total[type], size, &total[type])) {
        return InvalidArgumentError(
            "the total amount of type \"" + type +
            "\" reserved by --reserved-memory is larger than 2^64 bytes");
      }
    }
  }
  std::set<std::string> types;
  for (const auto& [type, size] : total) types.insert(type);
  for (const auto& [type, size] : node_allocatable_reservation) {
    if (IsMemoryResource(type)) types.insert(type);
  }
  for (const std::string& type : types) {
    const auto a = node_allocatable_reservation.find(type);
    const auto r = total.find(type);
    const uint64_t allocatable =
        a == node_allocatable_reservation.end() ? 0 : a->second;
    const uint64_t reserved = r == total.end() ? 0 : r->second;
    if (allocatable != reserved) {
      return InvalidArgumentError("the total amount \"" +
                                  BinaryQuantity(reserved) + "\" of type \"" +
                                  type + "\" is not equal to the value \"" +
                                  BinaryQuantity(allocatable) +
                                  "\" determined by Node Allocatable feature");
    }
  }
  return OkStatus();
}

ReservedMemory ConvertReservedMemory(
    const std::vector<NumaNode>& nodes,
    const std::vector<MemoryReservation>& reservations) {
  ReservedMemory out;
  for (const NumaNode& node : nodes) out[node.id];
  for (const MemoryReservation& reservation : reservations) {
    for (const auto& [type, size] : reservation.limits) {
      out[reservation.numa_node][type] = size;
    }
  }
  return out;
}

StatusOr<std::unique_ptr<MemoryManager>> MemoryManager::Create(
    const Options& options, const std::vector<NumaNode>& nodes,
    const Store* store) {
  // The kubelet validates its configuration before any manager starts.
  if (Status valid =
          ValidateReservedMemoryConfiguration(options.reserved_memory);
      !valid.ok()) {
    return valid;
  }
  if (options.policy == kMemoryPolicyNone) {
    return std::unique_ptr<MemoryManager>(
        new MemoryManager(options.policy, std::make_unique<NoneMemoryPolicy>(),
                          nullptr, options.drift_tolerance, store));
  }
  if (options.policy != kMemoryPolicyStatic) {
    return InvalidArgumentError("unknown policy: \"" + options.policy + "\"");
  }
  if (nodes.size() > kMaxStaticNodes) {
    return InvalidArgumentError("the Static memory policy holds at most " +
                                std::to_string(kMaxStaticNodes) +
                                " NUMA nodes; this machine has " +
                                std::to_string(nodes.size()));
  }
  for (const NumaNode& node : nodes) {
    if (node.id >= NumaMask::kMaxNodes) {
      return InvalidArgumentError("NUMA node " + std::to_string(node.id) +
                                  " is beyond the 64 nodes a mask holds");
    }
  }
  if (Status valid = ValidateReservedMemory(
          nodes, options.node_allocatable_reservation, options.reserved_memory);
      !valid.ok()) {
    return valid;
  }
  auto policy = StaticMemoryPolicy::Create(
      nodes, ConvertReservedMemory(nodes, options.reserved_memory));
  if (!policy.ok()) return policy.status();
  auto owned = std::make_unique<StaticMemoryPolicy>(std::move(*policy));
  StaticMemoryPolicy* static_policy = owned.get();
  std::unique_ptr<MemoryManager> manager(
      new MemoryManager(options.policy, std::move(owned), static_policy,
                        options.drift_tolerance, store));
  MutexLock lock(manager->mutex_);
  if (Status started = manager->policy_->Start(manager->state_);
      !started.ok()) {
    return started;
  }
  return manager;
}

MemoryManager::MemoryManager(std::string policy_name,
                             std::unique_ptr<MemoryPolicy> policy,
                             StaticMemoryPolicy* static_policy,
                             uint64_t drift_tolerance, const Store* store)
    : policy_name_(std::move(policy_name)),
      drift_tolerance_(drift_tolerance),
      store_(store),
      policy_(std::move(policy)),
      static_policy_(static_policy) {}

ProviderHints MemoryManager::GetTopologyHints(const Pod& pod,
                                              const Container& container) {
  MutexLock lock(mutex_);
  return policy_->GetTopologyHints(state_, pod, container);
}

ProviderHints MemoryManager::GetPodTopologyHints(const Pod& pod) {
  MutexLock lock(mutex_);
  return policy_->GetPodTopologyHints(state_, pod);
}

Status MemoryManager::Allocate(const Pod& pod, const Container& container) {
  MutexLock lock(mutex_);
  const TopologyHint affinity =
      store_ != nullptr ? store_->GetAffinity(pod.uid, container.name)
                        : TopologyHint{};
  return policy_->Allocate(state_, pod, container, affinity);
}

void MemoryManager::RemoveContainer(const std::string& pod_uid,
                                    const std::string& container) {
  MutexLock lock(mutex_);
  policy_->RemoveContainer(state_, pod_uid, container);
}

void MemoryManager::RemovePod(const std::string& pod_uid) {
  MutexLock lock(mutex_);
  const auto pod = state_.assignments.find(pod_uid);
  if (pod == state_.assignments.end()) {
    policy_->RemoveContainer(state_, pod_uid, {});  // forgets its reuse
    return;
  }
  std::vector<std::string> containers;
  for (const auto& [name, blocks] : pod->second) containers.push_back(name);
  for (const std::string& name : containers) {
    policy_->RemoveContainer(state_, pod_uid, name);
  }
}

Status MemoryManager::Restore(const std::string& recorded_policy,
                              const MemoryState& recorded, std::string* drift) {
  if (recorded_policy != policy_name_) {
    return FailedPreconditionError("[memorymanager] configured policy \"" +
                                   policy_name_ +
                                   "\" differs from state checkpoint policy "
                                   "\"" +
                                   recorded_policy + "\"");
  }
  MutexLock lock(mutex_);
  if (!state_.assignments.empty()) {
    return FailedPreconditionError(
        "[memorymanager] a restore after the start: the manager already "
        "holds memory");
  }
  for (const auto& [pod, containers] : recorded.assignments) {
    for (const auto& [container, blocks] : containers) {
      const std::string who =
          "[memorymanager] pod " + pod + " container " + container;
      if (!is_static()) {
        return FailedPreconditionError(
            who + " holds pinned memory, but the memory manager policy is " +
            policy_name_);
      }
      for (const MemoryBlock& block : blocks) {
        if (block.numa_affinity.empty() ||
            !std::is_sorted(block.numa_affinity.begin(),
                            block.numa_affinity.end(),
                            std::less_equal<int>())) {
          return FailedPreconditionError(
              who + ": a " + block.type +
              " block whose NUMA nodes are not a set in increasing order");
        }
      }
    }
  }
  if (!is_static()) return OkStatus();
  // The record keeps what the machine and the configuration decide; the
  // rest is rebuilt from the assignments as the kubelet's state file would
  // hold it, each block fitting what is free.
  MemoryState state;
  state.assignments = recorded.assignments;
  state.machine = recorded.machine.empty()
                      ? static_policy_->DefaultMachineState()
                      : recorded.machine;
  for (auto& [id, node] : state.machine) {
    node.cells = {id};
    node.assignments = 0;
    for (auto& [type, table] : node.memory) {
      table.reserved = 0;
      table.free = table.allocatable;
    }
  }
  // (The kubelet's state file would have refused what does not fit; our
  // record keeps no reserved or free bytes to compare with.)
  std::string unfit;
  if (Status updated = StaticMemoryPolicy::UpdateExpectedMachineState(
          state.machine, state.assignments, &unfit);
      !updated.ok()) {
    return updated;
  }
  if (!unfit.empty()) return FailedPreconditionError(unfit);
  std::string difference;
  if (Status started = policy_->Start(
          state,
          {.drift_tolerance = drift_tolerance_, .difference = &difference});
      !started.ok()) {
    return FailedPreconditionError(
        started.message() + (difference.empty() ? "" : ": " + difference));
  }
  if (drift != nullptr) *drift = difference;
  state_ = std::move(state);
  return OkStatus();
}

std::vector<MemoryBlock> MemoryManager::ContainerBlocks(
    const std::string& pod_uid, const std::string& container) const {
  MutexLock lock(mutex_);
  const auto* blocks = state_.Blocks(pod_uid, container);
  return blocks ? *blocks : std::vector<MemoryBlock>{};
}

std::optional<MemoryExplanation> MemoryManager::Explain(
    const Pod& pod, const Container* container) const {
  MutexLock lock(mutex_);
  if (!is_static() || !pod.guaranteed) return std::nullopt;
  MemoryExplanation out;
  if (container != nullptr) out.container = container->name;
  out.requests = container ? ContainerRequestedMemory(*container)
                           : PodRequestedMemory(pod);
  // A copy read under the lock, for the lambda below (explaining is rare).
  const MemoryMachineState machine = state_.machine;
  for (const auto& [id, node] : machine) {
    MemoryExplanation::Node& shown = out.nodes.emplace_back();
    shown.id = id;
    for (const auto& [type, size] : out.requests) {
      if (const auto it = node.memory.find(type); it != node.memory.end()) {
        shown.memory.emplace(type, it->second);
      }
    }
    shown.assignments = node.assignments;
    shown.cells = node.cells;
  }
  // Who holds memory on each node.
  for (const auto& [uid, containers] : state_.assignments) {
    for (const auto& [name, blocks] : containers) {
      for (const MemoryBlock& block : blocks) {
        for (int id : block.numa_affinity) {
          for (MemoryExplanation::Node& node : out.nodes) {
            if (node.id == id) node.holders.push_back({uid, name});
          }
        }
      }
    }
  }
  // The rule, where it bars a set of nodes whose memory would suffice:
  // every subset on small machines; on large ones the nodes holding memory
  // are named instead.
  std::vector<int> ids;
  for (const auto& [id, node] : machine) ids.push_back(id);
  out.large = ids.size() > 8;
  const std::vector<int> small = out.large ? std::vector<int>{} : ids;
  IterateMasks(small, [&](NumaMask mask) {
    if (mask.Count() < 2 || out.barred.size() >= 4) return;
    for (const auto& [type, size] : out.requests) {
      uint64_t free = 0;
      for (int id : mask.Ids()) {
        const auto& memory = machine.at(id).memory;
        if (auto it = memory.find(type); it != memory.end()) {
          free += it->second.free;
        }
      }
      if (free < size) return;
    }
    for (int id : mask.Ids()) {
      const MemoryNodeState& node = machine.at(id);
      if (node.assignments == 0) continue;
      MemoryExplanation::Barred barred{.node = id, .set = mask};
      if (node.cells.size() != 1) {
        std::vector<int> cells = node.cells;
        std::sort(cells.begin(), cells.end());
        if (cells == mask.Ids()) continue;
        barred.group = std::move(cells);
      }
      if (std::find(out.barred.begin(), out.barred.end(), barred) ==
          out.barred.end()) {
        out.barred.push_back(std::move(barred));
      }
      return;
    }
  });
  if (out.large) {
    const auto family =
        static_policy_->CompactHints(machine, pod.uid, out.requests);
    if (!family) {
      out.fits_nowhere = true;
    } else {
      out.fit_extras = family->extras;
      if (!family->universe.IsEmpty()) {
        out.fit_universe = family->universe;
        out.narrowest = family->NarrowestUpwardMemberSize();
      }
      out.preferred_size = family->preferred_size;
    }
    return out;
  }
  const auto hints =
      static_policy_->CalculateHints(machine, pod.uid, out.requests);
  const auto list = hints.find(kMemoryResource);
  if (hints.empty() || list == hints.end() || list->second.empty()) {
    out.fits_nowhere = true;
  } else {
    for (const TopologyHint& hint : list->second) {
      out.fits.push_back({*hint.affinity, hint.preferred});
    }
  }
  return out;
}

MemoryMachineState MemoryManager::Baseline() const {
  MutexLock lock(mutex_);
  return is_static() ? static_policy_->DefaultMachineState()
                     : MemoryMachineState{};
}

MemoryState MemoryManager::State() const {
  MutexLock lock(mutex_);
  return state_;
}

}  // namespace topology::manager
