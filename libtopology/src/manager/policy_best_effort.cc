// best-effort: the shared merge; every result is admitted.
#include "policy_base.h"

namespace topology::manager::internal {
namespace {

class BestEffortPolicy final : public MergingPolicy {
 public:
  using MergingPolicy::MergingPolicy;
  std::string_view Name() const override { return kPolicyBestEffort; }
  MergeResult Merge(const std::vector<ProviderHints>& providers,
                    MergeExplanation* explanation) const override {
    return MergeResult{MergeLists(FlattenProviderHints(providers), explanation),
                       true};
  }
};

}  // namespace

std::unique_ptr<Policy> NewBestEffortPolicy(NumaInfo numa, bool use_closest,
                                            MergeEngine engine) {
  return std::make_unique<BestEffortPolicy>(std::move(numa), use_closest,
                                            engine);
}

}  // namespace topology::manager::internal
