// CPU allocation: our Topology Manager and static CPU manager against the
// kubelet's own code (the kubelet oracle, tests/manager/oracle, on the
// pinned k8s.io/kubernetes), measured in the same run on the same machines
// and pods.
//
// One operation is the admission of a Guaranteed pod of one container
// asking 16 exclusive CPUs (hints, merge, the CPU choice), then the removal
// of its CPUs, with six pods of 8 CPUs already held:
//   - Dual192: 2 sockets x 48 cores x 2 threads (192 CPUs), a NUMA node per
//     socket, single-numa-node at container scope;
//   - Nodes34: 34 NUMA nodes of 4 cores x 2 threads (272 CPUs) over 2
//     sockets, Topology Manager policy none (the kubelet refuses more than
//     8 nodes under a merging policy unless max-allowable-numa-nodes, and
//     then enumerates 2^34 masks): the CPU choice alone.
// BM_Ours times our side; BM_Kubelet reports the oracle's own time per
// operation (manual time: the pipe to the oracle is not counted).
// Numbers in docs/performance.md.
#include <cstdint>
#include <string>
#include <vector>

#include <benchmark/benchmark.h>
#include <nlohmann/json.hpp>

#include "build_paths.h"
#include "kubelet_oracle.h"

namespace topology::manager::oracle {
namespace {

using nlohmann::json;

json Machine(int sockets, int nodes_per_socket, int cores_per_node) {
  json machine = {{"nodes", json::array()}, {"cpus", json::array()}};
  const int nodes = sockets * nodes_per_socket;
  const int cores = nodes * cores_per_node;
  for (int n = 0; n < nodes; ++n) {
    std::vector<int> row;
    for (int m = 0; m < nodes; ++m) {
      row.push_back(n == m                                         ? 10
                    : n / nodes_per_socket == m / nodes_per_socket ? 12
                                                                   : 21);
    }
    machine["nodes"].push_back(
        {{"id", n}, {"distances", row}, {"memory", uint64_t{64} << 30}});
  }
  // Linux's numbering: the second threads of all cores after the first.
  for (int core = 0; core < cores; ++core) {
    const int node = core / cores_per_node;
    for (int t = 0; t < 2; ++t) {
      machine["cpus"].push_back(
          {{"id", core + t * cores},
           {"socket", node / nodes_per_socket},
           {"core", core % (cores_per_node * nodes_per_socket)},
           {"node", node},
           {"uncore", -1}});
    }
  }
  return machine;
}

json Kubelet(const std::string& policy, int sibling_of_0) {
  return {{"topologyManagerPolicy", policy},
          {"topologyManagerScope", "container"},
          {"cpuManagerPolicy", "static"},
          {"reservedCPUs", {0, sibling_of_0}}};
}

json GuaranteedPod(const std::string& uid, int cpus) {
  return {{"uid", uid},
          {"qos", "guaranteed"},
          {"containers", {{{"name", "app"}, {"cpuMilli", cpus * 1000}}}}};
}

struct Setup {
  json machine;
  json kubelet;
};

Setup Dual192() { return {Machine(2, 1, 48), Kubelet("single-numa-node", 96)}; }
Setup Nodes34() { return {Machine(2, 17, 4), Kubelet("none", 136)}; }

constexpr int kHeldPods = 6;

void BM_Ours(benchmark::State& state, Setup (*setup)()) {
  const Setup s = setup();
  OurNode node;
  if (auto refused = node.Start(s.machine, s.kubelet)) {
    state.SkipWithError(refused->c_str());
    return;
  }
  for (int i = 0; i < kHeldPods; ++i) {
    if (!node.AdmitPod(PodOf(GuaranteedPod("held-" + std::to_string(i), 8)))) {
      state.SkipWithError("a held pod was refused");
      return;
    }
  }
  const Pod pod = PodOf(GuaranteedPod("timed", 16));
  for (auto _ : state) {
    if (!node.AdmitPod(pod)) {
      state.SkipWithError("refused");
      return;
    }
    node.Release(pod.uid);
  }
}

void BM_Kubelet(benchmark::State& state, Setup (*setup)()) {
  const Setup s = setup();
  Oracle oracle(topology::testing::ProgramPath("kubelet-oracle"));
  json answer = oracle.Ask(
      {{"op", "start"}, {"machine", s.machine}, {"kubelet", s.kubelet}});
  if (!answer.value("ok", false)) {
    state.SkipWithError(answer.dump().c_str());
    return;
  }
  for (int i = 0; i < kHeldPods; ++i) {
    answer = oracle.Ask({{"op", "admit"},
                         {"pod", GuaranteedPod("held-" + std::to_string(i), 8)},
                         {"samples", 1}});
    if (!answer.value("ok", false) ||
        !oracle.Ask({{"op", "commit"}, {"index", 0}}).value("ok", false)) {
      state.SkipWithError(answer.dump().c_str());
      return;
    }
  }
  // One operation a request: the iteration's manual time is the oracle's
  // own, and the pipe's round trip is all the wall time adds.
  const json request = {
      {"op", "bench"}, {"pod", GuaranteedPod("timed", 16)}, {"iterations", 1}};
  for (auto _ : state) {
    answer = oracle.Ask(request);
    if (!answer.value("ok", false)) {
      state.SkipWithError(answer.dump().c_str());
      return;
    }
    state.SetIterationTime(answer.at("nsPerOp").get<double>() * 1e-9);
  }
}

BENCHMARK_CAPTURE(BM_Ours, Dual192, &Dual192)->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_Kubelet, Dual192, &Dual192)
    ->UseManualTime()
    ->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_Ours, Nodes34, &Nodes34)->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_Kubelet, Nodes34, &Nodes34)
    ->UseManualTime()
    ->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace topology::manager::oracle

BENCHMARK_MAIN();
