// restricted: the best-effort merge; admitted only when preferred.
#include "policy_base.h"

namespace topology::manager::internal {
namespace {

class RestrictedPolicy final : public MergingPolicy {
 public:
  using MergingPolicy::MergingPolicy;
  std::string_view Name() const override { return kPolicyRestricted; }
  MergeResult Merge(const std::vector<ProviderHints>& providers,
                    MergeExplanation* explanation) const override {
    const TopologyHint hint =
        MergeLists(FlattenProviderHints(providers), explanation);
    return MergeResult{hint, hint.preferred};
  }
};

}  // namespace

std::unique_ptr<Policy> NewRestrictedPolicy(NumaInfo numa, bool use_closest,
                                            MergeEngine engine) {
  return std::make_unique<RestrictedPolicy>(std::move(numa), use_closest,
                                            engine);
}

}  // namespace topology::manager::internal
