// NodeResourceTopology exporter goals (numbers in docs/performance.md), on
// a 34-node machine (a GB200-class tray: 2 Grace CPU nodes of 72 CPUs and
// 32 CPU-less GPU memory nodes) with 10,000 device plugin devices over its
// nodes and 500 pods, 100 of them holding a CPU and a device:
//   - one round's object, built and rendered from what the kubelet
//     answered (BM_NrtRound34Nodes10000Devices), beside the host module's
//     view of the same machine and devices (`topology-manager status
//     --format nrt`, BM_HostNrtView34Nodes10000Devices), same run;
//   - the idle topology-nrt-exporter process, against the real API server
//     and a pod resources server here: CPU < 0.05 % of a core over 60 s,
//     resident memory < 16 MiB (BM_IdleNrtExporter34Nodes10000Devices);
//   - the update latency: from the kubelet's state file written after a
//     pod's admission to the object's new version on the API server, the
//     node otherwise quiet (BM_NrtUpdateLatency; its time includes the
//     150 ms pause before each change), beside the same update sent
//     directly to the same server (BM_NrtUpdateFloor).
#include <chrono>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <glog/logging.h>
#include <grpcpp/grpcpp.h>
#include <spawn.h>
#include <sys/wait.h>

#include <benchmark/benchmark.h>
#include <nlohmann/json.hpp>

#include "topology/common/logging.h"
#include "topology/plugin/http_endpoint.h"
#include "topology/testing/sysfs_tree_builder.h"
#include "topology/topology.h"

#include "api_server.h"
#include "build.h"
#include "build_paths.h"
#include "host_views.h"
#include "nrt_object.h"
#include "podresources/v1/api.grpc.pb.h"
#include "process_stats.h"
#include "socket_util.h"
#include "temp_dir.h"
#include "wait_for.h"

extern char** environ;

namespace topology::nrt {
namespace {

using ::topology::benchmarks::ApiServer;
using ::topology::benchmarks::MeasureIdleProcess;
using ::topology::benchmarks::ReportPercentiles;
using namespace std::chrono_literals;
using nlohmann::json;

constexpr int kCpuNodes = 2;
constexpr int kCpusPerNode = 72;
constexpr int kNodes = 34;
constexpr int kDevices = 10000;
constexpr int kPods = 500;
constexpr int kHoldingPods = 100;
constexpr uint64_t kGiB = uint64_t{1} << 30;
constexpr char kResource[] = "example.com/vf";

int Distance(int from, int to) {
  if (from == to) return 10;
  if (from < kCpuNodes && to < kCpuNodes) return 20;
  // A GPU's memory is near its Grace and far from the other.
  const auto grace = [](int node) {
    return node < kCpuNodes ? node : (node - kCpuNodes) % kCpuNodes;
  };
  return grace(from) == grace(to) ? 40 : 80;
}

Topology Machine() {
  Topology::Parts parts;
  for (int node = 0; node < kNodes; ++node) {
    NumaNode n{.id = node,
               .memory_bytes = (node < kCpuNodes ? 480 : 96) * kGiB};
    if (node < kCpuNodes) {
      std::vector<int> cpus;
      for (int c = 0; c < kCpusPerNode; ++c) {
        cpus.push_back(node * kCpusPerNode + c);
      }
      n.cpus = CpuSet::Of(cpus);
    }
    parts.numa_nodes.push_back(std::move(n));
    std::vector<int> row;
    for (int other = 0; other < kNodes; ++other) {
      row.push_back(Distance(node, other));
    }
    parts.distances.push_back(std::move(row));
  }
  return Topology(std::move(parts));
}

// The same machine as a sysfs tree, for the exporter process.
void WriteMachine(const std::filesystem::path& root) {
  testing::SysfsTreeBuilder tree(root);
  for (int node = 0; node < kNodes; ++node) {
    const std::string cpus =
        node < kCpuNodes ? std::to_string(node * kCpusPerNode) + "-" +
                               std::to_string((node + 1) * kCpusPerNode - 1)
                         : "";
    tree.AddNode(node, cpus, (node < kCpuNodes ? 480 : 96) * kGiB);
  }
  for (int cpu = 0; cpu < kCpuNodes * kCpusPerNode; ++cpu) {
    tree.AddCpu(cpu, cpu / kCpusPerNode, cpu, std::to_string(cpu));
  }
  std::vector<std::vector<int>> rows;
  for (int node = 0; node < kNodes; ++node) {
    std::vector<int> row;
    for (int other = 0; other < kNodes; ++other) {
      row.push_back(Distance(node, other));
    }
    rows.push_back(std::move(row));
  }
  tree.SetDistances(std::move(rows));
  tree.Finish();
}

std::string DeviceId(int i) { return "vf-" + std::to_string(i); }
int DeviceNode(int i) { return i % kNodes; }

// What the kubelet answers: every device on its node; 500 pods, the first
// 100 holding a CPU of the Grace nodes and a device each.
NodeResources Answers() {
  NodeResources out;
  for (int cpu = 1; cpu < kCpuNodes * kCpusPerNode; ++cpu) {
    out.allocatable_cpus.push_back(cpu);
  }
  for (int i = 0; i < kDevices; ++i) {
    out.allocatable_devices.push_back(
        {kResource, DeviceId(i), {DeviceNode(i)}});
  }
  for (int p = 0; p < kPods; ++p) {
    PodEntry pod{.ns = "ns-" + std::to_string(p % 20),
                 .name = "pod-" + std::to_string(p)};
    if (p < kHoldingPods) {
      pod.cpus = {1 + p};
      pod.devices = {{kResource, DeviceId(p), {DeviceNode(p)}}};
    }
    out.pods.push_back(std::move(pod));
  }
  return out;
}

void BM_NrtRound34Nodes10000Devices(benchmark::State& state) {
  const Topology machine = Machine();
  const NodeResources answers = Answers();
  size_t bytes = 0;
  for (auto _ : state) {
    Inputs inputs{
        .topology = &machine,
        .kubelet = {.policy = "single-numa-node", .max_numa_nodes = kNodes},
        .resources = &answers,
        .node_name = "gb200-0"};
    const json object = Render(Build(inputs).object);
    bytes = object.dump().size();
    benchmark::DoNotOptimize(bytes);
  }
  state.counters["object_bytes"] = static_cast<double>(bytes);
}
BENCHMARK(BM_NrtRound34Nodes10000Devices)->Unit(benchmark::kMillisecond);

void BM_HostNrtView34Nodes10000Devices(benchmark::State& state) {
  const Topology machine = Machine();
  host::HostSnapshot snapshot;
  snapshot.topology = &machine;
  snapshot.node_name = "gb200-0";
  snapshot.policy = "single-numa-node";
  snapshot.scope = "container";
  snapshot.max_numa_nodes = kNodes;
  snapshot.reserved_cpus = CpuSet::Of({0});
  snapshot.shared_cpus = machine.AllCpus();
  host::ResourceSnapshot resource{.name = kResource, .connected = true};
  for (int i = 0; i < kDevices; ++i) {
    resource.devices.push_back({DeviceId(i), {DeviceNode(i)}, true});
  }
  for (int p = 0; p < kHoldingPods; ++p) resource.in_use.push_back(DeviceId(p));
  std::sort(resource.devices.begin(), resource.devices.end(),
            [](const auto& a, const auto& b) { return a.id < b.id; });
  std::sort(resource.in_use.begin(), resource.in_use.end());
  snapshot.resources.push_back(std::move(resource));
  for (int p = 0; p < kPods; ++p) {
    host::PodResult pod;
    pod.ns = "ns-" + std::to_string(p % 20);
    pod.name = "pod-" + std::to_string(p);
    pod.admitted = true;
    snapshot.pods.push_back(std::move(pod));
  }
  size_t bytes = 0;
  for (auto _ : state) {
    bytes = host::NodeResourceTopologyJson(snapshot).dump().size();
    benchmark::DoNotOptimize(bytes);
  }
  state.counters["object_bytes"] = static_cast<double>(bytes);
}
BENCHMARK(BM_HostNrtView34Nodes10000Devices)->Unit(benchmark::kMillisecond);

// The kubelet's pod resources API, answering from a table the benchmark
// changes.
class PodResourcesServer final : public v1::PodResourcesLister::Service {
 public:
  explicit PodResourcesServer(const std::filesystem::path& socket) {
    const NodeResources answers = Answers();
    for (const int cpu : answers.allocatable_cpus)
      allocatable_.add_cpu_ids(cpu);
    for (const DeviceEntry& d : answers.allocatable_devices) {
      auto* devices = allocatable_.add_devices();
      devices->set_resource_name(d.resource);
      devices->add_device_ids(d.id);
      devices->mutable_topology()->add_nodes()->set_id(d.numa_nodes[0]);
    }
    for (const PodEntry& p : answers.pods) AddPod(p);
    grpc::ServerBuilder builder;
    builder.AddListeningPort("unix:" + socket.string(),
                             grpc::InsecureServerCredentials());
    builder.RegisterService(this);
    server_ = builder.BuildAndStart();
  }
  ~PodResourcesServer() override { server_->Shutdown(); }

  void AddPod(const PodEntry& p) {
    std::lock_guard lock(mu_);
    auto* pod = list_.add_pod_resources();
    pod->set_namespace_(p.ns);
    pod->set_name(p.name);
    auto* container = pod->add_containers();
    container->set_name("app");
    for (const int cpu : p.cpus) container->add_cpu_ids(cpu);
    for (const DeviceEntry& d : p.devices) {
      auto* devices = container->add_devices();
      devices->set_resource_name(d.resource);
      devices->add_device_ids(d.id);
    }
  }
  void RemoveLastPod() {
    std::lock_guard lock(mu_);
    list_.mutable_pod_resources()->RemoveLast();
  }

  grpc::Status GetAllocatableResources(
      grpc::ServerContext*, const v1::AllocatableResourcesRequest*,
      v1::AllocatableResourcesResponse* answer) override {
    *answer = allocatable_;
    return grpc::Status::OK;
  }
  grpc::Status List(grpc::ServerContext*, const v1::ListPodResourcesRequest*,
                    v1::ListPodResourcesResponse* answer) override {
    std::lock_guard lock(mu_);
    *answer = list_;
    return grpc::Status::OK;
  }

 private:
  v1::AllocatableResourcesResponse allocatable_;
  std::mutex mu_;
  v1::ListPodResourcesResponse list_;
  std::unique_ptr<grpc::Server> server_;
};

// The exporter on the machine's tree, its kubelet root a directory here
// with the pod resources socket; nullptr (and `state` skipped) when it did
// not get ready.
struct Exporter {
  testing::TempDir machine;
  testing::TempDir kubelet;
  std::unique_ptr<PodResourcesServer> pod_resources;
  int port = testing::FreeLoopbackPort();
  pid_t pid = 0;
  ~Exporter() {
    if (pid > 0) {
      kill(pid, SIGTERM);
      waitpid(pid, nullptr, 0);
    }
  }
  bool Start(benchmark::State& state, const ApiServer& server,
             const std::string& node) {
    WriteMachine(machine.path());
    std::filesystem::create_directories(kubelet.path() / "pod-resources");
    std::filesystem::create_directories(kubelet.path() / "pods");
    std::filesystem::create_directories(kubelet.path() / "device-plugins");
    pod_resources = std::make_unique<PodResourcesServer>(
        kubelet.path() / "pod-resources" / "kubelet.sock");
    std::ofstream(kubelet.path() / "config.yaml")
        << "kind: KubeletConfiguration\n"
           "topologyManagerPolicy: single-numa-node\n"
           "topologyManagerPolicyOptions: {max-allowable-numa-nodes: \"34\"}\n";
    std::vector<std::string> args = {
        topology::testing::ProgramPath("topology-nrt-exporter"),
        "--node-name",
        node,
        "--kubeconfig",
        server.kubeconfig(),
        "--host-root",
        machine.path().string(),
        "--kubelet-root",
        kubelet.path().string(),
        "--device-plugin-dir",
        (kubelet.path() / "device-plugins").string(),
        "--kubelet-config",
        (kubelet.path() / "config.yaml").string(),
        "--http-addr",
        "127.0.0.1:" + std::to_string(port)};
    std::vector<char*> argv;
    for (auto& arg : args) argv.push_back(arg.data());
    argv.push_back(nullptr);
    if (posix_spawn(&pid, argv[0], nullptr, nullptr, argv.data(), environ) !=
        0) {
      state.SkipWithError("cannot start topology-nrt-exporter");
      return false;
    }
    if (!testing::WaitFor(
            [&] {
              auto answer = plugin::HttpGet(port, "/readyz");
              return answer.ok() && answer->first == 200;
            },
            60s, 100ms)) {
      state.SkipWithError("the exporter did not get ready");
      return false;
    }
    return true;
  }
  // The kubelet writes a state file as its checkpoint manager does: a
  // temporary file renamed over it.
  void WriteState() const {
    const auto path = kubelet.path() / "cpu_manager_state";
    std::ofstream(path.string() + ".tmp") << "{}";
    std::filesystem::rename(path.string() + ".tmp", path);
  }
};

void BM_IdleNrtExporter34Nodes10000Devices(benchmark::State& state) {
  ApiServer* server = ApiServer::OrSkip(state);
  if (server == nullptr) return;
  for (auto _ : state) {
    Exporter exporter;
    if (!exporter.Start(state, *server, "idle-gb200")) return;
    std::this_thread::sleep_for(3s);  // settle: the first round's garbage
    MeasureIdleProcess(state, exporter.pid, 60s);
  }
}
BENCHMARK(BM_IdleNrtExporter34Nodes10000Devices)
    ->Iterations(1)
    ->Unit(benchmark::kSecond);

void BM_NrtUpdateLatency(benchmark::State& state) {
  ApiServer* server = ApiServer::OrSkip(state);
  if (server == nullptr) return;
  const std::string node = "latency-gb200";
  const std::string path = std::string(kCollectionPath) + "/" + node;
  Exporter exporter;
  if (!exporter.Start(state, *server, node)) return;
  // The object's metadata only: the poll costs the server and this
  // process little beside the exporter.
  const auto version = [&] {
    auto got = server->admin()->Request(
        "GET", path, {},
        "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1");
    if (!got.ok() || got->status != 200) return std::string();
    return json::parse(got->body)["metadata"].value("resourceVersion", "");
  };
  std::vector<double> micros;
  int round = 0;
  for (auto _ : state) {
    // Apart from the last round by more than the exporter's rate limit
    // (--min-interval, 100 ms): a pod admitted on a quiet node.
    std::this_thread::sleep_for(150ms);
    const std::string before = version();
    // A pod admitted: the kubelet lists it, then writes its state.
    if (++round % 2 == 1) {
      exporter.pod_resources->AddPod({.ns = "latency",
                                      .name = "pod-" + std::to_string(round),
                                      .cpus = {kCpusPerNode + 10}});
    } else {
      exporter.pod_resources->RemoveLastPod();
    }
    const auto start = std::chrono::steady_clock::now();
    exporter.WriteState();
    if (!testing::WaitFor([&] { return version() != before; }, 10s, 5ms)) {
      state.SkipWithError("the object did not change");
      return;
    }
    micros.push_back(std::chrono::duration<double, std::micro>(
                         std::chrono::steady_clock::now() - start)
                         .count());
  }
  if (!micros.empty()) ReportPercentiles(state, micros);
}
BENCHMARK(BM_NrtUpdateLatency)->Iterations(20)->Unit(benchmark::kMillisecond);

// The floor under the latency: the same object updated directly on the
// same server (a PUT on the last resourceVersion, one resource's count
// changed), as the exporter's update is sent.
void BM_NrtUpdateFloor(benchmark::State& state) {
  ApiServer* server = ApiServer::OrSkip(state);
  if (server == nullptr) return;
  const Topology machine = Machine();
  const NodeResources answers = Answers();
  json object = Render(Build({.topology = &machine,
                              .kubelet = {.policy = "single-numa-node",
                                          .max_numa_nodes = kNodes},
                              .resources = &answers,
                              .node_name = "floor-gb200"})
                           .object);
  auto created =
      server->admin()->Request("POST", kCollectionPath, object.dump());
  if (!created.ok() || created->status != 201) {
    state.SkipWithError("the object could not be created");
    return;
  }
  json stored = json::parse(created->body);
  const std::string path = std::string(kCollectionPath) + "/floor-gb200";
  std::vector<double> micros;
  int round = 0;
  for (auto _ : state) {
    std::this_thread::sleep_for(150ms);
    stored["zones"][0]["resources"][0]["available"] =
        std::to_string(100 + (++round % 2));
    stored["metadata"].erase("managedFields");
    const auto start = std::chrono::steady_clock::now();
    auto put = server->admin()->Request("PUT", path, stored.dump());
    if (!put.ok() || put->status != 200) {
      state.SkipWithError("the update was refused");
      return;
    }
    micros.push_back(std::chrono::duration<double, std::micro>(
                         std::chrono::steady_clock::now() - start)
                         .count());
    stored = json::parse(put->body);
  }
  if (!micros.empty()) ReportPercentiles(state, micros);
  (void)server->admin()->Request("DELETE", path);
}
BENCHMARK(BM_NrtUpdateFloor)->Iterations(20)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace topology::nrt

int main(int argc, char** argv) {
  topology::common::InitLogging(argv[0], 0);
  FLAGS_minloglevel = 2;  // keep benchmark output readable
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
