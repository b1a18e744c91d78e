// Single-resource preferred allocation: 1,024 available devices (2 sockets,
// 16 host bridges, 4 PCIe switches per host bridge, 16 GPUs per switch),
// k in {1, 2, 4, 8, 16}, with every device free and with every third taken.
// Each call is timed: the p50_us and p99_us counters are per-call latencies.
// BM_PreferredAllocationVfs: what one admission on a 10,000-VF node asks of
// the reference plugin (sriov-40x250, the 5,000 VFs of one NUMA node
// offered, k of them chosen), ids parsed from text as the plugin receives
// them.
#include <algorithm>
#include <chrono>
#include <utility>
#include <vector>

#include <benchmark/benchmark.h>

#include "topology/cost_graph.h"
#include "topology/device_selection.h"
#include "topology/discovery.h"

#include "synthetic_machines.h"
#include "temp_dir.h"

namespace topology {
namespace {

Topology Machine1024() {
  Topology::Parts parts;
  for (int n = 0; n < 2; ++n) {
    NumaNode node;
    node.id = n;
    node.cpus.Add(n);
    parts.numa_nodes.push_back(node);
  }
  parts.distances = {{10, 21}, {21, 10}};
  int device = 0;
  for (int hb = 0; hb < 16; ++hb) {
    for (int sw = 0; sw < 4; ++sw) {
      PciAddress root_port;
      root_port.domain = static_cast<uint32_t>(hb);
      root_port.bus = static_cast<uint8_t>(sw * 50);
      PciAddress usp = root_port;
      usp.bus = static_cast<uint8_t>(root_port.bus + 1);
      for (int g = 0; g < 16; ++g, ++device) {
        PciAddress dsp = usp;
        dsp.bus = static_cast<uint8_t>(usp.bus + 1);
        dsp.device = static_cast<uint8_t>(g);
        PciDevice d;
        d.address.domain = static_cast<uint32_t>(hb);
        d.address.bus = static_cast<uint8_t>(usp.bus + 2 + g);
        d.class_code = 0x030200;
        d.host_bridge = "pci" + std::to_string(hb);
        d.upstream_bridges = {dsp, usp, root_port};
        d.upstream_is_switch = {false, true, false};
        d.numa_nodes = {hb / 8};
        d.numa_source = NumaSource::kSysfs;
        parts.pci_devices.push_back(d);
      }
    }
  }
  return Topology(std::move(parts));
}

// The counters of a benchmark that timed every call: how many devices were
// offered, and the per-call p50 and p99 in microseconds.
void ReportPerCall(benchmark::State& state, size_t available,
                   std::vector<double> micros) {
  if (micros.empty()) return;
  std::sort(micros.begin(), micros.end());
  state.counters["available"] = static_cast<double>(available);
  state.counters["p50_us"] = micros[micros.size() / 2];
  state.counters["p99_us"] = micros[micros.size() * 99 / 100];
}

void BM_PreferredAllocation1024(benchmark::State& state) {
  static const Topology* topology = new Topology(Machine1024());
  static const CostModel* model = new CostModel(*topology);
  const DeviceSelector selector(*model);
  SelectionRequest request;
  for (const PciDevice& d : topology->pci_devices())
    request.available.push_back(d.address);
  // range(1): every third device already taken (a busy node).
  std::vector<PciAddress> free;
  for (size_t i = 0; i < request.available.size(); ++i) {
    if (state.range(1) == 0 || i % 3 != 0) free.push_back(request.available[i]);
  }
  request.available = free;
  request.size = static_cast<int>(state.range(0));
  // Every call is timed, so the counters give per-call percentiles.
  std::vector<double> micros;
  for (auto _ : state) {
    const auto start = std::chrono::steady_clock::now();
    auto selection = selector.Select(request);
    const auto stop = std::chrono::steady_clock::now();
    if (!selection.ok() || !selection->exact) {
      state.SkipWithError("selection failed");
      return;
    }
    benchmark::DoNotOptimize(selection);
    micros.push_back(
        std::chrono::duration<double, std::micro>(stop - start).count());
  }
  ReportPerCall(state, free.size(), std::move(micros));
}
BENCHMARK(BM_PreferredAllocation1024)
    ->ArgsProduct({{1, 2, 4, 8, 16}, {0, 1}})
    ->Unit(benchmark::kMicrosecond);

void BM_PreferredAllocationVfs(benchmark::State& state) {
  static const Topology* topology = [] {
    testing::TempDir root;
    if (!testing::WriteMachine("sriov-40x250", root.path())) std::abort();
    DiscoveryOptions options;
    options.host_root = root.path();
    auto discovered = Discover(options);
    if (!discovered.ok()) std::abort();
    return new Topology(std::move(*discovered));
  }();
  static const CostModel* model = new CostModel(*topology);
  // The ids the host offers: every VF of NUMA node 0, as text.
  std::vector<std::string> offered;
  for (const PciDevice& d : topology->pci_devices()) {
    if (d.device_id == 0x101e && d.numa_nodes == std::vector<int>{0}) {
      offered.push_back(d.address.ToString());
    }
  }
  std::vector<double> micros;
  for (auto _ : state) {
    const auto start = std::chrono::steady_clock::now();
    SelectionRequest request;
    request.size = static_cast<int>(state.range(0));
    request.available.reserve(offered.size());
    for (const std::string& id : offered) {
      request.available.push_back(*PciAddress::Parse(id));
    }
    auto selection = DeviceSelector(*model).Select(request);
    const auto stop = std::chrono::steady_clock::now();
    if (!selection.ok()) {
      state.SkipWithError(selection.status().ToString().c_str());
      return;
    }
    benchmark::DoNotOptimize(selection);
    micros.push_back(
        std::chrono::duration<double, std::micro>(stop - start).count());
  }
  ReportPerCall(state, offered.size(), std::move(micros));
}
BENCHMARK(BM_PreferredAllocationVfs)
    ->Arg(1)
    ->Arg(2)
    ->Arg(16)
    ->Unit(benchmark::kMicrosecond);

// Multi-resource: 4 types x 64 instances (GPUs, NICs, FPGAs spread over the
// machine above, and 64 CPU units on the two nodes), 2 + 1 + 1 + 4 asked.
void BM_CostGraph4x64(benchmark::State& state) {
  static const Topology* topology = new Topology(Machine1024());
  static const CostModel* model = new CostModel(*topology);
  const CostGraphSelector selector(*model);
  GraphRequest request;
  const auto& devices = topology->pci_devices();
  const char* names[] = {"gpu", "nic", "fpga"};
  for (int t = 0; t < 3; ++t) {
    ResourceRequest r;
    r.name = names[t];
    r.count = t == 0 ? 2 : 1;
    // Every 16th device, offset by type: 64 instances spread everywhere.
    for (size_t i = static_cast<size_t>(t) * 5;
         i < devices.size() && r.pool.size() < 64; i += 16) {
      r.pool.push_back({devices[i].address, -1});
    }
    request.resources.push_back(r);
  }
  ResourceRequest cpus{"cpu", 4, {}};
  for (int k = 0; k < 64; ++k) cpus.pool.push_back({std::nullopt, k % 2});
  request.resources.push_back(cpus);
  request.solver =
      state.range(0) == 0 ? GraphSolver::kGreedy : GraphSolver::kAnnealing;
  for (auto _ : state) {
    auto selection = selector.Select(request);
    if (!selection.ok()) {
      state.SkipWithError(selection.status().ToString().c_str());
      return;
    }
    benchmark::DoNotOptimize(selection);
  }
}
BENCHMARK(BM_CostGraph4x64)->Arg(0)->Arg(1)->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace topology

BENCHMARK_MAIN();
