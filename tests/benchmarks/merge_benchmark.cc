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

#include "topology/manager/cpu_manager.h"
#include "topology/manager/device_manager.h"
#include "topology/manager/policy.h"

namespace topology::manager {
namespace {

std::vector<int> Ids(int n) {
  std::vector<int> ids;
  ids.reserve(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) ids.push_back(i);
  return ids;
}

std::vector<ProviderHints> AnchorProviders(int n, int p) {
  std::vector<TopologyHint> hints;
  IterateMasks(Ids(n), [&](NumaMask m) {
    hints.push_back(TopologyHint{m, m.Count() == 1});
  });
  std::vector<ProviderHints> providers;
  providers.reserve(static_cast<size_t>(p));
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

// A realistic 64-node machine: 8 packages x 8 NUMA nodes (sub-NUMA
// clustering), 16 CPUs (8 cores x 2 threads) per node, a GPU on every even
// node, a NIC on every fourth; SLIT 10 / 12 inside a package / 32 across.
// One Guaranteed container asks for GPUs, a NIC and 8 CPUs; timed: device
// and CPU hint generation (compact families: 2^64 masks cannot be listed)
// plus the merge.
class SixtyFourNodes {
 public:
  SixtyFourNodes() {
    Topology::Parts parts;
    std::vector<std::vector<int>> slit(64, std::vector<int>(64));
    for (int n = 0; n < 64; ++n) {
      NumaNode node;
      node.id = n;
      for (int c = 0; c < 16; ++c) node.cpus.Add(n * 16 + c);
      parts.numa_nodes.push_back(node);
      for (int m = 0; m < 64; ++m) {
        slit[static_cast<size_t>(n)][static_cast<size_t>(m)] =
            n == m ? 10 : (n / 8 == m / 8 ? 12 : 32);
      }
      for (int c = 0; c < 16; ++c) {
        CpuInfo cpu;
        cpu.id = n * 16 + c;
        cpu.package_id = n / 8;
        cpu.core_id = (n % 8) * 8 + c / 2;
        cpu.numa_node = n;
        parts.cpus.push_back(cpu);
      }
    }
    parts.distances = slit;
    topology_ = Topology(std::move(parts));
    numa_ = *NumaInfo::FromTopology(topology_);
    std::vector<Device> gpus;
    std::vector<Device> nics;
    for (int n = 0; n < 64; n += 2)
      gpus.push_back({"gpu" + std::to_string(n), {n}, true});
    for (int n = 0; n < 64; n += 4)
      nics.push_back({"nic" + std::to_string(n), {n}, true});
    devices_ = std::make_unique<DeviceManager>(numa_.node_ids(), &store_);
    devices_->UpdateResource("example.com/gpu", gpus, nullptr);
    devices_->UpdateResource("example.com/nic", nics, nullptr);
    cpus_ = *CpuManager::Create(kCpuPolicyStatic, topology_, CpuSet::Of({0}),
                                &store_);
  }

  MergeResult Admit(const Policy& policy, int gpus) {
    Pod pod;
    pod.uid = "pod";
    pod.guaranteed = true;
    pod.containers = {Container{
        "c",
        {{"example.com/gpu", gpus}, {"example.com/nic", 1}, {"cpu", 8000}},
        false}};
    const std::vector<ProviderHints> hints = {
        devices_->GetTopologyHints(pod, pod.containers[0]),
        cpus_->GetTopologyHints(pod, pod.containers[0])};
    return policy.Merge(hints, nullptr);
  }

  const NumaInfo& numa() const { return numa_; }

 private:
  class NoStore : public Store {
    TopologyHint GetAffinity(const std::string&,
                             const std::string&) const override {
      return {};
    }
  };
  NoStore store_;
  Topology topology_;
  NumaInfo numa_;
  std::unique_ptr<DeviceManager> devices_;
  std::unique_ptr<CpuManager> cpus_;
};

void BM_Realistic64Nodes(benchmark::State& state) {
  static auto* machine = new SixtyFourNodes();
  const char* policies[] = {kPolicyBestEffort, kPolicyRestricted,
                            kPolicySingleNumaNode};
  const char* policy_name = policies[state.range(0)];
  const int gpus = static_cast<int>(state.range(1));
  auto policy = NewPolicy(policy_name, machine->numa(), {}, MergeEngine::kFast);
  MergeResult result;
  for (auto _ : state) {
    result = machine->Admit(**policy, gpus);
    benchmark::DoNotOptimize(result);
  }
  state.SetLabel(std::string(policy_name) + ", " + std::to_string(gpus) +
                 " GPU + 1 NIC + 8 CPUs -> " + result.hint.ToString() +
                 (result.admit ? " admitted" : " rejected"));
}
BENCHMARK(BM_Realistic64Nodes)
    ->ArgsProduct({{0, 1, 2}, {1, 2}})
    ->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace topology::manager

BENCHMARK_MAIN();
