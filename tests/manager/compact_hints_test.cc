// Compact hint families against the kubelet's enumerated lists, where both
// can run: (1) a family expands to exactly the enumerated list; (2) merging
// families with the fast engine gives the same hint and admission as the
// reference engine (the kubelet's cross product) over the enumerated lists,
// for every policy, with explicit lists mixed in.
#include <algorithm>

#include <gtest/gtest.h>

#include "topology/manager/numa_hints.h"
#include "topology/manager/policy.h"

#include "seeded_random.h"

namespace topology::manager {
namespace {

using testing::EnvOr;

class RequestGenerator : public testing::SeededRandom {
 public:
  using SeededRandom::SeededRandom;

  std::vector<int> Nodes() {
    const int n = Uniform(1, 7);
    std::vector<int> pool;
    const int size = Chance(50) ? n : 10;
    pool.reserve(static_cast<size_t>(size));
    for (int i = 0; i < size; ++i) pool.push_back(i);
    std::shuffle(pool.begin(), pool.end(), engine());
    std::vector<int> nodes(pool.begin(), pool.begin() + n);
    std::sort(nodes.begin(), nodes.end());
    return nodes;
  }

  NumaMask Item(const std::vector<int>& nodes) {
    if (Chance(5)) return NumaMask();  // no topology
    uint64_t bits = uint64_t{1} << nodes[static_cast<size_t>(
                        Uniform(0, static_cast<int>(nodes.size()) - 1))];
    if (Chance(10)) {  // a multi-node device
      bits |= uint64_t{1} << nodes[static_cast<size_t>(
                  Uniform(0, static_cast<int>(nodes.size()) - 1))];
    }
    return NumaMask::FromBits(bits);
  }

  HintRequest Request(const std::vector<int>& machine) {
    HintRequest r;
    // CPU-style generators iterate only some nodes.
    r.node_ids = machine;
    if (Chance(15) && machine.size() > 1) r.node_ids.pop_back();
    const int items = Uniform(0, 10);
    for (int i = 0; i < items; ++i) {
      const NumaMask item = Item(machine);
      r.all_items.push_back(item);
      const int fate = Uniform(1, 100);
      if (fate <= 65) {
        r.available_items.push_back(item);
      } else if (fate <= 72) {
        r.reusable_items.push_back(item);
      }
    }
    r.request = Uniform(Chance(5) ? 0 : 1, 4);
    return r;
  }
};

TEST(CompactHintsTest, FamiliesExpandToTheKubeletsList) {
  RequestGenerator gen(11);
  for (int i = 0; i < 3000; ++i) {
    const HintRequest r = gen.Request(gen.Nodes());
    const std::vector<TopologyHint> enumerated = GenerateNumaHints(r);
    const HintList compact = GenerateHintList(r, HintForm::kCompact);
    ASSERT_TRUE(compact.has_value());
    const std::vector<TopologyHint> expanded = compact.Expand();
    ASSERT_EQ(expanded, enumerated) << "case " << i;
  }
}

TEST(CompactHintsTest, AutoFormIsCompactOnlyAboveTwentyNodes) {
  HintRequest r;
  for (int i = 0; i < 21; ++i) r.node_ids.push_back(i);
  r.all_items = {NumaMask::FromBits(1)};
  r.available_items = r.all_items;
  r.request = 1;
  EXPECT_TRUE(GenerateHintList(r, HintForm::kAuto).is_family());
  r.node_ids.pop_back();
  EXPECT_FALSE(GenerateHintList(r, HintForm::kAuto).is_family());
}

TEST(CompactHintsTest, FastMergeOfFamiliesEqualsTheKubelet) {
  const int64_t cases = EnvOr("TOPOLOGY_COMPACT_CASES", 6000);
  RequestGenerator gen(
      static_cast<uint64_t>(EnvOr("TOPOLOGY_COMPACT_SEED", 5)));
  const char* policies[] = {kPolicyBestEffort, kPolicyRestricted,
                            kPolicySingleNumaNode};
  int64_t preferred = 0;
  for (int64_t i = 0; i < cases; ++i) {
    const std::vector<int> nodes = gen.Nodes();
    std::vector<ProviderHints> compact;
    std::vector<ProviderHints> enumerated;
    const int providers = gen.Uniform(1, 3);
    for (int p = 0; p < providers; ++p) {
      const std::string name = "r" + std::to_string(p);
      if (gen.Chance(15)) {
        // An explicit provider beside the generated ones.
        std::vector<TopologyHint> hints;
        const int count = gen.Uniform(1, 4);
        for (int h = 0; h < count; ++h) {
          hints.push_back(TopologyHint{gen.Item(nodes), gen.Chance(50)});
          if (hints.back().affinity->IsEmpty()) hints.back().affinity.reset();
        }
        compact.push_back({{name, hints}});
        enumerated.push_back({{name, hints}});
        continue;
      }
      const HintRequest r = gen.Request(nodes);
      compact.push_back({{name, GenerateHintList(r, HintForm::kCompact)}});
      enumerated.push_back({{name, HintList(GenerateNumaHints(r))}});
    }
    std::map<int, std::vector<int>> distances;
    for (int a : nodes) {
      std::vector<int> row(static_cast<size_t>(nodes.back()) + 1, 0);
      for (int b : nodes)
        row[static_cast<size_t>(b)] = a == b ? 10 : gen.Uniform(11, 13);
      distances[a] = row;
    }
    const NumaInfo numa = *NumaInfo::Create(nodes, distances);
    PolicyOptions options;
    options.prefer_closest_numa = gen.Chance(25);
    const char* policy = policies[gen.Uniform(0, 2)];
    auto reference = NewPolicy(policy, numa, options, MergeEngine::kReference);
    auto fast = NewPolicy(policy, numa, options, MergeEngine::kFast);
    const MergeResult want = (*reference)->Merge(enumerated, nullptr);
    const MergeResult got = (*fast)->Merge(compact, nullptr);
    ASSERT_EQ(got.hint, want.hint)
        << "case " << i << " policy " << policy
        << (options.prefer_closest_numa ? " closest" : "") << ": kubelet "
        << want.hint.ToString() << ", compact " << got.hint.ToString();
    ASSERT_EQ(got.admit, want.admit) << "case " << i;
    preferred += want.hint.preferred ? 1 : 0;
  }
  EXPECT_GT(preferred, cases / 10);
  EXPECT_LT(preferred, cases - cases / 10);
}

}  // namespace
}  // namespace topology::manager
