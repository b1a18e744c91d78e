#include "topology/manager/policy.h"

#include <string>

#include "policy_base.h"

namespace topology::manager {

StatusOr<std::unique_ptr<Policy>> NewPolicy(std::string_view name,
                                            const NumaInfo& numa,
                                            const PolicyOptions& options,
                                            MergeEngine engine) {
  const bool closest = options.prefer_closest_numa;
  if (closest && !numa.has_distances()) {
    return FailedPreconditionError(
        "option \"prefer-closest-numa-nodes\" needs NUMA distances, and none "
        "are known");
  }
  if (name == kPolicyNone) return internal::NewNonePolicy();
  if (name == kPolicyBestEffort) {
    return internal::NewBestEffortPolicy(numa, closest, engine);
  }
  if (name == kPolicyRestricted) {
    return internal::NewRestrictedPolicy(numa, closest, engine);
  }
  if (name == kPolicySingleNumaNode) {
    return internal::NewSingleNumaNodePolicy(numa, engine);
  }
  return InvalidArgumentError("unknown policy: \"" + std::string(name) + "\"");
}

}  // namespace topology::manager
