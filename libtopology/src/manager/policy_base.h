// The base of the merging policies: owns the NUMA info and the shared
// HintMerger; each policy file adds only its filter and admission rule.
#ifndef TOPOLOGY_SRC_MANAGER_POLICY_BASE_H_
#define TOPOLOGY_SRC_MANAGER_POLICY_BASE_H_

#include <memory>

#include "topology/manager/policy.h"

#include "hint_merger.h"

namespace topology::manager::internal {

class MergingPolicy : public Policy {
 public:
  MergingPolicy(NumaInfo numa, bool use_closest, MergeEngine engine)
      : numa_(std::move(numa)), merger_(numa_, use_closest), engine_(engine) {}

 protected:
  TopologyHint MergeLists(const HintLists& lists,
                          MergeExplanation* explanation) const {
    return merger_.Merge(lists, engine_, explanation);
  }
  const NumaInfo& numa() const { return numa_; }

 private:
  NumaInfo numa_;
  HintMerger merger_;
  MergeEngine engine_;
};

std::unique_ptr<Policy> NewNonePolicy();
std::unique_ptr<Policy> NewBestEffortPolicy(NumaInfo numa, bool use_closest,
                                            MergeEngine engine);
std::unique_ptr<Policy> NewRestrictedPolicy(NumaInfo numa, bool use_closest,
                                            MergeEngine engine);
std::unique_ptr<Policy> NewSingleNumaNodePolicy(NumaInfo numa,
                                                MergeEngine engine);

}  // namespace topology::manager::internal

#endif  // TOPOLOGY_SRC_MANAGER_POLICY_BASE_H_
