// Beyond the kubelet: the node policy "dynamic" applies each pod's own
// topology policy (the Node Topology Manager design's spec.topology.policy);
// any other node policy wins over the pod's. pod-level-single-numa-node is
// single-numa-node at pod scope, checked here against that configuration.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "topology/manager/topology_manager.h"

#include "seeded_random.h"

namespace topology::manager {
namespace {

NumaInfo Nodes(int n) {
  std::vector<int> ids;
  ids.reserve(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) ids.push_back(i);
  return *NumaInfo::Create(ids, std::nullopt);
}

TopologyHint H(const std::vector<int>& ids, bool preferred) {
  return TopologyHint{*NumaMask::FromIds(ids), preferred};
}

// The same hints for every container and for the pod.
class FixedProvider : public HintProvider {
 public:
  explicit FixedProvider(const Store* store) : store_(store) {}
  std::vector<TopologyHint> hints;
  std::map<std::string, std::vector<TopologyHint>> per_container;
  std::vector<std::string> allocations;

  ProviderHints GetTopologyHints(const Pod&, const Container& c) override {
    auto it = per_container.find(c.name);
    return {{"res", HintList(it == per_container.end() ? hints : it->second)}};
  }
  ProviderHints GetPodTopologyHints(const Pod&) override {
    auto it = per_container.find("");
    return {{"res", HintList(it == per_container.end() ? hints : it->second)}};
  }
  Status Allocate(const Pod& pod, const Container& c) override {
    allocations.push_back(c.name + "=" +
                          store_->GetAffinity(pod.uid, c.name).ToString());
    return OkStatus();
  }

 private:
  const Store* store_;
};

std::unique_ptr<TopologyManager> Make(const std::string& policy,
                                      const std::string& scope) {
  ManagerConfig config;
  config.policy = policy;
  config.scope = scope;
  auto manager = TopologyManager::Create(config, Nodes(2));
  EXPECT_TRUE(manager.ok()) << manager.status().ToString();
  return manager.ok() ? *std::move(manager) : nullptr;
}

Pod PodWith(const std::string& policy) {
  Pod pod;
  pod.uid = "uid-" + policy;
  pod.name = "p";
  pod.containers = {Container{"a", {}, false}, Container{"b", {}, false}};
  pod.topology_policy = policy;
  pod.topology_policy_source = policy.empty() ? "" : "spec.topology.policy";
  return pod;
}

struct Case {
  std::string pod_policy;  // "" = the pod states none
  // Admitted with hints that need both nodes ({0,1} preferred), and with a
  // single non-preferred node ({0} not preferred).
  bool admit_split;
  bool admit_unpreferred;
  std::string policy;  // what applies
  std::string scope;
};

class DynamicPolicyTest : public ::testing::TestWithParam<Case> {};

TEST_P(DynamicPolicyTest, EachPodPolicyDecidesItsPod) {
  const Case& c = GetParam();
  for (const auto& [hints, expected] :
       {std::pair{std::vector{H({0, 1}, true)}, c.admit_split},
        std::pair{std::vector{H({0}, false)}, c.admit_unpreferred}}) {
    auto manager = Make(kPolicyDynamic, kScopeContainer);
    FixedProvider provider(manager.get());
    provider.hints = hints;
    manager->AddHintProvider(&provider);
    const Pod pod = PodWith(c.pod_policy);
    const EffectivePolicy effective = manager->Effective(pod);
    EXPECT_EQ(effective.policy, c.policy);
    EXPECT_EQ(effective.scope, c.scope);
    EXPECT_EQ(effective.source,
              c.pod_policy.empty() ? "default" : "spec.topology.policy");
    const AdmitResult result = manager->Admit(pod);
    EXPECT_EQ(result.admit, expected) << hints[0].ToString();
    if (!result.admit) {
      EXPECT_EQ(result.reason, kTopologyAffinityError);
      EXPECT_TRUE(provider.allocations.empty());
    }
    if (c.policy == kPolicyNone && result.admit) {
      // The Topology Manager does not intervene: no affinity is stored.
      EXPECT_THAT(provider.allocations,
                  ::testing::ElementsAre("a={nil not-preferred}",
                                         "b={nil not-preferred}"))
          << ::testing::PrintToString(provider.allocations);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    PodPolicies, DynamicPolicyTest,
    ::testing::Values(Case{"", true, true, kPolicyNone, "none"},
                      Case{kPolicyNone, true, true, kPolicyNone, "none"},
                      Case{kPolicyBestEffort, true, true, kPolicyBestEffort,
                           kScopeContainer},
                      Case{kPolicyRestricted, true, false, kPolicyRestricted,
                           kScopeContainer},
                      Case{kPolicySingleNumaNode, false, false,
                           kPolicySingleNumaNode, kScopeContainer},
                      Case{kPolicyPodLevelSingleNumaNode, false, false,
                           kPolicySingleNumaNode, kScopePod}),
    [](const auto& param_info) {
      std::string name = param_info.param.pod_policy.empty()
                             ? "Unset"
                             : param_info.param.pod_policy;
      for (char& ch : name) {
        if (ch == '-') ch = '_';
      }
      return name;
    });

// A fixed node policy wins: the pod's field is read, reported, ignored.
TEST(DynamicPolicyTest, FixedNodePolicyWinsOverThePods) {
  for (const char* node : {kPolicyNone, kPolicyBestEffort, kPolicyRestricted,
                           kPolicySingleNumaNode}) {
    for (const char* asked :
         {"", kPolicyNone, kPolicyBestEffort, kPolicyRestricted,
          kPolicySingleNumaNode, kPolicyPodLevelSingleNumaNode}) {
      SCOPED_TRACE(std::string(node) + " / " + asked);
      auto fixed = Make(node, kScopeContainer);
      auto reference = Make(node, kScopeContainer);
      FixedProvider a(fixed.get());
      FixedProvider b(reference.get());
      a.hints = b.hints = {H({0, 1}, true)};
      fixed->AddHintProvider(&a);
      reference->AddHintProvider(&b);
      const Pod pod = PodWith(asked);
      Pod plain = pod;
      plain.topology_policy.clear();
      const EffectivePolicy effective = fixed->Effective(pod);
      EXPECT_EQ(effective.policy, node);
      EXPECT_EQ(effective.source, "node");
      EXPECT_EQ(effective.requested,
                std::string(asked) == node ? "" : std::string(asked));
      EXPECT_EQ(fixed->Admit(pod).admit, reference->Admit(plain).admit);
      EXPECT_EQ(a.allocations, b.allocations);
    }
  }
}

// pod-level-single-numa-node under "dynamic" decides exactly as the
// kubelet's single-numa-node policy at pod scope: seeded random hints for
// the pod and its containers, same admission, same stored affinities.
TEST(DynamicPolicyTest, PodLevelSingleNumaNodeEqualsSingleNumaNodePodScope) {
  testing::SeededRandom random(
      static_cast<uint64_t>(testing::EnvOr("TOPOLOGY_SEED", 2024)));
  const std::vector<std::vector<int>> masks = {{0}, {1}, {0, 1}};
  int admitted = 0;
  for (int round = 0; round < 500; ++round) {
    auto dynamic = Make(kPolicyDynamic, kScopeContainer);
    auto pod_scope = Make(kPolicySingleNumaNode, kScopePod);
    FixedProvider a(dynamic.get());
    FixedProvider b(pod_scope.get());
    for (const char* key : {"", "a", "b"}) {
      std::vector<TopologyHint> hints;
      const int count = random.Uniform(0, 3);
      hints.reserve(static_cast<size_t>(count));
      for (int i = 0; i < count; ++i) {
        hints.push_back(H(masks[static_cast<size_t>(random.Uniform(0, 2))],
                          random.Chance(50)));
      }
      a.per_container[key] = hints;
      b.per_container[key] = hints;
    }
    dynamic->AddHintProvider(&a);
    pod_scope->AddHintProvider(&b);
    const Pod pod = PodWith(kPolicyPodLevelSingleNumaNode);
    const AdmitResult x = dynamic->Admit(pod);
    const AdmitResult y = pod_scope->Admit(pod);
    ASSERT_EQ(x.admit, y.admit) << round;
    ASSERT_EQ(x.reason, y.reason) << round;
    ASSERT_EQ(a.allocations, b.allocations) << round;
    for (const char* container : {"a", "b"}) {
      ASSERT_EQ(dynamic->GetAffinity(pod.uid, container).ToString(),
                pod_scope->GetAffinity(pod.uid, container).ToString());
    }
    admitted += x.admit ? 1 : 0;
  }
  // Both outcomes occur, so the comparison means something.
  EXPECT_GT(admitted, 0);
  EXPECT_LT(admitted, 500);
}

TEST(DynamicPolicyTest, DynamicNeedsAKnownScope) {
  ManagerConfig config;
  config.policy = kPolicyDynamic;
  config.scope = "bogus";
  EXPECT_FALSE(TopologyManager::Create(config, Nodes(2)).ok());
  EXPECT_TRUE(IsPodTopologyPolicy(kPolicyPodLevelSingleNumaNode));
  EXPECT_FALSE(IsPodTopologyPolicy(kPolicyDynamic));
}

}  // namespace
}  // namespace topology::manager
