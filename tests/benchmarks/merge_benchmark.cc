// The kubelet's merge anchor (spec section 12): best-effort, NUMA nodes
// 0..N-1, P providers each with one resource listing every non-empty subset
// of the nodes in IterateMasks order, preferred iff a single node. One Merge
// call per iteration; inputs prebuilt; the result must be ({0}, preferred).
// The reference engine (the kubelet's cross product) and the fast engine run
// side by side; the reference runs only where it finishes in seconds.
//
//   build/default/tests/benchmarks/merge_benchmark
#include <cmath>
#include <string>

#include <benchmark/benchmark.h>

#include "topology/manager/policy.h"

namespace topology::manager {
namespace {

std::vector<int> Ids(int n) {
  std::vector<int> ids;
  for (int i = 0; i < n; ++i) ids.push_back(i);
  return ids;
}

std::vector<ProviderHints> AnchorProviders(int n, int p) {
  std::vector<TopologyHint> hints;
  IterateMasks(Ids(n), [&](NumaMask m) {
    hints.push_back(TopologyHint{m, m.Count() == 1});
  });
  std::vector<ProviderHints> providers;
  for (int i = 0; i < p; ++i) {
    providers.push_back(ProviderHints{{"resource" + std::to_string(i), hints}});
  }
  return providers;
}

NumaInfo PairedDistances(int n) {
  // 10 to self, 11 inside the pairs {0,1},{2,3},..., 21 otherwise.
  std::map<int, std::vector<int>> rows;
  for (int i = 0; i < n; ++i) {
    std::vector<int> row(static_cast<size_t>(n));
    for (int j = 0; j < n; ++j) {
      row[static_cast<size_t>(j)] = i == j ? 10 : (i / 2 == j / 2 ? 11 : 21);
    }
    rows[i] = row;
  }
  return *NumaInfo::Create(Ids(n), rows);
}

void RunMerge(benchmark::State& state, const char* policy_name, bool closest,
              MergeEngine engine) {
  const int n = static_cast<int>(state.range(0));
  const int p = static_cast<int>(state.range(1));
  const std::vector<ProviderHints> providers = AnchorProviders(n, p);
  PolicyOptions options;
  options.prefer_closest_numa = closest;
  auto policy = NewPolicy(policy_name, PairedDistances(n), options, engine);
  if (!policy.ok()) {
    state.SkipWithError(policy.status().ToString().c_str());
    return;
  }
  const TopologyHint want{NumaMask::FromBits(1), true};
  for (auto _ : state) {
    const MergeResult result = (*policy)->Merge(providers, nullptr);
    if (!(result.hint == want) &&
        std::string(policy_name) != kPolicySingleNumaNode) {
      state.SkipWithError(("wrong result " + result.hint.ToString()).c_str());
      return;
    }
    benchmark::DoNotOptimize(result);
  }
  state.counters["permutations"] =
      std::pow(std::pow(2.0, n) - 1, static_cast<double>(p));
}

void BM_MergeAnchorFast(benchmark::State& state) {
  RunMerge(state, kPolicyBestEffort, false, MergeEngine::kFast);
}
void BM_MergeAnchorReference(benchmark::State& state) {
  RunMerge(state, kPolicyBestEffort, false, MergeEngine::kReference);
}

// Fast: every N and P of the anchor that fits in memory (2^N - 1 hints per
// list; N = 32 and 64 would need 4e9 and 2e19 hints per list).
BENCHMARK(BM_MergeAnchorFast)
    ->ArgsProduct({{2, 4, 8, 16}, {1, 2, 3, 4}})
    ->Unit(benchmark::kMicrosecond);
// Reference: where the cross product stays below ~2e7 permutations.
BENCHMARK(BM_MergeAnchorReference)
    ->Args({2, 1})
    ->Args({2, 2})
    ->Args({2, 3})
    ->Args({2, 4})
    ->Args({4, 1})
    ->Args({4, 2})
    ->Args({4, 3})
    ->Args({4, 4})
    ->Args({8, 1})
    ->Args({8, 2})
    ->Args({8, 3})
    ->Args({16, 1})
    ->Unit(benchmark::kMicrosecond);

// The spec's other N=8 settings.
void BM_MergeN8Closest(benchmark::State& state) {
  RunMerge(state, kPolicyBestEffort, true,
           state.range(2) ? MergeEngine::kFast : MergeEngine::kReference);
}
void BM_MergeN8Restricted(benchmark::State& state) {
  RunMerge(state, kPolicyRestricted, false,
           state.range(2) ? MergeEngine::kFast : MergeEngine::kReference);
}
void BM_MergeN8SingleNumaNode(benchmark::State& state) {
  RunMerge(state, kPolicySingleNumaNode, false,
           state.range(2) ? MergeEngine::kFast : MergeEngine::kReference);
}
BENCHMARK(BM_MergeN8Closest)
    ->Args({8, 3, 0})
    ->Args({8, 3, 1})
    ->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_MergeN8Restricted)
    ->Args({8, 3, 0})
    ->Args({8, 3, 1})
    ->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_MergeN8SingleNumaNode)
    ->Args({8, 3, 0})
    ->Args({8, 3, 1})
    ->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace topology::manager

BENCHMARK_MAIN();
