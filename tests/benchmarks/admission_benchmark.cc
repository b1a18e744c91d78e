// Admission latency of the host module on the dual-socket fixture: one
// container with 2 GPUs, 1 NIC and 8 exclusive CPUs under single-numa-node
// (hints from both providers, the merge, GetPreferredAllocation and Allocate
// over the plugin's unix socket), then released. Reports p50/p99 and
// admissions per second (numbers in docs/performance.md).
#include <algorithm>
#include <chrono>
#include <filesystem>
#include <memory>

#include <glog/logging.h>

#include <benchmark/benchmark.h>

#include "topology/discovery.h"
#include "topology/plugin/logging.h"

#include "host_manager.h"
#include "reference_plugin.h"
#include "synthetic_machines.h"
#include "temp_dir.h"

namespace topology {
namespace {

using namespace std::chrono_literals;

void BM_Admission(benchmark::State& state) {
  testing::TempDir root;
  testing::TempDir work;
  if (!testing::WriteMachine("dual-socket-8gpu", root.path())) std::abort();
  DiscoveryOptions discovery;
  discovery.host_root = root.path();
  auto topology = Discover(discovery);
  host::HostConfig config;
  config.plugin_dir = work.path() / "plugins";
  config.control_socket.clear();
  config.topology.policy = manager::kPolicySingleNumaNode;
  config.topology.scope = manager::kScopeContainer;
  config.cpu_policy = manager::kCpuPolicyStatic;
  config.reserved_cpus = *CpuSet::ParseList("0");
  auto host = host::HostManager::Create(config, *topology);
  if (!host.ok() || !(*host)->Start().ok()) std::abort();

  device_plugin::PluginOptions options;
  options.config = *device_plugin::ParseConfig(
      "resources:\n"
      "  - {name: example.com/gpu, selectors: [{classes: [\"0302\"]}]}\n"
      "  - {name: example.com/nic, selectors: [{classes: [\"0200\"]}]}\n",
      "bench");
  options.host_root = root.path();
  options.runner.plugin_dir = config.plugin_dir;
  options.rescan_interval = 0s;
  options.watch_uevents = false;
  auto plugin = device_plugin::TopologyDevicePlugin::Create(std::move(options));
  if (!plugin.ok() || !(*plugin)->Start().ok()) std::abort();
  for (int i = 0; i < 500; ++i) {
    auto resources = (*host)->Resources();
    if (resources["example.com/gpu"].allocatable == 8 &&
        resources["example.com/nic"].allocatable == 4) {
      break;
    }
    std::this_thread::sleep_for(10ms);
  }

  manager::Pod pod;
  pod.name = "bench";
  pod.guaranteed = true;
  manager::Container container;
  container.name = "main";
  container.limits = {
      {"cpu", 8000}, {"example.com/gpu", 2}, {"example.com/nic", 1}};
  pod.containers.push_back(container);
  std::vector<double> micros;
  int n = 0;
  for (auto _ : state) {
    pod.uid = "uid-" + std::to_string(n++);
    const auto start = std::chrono::steady_clock::now();
    const host::PodResult result = (*host)->Admit(pod, false);
    micros.push_back(std::chrono::duration<double, std::micro>(
                         std::chrono::steady_clock::now() - start)
                         .count());
    if (!result.admitted) {
      state.SkipWithError(result.message.c_str());
      break;
    }
    state.PauseTiming();
    (void)(*host)->Release(pod.uid);
    state.ResumeTiming();
  }
  std::sort(micros.begin(), micros.end());
  if (!micros.empty()) {
    state.counters["p50_us"] = micros[micros.size() / 2];
    state.counters["p99_us"] = micros[micros.size() * 99 / 100];
    double total = 0;
    for (double m : micros) total += m;
    state.counters["admissions_per_s"] =
        1e6 * static_cast<double>(micros.size()) / total;
  }
  (*plugin)->Stop();
  (*host)->Stop();
}
BENCHMARK(BM_Admission)->Iterations(2000)->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace topology

int main(int argc, char** argv) {
  topology::plugin::InitLogging(argv[0], 0);
  FLAGS_minloglevel = 2;
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
