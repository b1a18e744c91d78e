#include "topology/manager/topology_manager.h"

#include <string>

#include "topology/manager/policy_options.h"

namespace topology::manager {
namespace {

constexpr char kScopeNone[] = "none";

AdmitResult Admitted() { return AdmitResult{true, "", ""}; }

AdmitResult TopologyAffinityRejection() {
  return AdmitResult{false, kTopologyAffinityError, kTopologyAffinityMessage};
}

// Init containers first, then app containers, in spec order.
std::vector<const Container*> AllContainers(const Pod& pod) {
  std::vector<const Container*> all;
  for (const Container& c : pod.init_containers) all.push_back(&c);
  for (const Container& c : pod.containers) all.push_back(&c);
  return all;
}

}  // namespace

bool IsPodTopologyPolicy(const std::string& name) {
  return name == kPolicyNone || name == kPolicyBestEffort ||
         name == kPolicyRestricted || name == kPolicySingleNumaNode ||
         name == kPolicyPodLevelSingleNumaNode;
}

StatusOr<std::unique_ptr<TopologyManager>> TopologyManager::Create(
    const ManagerConfig& config, const NumaInfo& numa) {
  if (config.policy == kPolicyNone) {
    auto policy = NewPolicy(kPolicyNone, numa, PolicyOptions{}, config.engine);
    if (!policy.ok()) return policy.status();
    return std::unique_ptr<TopologyManager>(
        new TopologyManager(*std::move(policy), kScopeNone));
  }
  auto options = PolicyOptions::Parse(config.policy_options);
  if (!options.ok()) return options.status();
  if (options->prefer_closest_numa && !numa.has_distances()) {
    return FailedPreconditionError(
        "cannot discover NUMA topology: error getting NUMA distances from "
        "cadvisor");
  }
  if (static_cast<int>(numa.node_ids().size()) >
      options->max_allowable_numa_nodes) {
    return FailedPreconditionError(
        "unsupported on machines with more than " +
        std::to_string(options->max_allowable_numa_nodes) + " NUMA Nodes");
  }
  if (config.policy == kPolicyDynamic) {
    // Every policy a pod may ask for, built once with the node's options.
    auto none = NewPolicy(kPolicyNone, numa, PolicyOptions{}, config.engine);
    if (!none.ok()) return none.status();
    if (config.scope != kScopeContainer && config.scope != kScopePod) {
      return InvalidArgumentError("unknown scope: \"" + config.scope + "\"");
    }
    std::unique_ptr<TopologyManager> manager(
        new TopologyManager(*std::move(none), config.scope));
    for (const char* name :
         {kPolicyBestEffort, kPolicyRestricted, kPolicySingleNumaNode}) {
      auto policy = NewPolicy(name, numa, *options, config.engine);
      if (!policy.ok()) return policy.status();
      manager->pod_policies_[name] = *std::move(policy);
    }
    return manager;
  }
  auto policy = NewPolicy(config.policy, numa, *options, config.engine);
  if (!policy.ok()) return policy.status();
  if (config.scope != kScopeContainer && config.scope != kScopePod) {
    return InvalidArgumentError("unknown scope: \"" + config.scope + "\"");
  }
  return std::unique_ptr<TopologyManager>(
      new TopologyManager(*std::move(policy), config.scope));
}

EffectivePolicy TopologyManager::Effective(const Pod& pod) const {
  EffectivePolicy out;
  if (!dynamic()) {
    // A fixed node policy wins over whatever the pod asks for.
    out.policy = std::string(policy_->Name());
    out.scope = scope_;
    out.source = "node";
    if (!pod.topology_policy.empty() && pod.topology_policy != out.policy) {
      out.requested = pod.topology_policy;
    }
    return out;
  }
  if (pod.topology_policy.empty()) {
    out.policy = kPolicyNone;
    out.scope = kScopeNone;
    out.source = "default";
    return out;
  }
  out.source =
      pod.topology_policy_source.empty() ? "pod" : pod.topology_policy_source;
  if (pod.topology_policy == kPolicyPodLevelSingleNumaNode) {
    out.policy = kPolicySingleNumaNode;
    out.scope = kScopePod;
    out.requested = pod.topology_policy;
  } else if (pod.topology_policy == kPolicyNone) {
    out.policy = kPolicyNone;
    out.scope = kScopeNone;
  } else {
    out.policy = pod.topology_policy;
    out.scope = scope_;
  }
  return out;
}

TopologyManager::TopologyManager(std::unique_ptr<Policy> policy,
                                 std::string scope)
    : policy_(std::move(policy)), scope_(std::move(scope)) {}

void TopologyManager::AddHintProvider(HintProvider* provider) {
  providers_.push_back(provider);
}

AdmitResult TopologyManager::Admit(const Pod& pod,
                                   std::vector<MergeTrace>* traces) {
  const EffectivePolicy effective = Effective(pod);
  if (effective.scope == kScopeNone) return AdmitNoneScope(pod);
  const Policy* policy = policy_.get();
  if (dynamic()) {
    const auto it = pod_policies_.find(effective.policy);
    if (it == pod_policies_.end()) {
      return AdmitResult{false, kUnexpectedAdmissionError,
                         "unknown topology policy \"" + pod.topology_policy +
                             "\" of pod " + pod.ns + "/" + pod.name};
    }
    policy = it->second.get();
  }
  if (effective.scope == kScopePod) return AdmitPodScope(*policy, pod, traces);
  return AdmitContainerScope(*policy, pod, traces);
}

std::optional<AdmitResult> TopologyManager::AllocateAll(
    const Pod& pod, const Container& container) {
  for (HintProvider* provider : providers_) {
    const Status status = provider->Allocate(pod, container);
    if (!status.ok()) {
      // A refusal with the kubelet's own reason (its admission.Error) is
      // reported as the kubelet reports it: the reason and the message.
      if (!status.reason().empty()) {
        return AdmitResult{false, status.reason(), status.message()};
      }
      return AdmitResult{false, kUnexpectedAdmissionError,
                         "Allocate failed due to " + status.message() +
                             ", which is unexpected"};
    }
  }
  return std::nullopt;
}

AdmitResult TopologyManager::AdmitContainerScope(
    const Policy& policy, const Pod& pod, std::vector<MergeTrace>* traces) {
  for (const Container* container : AllContainers(pod)) {
    MergeTrace trace;
    trace.container = container->name;
    for (HintProvider* provider : providers_) {
      trace.provider_hints.push_back(
          provider->GetTopologyHints(pod, *container));
    }
    trace.result = policy.Merge(trace.provider_hints, &trace.explanation);
    const MergeResult result = trace.result;
    if (traces) traces->push_back(std::move(trace));
    if (!result.admit) return TopologyAffinityRejection();
    SetAffinity(pod.uid, container->name, result.hint);
    if (auto failure = AllocateAll(pod, *container)) return *failure;
  }
  return Admitted();
}

AdmitResult TopologyManager::AdmitPodScope(const Policy& policy, const Pod& pod,
                                           std::vector<MergeTrace>* traces) {
  MergeTrace trace;
  for (HintProvider* provider : providers_) {
    trace.provider_hints.push_back(provider->GetPodTopologyHints(pod));
  }
  trace.result = policy.Merge(trace.provider_hints, &trace.explanation);
  const MergeResult result = trace.result;
  if (traces) traces->push_back(std::move(trace));
  if (!result.admit) return TopologyAffinityRejection();
  for (const Container* container : AllContainers(pod)) {
    SetAffinity(pod.uid, container->name, result.hint);
  }
  for (const Container* container : AllContainers(pod)) {
    if (auto failure = AllocateAll(pod, *container)) return *failure;
  }
  return Admitted();
}

AdmitResult TopologyManager::AdmitNoneScope(const Pod& pod) {
  for (const Container* container : AllContainers(pod)) {
    if (auto failure = AllocateAll(pod, *container)) return *failure;
  }
  return Admitted();
}

void TopologyManager::SetAffinity(const std::string& pod_uid,
                                  const std::string& container,
                                  const TopologyHint& hint) {
  MutexLock lock(store_mutex_);
  affinity_[{pod_uid, container}] = hint;
}

void TopologyManager::RemovePod(const std::string& pod_uid) {
  MutexLock lock(store_mutex_);
  // Keyed by (pod, container): the pod's entries are one range.
  auto it = affinity_.lower_bound({pod_uid, std::string()});
  while (it != affinity_.end() && it->first.first == pod_uid)
    it = affinity_.erase(it);
}

TopologyHint TopologyManager::GetAffinity(const std::string& pod_uid,
                                          const std::string& container) const {
  MutexLock lock(store_mutex_);
  const auto it = affinity_.find({pod_uid, container});
  return it == affinity_.end() ? TopologyHint{} : it->second;
}

}  // namespace topology::manager
