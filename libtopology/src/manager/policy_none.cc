// none: no merge; the zero hint, always admitted.
#include "policy_base.h"

namespace topology::manager::internal {
namespace {

class NonePolicy final : public Policy {
 public:
  std::string_view Name() const override { return kPolicyNone; }
  MergeResult Merge(const std::vector<ProviderHints>& /*providers*/,
                    MergeExplanation* explanation) const override {
    if (explanation) explanation->reason = "policy none does not merge";
    return MergeResult{TopologyHint{}, true};
  }
};

}  // namespace

std::unique_ptr<Policy> NewNonePolicy() {
  return std::make_unique<NonePolicy>();
}

}  // namespace topology::manager::internal
