// Topology Manager policies: none, best-effort, restricted and
// single-numa-node, with the kubelet's exact merge (one shared merger; the
// policies only choose its filter, mask comparison and admission rule).
//
// Two merge engines give identical results on every input: kReference walks
// the cross product of the providers' hints as the kubelet does (exponential;
// the oracle), kFast derives the same answer from the structure of the rules
// (docs/topology-manager.md).
//
// Thread safety: a Policy is immutable; Merge may be called concurrently.
#ifndef TOPOLOGY_MANAGER_POLICY_H_
#define TOPOLOGY_MANAGER_POLICY_H_

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "topology/export.h"
#include "topology/manager/hint_provider.h"
#include "topology/manager/numa_info.h"
#include "topology/manager/policy_options.h"
#include "topology/manager/topology_hint.h"
#include "topology/status.h"

namespace topology::manager {

inline constexpr char kPolicyNone[] = "none";
inline constexpr char kPolicyBestEffort[] = "best-effort";
inline constexpr char kPolicyRestricted[] = "restricted";
inline constexpr char kPolicySingleNumaNode[] = "single-numa-node";
// Beyond the kubelet (the Node Topology Manager design, never merged
// upstream): the node policy that applies each pod's own policy, and the
// pod policy that puts every container of the pod on one NUMA node.
inline constexpr char kPolicyDynamic[] = "dynamic";
inline constexpr char kPolicyPodLevelSingleNumaNode[] =
    "pod-level-single-numa-node";

enum class MergeEngine { kReference, kFast };

// Why a merge ended as it did, for --explain and logs.
struct MergeExplanation {
  int hint_lists = 0;  // after flattening (and filtering)
  int best_non_preferred_count =
      0;                    // the kubelet's bestNonPreferredAffinityCount
  double permutations = 0;  // size of the cross product
  int64_t candidates_examined = 0;  // merged results the engine looked at
  std::string reason = {};          // one sentence
};

struct MergeResult {
  TopologyHint hint = {};
  bool admit = false;
};

class TOPOLOGY_EXPORT Policy {
 public:
  virtual ~Policy() = default;
  virtual std::string_view Name() const = 0;
  // Merges the providers' hints (in provider order). `explanation` may be
  // null.
  virtual MergeResult Merge(const std::vector<ProviderHints>& providers,
                            MergeExplanation* explanation) const = 0;
};

// Builds a policy. Fails with INVALID_ARGUMENT `unknown policy: "<name>"`,
// and with FAILED_PRECONDITION when prefer-closest-numa-nodes is set but
// `numa` has no distances.
TOPOLOGY_EXPORT StatusOr<std::unique_ptr<Policy>> NewPolicy(
    std::string_view name, const NumaInfo& numa, const PolicyOptions& options,
    MergeEngine engine = MergeEngine::kFast);

}  // namespace topology::manager

#endif  // TOPOLOGY_MANAGER_POLICY_H_
