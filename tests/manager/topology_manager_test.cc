// TopologyManager: creation checks, scopes and admission, with scripted
// providers (the kubelet's fake hint providers).
#include "topology/manager/topology_manager.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "status_matchers.h"

namespace topology::manager {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using testing::StatusIs;

NumaMask M(const std::vector<int>& ids) { return *NumaMask::FromIds(ids); }
TopologyHint H(const std::vector<int>& ids, bool preferred) {
  return TopologyHint{M(ids), preferred};
}

NumaInfo Nodes(int n) {
  std::vector<int> ids;
  ids.reserve(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) ids.push_back(i);
  return *NumaInfo::Create(ids, std::nullopt);
}

// Answers from a script keyed by container name ("" = pod scope) and records
// Allocate calls with the affinity the store holds at that moment.
class ScriptedProvider : public HintProvider {
 public:
  explicit ScriptedProvider(const Store* store) : store_(store) {}
  std::map<std::string, ProviderHints> hints;
  std::string fail_allocate_for;
  std::vector<std::string> allocations;

  ProviderHints GetTopologyHints(const Pod&, const Container& c) override {
    return hints[c.name];
  }
  ProviderHints GetPodTopologyHints(const Pod&) override { return hints[""]; }
  Status Allocate(const Pod& pod, const Container& c) override {
    if (c.name == fail_allocate_for) return UnavailableError("no device left");
    allocations.push_back(c.name + "=" +
                          store_->GetAffinity(pod.uid, c.name).ToString());
    return OkStatus();
  }

 private:
  const Store* store_;
};

Pod TwoContainerPod() {
  Pod pod;
  pod.uid = "uid-1";
  pod.name = "pod";
  pod.init_containers = {Container{"init", {}, false}};
  pod.containers = {Container{"app", {}, false}, Container{"side", {}, false}};
  return pod;
}

std::unique_ptr<TopologyManager> Make(const std::string& policy,
                                      const std::string& scope, int nodes = 2) {
  ManagerConfig config;
  config.policy = policy;
  config.scope = scope;
  auto manager = TopologyManager::Create(config, Nodes(nodes));
  EXPECT_TRUE(manager.ok()) << manager.status().ToString();
  return manager.ok() ? *std::move(manager) : nullptr;
}

ProviderHints One(std::vector<TopologyHint> hints) {
  return ProviderHints{{"res", HintList(std::move(hints))}};
}

TEST(TopologyManagerTest, CreationErrorsInTheKubeletsOrder) {
  ManagerConfig config;
  config.policy = "bogus";
  config.scope = "bogus";
  EXPECT_THAT(
      TopologyManager::Create(config, Nodes(2)),
      StatusIs(StatusCode::kInvalidArgument, "unknown policy: \"bogus\""));
  config.policy = kPolicyBestEffort;
  EXPECT_THAT(
      TopologyManager::Create(config, Nodes(2)),
      StatusIs(StatusCode::kInvalidArgument, "unknown scope: \"bogus\""));
  config.scope = kScopePod;
  EXPECT_THAT(TopologyManager::Create(config, Nodes(9)),
              StatusIs(StatusCode::kFailedPrecondition,
                       "unsupported on machines with more than 8 NUMA Nodes"));
  config.policy_options = {{"max-allowable-numa-nodes", "64"}};
  EXPECT_TRUE(TopologyManager::Create(config, Nodes(64)).ok());
  config.policy_options = {{"prefer-closest-numa-nodes", "true"}};
  EXPECT_THAT(TopologyManager::Create(config, Nodes(2)),
              StatusIs(StatusCode::kFailedPrecondition,
                       HasSubstr("cannot discover NUMA topology")));
  config.policy_options = {{"bogus", "1"}};
  EXPECT_THAT(TopologyManager::Create(config, Nodes(2)),
              StatusIs(StatusCode::kInvalidArgument));
  // Policy none checks nothing else, as the kubelet's none scope.
  config.policy = kPolicyNone;
  config.scope = "bogus";
  EXPECT_TRUE(TopologyManager::Create(config, Nodes(16)).ok());
}

TEST(TopologyManagerTest, ContainerScopeMergesAndAllocatesPerContainer) {
  auto manager = Make(kPolicyRestricted, kScopeContainer);
  ScriptedProvider provider(manager.get());
  provider.hints["init"] = One({H({1}, true)});
  provider.hints["app"] = One({H({0}, true)});
  manager->AddHintProvider(&provider);
  std::vector<MergeTrace> traces;
  const AdmitResult result = manager->Admit(TwoContainerPod(), &traces);
  EXPECT_TRUE(result.admit);
  EXPECT_EQ(result.reason, "");
  // Init first, then app containers, each stored before its Allocate.
  EXPECT_THAT(provider.allocations,
              ElementsAre("init={[1] preferred}", "app={[0] preferred}",
                          "side={[0,1] preferred}"));
  ASSERT_EQ(traces.size(), 3u);
  EXPECT_EQ(traces[0].container, "init");
  EXPECT_EQ(manager->GetAffinity("uid-1", "app"), H({0}, true));
  manager->RemovePod("uid-1");
  EXPECT_EQ(manager->GetAffinity("uid-1", "app"), TopologyHint{});
}

TEST(TopologyManagerTest, ContainerScopeRejectsAtTheFirstFailingContainer) {
  auto manager = Make(kPolicyRestricted, kScopeContainer);
  ScriptedProvider provider(manager.get());
  provider.hints["app"] = One({H({0}, false)});
  manager->AddHintProvider(&provider);
  const AdmitResult result = manager->Admit(TwoContainerPod());
  EXPECT_FALSE(result.admit);
  EXPECT_EQ(result.reason, "TopologyAffinityError");
  EXPECT_EQ(result.message,
            "Resources cannot be allocated with Topology locality");
  // The init container was already allocated; nothing is rolled back.
  EXPECT_THAT(provider.allocations, ElementsAre("init={[0,1] preferred}"));
}

TEST(TopologyManagerTest, PodScopeStoresOneHintForEveryContainer) {
  auto manager = Make(kPolicySingleNumaNode, kScopePod);
  ScriptedProvider provider(manager.get());
  provider.hints[""] = One({H({1}, true), H({0, 1}, false)});
  manager->AddHintProvider(&provider);
  std::vector<MergeTrace> traces;
  EXPECT_TRUE(manager->Admit(TwoContainerPod(), &traces).admit);
  ASSERT_EQ(traces.size(), 1u);
  EXPECT_THAT(provider.allocations,
              ElementsAre("init={[1] preferred}", "app={[1] preferred}",
                          "side={[1] preferred}"));
}

TEST(TopologyManagerTest, PodScopeRejection) {
  auto manager = Make(kPolicySingleNumaNode, kScopePod);
  ScriptedProvider provider(manager.get());
  provider.hints[""] = One({H({0, 1}, true)});
  manager->AddHintProvider(&provider);
  std::vector<MergeTrace> traces;
  const AdmitResult result = manager->Admit(TwoContainerPod(), &traces);
  EXPECT_FALSE(result.admit);
  EXPECT_EQ(result.reason, "TopologyAffinityError");
  EXPECT_TRUE(provider.allocations.empty());
  // The explanation names the resource whose hints left nothing.
  ASSERT_EQ(traces.size(), 1u);
  EXPECT_THAT(traces[0].explanation.reason,
              ::testing::HasSubstr("the hint list of res is empty"));
}

TEST(TopologyManagerTest, AllocateFailureIsUnexpectedAdmissionError) {
  auto manager = Make(kPolicyBestEffort, kScopeContainer);
  ScriptedProvider provider(manager.get());
  provider.fail_allocate_for = "app";
  manager->AddHintProvider(&provider);
  const AdmitResult result = manager->Admit(TwoContainerPod());
  EXPECT_FALSE(result.admit);
  EXPECT_EQ(result.reason, "UnexpectedAdmissionError");
  EXPECT_EQ(result.message,
            "Allocate failed due to no device left, which is unexpected");
}

TEST(TopologyManagerTest, PolicyNoneOnlyAllocates) {
  auto manager = Make(kPolicyNone, kScopePod);
  ScriptedProvider provider(manager.get());
  provider.hints[""] = One({H({0}, false)});
  manager->AddHintProvider(&provider);
  EXPECT_TRUE(manager->Admit(TwoContainerPod()).admit);
  EXPECT_THAT(provider.allocations,
              ElementsAre("init={nil not-preferred}", "app={nil not-preferred}",
                          "side={nil not-preferred}"));
}

// The kubelet's TestAdmit canAdmit table.
TEST(TopologyManagerTest, CanAdmitTable) {
  struct Row {
    const char* policy;
    TopologyHint hint;
    bool admit;
  };
  const Row rows[] = {
      {kPolicyBestEffort, TopologyHint{std::nullopt, false}, true},
      {kPolicyBestEffort, TopologyHint{std::nullopt, true}, true},
      {kPolicyRestricted, TopologyHint{std::nullopt, false}, false},
      {kPolicyRestricted, TopologyHint{std::nullopt, true}, true},
      {kPolicySingleNumaNode, TopologyHint{std::nullopt, false}, false},
      {kPolicySingleNumaNode, TopologyHint{std::nullopt, true}, true},
  };
  for (const Row& row : rows) {
    auto manager = Make(row.policy, kScopePod);
    ScriptedProvider provider(manager.get());
    // A provider whose single hint merges to `row.hint` (nil -> all nodes).
    provider.hints[""] =
        row.hint.preferred
            ? ProviderHints{}
            : ProviderHints{{"res", std::vector<TopologyHint>{}}};
    manager->AddHintProvider(&provider);
    EXPECT_EQ(manager->Admit(TwoContainerPod()).admit, row.admit)
        << row.policy << " " << row.hint.ToString();
  }
}

}  // namespace
}  // namespace topology::manager
