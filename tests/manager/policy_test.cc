// The kubelet's merge situations (policy_test.go's common cases and the
// per-policy tables, section 10 of the spec's pitfalls) as one table, run
// under every policy and both merge engines. Expectations are derived by
// hand from the kubelet's rules.
#include "topology/manager/policy.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "status_matchers.h"

namespace topology::manager {
namespace {

using testing::StatusIs;

NumaMask M(const std::vector<int>& ids) { return *NumaMask::FromIds(ids); }
TopologyHint H(const std::vector<int>& ids, bool preferred) {
  return TopologyHint{M(ids), preferred};
}
TopologyHint Nil(bool preferred) {
  return TopologyHint{std::nullopt, preferred};
}

// One provider with one resource.
ProviderHints One(std::vector<TopologyHint> hints) {
  return ProviderHints{{"res", HintList(std::move(hints))}};
}

struct MergeCase {
  std::string name;
  std::vector<int> nodes;
  std::vector<ProviderHints> providers;
  TopologyHint best_effort;       // restricted: same hint, admit = preferred
  TopologyHint single_numa_node;  // admit = preferred
  bool closest = false;  // run best-effort/restricted with prefer-closest
};

void PrintTo(const MergeCase& c, std::ostream* os) { *os << c.name; }

std::vector<MergeCase> Cases() {
  const std::vector<int> two = {0, 1};
  const std::vector<int> four = {0, 1, 2, 3};
  return {
      {"NoProviders", two, {}, H({0, 1}, true), Nil(true)},
      {"ProviderWithNoResources",
       two,
       {ProviderHints{}},
       H({0, 1}, true),
       Nil(true)},
      {"NilListIsDontCare",
       two,
       {ProviderHints{{"res", std::nullopt}}},
       H({0, 1}, true),
       Nil(true)},
      {"EmptyListCannotBeSatisfied",
       two,
       {ProviderHints{{"res", std::vector<TopologyHint>{}}}},
       H({0, 1}, false),
       Nil(false)},
      {"TwoProvidersAgreeOnNode0",
       two,
       {One({H({0}, true), H({1}, true), H({0, 1}, false)}),
        One({H({0}, true), H({1}, true), H({0, 1}, false)})},
       H({0}, true),
       H({0}, true)},
      {"OnlyNode1IsCommon",
       two,
       {One({H({1}, true)}), One({H({0}, true), H({1}, true)})},
       H({1}, true),
       H({1}, true)},
      {"PreferredNeedsIdenticalMasks",
       two,
       {One({H({0}, true)}), One({H({0, 1}, true)})},
       H({0}, false),
       Nil(false)},
      {"DisjointSingleNodesGiveDefault",
       two,
       {One({H({0}, true)}), One({H({1}, true)})},
       H({0, 1}, false),
       Nil(false)},
      {"WideDeviceNarrowCpu",
       two,
       {One({H({0, 1}, true)}),
        One({H({0}, true), H({1}, true), H({0, 1}, false)})},
       H({0, 1}, false),
       Nil(false)},
      {"PreferredNilHintMatchesAnyMask",
       two,
       {ProviderHints{{"res", std::vector<TopologyHint>{Nil(true)}}},
        One({H({1}, true), H({0}, true)})},
       H({0}, true),
       H({0}, true)},
      {"NonPreferredNilFromEmptyListSpoilsPreference",
       two,
       {ProviderHints{{"a", std::vector<TopologyHint>{}}}, One({H({0}, true)})},
       H({0}, false),
       Nil(false)},
      {"EmptyMergedMasksAreSkipped",
       two,
       {One({H({0}, false), H({0, 1}, false)}), One({H({1}, false)})},
       H({1}, false),
       Nil(false)},
      {"NumericTieBreak",
       four,
       {One({H({0, 3}, true), H({1, 2}, true)})},
       H({1, 2}, true),
       Nil(false)},
      {"BestCountKeepsWiderMask",
       four,
       {One({H({0, 3}, false)}), One({H({0}, true), H({0, 3}, false)})},
       H({0, 3}, false),
       Nil(false)},
      {"BelowBestCountPrefersMoreNodes",
       four,
       {One({H({0, 1, 2}, false)}), One({H({0}, false), H({0, 1}, false)})},
       H({0, 1}, false),
       Nil(false)},
      {"BelowBestCountBeatsAboveIt",
       four,
       {One({H({0}, false), H({1, 2, 3}, false)}),
        One({H({0, 1}, false), H({1, 2, 3}, false)})},
       H({0}, false),
       Nil(false)},
      {"MultiNodePreferredBlocksSingleNumaNode",
       two,
       {One({H({0, 1}, true)})},
       H({0, 1}, true),
       Nil(false)},
      {"MasksOutsideTheMachineAreDropped",
       two,
       {One({H({0, 2}, true)}), One({H({0, 2}, true)})},
       H({0}, true),
       Nil(false)},
      {"ThreeProvidersTwoResources",
       four,
       {ProviderHints{
            {"gpu", std::vector<TopologyHint>{H({2}, true), H({3}, true),
                                              H({2, 3}, false)}},
            {"nic", std::vector<TopologyHint>{H({3}, true)}}},
        One({H({0}, true), H({1}, true), H({2}, true), H({3}, true)}),
        ProviderHints{}},
       H({3}, true),
       H({3}, true)},
      {"ClosestPicksShorterAverageDistance",
       four,
       {One({H({1, 2}, true), H({2, 3}, true)})},
       H({2, 3}, true),
       Nil(false),
       /*closest=*/true},
      {"ClosestDoesNotChangeSingleNumaNode",
       four,
       {One({H({1}, true), H({0}, true)})},
       H({0}, true),
       H({0}, true),
       /*closest=*/true},
      {"ClosestNeverPrefersAWiderMask",
       four,
       {One({H({0}, true), H({2, 3}, true)})},
       H({0}, true),
       H({0}, true),
       /*closest=*/true},
  };
}

NumaInfo Info(const std::vector<int>& nodes) {
  // The kubelet fixture's distances for 4 nodes; 10/20 otherwise.
  std::map<int, std::vector<int>> rows;
  if (nodes.size() == 4) {
    rows = {{0, {10, 11, 12, 12}},
            {1, {11, 10, 12, 12}},
            {2, {12, 12, 10, 11}},
            {3, {12, 12, 11, 10}}};
  } else {
    for (int i : nodes) {
      std::vector<int> row(static_cast<size_t>(nodes.back()) + 1, 20);
      row[static_cast<size_t>(i)] = 10;
      rows[i] = row;
    }
  }
  return *NumaInfo::Create(nodes, rows);
}

using Param = std::tuple<MergeCase, MergeEngine>;

class PolicyMergeTest : public ::testing::TestWithParam<Param> {
 protected:
  MergeResult Run(const char* policy_name) {
    const auto& [c, engine] = GetParam();
    PolicyOptions options;
    options.prefer_closest_numa = c.closest;
    auto policy = NewPolicy(policy_name, Info(c.nodes), options, engine);
    EXPECT_TRUE(policy.ok()) << policy.status().ToString();
    return (*policy)->Merge(c.providers, nullptr);
  }
};

TEST_P(PolicyMergeTest, BestEffortAdmitsTheBestHint) {
  const MergeResult r = Run(kPolicyBestEffort);
  EXPECT_EQ(r.hint, std::get<0>(GetParam()).best_effort) << r.hint.ToString();
  EXPECT_TRUE(r.admit);
}

TEST_P(PolicyMergeTest, RestrictedAdmitsOnlyPreferred) {
  const MergeResult r = Run(kPolicyRestricted);
  const TopologyHint& want = std::get<0>(GetParam()).best_effort;
  EXPECT_EQ(r.hint, want) << r.hint.ToString();
  EXPECT_EQ(r.admit, want.preferred);
}

TEST_P(PolicyMergeTest, SingleNumaNode) {
  const MergeResult r = Run(kPolicySingleNumaNode);
  const TopologyHint& want = std::get<0>(GetParam()).single_numa_node;
  EXPECT_EQ(r.hint, want) << r.hint.ToString();
  EXPECT_EQ(r.admit, want.preferred);
}

TEST_P(PolicyMergeTest, NoneAdmitsWithTheZeroHint) {
  const MergeResult r = Run(kPolicyNone);
  EXPECT_EQ(r.hint, TopologyHint{});
  EXPECT_TRUE(r.admit);
}

INSTANTIATE_TEST_SUITE_P(
    Kubelet, PolicyMergeTest,
    ::testing::Combine(::testing::ValuesIn(Cases()),
                       ::testing::Values(MergeEngine::kReference,
                                         MergeEngine::kFast)),
    [](const ::testing::TestParamInfo<Param>& p) {
      return std::get<0>(p.param).name +
             (std::get<1>(p.param) == MergeEngine::kFast ? "_Fast"
                                                         : "_Reference");
    });

TEST(PolicyTest, SingleNodeMachineReportsNilForItsOnlyNode) {
  for (MergeEngine engine : {MergeEngine::kReference, MergeEngine::kFast}) {
    auto policy = NewPolicy(kPolicySingleNumaNode,
                            *NumaInfo::Create({0}, std::nullopt), {}, engine);
    ASSERT_TRUE(policy.ok());
    const MergeResult r = (*policy)->Merge({One({H({0}, true)})}, nullptr);
    EXPECT_EQ(r.hint, Nil(true));
    EXPECT_TRUE(r.admit);
  }
}

TEST(PolicyTest, FactoryErrors) {
  const NumaInfo info = *NumaInfo::Create({0, 1}, std::nullopt);
  EXPECT_THAT(
      NewPolicy("bogus", info, {}),
      StatusIs(StatusCode::kInvalidArgument, "unknown policy: \"bogus\""));
  PolicyOptions closest;
  closest.prefer_closest_numa = true;
  EXPECT_THAT(NewPolicy(kPolicyBestEffort, info, closest),
              StatusIs(StatusCode::kFailedPrecondition));
}

TEST(PolicyTest, ExplanationNamesTheRule) {
  auto policy =
      NewPolicy(kPolicyBestEffort, *NumaInfo::Create({0, 1}, std::nullopt), {});
  MergeExplanation why;
  (*policy)->Merge({One({H({0}, true)}), One({H({0, 1}, true)})}, &why);
  EXPECT_EQ(why.hint_lists, 2);
  EXPECT_EQ(why.best_non_preferred_count, 2);
  EXPECT_EQ(why.permutations, 1);
  EXPECT_THAT(why.reason, ::testing::HasSubstr("non-preferred"));
}

}  // namespace
}  // namespace topology::manager
