// The Memory Manager (Static) on an admission path, as the kubelet runs it:
// - BM_MemoryHints/N: one container's hints (memory and two huge page
//   sizes) on N NUMA nodes, two of them in a cross-node group and a third
//   holding single-node allocations; every subset of nodes is looked at,
//   as upstream's calculateHints does, up to 16 nodes; above, the compact
//   form (the nodes free of pinned memory as one weighted family, the
//   allocations in place as extras).
// - BM_MemoryAdmission/N: hints, the Topology Manager's merge (restricted)
//   and Allocate for one pod, then its release.
// Numbers in docs/performance.md.
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include <benchmark/benchmark.h>

#include "topology/manager/memory_manager.h"
#include "topology/manager/topology_manager.h"

namespace topology::manager {
namespace {

constexpr uint64_t kGiB = uint64_t{1} << 30;

std::vector<NumaNode> Machine(int nodes) {
  std::vector<NumaNode> out;
  for (int id = 0; id < nodes; ++id) {
    NumaNode node;
    node.id = id;
    node.memory_bytes = 64 * kGiB;
    node.hugepages = {
        HugePages{.page_size_bytes = 2 << 20, .total_pages = 4096},
        HugePages{.page_size_bytes = kGiB, .total_pages = 8}};
    out.push_back(node);
  }
  return out;
}

Pod MemoryPod(const std::string& uid, uint64_t memory) {
  Pod pod;
  pod.uid = uid;
  pod.name = uid;
  pod.guaranteed = true;
  pod.containers = {Container{"c",
                              {{"cpu", 1000},
                               {"memory", static_cast<int64_t>(memory)},
                               {"hugepages-2Mi", int64_t{1} << 30},
                               {"hugepages-1Gi", static_cast<int64_t>(kGiB)}},
                              false}};
  return pod;
}

struct Node {
  explicit Node(int nodes) {
    ManagerConfig config;
    config.policy = kPolicyRestricted;
    config.policy_options = {{"max-allowable-numa-nodes", "64"}};
    std::vector<int> ids;
    for (int id = 0; id < nodes; ++id) ids.push_back(id);
    topology = *TopologyManager::Create(config, *NumaInfo::Create(ids, {}));
    MemoryManager::Options options;
    options.policy = kMemoryPolicyStatic;
    for (int id = 0; id < nodes; ++id) {
      options.reserved_memory.push_back({id, {{"memory", kGiB}}});
    }
    options.node_allocatable_reservation = {
        {"memory", static_cast<uint64_t>(nodes) * kGiB}};
    auto created =
        MemoryManager::Create(options, Machine(nodes), topology.get());
    if (!created.ok()) {
      std::fprintf(stderr, "%s\n", created.status().message().c_str());
      std::abort();
    }
    memory = std::move(*created);
    topology->AddHintProvider(memory.get());
    // 60 GiB needs two nodes (47 GiB allocatable each): a group; then
    // small pods on one node alone.
    (void)topology->Admit(MemoryPod("group", 60 * kGiB));
    for (int i = 0; i < 4; ++i) {
      (void)topology->Admit(MemoryPod("single-" + std::to_string(i), kGiB));
    }
  }
  std::unique_ptr<TopologyManager> topology;
  std::unique_ptr<MemoryManager> memory;
};

void BM_MemoryHints(benchmark::State& state) {
  Node node(static_cast<int>(state.range(0)));
  const Pod pod = MemoryPod("p", 8 * kGiB);
  size_t hints = 0;
  for (auto _ : state) {
    const ProviderHints got =
        node.memory->GetTopologyHints(pod, pod.containers[0]);
    hints = got.empty() || got.begin()->second.is_family()
                ? 0
                : got.begin()->second->size();
    benchmark::DoNotOptimize(hints);
  }
  // 0 for the compact form (above 16 nodes).
  state.counters["hints_per_type"] = static_cast<double>(hints);
}
BENCHMARK(BM_MemoryHints)
    ->Arg(2)
    ->Arg(4)
    ->Arg(8)
    ->Arg(16)
    ->Arg(17)
    ->Arg(32)
    ->Arg(64)
    ->Unit(benchmark::kMicrosecond);

void BM_MemoryAdmission(benchmark::State& state) {
  Node node(static_cast<int>(state.range(0)));
  const Pod pod = MemoryPod("p", 8 * kGiB);
  bool admitted = false;
  for (auto _ : state) {
    admitted = node.topology->Admit(pod).admit;
    node.memory->RemovePod(pod.uid);
    node.topology->RemovePod(pod.uid);
  }
  if (!admitted) state.SkipWithError("the pod was not admitted");
}
BENCHMARK(BM_MemoryAdmission)
    ->Arg(4)
    ->Arg(8)
    ->Arg(16)
    ->Arg(17)
    ->Arg(32)
    ->Arg(64)
    ->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace topology::manager

BENCHMARK_MAIN();
