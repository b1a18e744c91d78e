// The fast merge engine must equal the reference engine (the kubelet's cross
// product) on every input. Seeded random cases: up to 8 NUMA nodes with
// sparse ids, nil / empty / mixed lists, nil masks, masks reaching outside
// the machine, every policy, prefer-closest with random distances.
//
// TOPOLOGY_DIFF_CASES sets the number of cases (default 20000) and
// TOPOLOGY_DIFF_SEED the seed (default 1); the "long" ctest label runs more.
#include <algorithm>
#include <sstream>

#include <gtest/gtest.h>

#include "topology/manager/policy.h"

#include "seeded_random.h"

namespace topology::manager {
namespace {

using testing::EnvOr;

struct RandomCase {
  std::vector<int> nodes;
  std::map<int, std::vector<int>> distances;
  std::vector<ProviderHints> providers;
  std::string policy;
  bool closest = false;
};

class CaseGenerator : public testing::SeededRandom {
 public:
  using SeededRandom::SeededRandom;

  RandomCase Next() {
    RandomCase c;
    while (true) {
      c = Draw();
      double permutations = 1;
      size_t lists = 0;
      for (const ProviderHints& p : c.providers) {
        if (p.empty()) ++lists;
        for (const auto& [name, hints] : p) {
          ++lists;
          if (hints && !hints->empty())
            permutations *= static_cast<double>(hints->size());
        }
      }
      (void)lists;
      if (permutations <= 20000) return c;
    }
  }

 private:
  RandomCase Draw() {
    RandomCase c;
    const int n = Uniform(1, 8);
    // Sparse ids below 12 half of the time.
    std::vector<int> pool;
    const int size = Chance(50) ? n : 12;
    pool.reserve(static_cast<size_t>(size));
    for (int i = 0; i < size; ++i) pool.push_back(i);
    std::shuffle(pool.begin(), pool.end(), engine());
    c.nodes.assign(pool.begin(), pool.begin() + n);
    std::sort(c.nodes.begin(), c.nodes.end());
    const int max_id = c.nodes.back();
    for (int i : c.nodes) {
      std::vector<int> row(static_cast<size_t>(max_id) + 1, 0);
      for (int j : c.nodes)
        row[static_cast<size_t>(j)] = i == j ? 10 : Uniform(11, 14);
      c.distances[i] = row;
    }
    const char* policies[] = {kPolicyBestEffort, kPolicyRestricted,
                              kPolicySingleNumaNode};
    c.policy = policies[Uniform(0, 2)];
    c.closest = Chance(30);
    const int providers = Uniform(0, 4);
    for (int p = 0; p < providers; ++p) {
      ProviderHints provider;
      if (!Chance(10)) {
        const int resources = Uniform(1, 2);
        for (int r = 0; r < resources; ++r) {
          const std::string name = "r" + std::to_string(r);
          const int shape = Uniform(1, 100);
          if (shape <= 8) {
            provider[name] = std::nullopt;
          } else if (shape <= 14) {
            provider[name] = std::vector<TopologyHint>{};
          } else {
            std::vector<TopologyHint> hints;
            const int count = Uniform(1, 7);
            hints.reserve(static_cast<size_t>(count));
            for (int h = 0; h < count; ++h)
              hints.push_back(RandomHint(c.nodes));
            provider[name] = hints;
          }
        }
      }
      c.providers.push_back(provider);
    }
    return c;
  }

  TopologyHint RandomHint(const std::vector<int>& nodes) {
    TopologyHint hint;
    hint.preferred = Chance(55);
    if (Chance(8)) return hint;  // nil mask
    uint64_t bits = 0;
    // Small masks are common in real hints.
    const int size = Uniform(
        1, std::min<int>(static_cast<int>(nodes.size()), Chance(60) ? 2 : 8));
    for (int i = 0; i < size; ++i) {
      bits |= uint64_t{1} << nodes[static_cast<size_t>(
                  Uniform(0, static_cast<int>(nodes.size()) - 1))];
    }
    if (Chance(5))
      bits |= uint64_t{1} << Uniform(12, 63);  // outside the machine
    hint.affinity = NumaMask::FromBits(bits);
    return hint;
  }
};

std::string Describe(const RandomCase& c) {
  std::ostringstream out;
  out << "policy " << c.policy << (c.closest ? " closest" : "") << " nodes";
  for (int n : c.nodes) out << " " << n;
  for (size_t p = 0; p < c.providers.size(); ++p) {
    out << "\n provider " << p << ":";
    for (const auto& [name, hints] : c.providers[p]) {
      out << " " << name << "=";
      if (!hints) {
        out << "nil";
        continue;
      }
      out << "[";
      for (const TopologyHint& h : *hints) out << h.ToString();
      out << "]";
    }
  }
  return out.str();
}

TEST(MergeDifferentialTest, FastEqualsReference) {
  const int64_t cases = EnvOr("TOPOLOGY_DIFF_CASES", 20000);
  const auto seed = static_cast<uint64_t>(EnvOr("TOPOLOGY_DIFF_SEED", 1));
  CaseGenerator generator(seed);
  int64_t preferred = 0;
  int64_t admitted = 0;
  for (int64_t i = 0; i < cases; ++i) {
    const RandomCase c = generator.Next();
    const NumaInfo numa = *NumaInfo::Create(c.nodes, c.distances);
    PolicyOptions options;
    options.prefer_closest_numa = c.closest;
    auto reference =
        NewPolicy(c.policy, numa, options, MergeEngine::kReference);
    auto fast = NewPolicy(c.policy, numa, options, MergeEngine::kFast);
    ASSERT_TRUE(reference.ok() && fast.ok());
    const MergeResult want = (*reference)->Merge(c.providers, nullptr);
    const MergeResult got = (*fast)->Merge(c.providers, nullptr);
    ASSERT_EQ(got.hint, want.hint)
        << "case " << i << " (seed " << seed << "): reference "
        << want.hint.ToString() << ", fast " << got.hint.ToString() << "\n"
        << Describe(c);
    ASSERT_EQ(got.admit, want.admit) << "case " << i << "\n" << Describe(c);
    preferred += want.hint.preferred ? 1 : 0;
    admitted += want.admit ? 1 : 0;
  }
  // The generator must exercise both outcomes, or the test proves little.
  EXPECT_GT(preferred, cases / 10);
  EXPECT_LT(preferred, cases - cases / 10);
  EXPECT_GT(admitted, cases / 10);
  RecordProperty("cases", static_cast<int>(cases));
}

}  // namespace
}  // namespace topology::manager
