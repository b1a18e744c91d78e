// single-numa-node: only preferred single-node (or nil) hints take part, the
// mask comparison is always "narrowest", a result equal to the default
// affinity is reported as nil, and only preferred results are admitted.
#include "policy_base.h"

namespace topology::manager::internal {
namespace {

class SingleNumaNodePolicy final : public MergingPolicy {
 public:
  SingleNumaNodePolicy(NumaInfo numa, MergeEngine engine)
      : MergingPolicy(std::move(numa), /*use_closest=*/false, engine) {}
  std::string_view Name() const override { return kPolicySingleNumaNode; }
  MergeResult Merge(const std::vector<ProviderHints>& providers,
                    MergeExplanation* explanation) const override {
    TopologyHint hint =
        MergeLists(FilterSingleNumaNodeHints(FlattenProviderHints(providers)),
                   explanation);
    if (hint.affinity && *hint.affinity == numa().DefaultAffinity()) {
      hint.affinity.reset();
    }
    if (explanation != nullptr && !hint.preferred) {
      explanation->reason =
          "single-numa-node keeps only preferred hints on one NUMA node; " +
          explanation->reason;
    }
    return MergeResult{hint, hint.preferred};
  }
};

}  // namespace

std::unique_ptr<Policy> NewSingleNumaNodePolicy(NumaInfo numa,
                                                MergeEngine engine) {
  return std::make_unique<SingleNumaNodePolicy>(std::move(numa), engine);
}

}  // namespace topology::manager::internal
