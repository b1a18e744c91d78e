// DRA goals (numbers in docs/performance.md), against the real Kubernetes
// control plane that scripts/kube-cluster builds and starts for the run:
//   - publish 10,000 devices (an SR-IOV tree of 40 PFs x 250 VFs) as this
//     node's pool: the time and the slices; a re-publish of the unchanged
//     inventory sends nothing;
//   - the same for 10,040 shareable devices with 40 counter sets (SR-IOV
//     PFs and their VFs as partitions), beside the server's floor;
//   - Prepare of one device, whole and as a share, in the same run;
//   - Prepare of a claim of 8 devices over the kubelet's socket, beside the
//     API server's GET of the claim (the claim comes from a table here, so
//     the two are apart): p99 < 5 ms;
//   - the idle topology-dra-driver process at 10,000 devices (published,
//     registered, health streams ready): CPU < 0.05 % of a core over 60 s,
//     resident memory < 24 MiB, as the device plugin.
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <glog/logging.h>
#include <netinet/in.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <benchmark/benchmark.h>
#include <nlohmann/json.hpp>

#include "topology/common/logging.h"
#include "topology/draplugin/kube_client.h"
#include "topology/draplugin/kube_config.h"
#include "topology/draplugin/resource_slices.h"
#include "topology/plugin/http_endpoint.h"
#include "topology/testing/fake_dra_kubelet.h"

#include "api_server.h"
#include "build_paths.h"
#include "dra_driver.h"
#include "process_stats.h"
#include "socket_util.h"
#include "synthetic_machines.h"
#include "temp_dir.h"
#include "wait_for.h"

extern char** environ;

namespace topology::device_plugin {
namespace {

using ::topology::benchmarks::ApiServer;
using ::topology::benchmarks::MeasureIdleProcess;
using ::topology::benchmarks::ReportPercentiles;
using namespace std::chrono_literals;
using nlohmann::json;

constexpr char kDriver[] = "pci.libtopology.dev";
constexpr char kVfConfig[] =
    "resources: [{name: example.com/vf, selectors: [{devices: [\"101e\"]}]}]\n";

// Deletes every slice of `node` (between iterations: the tests' server,
// whose custom resources take no field selector on spec.nodeName, answers
// the publisher's list with every slice it holds, which a real API server
// filters; without this, each iteration would list the ones before).
// The slices are found by name (the publisher's generateName starts with
// "<node>-", the floor's with "<node>-"), from a metadata-only list: a full
// list of many 10,000-device pools is larger than a client takes.
void DeleteSlicesOf(draplugin::KubeClient* admin, const std::string& node) {
  auto listed = admin->Request(
      "GET", "/apis/resource.k8s.io/v1/resourceslices", {},
      "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1");
  if (!listed.ok() || listed->status != 200) std::abort();
  const json list = json::parse(listed->body);
  for (const json& item : list["items"]) {
    const std::string name = item["metadata"]["name"];
    if (!name.starts_with(node + "-")) continue;
    auto deleted = admin->Request(
        "DELETE", "/apis/resource.k8s.io/v1/resourceslices/" + name);
    if (!deleted.ok()) std::abort();
  }
}

// 40 PFs x 250 VFs: 10,000 VFs selected, as slice devices.
struct Inventory {
  Inventory() {
    if (!testing::WriteMachine("sriov-40x250", root.path())) std::abort();
    std::ofstream(root.path() / "config.yaml") << kVfConfig;
    config = *ParseConfig(kVfConfig, "bench");
    sysfs = NewHostRootReader(root.path());
    snapshot = *DiscoverSnapshot(config, root.path(), *sysfs, cdi.path(), {});
    devices = DraInventory(config, *snapshot, *sysfs,
                           dra::NumaAttributeForm::kScalar, nullptr);
  }
  static Inventory& Get() {
    static Inventory inventory;
    return inventory;
  }
  testing::TempDir root;
  testing::TempDir cdi;
  Config config;
  std::unique_ptr<SysfsReader> sysfs;
  std::shared_ptr<Snapshot> snapshot;
  std::vector<draplugin::SliceDevice> devices;
};

// The same machine with every function published (the 40 PFs too) as
// one shareable resource (100 of "bandwidth", a range in steps of 10): the
// 10,040 devices allow multiple allocations, and each PF with its VFs is a
// counter set, in slices of their own (KEP-4815, KEP-5075).
constexpr char kSharedConfig[] =
    "resources:\n"
    "  - name: example.com/nic\n"
    "    selectors: [{vendors: [\"15b3\"]}]\n"
    "    shareable:\n"
    "      capacity:\n"
    "        bandwidth: {value: \"100\", default: \"10\",\n"
    "                    validRange: {min: \"10\", step: \"10\"}}\n";
struct SharedInventory {
  SharedInventory() {
    config = *ParseConfig(kSharedConfig, "bench");
    const Inventory& plain = Inventory::Get();
    snapshot = *DiscoverSnapshot(config, plain.root.path(), *plain.sysfs,
                                 plain.cdi.path(), {});
    std::vector<draplugin::SliceDevice> devices =
        DraInventory(config, *snapshot, *plain.sysfs,
                     dra::NumaAttributeForm::kScalar, nullptr);
    pool.name = "pool";
    pool.counter_sets = PartitionSriov(*snapshot, &devices);
    pool.partition_type_attribute =
        std::string(kDriver) + "/" + kPartitionTypeAttribute;
    pool.devices = std::move(devices);
  }
  static SharedInventory& Get() {
    static SharedInventory inventory;
    return inventory;
  }
  Config config;
  std::shared_ptr<Snapshot> snapshot;
  draplugin::Pool pool;
};

// The pool a benchmark publishes: Arg 0, the 10,000 VFs; Arg 1, the
// 10,040 shareable functions with their 40 counter sets.
draplugin::Pool PoolOf(const benchmark::State& state, const std::string& name) {
  draplugin::Pool pool;
  if (state.range(0) == 0) {
    pool.devices = Inventory::Get().devices;
  } else {
    pool = SharedInventory::Get().pool;
  }
  pool.name = name;
  return pool;
}

// A fresh node's pool of 10,000 devices: every slice created.
void BM_Publish10000Devices(benchmark::State& state) {
  ApiServer* server = ApiServer::OrSkip(state);
  if (server == nullptr) return;
  auto client = server->DriverClient();
  int node = 0;
  draplugin::SlicePublisher::Stats stats;
  size_t devices = 0;
  for (auto _ : state) {
    const std::string name = "publish-" + std::to_string(node++);
    state.PauseTiming();
    draplugin::Pool pool = PoolOf(state, name);
    devices = pool.devices.size();
    state.ResumeTiming();
    draplugin::SlicePublisher publisher(client.get(), kDriver, name, {});
    if (!publisher.Publish(std::move(pool)).ok()) {
      state.SkipWithError("publishing failed");
      return;
    }
    stats = publisher.stats();
    state.PauseTiming();
    DeleteSlicesOf(server->admin(), name);
    state.ResumeTiming();
  }
  state.counters["devices"] = static_cast<double>(devices);
  state.counters["slices"] = static_cast<double>(stats.creates);
}
BENCHMARK(BM_Publish10000Devices)
    ->ArgName("partitioned_shared")
    ->Arg(0)
    ->Arg(1)
    ->Iterations(3)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

// The server's own floor for the same work, measured in the same run: the
// very slices the publisher wrote (read back, renamed to a new node),
// created by a minimal client with as many requests in flight as the
// publisher (8), on kept connections; no validation, no comparison, no
// list. BM_Publish10000Devices / this is the publisher's overhead.
void BM_Publish10000DevicesFloor(benchmark::State& state) {
  ApiServer* server = ApiServer::OrSkip(state);
  if (server == nullptr) return;
  auto client = server->DriverClient();
  // The slices as the publisher makes them, once.
  {
    draplugin::SlicePublisher publisher(client.get(), kDriver, "floor-source",
                                        {});
    if (!publisher.Publish(PoolOf(state, "floor-source")).ok()) {
      state.SkipWithError("publishing the source slices failed");
      return;
    }
  }
  auto listed = server->admin()->Request(
      "GET", "/apis/resource.k8s.io/v1/resourceslices");
  if (!listed.ok() || listed->status != 200) {
    state.SkipWithError("listing the source slices failed");
    return;
  }
  std::vector<json> slices;
  const json all = json::parse(listed->body);
  for (const json& item : all["items"]) {
    if (item["spec"].value("nodeName", "") != "floor-source") continue;
    slices.push_back({{"apiVersion", "resource.k8s.io/v1"},
                      {"kind", "ResourceSlice"},
                      {"metadata", json::object()},
                      {"spec", item["spec"]}});
  }
  if (slices.empty()) {
    state.SkipWithError(
        ("no source slices among " + std::to_string(all["items"].size()))
            .c_str());
    return;
  }
  constexpr size_t kInFlight = 8;
  int node = 0;
  for (auto _ : state) {
    state.PauseTiming();
    const std::string name = "floor-" + std::to_string(node++);
    std::vector<std::string> bodies;
    for (json slice : slices) {
      slice["metadata"]["generateName"] = name + "-";
      slice["spec"]["nodeName"] = name;
      slice["spec"]["pool"]["name"] = name;
      bodies.push_back(slice.dump());
    }
    state.ResumeTiming();
    std::atomic<size_t> next{0};
    std::atomic<bool> failed{false};
    const auto send = [&] {
      for (size_t i = next++; i < bodies.size(); i = next++) {
        auto made = client->Request(
            "POST", "/apis/resource.k8s.io/v1/resourceslices", bodies[i]);
        if (!made.ok() || made->status != 201) failed = true;
      }
    };
    std::vector<std::thread> senders;
    for (size_t k = 1; k < kInFlight; ++k) senders.emplace_back(send);
    send();
    for (std::thread& sender : senders) sender.join();
    if (failed) {
      state.SkipWithError("a create failed");
      return;
    }
    state.PauseTiming();
    DeleteSlicesOf(server->admin(), name);
    state.ResumeTiming();
  }
  DeleteSlicesOf(server->admin(), "floor-source");
  state.counters["slices"] = static_cast<double>(slices.size());
  state.counters["in_flight"] = static_cast<double>(kInFlight);
}
BENCHMARK(BM_Publish10000DevicesFloor)
    ->ArgName("partitioned_shared")
    ->Arg(0)
    ->Arg(1)
    ->Iterations(3)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

// The same inventory again: one list, nothing written.
void BM_Republish10000DevicesUnchanged(benchmark::State& state) {
  ApiServer* server = ApiServer::OrSkip(state);
  if (server == nullptr) return;
  Inventory& inventory = Inventory::Get();
  auto client = server->DriverClient();
  draplugin::SlicePublisher publisher(client.get(), kDriver, "republish", {});
  if (!publisher.Publish("republish", inventory.devices).ok()) {
    state.SkipWithError("publishing failed");
    return;
  }
  const auto before = publisher.stats();
  for (auto _ : state) {
    if (!publisher.Publish("republish", inventory.devices).ok()) {
      state.SkipWithError("re-publishing failed");
      return;
    }
  }
  const auto after = publisher.stats();
  state.counters["writes"] =
      static_cast<double>((after.creates + after.updates + after.deletes) -
                          (before.creates + before.updates + before.deletes));
}
BENCHMARK(BM_Republish10000DevicesUnchanged)
    ->Iterations(5)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

// Claims from a table: the API server's part is measured apart.
class TableSource : public draplugin::ClaimSource {
 public:
  void Add(draplugin::Claim claim) {
    std::lock_guard lock(mu_);
    claims_[claim.ref.uid] = std::move(claim);
  }
  StatusOr<draplugin::Claim> Get(const draplugin::ClaimRef& ref,
                                 const std::string& /*driver*/) override {
    std::lock_guard lock(mu_);
    const auto it = claims_.find(ref.uid);
    if (it == claims_.end()) return NotFoundError("no claim " + ref.uid);
    return it->second;
  }

 private:
  std::mutex mu_;
  std::map<std::string, draplugin::Claim> claims_;
};

// A driver on the kubelet's socket for the Prepare benchmarks: the
// reference handler over `config` and `snapshot`, its runner started and
// registered with a fake kubelet; claims come from `source`. As on a node,
// the CDI directory is on a tmpfs (/var/run) and the checkpoint on disk.
struct PreparingDriver {
  PreparingDriver(const Config& config, std::shared_ptr<Snapshot> snapshot)
      : cdi(std::filesystem::is_directory("/dev/shm")
                ? testing::TempDir("/dev/shm")
                : testing::TempDir()),
        handler(config, Inventory::Get().root.path(), cdi.path(), kDriver,
                "bench-node", [snapshot] { return snapshot; }),
        kubelet(sockets.path() / "registry") {
    draplugin::DriverOptions options;
    options.driver_name = kDriver;
    options.registry_dir = sockets.path() / "registry";
    options.plugin_dir = sockets.path() / "plugin";
    auto created = draplugin::DriverRunner::Create(options, &source, &handler);
    if (!created.ok() || !(*created)->Start().ok()) std::abort();
    runner = std::move(*created);
    if (!kubelet.Register(kDriver).ok()) std::abort();
  }
  ~PreparingDriver() { runner->Stop(); }
  // Prepares `claim` through the kubelet's socket, timed into `micros`;
  // then unprepares it (not timed). False when the Prepare failed.
  bool PrepareTimed(benchmark::State& state, const draplugin::Claim& claim,
                    std::vector<double>* micros) {
    source.Add(claim);
    const auto start = std::chrono::steady_clock::now();
    auto prepared = kubelet.Prepare({{"bench", claim.ref.uid, "claim"}});
    micros->push_back(std::chrono::duration<double, std::micro>(
                          std::chrono::steady_clock::now() - start)
                          .count());
    if (!prepared.ok() || !prepared->at(claim.ref.uid).error.empty()) {
      return false;
    }
    state.PauseTiming();
    (void)kubelet.Unprepare({{"bench", claim.ref.uid, "claim"}});
    state.ResumeTiming();
    return true;
  }

  testing::TempDir sockets;
  testing::TempDir cdi;
  TableSource source;
  DraHandler handler;
  testing::FakeDraKubelet kubelet;
  std::unique_ptr<draplugin::DriverRunner> runner;
};

// NodePrepareResources of a claim of 8 VFs (of 10,000) through the
// kubelet's socket: the claim read, the CDI spec written, the checkpoint
// made durable, the answer; each claim unprepared after (not timed). As on
// a node, the CDI directory is on a tmpfs (/var/run) and the checkpoint on
// disk (/var/lib/kubelet).
void BM_PrepareClaimOf8(benchmark::State& state) {
  Inventory& inventory = Inventory::Get();
  PreparingDriver driver(inventory.config, inventory.snapshot);
  std::vector<double> micros;
  size_t next = 0;
  for (auto _ : state) {
    draplugin::Claim claim;
    claim.ref = {"bench", "uid-" + std::to_string(next), "claim"};
    for (int i = 0; i < 8; ++i) {
      claim.results.push_back(
          {"vfs", kDriver, "bench-node",
           inventory
               .devices[(next * 8 + static_cast<size_t>(i)) %
                        inventory.devices.size()]
               .name});
    }
    ++next;
    if (!driver.PrepareTimed(state, claim, &micros)) {
      state.SkipWithError("prepare failed");
      break;
    }
  }
  if (!micros.empty()) ReportPercentiles(state, micros);
}
BENCHMARK(BM_PrepareClaimOf8)
    ->Iterations(500)
    ->Unit(benchmark::kMicrosecond)
    ->UseRealTime();

// NodePrepareResources of a claim of one device through the kubelet's
// socket, as BM_PrepareClaimOf8: Arg 0, a VF allocated whole (the floor);
// Arg 1, a share of a shareable function (its share id and consumed
// capacity: a CDI name of the share's own and the share's amount in the
// environment), measured in the same run.
void BM_PrepareClaimOf1(benchmark::State& state) {
  const bool shared = state.range(0) == 1;
  Inventory& plain = Inventory::Get();
  const std::vector<draplugin::SliceDevice>& devices =
      shared ? SharedInventory::Get().pool.devices : plain.devices;
  PreparingDriver driver(
      shared ? SharedInventory::Get().config : plain.config,
      shared ? SharedInventory::Get().snapshot : plain.snapshot);
  std::vector<double> micros;
  size_t next = 0;
  for (auto _ : state) {
    draplugin::Claim claim;
    claim.ref = {"bench", "uid-" + std::to_string(next), "claim"};
    draplugin::AllocationResult result{"nic", kDriver, "bench-node",
                                       devices[next % devices.size()].name};
    if (shared) {
      char share[40];
      std::snprintf(share, sizeof(share), "00000000-0000-4000-8000-%012zx",
                    next);
      result.share_id = share;
      result.consumed_capacity["bandwidth"] = "20";
    }
    claim.results.push_back(std::move(result));
    ++next;
    if (!driver.PrepareTimed(state, claim, &micros)) {
      state.SkipWithError("prepare failed");
      break;
    }
  }
  if (!micros.empty()) ReportPercentiles(state, micros);
}
BENCHMARK(BM_PrepareClaimOf1)
    ->ArgName("shared")
    ->Arg(0)
    ->Arg(1)
    ->Iterations(500)
    ->Unit(benchmark::kMicrosecond)
    ->UseRealTime();

// The API server's part of a Prepare: GET of the claim (TLS kept alive by
// no one: one connection per request, as the client makes them).
void BM_ClaimGetFromApiServer(benchmark::State& state) {
  ApiServer* server = ApiServer::OrSkip(state);
  if (server == nullptr) return;
  auto client = server->DriverClient();
  const std::string claims =
      "/apis/resource.k8s.io/v1/namespaces/default/resourceclaims";
  (void)server->admin()->Request(
      "POST", claims,
      R"({"apiVersion":"resource.k8s.io/v1","kind":"ResourceClaim",)"
      R"("metadata":{"name":"bench"},"spec":{}})");
  std::vector<double> micros;
  for (auto _ : state) {
    const auto start = std::chrono::steady_clock::now();
    auto answer = client->Request("GET", claims + "/bench");
    micros.push_back(std::chrono::duration<double, std::micro>(
                         std::chrono::steady_clock::now() - start)
                         .count());
    if (!answer.ok() || answer->status != 200) {
      state.SkipWithError("GET failed");
      break;
    }
  }
  if (!micros.empty()) ReportPercentiles(state, micros);
}
BENCHMARK(BM_ClaimGetFromApiServer)
    ->Iterations(200)
    ->Unit(benchmark::kMicrosecond)
    ->UseRealTime();

// topology-dra-driver serving 10,000 VFs: published, registered with a
// fake kubelet that watches the health stream, ready; then left alone for
// 60 s.
void BM_IdleDraDriver10000(benchmark::State& state) {
  ApiServer* server = ApiServer::OrSkip(state);
  if (server == nullptr) return;
  Inventory& inventory = Inventory::Get();
  testing::TempDir sockets;
  testing::TempDir work;
  const int port = testing::FreeLoopbackPort();
  for (auto _ : state) {
    std::vector<std::string> args = {
        topology::testing::ProgramPath("topology-dra-driver"),
        "--config",
        (inventory.root.path() / "config.yaml").string(),
        "--host-root",
        inventory.root.path().string(),
        "--kubeconfig",
        server->driver_kubeconfig(),
        "--node-name",
        "idle-node",
        "--registry-dir",
        (sockets.path() / "registry").string(),
        "--plugin-dir",
        (sockets.path() / "plugin").string(),
        "--cdi-dir",
        (work.path() / "cdi").string(),
        "--http-addr",
        "127.0.0.1:" + std::to_string(port)};
    std::vector<char*> argv;
    for (auto& arg : args) argv.push_back(arg.data());
    argv.push_back(nullptr);
    pid_t pid = 0;
    if (posix_spawn(&pid, argv[0], nullptr, nullptr, argv.data(), environ) !=
        0) {
      state.SkipWithError("cannot start topology-dra-driver");
      return;
    }
    testing::FakeDraKubelet kubelet(sockets.path() / "registry");
    const bool ready = testing::WaitFor(
        [&] {
          (void)kubelet.Register(kDriver);
          auto answer = plugin::HttpGet(port, "/readyz");
          return answer.ok() && answer->first == 200;
        },
        120s, 200ms);
    if (!ready) {
      kill(pid, SIGKILL);
      waitpid(pid, nullptr, 0);
      state.SkipWithError("the driver did not get ready");
      return;
    }
    // A kubelet with resource health status watches the health stream: the
    // complete list at once and again at every refresh.
    size_t health_messages = 0;
    std::thread watcher(
        [&] { health_messages = kubelet.WatchHealth("v1", 1000, 90s).size(); });
    // The start is over once the kubelet has the complete list.
    (void)testing::WaitFor([&] { return kubelet.health_messages() >= 1; }, 30s);
    MeasureIdleProcess(state, pid, 60s);
    kill(pid, SIGTERM);
    waitpid(pid, nullptr, 0);
    watcher.join();
    state.counters["health_messages"] = static_cast<double>(health_messages);
  }
  state.counters["devices"] = static_cast<double>(inventory.devices.size());
}
BENCHMARK(BM_IdleDraDriver10000)->Iterations(1)->Unit(benchmark::kSecond);

}  // namespace
}  // namespace topology::device_plugin

int main(int argc, char** argv) {
  topology::common::InitLogging(argv[0], 0);
  FLAGS_minloglevel = 2;  // keep benchmark output readable
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
