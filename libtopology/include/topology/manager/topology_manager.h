// TopologyManager: the kubelet's Topology Manager. Collects hints from its
// providers per container or per pod (the scope), merges them with the
// policy, admits or rejects, stores the chosen affinity and asks each
// provider to allocate.
//
// Thread safety: RemovePod and GetAffinity may be called from any thread,
// also during an admission. Admit is called for one pod at a time, as the
// kubelet admits pods one at a time: its caller is the one serialiser of
// admissions (the host's admission slot); two concurrent Admit calls would
// ask the providers for two pods' hints at once.
#ifndef TOPOLOGY_MANAGER_TOPOLOGY_MANAGER_H_
#define TOPOLOGY_MANAGER_TOPOLOGY_MANAGER_H_

#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "topology/export.h"
#include "topology/manager/admission.h"
#include "topology/manager/hint_provider.h"
#include "topology/manager/numa_info.h"
#include "topology/manager/policy.h"
#include "topology/manager/store.h"
#include "topology/thread_annotations.h"

namespace topology::manager {

inline constexpr char kScopeContainer[] = "container";
inline constexpr char kScopePod[] = "pod";

// What one container's (or the pod's) merge looked like, for --explain.
struct MergeTrace {
  std::string container = {};  // empty for pod scope
  // Per provider, in order: its hints.
  std::vector<ProviderHints> provider_hints = {};
  MergeResult result = {};
  MergeExplanation explanation = {};
};

// The policy and scope that decide one pod, and where they came from.
struct EffectivePolicy {
  std::string policy = {};  // none, best-effort, restricted, single-numa-node
  std::string scope;        // container, pod, or none (policy none)
  // "node" (the node's fixed policy), the pod's source
  // ("spec.topology.policy" or the annotation), or "default" (a pod that
  // states no policy under "dynamic": none).
  std::string source = {};
  // What the pod asked for, when it differs from what applies (a fixed
  // node policy wins; pod-level-single-numa-node is single-numa-node at
  // pod scope).
  std::string requested = {};
};

// Whether `name` is a topology policy a pod may state.
TOPOLOGY_EXPORT bool IsPodTopologyPolicy(const std::string& name);

struct ManagerConfig {
  std::string policy = kPolicyNone;
  std::string scope = kScopeContainer;
  std::map<std::string, std::string> policy_options = {};
  MergeEngine engine = MergeEngine::kFast;
};

class TOPOLOGY_EXPORT TopologyManager final : public Store {
 public:
  // As the kubelet's NewManager: policy none needs nothing else; otherwise
  // the options are parsed, distances are required for
  // prefer-closest-numa-nodes ("cannot discover NUMA topology: ..."), more
  // NUMA nodes than max-allowable-numa-nodes fail with "unsupported on
  // machines with more than N NUMA Nodes", then unknown policy or scope
  // names fail. All failures are INVALID_ARGUMENT or FAILED_PRECONDITION.
  // Beyond the kubelet, policy "dynamic" applies each pod's own policy
  // (Pod::topology_policy; none when it states none) with `scope`, and
  // pod-level-single-numa-node as single-numa-node at pod scope.
  static StatusOr<std::unique_ptr<TopologyManager>> Create(
      const ManagerConfig& config, const NumaInfo& numa);

  // Providers are asked in the order added. Not owned; must outlive the
  // manager.
  void AddHintProvider(HintProvider* provider);

  // Admits `pod`. `traces`, when not null, receives one entry per merge.
  // One call at a time (see above).
  AdmitResult Admit(const Pod& pod, std::vector<MergeTrace>* traces = nullptr);

  // Which policy and scope decide `pod`. REQUIRES: a pod policy, if any,
  // is one of IsPodTopologyPolicy's.
  EffectivePolicy Effective(const Pod& pod) const;

  // Puts back a container's affinity read from a checkpoint. Beyond the
  // kubelet, which keeps none across a restart: the host's views show it.
  void RestoreAffinity(const std::string& pod_uid, const std::string& container,
                       const TopologyHint& hint) {
    SetAffinity(pod_uid, container, hint);
  }
  // Forgets the stored affinities of a pod.
  void RemovePod(const std::string& pod_uid);

  TopologyHint GetAffinity(const std::string& pod_uid,
                           const std::string& container) const override;

  const Policy& policy() const { return *policy_; }
  const std::string& scope() const { return scope_; }
  bool dynamic() const { return !pod_policies_.empty(); }

 private:
  TopologyManager(std::unique_ptr<Policy> policy, std::string scope);

  AdmitResult AdmitContainerScope(const Policy& policy, const Pod& pod,
                                  std::vector<MergeTrace>* traces);
  AdmitResult AdmitPodScope(const Policy& policy, const Pod& pod,
                            std::vector<MergeTrace>* traces);
  AdmitResult AdmitNoneScope(const Pod& pod);
  // Calls Allocate on every provider; a failure becomes the kubelet's
  // UnexpectedAdmissionError.
  std::optional<AdmitResult> AllocateAll(const Pod& pod,
                                         const Container& container);
  void SetAffinity(const std::string& pod_uid, const std::string& container,
                   const TopologyHint& hint);

  std::unique_ptr<Policy> policy_;
  std::string scope_;  // "container", "pod" or "none" (policy none)
  // Under "dynamic": best-effort, restricted and single-numa-node by name
  // (policy_ is then none and scope_ the scope pods' policies use).
  std::map<std::string, std::unique_ptr<Policy>> pod_policies_;
  std::vector<HintProvider*> providers_;
  mutable Mutex store_mutex_;
  std::map<std::pair<std::string, std::string>, TopologyHint> affinity_
      TOPOLOGY_GUARDED_BY(store_mutex_);
};

}  // namespace topology::manager

#endif  // TOPOLOGY_MANAGER_TOPOLOGY_MANAGER_H_
