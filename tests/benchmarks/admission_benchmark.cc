// Admission latency of the host module.
// - BM_Admission: the dual-socket fixture, one container with 2 GPUs, 1 NIC
//   and 8 exclusive CPUs under single-numa-node (hints from both providers,
//   the merge, GetPreferredAllocation and Allocate over the plugin's unix
//   socket), then released, with 0 and 1,000 other pods held.
// - BM_ControlAdmission10000Devices: the same path as `topology-manager
//   admit` (a manifest over the control socket) on a 10,000-VF node, with
//   0 to 10,000 pods held; admission and release timed separately.
// - BM_HeapPerPod: heap held per admitted pod, and what is left after all
//   are released.
// - BM_Restore10000Pods: start-up of the host module on a checkpoint of
//   10,000 pods (snapshot only, and half of them in the journal).
// - BM_AdmitBatch: batches of 250 and 1,000 pods in one request.
// - BM_JournalSync: one record appended and synced, the disk's floor under
//   every admission and release, measured in the same run.
// Reports p50/p99 and admissions per second (numbers in
// docs/performance.md).
#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <fcntl.h>
#include <glog/logging.h>
#include <grpcpp/grpcpp.h>
#include <malloc.h>
#include <unistd.h>

#include <benchmark/benchmark.h>

#include "topology/common/logging.h"
#include "topology/discovery.h"
#include "topology/plugin/plugin_runner.h"

#include "checkpoint.h"
#include "checkpoint_store.h"
#include "context_switches.h"
#include "host_manager.h"
#include "host_start.h"
#include "reference_plugin.h"
#include "synthetic_machines.h"
#include "temp_dir.h"
#include "topologymanager/v1alpha1/control.grpc.pb.h"
#include "wait_for.h"

namespace topology {
namespace {

using namespace std::chrono_literals;

// The host module serving the dual-socket fixture with the reference plugin
// (8 GPUs, 4 NICs), single-numa-node, static CPU manager.
class Node {
 public:
  struct Shape {
    std::string machine = "dual-socket-8gpu";
    std::string plugin_config =
        "resources:\n"
        "  - {name: example.com/gpu, selectors: [{classes: [\"0302\"]}]}\n"
        "  - {name: example.com/nic, selectors: [{classes: [\"0200\"]}]}\n";
    std::map<std::string, size_t> allocatable = {{"example.com/gpu", 8},
                                                 {"example.com/nic", 4}};
    bool control_socket = false;
  };
  Node() : Node(Shape()) {}
  explicit Node(const Shape& shape) {
    if (!testing::WriteMachine(shape.machine, root_.path())) std::abort();
    DiscoveryOptions discovery;
    discovery.host_root = root_.path();
    auto topology = Discover(discovery);
    host::HostConfig config;
    config.plugin_dir = work_.path() / "plugins";
    config.control_socket.clear();
    if (shape.control_socket) config.control_socket = work_.path() / "c.sock";
    config.topology.policy = manager::kPolicySingleNumaNode;
    config.topology.scope = manager::kScopeContainer;
    config.cpu_policy = manager::kCpuPolicyStatic;
    config.reserved_cpus = *CpuSet::ParseList("0");
    auto host = host::HostManager::Create(config, *topology);
    if (!host.ok() || !testing::StartHost(**host).ok()) std::abort();
    host_ = std::move(*host);

    device_plugin::PluginOptions options;
    options.config = *device_plugin::ParseConfig(shape.plugin_config, "bench");
    options.host_root = root_.path();
    options.runner.plugin_dir = config.plugin_dir;
    options.rescan_interval = 0s;
    options.watch_uevents = false;
    auto plugin =
        device_plugin::TopologyDevicePlugin::Create(std::move(options));
    if (!plugin.ok() || !(*plugin)->Start().ok()) std::abort();
    plugin_ = std::move(*plugin);
    (void)testing::WaitFor(
        [&] {
          auto resources = host_->Resources();
          bool ready = true;
          for (const auto& [name, count] : shape.allocatable) {
            ready = ready && resources[name].allocatable == count;
          }
          return ready;
        },
        std::chrono::seconds(30));
    if (shape.control_socket) {
      control_ = topologymanager::v1alpha1::Control::NewStub(
          grpc::CreateChannel("unix:" + config.control_socket.string(),
                              grpc::InsecureChannelCredentials()));
    }
  }
  ~Node() {
    plugin_->Stop();
    host_->Stop();
  }
  host::HostManager& host() { return *host_; }
  topologymanager::v1alpha1::Control::Stub& control() { return *control_; }

 private:
  testing::TempDir root_;
  testing::TempDir work_;
  std::unique_ptr<host::HostManager> host_;
  std::unique_ptr<device_plugin::TopologyDevicePlugin> plugin_;
  std::unique_ptr<topologymanager::v1alpha1::Control::Stub> control_;
};

// Holds `count` plain pods, admitted in batches of 1,000 (one sync each).
bool Fill(host::HostManager& host, int64_t count, const std::string& prefix);

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

// Counters `<prefix>p50_us` and `<prefix>p99_us` of `micros`.
void Percentiles(benchmark::State& state, const std::string& prefix,
                 std::vector<double> micros) {
  std::sort(micros.begin(), micros.end());
  if (micros.empty()) return;
  state.counters[prefix + "p50_us"] = micros[micros.size() / 2];
  state.counters[prefix + "p99_us"] = micros[micros.size() * 99 / 100];
}

void Report(benchmark::State& state, std::vector<double> micros) {
  if (micros.empty()) return;
  double total = 0;
  for (double m : micros) total += m;
  state.counters["admissions_per_s"] =
      1e6 * static_cast<double>(micros.size()) / total;
  Percentiles(state, "", std::move(micros));
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
  std::vector<double> release_micros;  // the release, untimed by the loop
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
    const auto released_from = std::chrono::steady_clock::now();
    (void)node.host().Release(pod.uid);
    release_micros.push_back(
        std::chrono::duration<double, std::micro>(
            std::chrono::steady_clock::now() - released_from)
            .count());
    state.ResumeTiming();
  }
  state.counters["pods_held"] = static_cast<double>(state.range(0));
  Percentiles(state, "release_", std::move(release_micros));
  Report(state, std::move(micros));
}
BENCHMARK(BM_Admission)
    ->Arg(0)
    ->Arg(1000)
    ->Iterations(1000)
    ->Unit(benchmark::kMicrosecond);

bool Fill(host::HostManager& host, int64_t count, const std::string& prefix) {
  for (int64_t done = 0; done < count;) {
    std::vector<manager::Pod> pods;
    for (; done < count && pods.size() < 1000; ++done) {
      pods.push_back(PlainPod(prefix + std::to_string(done)));
    }
    const auto results = host.AdmitAll(pods, false, nullptr);
    if (results.empty() || !results.back().admitted) return false;
  }
  return true;
}

// The 10,000-VF node: sriov-40x250, every VF in one resource.
Node::Shape TenThousandVfs() {
  Node::Shape shape;
  shape.machine = "sriov-40x250";
  shape.plugin_config =
      "resources: [{name: example.com/vf, selectors: [{devices: "
      "[\"101e\"]}]}]\n";
  shape.allocatable = {{"example.com/vf", 10000}};
  shape.control_socket = true;
  return shape;
}

// What `topology-manager admit pod.yaml` sends: a Guaranteed pod asking for
// 2 VFs and 1 CPU (exclusive under the static policy).
std::string VfPodYaml(const std::string& name) {
  return "apiVersion: v1\nkind: Pod\nmetadata: {name: " + name +
         ", namespace: default, uid: " + name +
         "}\nspec:\n  containers:\n  - name: main\n    resources:\n"
         "      limits: {cpu: \"1\", memory: 1Gi, example.com/vf: 2}\n";
}

double Since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::micro>(
             std::chrono::steady_clock::now() - start)
      .count();
}

// Admission and release over the control socket on 10,000 VFs with
// state.range(0) plain pods held; switches_per_pod counts the context
// switches of one admission and its release.
void BM_ControlAdmission10000Devices(benchmark::State& state) {
  Node node(TenThousandVfs());
  if (!Fill(node.host(), state.range(0), "held-")) {
    state.SkipWithError("could not fill the node");
    return;
  }
  std::vector<double> admit;
  std::vector<double> release;
  int n = 0;
  const int64_t switches_before = testing::ProcessContextSwitches();
  for (auto _ : state) {
    const std::string name = "vf-pod-" + std::to_string(n++);
    topologymanager::v1alpha1::AdmitRequest request;
    auto* manifest = request.add_manifests();
    manifest->set_source("pod.yaml");
    manifest->set_yaml(VfPodYaml(name));
    topologymanager::v1alpha1::JsonReply reply;
    auto start = std::chrono::steady_clock::now();
    {
      grpc::ClientContext context;
      context.set_deadline(std::chrono::system_clock::now() + 10s);
      const grpc::Status status =
          node.control().Admit(&context, request, &reply);
      admit.push_back(Since(start));
      if (!status.ok() ||
          reply.json().find("\"admitted\":true") == std::string::npos) {
        state.SkipWithError(("not admitted: " + status.error_message() +
                             reply.json().substr(0, 300))
                                .c_str());
        break;
      }
    }
    topologymanager::v1alpha1::ReleaseRequest release_request;
    release_request.set_pod(name);
    start = std::chrono::steady_clock::now();
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + 10s);
    if (!node.control().Release(&context, release_request, &reply).ok()) {
      state.SkipWithError("release failed");
      break;
    }
    release.push_back(Since(start));
  }
  state.counters["pods_held"] = static_cast<double>(state.range(0));
  state.counters["switches_per_pod"] =
      static_cast<double>(testing::ProcessContextSwitches() - switches_before) /
      static_cast<double>(std::max(n, 1));
  Report(state, admit);
  Percentiles(state, "release_", std::move(release));
}
BENCHMARK(BM_ControlAdmission10000Devices)
    ->Arg(0)
    ->Arg(1000)
    ->Arg(4000)
    ->Arg(10000)
    ->Iterations(300)
    ->Unit(benchmark::kMicrosecond);

// The floor under every admission and release: one journal-sized record
// synced with fdatasync, in the same kind of directory as the benchmarks
// above. Arg(0): appended to a file that grows with each record (each sync
// also commits the new size); Arg(1): through the checkpoint store, which
// writes its journal's file ahead of the records. On a disk whose flush
// takes a millisecond, no synced admission can be faster.
void BM_JournalSync(benchmark::State& state) {
  testing::TempDir dir;
  const std::string record(static_cast<size_t>(state.range(0)) - 1, 'x');
  const std::string line = record + "\n";
  const bool store_path = state.range(1) != 0;
  std::optional<host::CheckpointStore> store;
  int fd = -1;
  if (store_path) {
    store.emplace(dir.path() / "checkpoint", size_t{64} << 20);
    if (!store->Compact([] { return host::EncodeCheckpoint({}); }).ok()) {
      state.SkipWithError("cannot create the checkpoint");
      return;
    }
  } else {
    const std::string path = (dir.path() / "journal").string();
    fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
    if (fd < 0) {
      state.SkipWithError("cannot create the journal file");
      return;
    }
  }
  std::vector<double> micros;
  for (auto _ : state) {
    const auto start = std::chrono::steady_clock::now();
    const bool synced = store_path
                            ? store->Append(line).ok()
                            : ::write(fd, line.data(), line.size()) ==
                                      static_cast<ssize_t>(line.size()) &&
                                  ::fdatasync(fd) == 0;
    if (!synced) {
      state.SkipWithError("cannot write the journal");
      break;
    }
    micros.push_back(Since(start));
  }
  if (fd >= 0) ::close(fd);
  Percentiles(state, "", std::move(micros));
}
BENCHMARK(BM_JournalSync)
    ->Args({300, 0})
    ->Args({300, 1})
    ->Iterations(300)
    ->Unit(benchmark::kMicrosecond);

size_t HeapInUse() {
  const struct mallinfo2 info = mallinfo2();
  return info.uordblks + info.hblkhd;
}

size_t ResidentBytes() {
  std::ifstream statm("/proc/self/statm");
  size_t pages = 0;
  size_t resident = 0;
  statm >> pages >> resident;
  return resident * static_cast<size_t>(sysconf(_SC_PAGESIZE));
}

// Heap held per pod: 10,000 GPU-less pods (one container each, as the
// manifests of BM_ControlAdmission10000Devices without devices) admitted,
// then all released.
void BM_HeapPerPod(benchmark::State& state) {
  for (auto _ : state) {
    state.PauseTiming();
    Node node;
    const size_t before = HeapInUse();
    const size_t resident_before = ResidentBytes();
    state.ResumeTiming();
    if (!Fill(node.host(), state.range(0), "p-")) {
      state.SkipWithError("could not fill the node");
      return;
    }
    state.PauseTiming();
    const size_t held = HeapInUse();
    const size_t resident_held = ResidentBytes();
    for (int64_t i = 0; i < state.range(0); ++i) {
      (void)node.host().Release("p-" + std::to_string(i));
    }
    const size_t after = HeapInUse();
    const size_t resident_after = ResidentBytes();
    const auto per_pod = [&](size_t a, size_t b) {
      return (static_cast<double>(a) - static_cast<double>(b)) /
             static_cast<double>(state.range(0));
    };
    state.counters["heap_per_pod_B"] = per_pod(held, before);
    state.counters["heap_left_per_pod_B"] = per_pod(after, before);
    state.counters["rss_per_pod_B"] = per_pod(resident_held, resident_before);
    state.counters["rss_left_per_pod_B"] =
        per_pod(resident_after, resident_before);
    state.ResumeTiming();
  }
}
BENCHMARK(BM_HeapPerPod)
    ->Arg(10000)
    ->Iterations(1)
    ->Unit(benchmark::kMillisecond);

host::Checkpoint TenThousandPods() {
  host::Checkpoint checkpoint;
  for (int i = 0; i < 10000; ++i) {
    host::CheckpointPod pod;
    pod.pod.uid = "uid-" + std::to_string(i);
    pod.pod.ns = "default";
    pod.pod.name = "pod-" + std::to_string(i);
    pod.pod.containers.push_back(
        {"main", {{"example.com/vf", 1}, {"cpu", 500}}, false});
    host::CheckpointContainer container;
    container.name = "main";
    container.devices["example.com/vf"] = {"vf-" + std::to_string(i)};
    container.numa_nodes = std::vector<int>{i % 2};
    pod.containers.push_back(container);
    checkpoint.pods.push_back(std::move(pod));
  }
  checkpoint.registered["example.com/vf"] = {};
  return checkpoint;
}

// The checkpoint's codec alone on 10,000 pods: encode (range 0) or decode
// (range 1) of the whole snapshot.
void BM_CheckpointCodec10000Pods(benchmark::State& state) {
  const host::Checkpoint checkpoint = TenThousandPods();
  const std::string text = host::EncodeCheckpoint(checkpoint);
  for (auto _ : state) {
    if (state.range(0) == 0) {
      benchmark::DoNotOptimize(host::EncodeCheckpoint(checkpoint));
    } else {
      auto decoded = host::DecodeCheckpoint(text);
      if (!decoded.ok() || decoded->pods.size() != 10000) std::abort();
    }
  }
  state.counters["bytes"] = static_cast<double>(text.size());
}
BENCHMARK(BM_CheckpointCodec10000Pods)
    ->Arg(0)
    ->Arg(1)
    ->Unit(benchmark::kMillisecond);

// Start-up of the host module on a checkpoint of 10,000 pods, each holding
// one device and one CPU-less container; state.range(0) of them are in the
// journal rather than the snapshot. Timed: Create + Start (restore, the
// compaction that folds the journal in, both gRPC servers).
void BM_Restore10000Pods(benchmark::State& state) {
  testing::TempDir root;
  if (!testing::WriteMachine("dual-socket-8gpu", root.path())) std::abort();
  DiscoveryOptions discovery;
  discovery.host_root = root.path();
  const auto topology = Discover(discovery);
  const int64_t in_journal = state.range(0);
  // The memory manager's record, as every checkpoint this version writes
  // holds it (without it the first restart appends one, a one-time cost):
  // what a manager records on this machine.
  std::optional<host::CheckpointMemory> memory;
  {
    testing::TempDir work;
    host::HostConfig config;
    config.plugin_dir = work.path() / "plugins";
    config.control_socket.clear();
    auto host = host::HostManager::Create(config, *topology);
    if (!host.ok() || !testing::StartHost(**host).ok()) std::abort();
    (*host)->Stop();
    std::ifstream in(config.plugin_dir / host::kCheckpointFile);
    const std::string text((std::istreambuf_iterator<char>(in)),
                           std::istreambuf_iterator<char>());
    auto written = host::DecodeCheckpoint(text);
    if (!written.ok() || !written->memory) std::abort();
    memory = written->memory;
  }
  for (auto _ : state) {
    state.PauseTiming();
    testing::TempDir work;
    host::HostConfig config;
    config.plugin_dir = work.path() / "plugins";
    config.control_socket.clear();
    std::filesystem::create_directories(config.plugin_dir);
    host::Checkpoint snapshot = TenThousandPods();
    snapshot.memory = memory;
    std::string journal;
    // The last `in_journal` pods move from the snapshot to the journal.
    const auto kept = static_cast<size_t>(10000 - in_journal);
    for (size_t i = kept; i < snapshot.pods.size(); ++i) {
      journal += host::EncodeAdmitRecord(snapshot.pods[i]);
    }
    snapshot.pods.resize(kept);
    std::ofstream(config.plugin_dir / host::kCheckpointFile)
        << host::EncodeCheckpoint(snapshot);
    std::ofstream(config.plugin_dir /
                  (std::string(host::kCheckpointFile) + ".journal"))
        << journal;
    state.ResumeTiming();
    auto host = host::HostManager::Create(config, *topology);
    if (!host.ok() || !testing::StartHost(**host).ok()) std::abort();
    state.PauseTiming();
    if ((*host)->StatusJson()["pods"].size() != 10000) {
      state.SkipWithError("not every pod restored");
    }
    (*host)->Stop();
    host->reset();
    state.ResumeTiming();
  }
  state.counters["in_journal"] = static_cast<double>(in_journal);
}
BENCHMARK(BM_Restore10000Pods)
    ->Arg(0)
    ->Arg(5000)
    ->Iterations(5)
    ->Unit(benchmark::kMillisecond);

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
  // As topology-manager serve does; the plugin processes spawned here
  // choose their own (gRPC has read the variable once it is initialised).
  const std::string engine = topology::common::ChooseGrpcPollEngine("epoll1");
  grpc_init();
  if (engine == "epoll1") unsetenv("GRPC_POLL_STRATEGY");
  topology::common::InitLogging(argv[0], 0);
  FLAGS_minloglevel = 2;
  benchmark::AddCustomContext("grpc_poll_engine", engine);
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
