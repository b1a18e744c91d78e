// Discovery speed: the 4,096- and 8,192-function SR-IOV trees, the recorded
// real machines, and, in the same run, lspci and lstopo on the same trees;
// then `topology-info --format json` and `lstopo --of xml` as commands on
// trees of 1k to 16k functions and the recordings, with the second core
// idle and busy, with their CPU time and peak memory per function, and on
// the recordings both commands interleaved, run by run.
//
//   build/default/tests/benchmarks/discovery_benchmark
//
// Trees are written once per run below $TMPDIR. Reported in
// docs/performance.md.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <spawn.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <benchmark/benchmark.h>

#include "topology/discovery.h"

#include "build_paths.h"
#include "real_machines.h"
#include "synthetic_machines.h"
#include "temp_dir.h"

extern char** environ;

namespace topology {
namespace {

// Removed at exit: the SR-IOV trees of one run are 1.9 GB.
testing::TempDir& Scratch() {
  static testing::TempDir dir;
  return dir;
}

// The SR-IOV tree with `functions` PCI functions (PFs + VFs, 256 each).
const std::filesystem::path& SriovTree(int functions) {
  static std::map<int, std::filesystem::path> trees;
  auto it = trees.find(functions);
  if (it == trees.end()) {
    const auto root = Scratch().path() / ("sriov-" + std::to_string(functions));
    testing::WriteSriovMachine(root, functions / 256, 255);
    // Written back before anything is timed: a 16k tree is some 200,000
    // files, whose writeback would otherwise run beside the first runs.
    ::sync();
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

#ifdef TOPOLOGY_HAVE_INFO_BINARY
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
  RunCommand(state, topology::testing::ProgramPath("topology-info") +
                        " --host-root '" + root.string() + "' select --from " +
                        *vfs + " --count " + std::to_string(state.range(0)) +
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

// One process per iteration, as a user runs it, optionally with the other
// core kept busy by a spinning thread: wall time (the benchmark's real
// time), CPU time and peak resident memory of the program from wait4, per
// PCI function of the tree.
class BusyCore {
 public:
  explicit BusyCore(bool busy) {
    if (busy) {
      thread_ = std::thread([this] {
        uint64_t spins = 0;
        while (!stop_.load(std::memory_order_relaxed)) {
          benchmark::DoNotOptimize(++spins);
        }
      });
    }
  }
  ~BusyCore() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
  }
  BusyCore(const BusyCore&) = delete;
  BusyCore& operator=(const BusyCore&) = delete;

 private:
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

// The benchmark's environment with `extra_env` ("NAME=value") added: the
// spawn itself sets it, so no `env` program runs in between and both
// programs compared pay the same start-up (one shell that execs them).
// Points into `extra_env`, which must outlive the result.
std::vector<char*> Environment(const std::vector<std::string>& extra_env) {
  std::vector<char*> envp;
  for (char** e = environ; *e != nullptr; ++e) envp.push_back(*e);
  for (const std::string& entry : extra_env) {
    envp.push_back(const_cast<char*>(entry.c_str()));
  }
  envp.push_back(nullptr);
  return envp;
}

struct Spawned {
  bool ok = false;  // started and exited 0
  double wall_seconds = 0;
  double cpu_seconds = 0;
  long max_rss_kb = 0;  // NOLINT(google-runtime-int): rusage's type
};

// Runs `command` through `/bin/sh -c "exec ..."` and waits for it.
Spawned SpawnAndWait(const std::string& command,
                     const std::vector<char*>& envp) {
  Spawned out;
  const std::string script = "exec " + command;
  const char* argv[] = {"/bin/sh", "-c", script.c_str(), nullptr};
  const auto start = std::chrono::steady_clock::now();
  pid_t pid = 0;
  if (posix_spawn(&pid, "/bin/sh", nullptr, nullptr,
                  const_cast<char* const*>(argv), envp.data()) != 0) {
    return out;
  }
  int status = 0;
  rusage usage{};
  if (wait4(pid, &status, 0, &usage) != pid) return out;
  out.wall_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();
  out.ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
  out.cpu_seconds =
      static_cast<double>(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) +
      static_cast<double>(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) /
          1e6;
  out.max_rss_kb = usage.ru_maxrss;
  return out;
}

void RunProgram(benchmark::State& state, const std::string& command,
                double functions,
                const std::vector<std::string>& extra_env = {}) {
  const std::vector<char*> envp = Environment(extra_env);
  BusyCore busy(state.range(1) != 0);
  double cpu_seconds = 0;
  long max_rss_kb = 0;  // NOLINT(google-runtime-int): rusage's type
  for (auto _ : state) {
    const Spawned run = SpawnAndWait(command, envp);
    if (!run.ok) {
      state.SkipWithError(("failed: " + command).c_str());
      return;
    }
    cpu_seconds += run.cpu_seconds;
    max_rss_kb = std::max(max_rss_kb, run.max_rss_kb);
  }
  const auto iterations = static_cast<double>(state.iterations());
  state.counters["cpu_ms"] = 1e3 * cpu_seconds / iterations;
  state.counters["max_rss_mb"] = static_cast<double>(max_rss_kb) / 1024.0;
  state.counters["functions"] = functions;
  if (functions > 0) {
    state.counters["rss_per_function_b"] =
        1024.0 * static_cast<double>(max_rss_kb) / functions;
  }
}

// Functions in a tree: the entries of its sys/bus/pci/devices (none when
// the recording has no PCI bus).
double FunctionsIn(const std::filesystem::path& root) {
  double n = 0;
  std::error_code error;
  for (std::filesystem::directory_iterator
           it(root / "sys/bus/pci/devices", error),
       end;
       !error && it != end; it.increment(error)) {
    ++n;
  }
  return n;
}

const char kLstopoXml[] =
    "lstopo-no-graphics --whole-io --of xml > /dev/null 2>&1";

// lstopo reading `root` with its Linux back-end only, as discovery runs hwloc.
std::vector<std::string> LstopoEnv(const std::filesystem::path& root) {
  return {"HWLOC_COMPONENTS=linux,stop", "HWLOC_FSROOT=" + root.string()};
}

#ifdef TOPOLOGY_HAVE_INFO_BINARY
std::string InfoJson(const std::filesystem::path& root) {
  return topology::testing::ProgramPath("topology-info") + " --host-root '" +
         root.string() + "' --format json > /dev/null";
}

// `topology-info --format json` against `lstopo --whole-io --of xml` on
// the SR-IOV trees; second argument 1: the other core busy.
void BM_InfoJsonSriov(benchmark::State& state) {
  const auto& root = SriovTree(static_cast<int>(state.range(0)));
  RunProgram(state, InfoJson(root), FunctionsIn(root));
}
BENCHMARK(BM_InfoJsonSriov)
    ->ArgsProduct({{1024, 4096, 8192, 16384}, {0, 1}})
    ->Iterations(5)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
#endif

void BM_LstopoXmlSriov(benchmark::State& state) {
  const auto& root = SriovTree(static_cast<int>(state.range(0)));
  RunProgram(state, kLstopoXml, FunctionsIn(root), LstopoEnv(root));
}
BENCHMARK(BM_LstopoXmlSriov)
    ->ArgsProduct({{1024, 4096, 8192, 16384}, {0, 1}})
    ->Iterations(5)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

#ifdef TOPOLOGY_HAVE_INFO_BINARY
// The machine the benchmark runs on, read live as a user on a node runs
// both programs (hwloc with all its components in both). A real function's
// config space costs a hardware access per dword read (trapped by the
// hypervisor in a VM); lstopo reads 256 bytes of it per function,
// discovery none.
void BM_InfoJsonLiveMachine(benchmark::State& state) {
  RunProgram(state, InfoJson("/"), FunctionsIn("/"));
}
BENCHMARK(BM_InfoJsonLiveMachine)
    ->ArgsProduct({{0}, {0, 1}})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
#endif

void BM_LstopoXmlLiveMachine(benchmark::State& state) {
  RunProgram(state, kLstopoXml, FunctionsIn("/"));
}
BENCHMARK(BM_LstopoXmlLiveMachine)
    ->ArgsProduct({{0}, {0, 1}})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

// The recordings in tests/data/real-machines.
const char* const kRecordings[] = {
    "32intel64-2p8co2t+8ve.tar.bz2", "32em64t-2n8c+dax+nvme+mic+dimms.tar.bz2",
    "2pa-pcidomain32bits.tar.bz2",   "nvidiagpunumanodes.tar.bz2",
    "memorysidecaches.tar.bz2",      "128arm-2pa2n8cluster4co.tar.bz2"};

// The recording state.range(0) names, unpacked, as the benchmark's label;
// nullopt (the benchmark skipped) when the recordings are absent.
std::optional<std::filesystem::path> Recording(benchmark::State& state) {
  auto root = testing::UnpackRealMachine(kRecordings[state.range(0)]);
  if (!root) {
    state.SkipWithError("recordings absent");
  } else {
    state.SetLabel(kRecordings[state.range(0)]);
  }
  return root;
}

void BM_DiscoverRecording(benchmark::State& state) {
  const auto root = Recording(state);
  if (!root) return;
  RunDiscovery(state, *root, true, true);
}
BENCHMARK(BM_DiscoverRecording)
    ->DenseRange(0, 5)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

void BM_LstopoRecording(benchmark::State& state) {
  const auto root = Recording(state);
  if (!root) return;
  RunCommand(state,
             "HWLOC_COMPONENTS=linux,stop HWLOC_FSROOT='" + root->string() +
                 "' lstopo-no-graphics --whole-io --of xml > /dev/null 2>&1");
}
BENCHMARK(BM_LstopoRecording)
    ->DenseRange(0, 5)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

#ifdef TOPOLOGY_HAVE_INFO_BINARY
void BM_InfoJsonRecording(benchmark::State& state) {
  const auto root = Recording(state);
  if (!root) return;
  RunProgram(state, InfoJson(*root), FunctionsIn(*root));
}
BENCHMARK(BM_InfoJsonRecording)
    ->ArgsProduct({{0, 1, 2, 3, 4, 5}, {0, 1}})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
#endif

void BM_LstopoXmlRecording(benchmark::State& state) {
  const auto root = Recording(state);
  if (!root) return;
  RunProgram(state, kLstopoXml, FunctionsIn(*root), LstopoEnv(*root));
}
BENCHMARK(BM_LstopoXmlRecording)
    ->ArgsProduct({{0, 1, 2, 3, 4, 5}, {0, 1}})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

#ifdef TOPOLOGY_HAVE_INFO_BINARY
double Median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  return values.empty() ? 0 : values[values.size() / 2];
}

// Both commands on the same recording, one after the other in every
// iteration, so that both meet the same state of the machine (the runs
// above measure one program for a few seconds, then the other): the
// comparison the target is judged on. Time is ours; the counters are the
// medians of both and their ratio (below 1: ours is faster).
void BM_InfoJsonAgainstLstopoRecording(benchmark::State& state) {
  const auto root = Recording(state);
  if (!root) return;
  const std::string ours_command = InfoJson(*root);
  const std::vector<std::string> lstopo_extra = LstopoEnv(*root);
  const std::vector<char*> ours_env = Environment({});
  const std::vector<char*> lstopo_env = Environment(lstopo_extra);
  BusyCore busy(state.range(1) != 0);
  std::vector<double> ours;
  std::vector<double> lstopo;
  for (auto _ : state) {
    const Spawned a = SpawnAndWait(ours_command, ours_env);
    const Spawned b = SpawnAndWait(kLstopoXml, lstopo_env);
    if (!a.ok || !b.ok) {
      state.SkipWithError(!a.ok ? "topology-info failed" : "lstopo failed");
      return;
    }
    ours.push_back(a.wall_seconds);
    lstopo.push_back(b.wall_seconds);
    state.SetIterationTime(a.wall_seconds);
  }
  const double ours_median = Median(ours);
  const double lstopo_median = Median(lstopo);
  state.counters["ours_ms"] = 1e3 * ours_median;
  state.counters["lstopo_ms"] = 1e3 * lstopo_median;
  state.counters["ratio"] = lstopo_median > 0 ? ours_median / lstopo_median : 0;
}
BENCHMARK(BM_InfoJsonAgainstLstopoRecording)
    ->ArgsProduct({{0, 1, 2, 3, 4, 5}, {0, 1}})
    ->Iterations(200)
    ->Unit(benchmark::kMillisecond)
    ->UseManualTime();
#endif

}  // namespace
}  // namespace topology

BENCHMARK_MAIN();
