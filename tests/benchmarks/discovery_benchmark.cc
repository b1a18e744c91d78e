// Discovery speed: the 4,096- and 8,192-function SR-IOV trees, the recorded
// real machines, and, in the same run, lspci and lstopo on the same trees.
//
//   build/default/tests/benchmarks/discovery_benchmark
//
// Trees are written once per run below $TMPDIR. Reported in
// docs/performance.md.
#include <cstdlib>
#include <map>
#include <string>

#include <benchmark/benchmark.h>

#include "topology/discovery.h"

#include "real_machines.h"
#include "synthetic_machines.h"
#include "temp_dir.h"

namespace topology {
namespace {

testing::TempDir& Scratch() {
  static auto* dir = new testing::TempDir();
  return *dir;
}

// The SR-IOV tree with `functions` PCI functions (PFs + VFs, 256 each).
const std::filesystem::path& SriovTree(int functions) {
  static std::map<int, std::filesystem::path> trees;
  auto it = trees.find(functions);
  if (it == trees.end()) {
    const auto root = Scratch().path() / ("sriov-" + std::to_string(functions));
    testing::WriteSriovMachine(root, functions / 256, 255);
    it = trees.emplace(functions, root).first;
  }
  return it->second;
}

void RunDiscovery(benchmark::State& state, const std::filesystem::path& root,
                  bool libpci, bool hwloc) {
  DiscoveryOptions options;
  options.host_root = root;
  options.use_libpci = libpci;
  options.use_hwloc = hwloc;
  size_t devices = 0;
  for (auto _ : state) {
    auto topology = Discover(options);
    if (!topology.ok()) {
      state.SkipWithError(topology.status().ToString().c_str());
      return;
    }
    devices = topology->pci_devices().size();
    benchmark::DoNotOptimize(topology);
  }
  state.counters["devices"] = static_cast<double>(devices);
}

void BM_DiscoverSriov(benchmark::State& state) {
  RunDiscovery(state, SriovTree(static_cast<int>(state.range(0))), true, true);
}
BENCHMARK(BM_DiscoverSriov)
    ->Arg(4096)
    ->Arg(8192)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

void BM_DiscoverSriovSysfsOnly(benchmark::State& state) {
  RunDiscovery(state, SriovTree(static_cast<int>(state.range(0))), false,
               false);
}
BENCHMARK(BM_DiscoverSriovSysfsOnly)
    ->Arg(4096)
    ->Arg(8192)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

void RunCommand(benchmark::State& state, const std::string& command) {
  for (auto _ : state) {
    if (std::system(command.c_str()) != 0) {
      state.SkipWithError(("failed: " + command).c_str());
      return;
    }
  }
}

#ifdef TOPOLOGY_INFO_BINARY
// `topology-info select` as a user runs it: k of the 4,080 VFs of a
// 4,098-function SR-IOV tree (discovery, the cost tree, the choice and the
// runner-up explanation), one process per iteration.
void BM_SelectCommand4096Vfs(benchmark::State& state) {
  const auto& root = SriovTree(4096);
  static const std::string* vfs = [&] {
    auto* out = new std::string;
    for (const auto& f : testing::SriovLayout(16, 255)) {
      if (f.physfn.empty()) continue;
      if (!out->empty()) *out += ',';
      *out += f.address;
    }
    return out;
  }();
  RunCommand(state, std::string(TOPOLOGY_INFO_BINARY) + " --host-root '" +
                        root.string() + "' select --from " + *vfs +
                        " --count " + std::to_string(state.range(0)) +
                        " --format json > /dev/null");
}
BENCHMARK(BM_SelectCommand4096Vfs)
    ->Arg(1)
    ->Arg(256)
    ->Arg(1024)
    ->Arg(2048)
    ->Arg(4080)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
#endif

void BM_LspciSriov(benchmark::State& state) {
  const auto& root = SriovTree(static_cast<int>(state.range(0)));
  RunCommand(state, "lspci -D -A linux-sysfs -O sysfs.path='" +
                        (root / "sys/bus/pci").string() + "' > /dev/null");
}
BENCHMARK(BM_LspciSriov)
    ->Arg(4096)
    ->Arg(8192)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

void BM_LstopoSriov(benchmark::State& state) {
  const auto& root = SriovTree(static_cast<int>(state.range(0)));
  RunCommand(state, "HWLOC_COMPONENTS=linux,stop HWLOC_FSROOT='" +
                        root.string() +
                        "' lstopo-no-graphics --whole-io --of xml > /dev/null");
}
BENCHMARK(BM_LstopoSriov)
    ->Arg(4096)
    ->Arg(8192)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

// The recordings in tests/data/real-machines.
const char* const kRecordings[] = {
    "32intel64-2p8co2t+8ve.tar.bz2", "32em64t-2n8c+dax+nvme+mic+dimms.tar.bz2",
    "2pa-pcidomain32bits.tar.bz2",   "nvidiagpunumanodes.tar.bz2",
    "memorysidecaches.tar.bz2",      "128arm-2pa2n8cluster4co.tar.bz2"};

void BM_DiscoverRecording(benchmark::State& state) {
  const auto root = testing::UnpackRealMachine(kRecordings[state.range(0)]);
  if (!root) {
    state.SkipWithError("recordings absent");
    return;
  }
  state.SetLabel(kRecordings[state.range(0)]);
  RunDiscovery(state, *root, true, true);
}
BENCHMARK(BM_DiscoverRecording)
    ->DenseRange(0, 5)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

void BM_LstopoRecording(benchmark::State& state) {
  const auto root = testing::UnpackRealMachine(kRecordings[state.range(0)]);
  if (!root) {
    state.SkipWithError("recordings absent");
    return;
  }
  state.SetLabel(kRecordings[state.range(0)]);
  RunCommand(state,
             "HWLOC_COMPONENTS=linux,stop HWLOC_FSROOT='" + root->string() +
                 "' lstopo-no-graphics --whole-io --of xml > /dev/null 2>&1");
}
BENCHMARK(BM_LstopoRecording)
    ->DenseRange(0, 5)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

}  // namespace
}  // namespace topology

BENCHMARK_MAIN();
