// Admission latency of the host module on the dual-socket fixture: one
// container with 2 GPUs, 1 NIC and 8 exclusive CPUs under single-numa-node
// (hints from both providers, the merge, GetPreferredAllocation and Allocate
// over the plugin's unix socket), then released, with 0 and 1,000 other
// pods held; and batches of 250 and 1,000 pods in one request. Reports
// p50/p99 and admissions per second (numbers in docs/performance.md).
#include <algorithm>
#include <chrono>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>
#include <vector>

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

// The host module serving the dual-socket fixture with the reference plugin
// (8 GPUs, 4 NICs), single-numa-node, static CPU manager.
class Node {
 public:
  Node() {
    if (!testing::WriteMachine("dual-socket-8gpu", root_.path())) std::abort();
    DiscoveryOptions discovery;
    discovery.host_root = root_.path();
    auto topology = Discover(discovery);
    host::HostConfig config;
    config.plugin_dir = work_.path() / "plugins";
    config.control_socket.clear();
    config.topology.policy = manager::kPolicySingleNumaNode;
    config.topology.scope = manager::kScopeContainer;
    config.cpu_policy = manager::kCpuPolicyStatic;
    config.reserved_cpus = *CpuSet::ParseList("0");
    auto host = host::HostManager::Create(config, *topology);
    if (!host.ok() || !(*host)->Start().ok()) std::abort();
    host_ = std::move(*host);

    device_plugin::PluginOptions options;
    options.config = *device_plugin::ParseConfig(
        "resources:\n"
        "  - {name: example.com/gpu, selectors: [{classes: [\"0302\"]}]}\n"
        "  - {name: example.com/nic, selectors: [{classes: [\"0200\"]}]}\n",
        "bench");
    options.host_root = root_.path();
    options.runner.plugin_dir = config.plugin_dir;
    options.rescan_interval = 0s;
    options.watch_uevents = false;
    auto plugin =
        device_plugin::TopologyDevicePlugin::Create(std::move(options));
    if (!plugin.ok() || !(*plugin)->Start().ok()) std::abort();
    plugin_ = std::move(*plugin);
    for (int i = 0; i < 500; ++i) {
      auto resources = host_->Resources();
      if (resources["example.com/gpu"].allocatable == 8 &&
          resources["example.com/nic"].allocatable == 4) {
        break;
      }
      std::this_thread::sleep_for(10ms);
    }
  }
  ~Node() {
    plugin_->Stop();
    host_->Stop();
  }
  host::HostManager& host() { return *host_; }

 private:
  testing::TempDir root_;
  testing::TempDir work_;
  std::unique_ptr<host::HostManager> host_;
  std::unique_ptr<device_plugin::TopologyDevicePlugin> plugin_;
};

// One container with 2 GPUs, 1 NIC and 8 exclusive CPUs.
manager::Pod GpuPod(const std::string& uid) {
  manager::Pod pod;
  pod.name = uid;
  pod.uid = uid;
  pod.guaranteed = true;
  manager::Container container;
  container.name = "main";
  container.limits = {
      {"cpu", 8000}, {"example.com/gpu", 2}, {"example.com/nic", 1}};
  pod.containers.push_back(container);
  return pod;
}

// A pod with no exclusive resources: it is held (and checkpointed) only.
manager::Pod PlainPod(const std::string& uid) {
  manager::Pod pod;
  pod.name = uid;
  pod.uid = uid;
  pod.containers.push_back({"main", {}, false});
  return pod;
}

void Report(benchmark::State& state, std::vector<double> micros) {
  std::sort(micros.begin(), micros.end());
  if (micros.empty()) return;
  state.counters["p50_us"] = micros[micros.size() / 2];
  state.counters["p99_us"] = micros[micros.size() * 99 / 100];
  double total = 0;
  for (double m : micros) total += m;
  state.counters["admissions_per_s"] =
      1e6 * static_cast<double>(micros.size()) / total;
}

// Admission and release of the GPU pod with state.range(0) plain pods held.
void BM_Admission(benchmark::State& state) {
  Node node;
  for (int64_t i = 0; i < state.range(0); ++i) {
    if (!node.host()
             .Admit(PlainPod("held-" + std::to_string(i)), false)
             .admitted) {
      state.SkipWithError("could not fill the node");
      return;
    }
  }
  std::vector<double> micros;
  int n = 0;
  for (auto _ : state) {
    const manager::Pod pod = GpuPod("uid-" + std::to_string(n++));
    const auto start = std::chrono::steady_clock::now();
    const host::PodResult result = node.host().Admit(pod, false);
    micros.push_back(std::chrono::duration<double, std::micro>(
                         std::chrono::steady_clock::now() - start)
                         .count());
    if (!result.admitted) {
      state.SkipWithError(result.message.c_str());
      break;
    }
    state.PauseTiming();
    (void)node.host().Release(pod.uid);
    state.ResumeTiming();
  }
  state.counters["pods_held"] = static_cast<double>(state.range(0));
  Report(state, std::move(micros));
}
BENCHMARK(BM_Admission)
    ->Arg(0)
    ->Arg(1000)
    ->Iterations(1000)
    ->Unit(benchmark::kMicrosecond);

// One request of state.range(0) plain pods (the control socket's Admit of
// a long manifest): the time per pod should not grow with the batch.
void BM_AdmitBatch(benchmark::State& state) {
  std::vector<double> per_pod;
  int round = 0;
  for (auto _ : state) {
    state.PauseTiming();
    Node node;
    std::vector<manager::Pod> pods;
    for (int64_t i = 0; i < state.range(0); ++i) {
      pods.push_back(
          PlainPod("r" + std::to_string(round) + "-" + std::to_string(i)));
    }
    ++round;
    state.ResumeTiming();
    const auto start = std::chrono::steady_clock::now();
    const auto results = node.host().AdmitAll(pods, false, nullptr);
    const double micros = std::chrono::duration<double, std::micro>(
                              std::chrono::steady_clock::now() - start)
                              .count();
    per_pod.push_back(micros / static_cast<double>(pods.size()));
    if (results.size() != pods.size() || !results.back().admitted) {
      state.SkipWithError("batch not admitted");
      break;
    }
  }
  std::sort(per_pod.begin(), per_pod.end());
  if (!per_pod.empty()) {
    state.counters["us_per_pod"] = per_pod[per_pod.size() / 2];
  }
  state.counters["batch"] = static_cast<double>(state.range(0));
}
BENCHMARK(BM_AdmitBatch)
    ->Arg(250)
    ->Arg(1000)
    ->Iterations(5)
    ->Unit(benchmark::kMillisecond);

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
