// Device plugin goals over real unix sockets (numbers in docs/performance.md):
//   - GetPreferredAllocation round trip, 1,024 devices, size 8: p99 < 2 ms;
//     and what one admission on a 10,000-VF node asks (5,000 offered, 2
//     wanted), for the admission's share of it;
//   - 10,000 available devices, size 5,000: answer < 1 s;
//   - ListAndWatch of 10,000 devices sent in < 100 ms;
//   - the idle plugin process (registered, stream open): resident memory
//     < 20 MiB with 1,024 devices and < 24 MiB with 10,000; CPU < 0.05 %
//     of a core over 60 s with 10,000 devices (and the same with
//     --no-uevents, periodic full rescans, for comparison);
//   - /healthz answered while pods hold and trickle connections to the port.
#include <algorithm>
#include <chrono>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <string_view>
#include <thread>

#include <glog/logging.h>
#include <spawn.h>
#include <sys/wait.h>

#include <benchmark/benchmark.h>

#include "topology/common/logging.h"
#include "topology/plugin/http_endpoint.h"
#include "topology/plugin/plugin_runner.h"
#include "topology/testing/fake_kubelet.h"

#include "build_paths.h"
#include "context_switches.h"
#include "http_attack.h"
#include "process_stats.h"
#include "reference_plugin.h"
#include "synthetic_machines.h"
#include "temp_dir.h"
#include "wait_for.h"

extern char** environ;

namespace topology::device_plugin {
namespace {

using ::topology::benchmarks::MeasureIdleProcess;
using ::topology::benchmarks::ReportPercentiles;

using namespace std::chrono_literals;

// A fixture tree, a fake kubelet and the plugin serving every VF.
struct Setup {
  explicit Setup(const std::string& machine) {
    if (!testing::WriteMachine(machine, root.path())) std::abort();
    kubelet.Start();
    PluginOptions options;
    options.config = *ParseConfig(
        "resources: [{name: example.com/vf, selectors: [{devices: "
        "[\"101e\"]}]}]",
        "bench");
    options.host_root = root.path();
    options.runner.plugin_dir = plugins.path();
    options.rescan_interval = 0s;
    options.watch_uevents = false;
    plugin = std::move(*TopologyDevicePlugin::Create(std::move(options)));
    if (!plugin->Start().ok()) std::abort();
    connection = kubelet.WaitForConnection("example.com/vf", 10s);
    if (!connection || !connection->WaitForMessages(1, 5s)) std::abort();
    const v1beta1::ListAndWatchResponse list = *connection->latest();
    for (const auto& device : list.devices()) {
      ids.push_back(device.id());
      const auto& nodes = device.topology().nodes();
      if (nodes.size() == 1 && nodes[0].id() == 0) {
        node0_ids.push_back(device.id());
      }
    }
  }
  testing::TempDir root;
  testing::TempDir plugins;
  testing::FakeKubelet kubelet{plugins.path()};
  std::unique_ptr<TopologyDevicePlugin> plugin;
  std::shared_ptr<testing::PluginConnection> connection;
  std::vector<std::string> ids;
  std::vector<std::string> node0_ids;  // what an admission offers
};

// Offers every device, or with `node0_only` those of NUMA node 0 (what the
// kubelet offers a single-numa-node admission).
void PreferredRoundTrip(benchmark::State& state, const std::string& machine,
                        bool node0_only = false) {
  static std::map<std::string, std::unique_ptr<Setup>> setups;
  auto& setup = setups[machine];
  if (!setup) setup = std::make_unique<Setup>(machine);
  const int size = static_cast<int>(state.range(0));
  v1beta1::PreferredAllocationRequest request;
  auto* container = request.add_container_requests();
  for (const auto& id : node0_only ? setup->node0_ids : setup->ids) {
    container->add_available_deviceids(id);
  }
  container->set_allocation_size(size);
  std::vector<double> micros;
  const int64_t switches_before = testing::ProcessContextSwitches();
  for (auto _ : state) {
    const auto start = std::chrono::steady_clock::now();
    grpc::ClientContext context;
    v1beta1::PreferredAllocationResponse response;
    if (!setup->connection->stub()
             .GetPreferredAllocation(&context, request, &response)
             .ok() ||
        response.container_responses(0).deviceids_size() != size) {
      state.SkipWithError("GetPreferredAllocation failed");
      return;
    }
    micros.push_back(std::chrono::duration<double, std::micro>(
                         std::chrono::steady_clock::now() - start)
                         .count());
  }
  state.counters["devices"] = static_cast<double>(setup->ids.size());
  state.counters["offered"] =
      static_cast<double>(container->available_deviceids_size());
  state.counters["switches_per_call"] =
      static_cast<double>(testing::ProcessContextSwitches() - switches_before) /
      static_cast<double>(std::max<size_t>(micros.size(), 1));
  ReportPercentiles(state, micros);
}

void BM_PreferredAllocation1024(benchmark::State& state) {
  PreferredRoundTrip(state, "sriov-8x128");
}
BENCHMARK(BM_PreferredAllocation1024)
    ->Arg(8)
    ->Unit(benchmark::kMicrosecond)
    ->Iterations(2000);

void BM_PreferredAllocation10000(benchmark::State& state) {
  PreferredRoundTrip(state, "sriov-40x250");
}
BENCHMARK(BM_PreferredAllocation10000)
    ->Arg(5000)
    ->Unit(benchmark::kMillisecond)
    ->Iterations(5);

// What one admission on a 10,000-VF node asks: the 5,000 VFs of NUMA node
// 0 offered, 2 wanted (admission_benchmark's BM_ControlAdmission10000Devices
// makes this call once per admission).
void BM_PreferredAllocationAdmission(benchmark::State& state) {
  PreferredRoundTrip(state, "sriov-40x250", true);
}
BENCHMARK(BM_PreferredAllocationAdmission)
    ->Arg(2)
    ->Unit(benchmark::kMicrosecond)
    ->Iterations(2000);

class FixedHandler : public plugin::ResourceHandler {
 public:
  plugin::DevicePluginOptions Options() const override { return {}; }
  StatusOr<plugin::ContainerAllocation> Allocate(
      const std::vector<std::string>&) override {
    return plugin::ContainerAllocation{};
  }
};

// Time from opening a ListAndWatch stream to the full list of 10,000
// devices (63-byte ids, one NUMA node each) decoded by the client.
void BM_ListAndWatch10000(benchmark::State& state) {
  testing::TempDir dir;
  testing::FakeKubelet kubelet(dir.path());
  kubelet.Start();
  plugin::RunnerOptions options;
  options.plugin_dir = dir.path();
  plugin::PluginRunner runner(options);
  std::vector<plugin::Device> devices;
  for (int i = 0; i < 10000; ++i) {
    std::string id = "device-" + std::to_string(i) + "-";
    id.resize(63, 'x');
    devices.push_back(
        {.id = id, .health = plugin::Health::kHealthy, .numa_nodes = {i % 8}});
  }
  if (!runner
           .AddResource("example.com/dev", std::make_shared<FixedHandler>(),
                        devices)
           .ok() ||
      !runner.Start().ok()) {
    state.SkipWithError("cannot start");
    return;
  }
  auto connection = kubelet.WaitForConnection("example.com/dev", 10s);
  std::vector<double> micros;
  size_t bytes = 0;
  for (auto _ : state) {
    const auto start = std::chrono::steady_clock::now();
    grpc::ClientContext context;
    auto stream = connection->stub().ListAndWatch(&context, v1beta1::Empty());
    v1beta1::ListAndWatchResponse response;
    if (!stream->Read(&response) || response.devices_size() != 10000) {
      state.SkipWithError("no list");
      return;
    }
    micros.push_back(std::chrono::duration<double, std::micro>(
                         std::chrono::steady_clock::now() - start)
                         .count());
    bytes = response.ByteSizeLong();
    context.TryCancel();
    (void)stream->Finish();
  }
  state.counters["message_bytes"] = static_cast<double>(bytes);
  ReportPercentiles(state, micros);
}
BENCHMARK(BM_ListAndWatch10000)->Unit(benchmark::kMillisecond)->Iterations(50);

// The topology-device-plugin process serving every VF of `machine`,
// registered with a fake kubelet whose ListAndWatch stream stays open,
// then left alone: its CPU over `idle` and its resident memory at the end.
// Extra arguments: Arg(1) watches uevents (the default), Arg(0) runs with
// --no-uevents, where every --rescan-interval (10 s) is a full rescan.
void IdlePlugin(benchmark::State& state, const std::string& machine,
                std::chrono::seconds idle) {
  static std::map<std::string, std::unique_ptr<testing::TempDir>> roots;
  auto& root = roots[machine];
  if (!root) {
    root = std::make_unique<testing::TempDir>();
    if (!testing::WriteMachine(machine, root->path())) std::abort();
    std::ofstream(root->path() / "config.yaml")
        << "resources: [{name: example.com/vf, selectors: [{devices: "
           "[\"101e\"]}]}]\n";
  }
  const bool uevents = state.range(0) != 0;
  testing::TempDir plugins;
  testing::FakeKubelet kubelet(plugins.path());
  kubelet.Start();
  for (auto _ : state) {
    std::vector<std::string> args = {
        topology::testing::ProgramPath("topology-device-plugin"),
        "--config",
        (root->path() / "config.yaml").string(),
        "--host-root",
        root->path().string(),
        "--plugin-dir",
        plugins.path().string(),
        "--http-addr",
        "127.0.0.1:0",
        uevents ? "--uevents" : "--no-uevents"};
    std::vector<char*> argv;
    argv.reserve(args.size());
    for (auto& arg : args) argv.push_back(arg.data());
    argv.push_back(nullptr);
    pid_t pid = 0;
    if (posix_spawn(&pid, argv[0], nullptr, nullptr, argv.data(), environ) !=
        0) {
      state.SkipWithError("cannot start the plugin");
      return;
    }
    auto connection = kubelet.WaitForConnection("example.com/vf", 60s);
    if (!connection || !connection->WaitForMessages(1, 30s)) {
      state.SkipWithError("the plugin did not register");
    }
    std::this_thread::sleep_for(3s);  // the start-up rescan settles
    MeasureIdleProcess(state, pid, idle);
    kill(pid, SIGTERM);
    int wstatus = 0;
    waitpid(pid, &wstatus, 0);
    state.counters["devices"] =
        connection ? connection->latest()->devices_size() : 0;
  }
}

void BM_IdlePlugin1024(benchmark::State& state) {
  IdlePlugin(state, "sriov-8x128", 20s);
}
BENCHMARK(BM_IdlePlugin1024)->Arg(1)->Iterations(1)->Unit(benchmark::kSecond);

void BM_IdlePlugin10000(benchmark::State& state) {
  IdlePlugin(state, "sriov-40x250", 60s);
}
BENCHMARK(BM_IdlePlugin10000)
    ->Arg(1)
    ->Arg(0)
    ->Iterations(1)
    ->Unit(benchmark::kSecond);

// The kubelet's probe of /healthz (from 127.0.0.2, the node) while pods
// attack the port: arg 0 nobody, 1 a slow-loris of 200 connections from
// one pod, 2 a flood of 10 slow connections from each of 20 pods, 3 the
// slow-loris from the probe's own address (a host-network pod). Counters:
// the share of probes answered 200 within 1 s, and their latency.
void BM_HealthzUnderAttack(benchmark::State& state) {
  auto http = plugin::HttpEndpoint::Start(
      "127.0.0.1:0", {.health_problem = [] { return std::string(); },
                      .metrics = [] { return std::string("up 1\n"); }});
  if (!http.ok()) std::abort();
  const int port = (*http)->port();
  std::vector<std::unique_ptr<testing::SlowLoris>> attacks;
  switch (state.range(0)) {
    case 1:
      attacks.push_back(
          std::make_unique<testing::SlowLoris>(port, "127.0.0.3", 200));
      break;
    case 2:
      for (int i = 0; i < 20; ++i) {
        attacks.push_back(std::make_unique<testing::SlowLoris>(
            port, "127.0.1." + std::to_string(i + 1), 10));
      }
      break;
    case 3:
      attacks.push_back(
          std::make_unique<testing::SlowLoris>(port, "127.0.0.2", 200));
      break;
    default:
      break;
  }
  // The attack in place: every attacker holds its connections.
  (void)testing::WaitFor([&] {
    for (const auto& attack : attacks) {
      if (attack->open() < 10) return false;
    }
    return true;
  });
  std::vector<double> micros;
  size_t answered = 0;
  for (auto _ : state) {
    const auto start = std::chrono::steady_clock::now();
    const int code = testing::ProbeFrom("127.0.0.2", port, "/healthz", 1000ms);
    micros.push_back(std::chrono::duration<double, std::micro>(
                         std::chrono::steady_clock::now() - start)
                         .count());
    if (code == 200) ++answered;
    std::this_thread::sleep_for(10ms);
  }
  uint64_t cut = 0;
  for (const auto& attack : attacks) cut += attack->reopened();
  ReportPercentiles(state, micros);
  state.counters["answered_pct"] = 100.0 * static_cast<double>(answered) /
                                   static_cast<double>(micros.size());
  state.counters["attack_cut"] = static_cast<double>(cut);
}
BENCHMARK(BM_HealthzUnderAttack)
    ->Arg(0)
    ->Arg(1)
    ->Arg(2)
    ->Arg(3)
    ->Iterations(300)
    ->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace topology::device_plugin

int main(int argc, char** argv) {
  // As the daemons do (and the plugin processes spawned here inherit it).
  const std::string engine = topology::common::ChooseGrpcPollEngine();
  topology::common::InitLogging(argv[0], 0);
  FLAGS_minloglevel = 2;  // keep benchmark output readable
  benchmark::AddCustomContext("grpc_poll_engine", engine);
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
