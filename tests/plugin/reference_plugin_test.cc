// topology-device-plugin against the fake kubelet on fixture sysfs trees:
// topology reporting, preferred allocations (P.c), Allocate content (P.d),
// health and hot-plug.
#include "reference_plugin.h"

#include <cerrno>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <random>
#include <set>
#include <thread>

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "topology/common/cdi.h"
#include "topology/dra_attributes.h"
#include "topology/draplugin/claim_checkpoint.h"
#include "topology/plugin/http_endpoint.h"
#include "topology/testing/fake_clock.h"
#include "topology/testing/fake_kubelet.h"
#include "topology/testing/sysfs_tree_builder.h"

#include "dra_driver.h"
#include "seeded_random.h"
#include "status_matchers.h"
#include "synthetic_machines.h"
#include "temp_dir.h"
#include "time_scale.h"
#include "wait_for.h"

namespace topology::device_plugin {
namespace {

using namespace std::chrono_literals;
using plugin::HttpEndpoint;
using plugin::HttpGet;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::SizeIs;
using ::testing::UnorderedElementsAre;
using ::topology::testing::FakeKubelet;
using ::topology::testing::IsOk;
using ::topology::testing::PluginConnection;
using ::topology::testing::Scaled;
using ::topology::testing::StatusIs;
using ::topology::testing::WaitFor;

constexpr char kGpu[] = "example.com/gpu";
constexpr char kNic[] = "example.com/nic";
const std::vector<std::string> kNode0Gpus = {"0000:1a:00.0", "0000:1b:00.0",
                                             "0000:3d:00.0", "0000:3e:00.0"};
const std::vector<std::string> kNode1Gpus = {"0000:9a:00.0", "0000:9b:00.0",
                                             "0000:ba:00.0", "0000:bb:00.0"};

std::vector<std::string> AllGpus() {
  std::vector<std::string> all = kNode0Gpus;
  all.insert(all.end(), kNode1Gpus.begin(), kNode1Gpus.end());
  return all;
}

class ReferencePluginTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(testing::WriteMachine("dual-socket-8gpu", root_.path()));
    kubelet_.Start();
  }

  // The fixture tree and plugin directory, tests driving rescans.
  PluginOptions Options(Config config) const {
    PluginOptions options;
    options.config = std::move(config);
    options.host_root = root_.path();
    options.runner.plugin_dir = plugins_.path();
    options.runner.initial_backoff = 100ms;
    options.runner.stream_gap = 0ms;
    options.rescan_interval = 0s;  // tests drive rescans
    options.recovery_period = 300ms;
    options.watch_uevents = false;
    options.clock = &clock_;  // health recovery and uevent debounce
    options.cdi_dir = cdi_dir_override_ ? *cdi_dir_override_ : cdi_dir();
    options.dra_claims = dra_claims_;
    return options;
  }
  std::filesystem::path cdi_dir() const {
    auto dir = root_.path() / "var/run/cdi";
    std::filesystem::create_directories(dir);
    return dir;
  }

  // Allocate of `ids` for one container, as the kubelet asks it: the
  // container's answer, or nullopt when the call fails.
  std::optional<v1beta1::ContainerAllocateResponse> AllocateGpus(
      const std::vector<std::string>& ids) {
    v1beta1::AllocateRequest request;
    auto* container = request.add_container_requests();
    for (const auto& id : ids) container->add_devices_ids(id);
    grpc::ClientContext context;
    v1beta1::AllocateResponse response;
    if (!gpu_->stub().Allocate(&context, request, &response).ok() ||
        response.container_responses_size() != 1) {
      return std::nullopt;
    }
    return response.container_responses(0);
  }

  void StartPlugin(const std::string& extra_gpu_config = "") {
    auto config = ParseConfig(
        "resources:\n"
        "  - name: example.com/gpu\n"
        "    selectors: [{vendors: [\"10de\"], classes: [\"0302\"]}]\n" +
            extra_gpu_config +
            "  - name: example.com/nic\n"
            "    selectors: [{classes: [\"0200\"]}]\n",
        "test");
    ASSERT_THAT(config.status(), IsOk());
    auto plugin = TopologyDevicePlugin::Create(Options(*config));
    ASSERT_THAT(plugin.status(), IsOk());
    plugin_ = std::move(*plugin);
    ASSERT_THAT(plugin_->Start(), IsOk());
    gpu_ = kubelet_.WaitForConnection(kGpu, 10s);
    ASSERT_NE(gpu_, nullptr);
    ASSERT_TRUE(gpu_->WaitForMessages(1, Scaled(2s)));
  }

  std::filesystem::path DeviceDir(const std::string& address) const {
    return std::filesystem::canonical(root_.path() / "sys/bus/pci/devices" /
                                      address);
  }

  StatusOr<std::vector<std::string>> Preferred(
      const std::vector<std::string>& available,
      const std::vector<std::string>& must, int size) {
    v1beta1::PreferredAllocationRequest request;
    auto* container = request.add_container_requests();
    for (const auto& id : available) container->add_available_deviceids(id);
    for (const auto& id : must) container->add_must_include_deviceids(id);
    container->set_allocation_size(size);
    grpc::ClientContext context;
    v1beta1::PreferredAllocationResponse response;
    grpc::Status status =
        gpu_->stub().GetPreferredAllocation(&context, request, &response);
    if (!status.ok()) return InternalError(status.error_message());
    const auto& ids = response.container_responses(0).deviceids();
    return std::vector<std::string>(ids.begin(), ids.end());
  }

  // Waits for a list on the GPU stream that satisfies `predicate`.
  template <typename Predicate>
  bool WaitForList(Predicate predicate, std::chrono::milliseconds timeout) {
    return testing::WaitFor(
        [&] {
          auto latest = gpu_->latest();
          return latest && predicate(*latest);
        },
        timeout);
  }

  // The plugins' time: tests advance it past a recovery period or a
  // uevent's debounce.
  testing::FakeClock clock_;
  testing::TempDir root_;
  testing::TempDir plugins_;
  std::optional<std::filesystem::path> cdi_dir_override_;
  std::filesystem::path dra_claims_;  // topology-dra-driver's checkpoint
  FakeKubelet kubelet_{plugins_.path()};
  std::unique_ptr<TopologyDevicePlugin> plugin_;
  std::shared_ptr<PluginConnection> gpu_;
};

// The health `list` gives device `id`, or "" when it lists no such device.
std::string HealthOf(const v1beta1::ListAndWatchResponse& list,
                     const std::string& id) {
  for (const auto& device : list.devices()) {
    if (device.id() == id) return device.health();
  }
  return "";
}

std::map<std::string, std::vector<int64_t>> NodesById(
    const v1beta1::ListAndWatchResponse& list) {
  std::map<std::string, std::vector<int64_t>> out;
  for (const auto& device : list.devices()) {
    auto& nodes = out[device.id()];
    if (device.has_topology()) {
      for (const auto& node : device.topology().nodes())
        nodes.push_back(node.id());
    }
  }
  return out;
}

// Back from DRA on a live node: a device a prepared claim of the DRA
// driver holds (its checkpoint of prepared claims) is not offered; once the
// claim is unprepared, the next reconcile offers it again.
TEST_F(ReferencePluginTest,
       ADevicePreparedForADraClaimIsNotOfferedUntilReleased) {
  dra_claims_ = root_.path() / "dra" / draplugin::kClaimCheckpointFile;
  std::filesystem::create_directories(dra_claims_.parent_path());
  draplugin::PreparedClaims claims;
  claims["c1"] = {
      .ref = {.ns = "default", .uid = "c1", .name = "pair"},
      .devices = {{.request_names = {"gpu"},
                   .pool = "node-a",
                   .device = "pci-0000-1a-00-0",
                   .cdi_device_ids = {"pci.libtopology.dev/pci=c1-0"}},
                  // Not a device name of this driver: ignored.
                  {.request_names = {"nic"},
                   .pool = "node-a",
                   .device = "nic-7",
                   .cdi_device_ids = {}}}};
  ASSERT_THAT(draplugin::SaveClaims(dra_claims_, claims), IsOk());
  StartPlugin();
  auto nodes = NodesById(*gpu_->latest());
  EXPECT_THAT(nodes, SizeIs(7));
  EXPECT_FALSE(nodes.contains("0000:1a:00.0"));
  // The kubelet asking for it anyway (an old list) is refused.
  EXPECT_FALSE(AllocateGpus({"0000:1a:00.0"}).has_value());

  // Unprepared: the checkpoint no longer names it.
  ASSERT_THAT(draplugin::SaveClaims(dra_claims_, {}), IsOk());
  ASSERT_THAT(plugin_->Reconcile(), IsOk());
  EXPECT_TRUE(WaitForList(
      [](const v1beta1::ListAndWatchResponse& list) {
        return NodesById(list).size() == 8;
      },
      Scaled(5s)));
  EXPECT_TRUE(AllocateGpus({"0000:1a:00.0"}).has_value());

  // A checkpoint that cannot be read keeps what was last read, and says so.
  ASSERT_THAT(draplugin::SaveClaims(dra_claims_, claims), IsOk());
  ASSERT_THAT(plugin_->Rescan(), IsOk());
  EXPECT_TRUE(WaitForList(
      [](const v1beta1::ListAndWatchResponse& list) {
        return NodesById(list).size() == 7;
      },
      Scaled(5s)));
  std::ofstream(dra_claims_) << "{not json";
  ASSERT_THAT(plugin_->Reconcile(), IsOk());
  EXPECT_THAT(NodesById(*gpu_->latest()), SizeIs(7));
}

// A device prepared for an adminAccess claim (monitoring, KEP-5018) is no
// one's exclusively: the device plugin still offers and allocates it.
TEST_F(ReferencePluginTest, AnAdminAccessClaimHoldsNoDevice) {
  dra_claims_ = root_.path() / "dra" / draplugin::kClaimCheckpointFile;
  std::filesystem::create_directories(dra_claims_.parent_path());
  draplugin::PreparedClaims claims;
  claims["m1"] = {.ref = {.ns = "monitoring", .uid = "m1", .name = "watch"},
                  .devices = {{.request_names = {"gpu"},
                               .pool = "node-a",
                               .device = "pci-0000-1a-00-0",
                               .cdi_device_ids = {},
                               .admin_access = true}}};
  ASSERT_THAT(draplugin::SaveClaims(dra_claims_, claims), IsOk());
  StartPlugin();
  EXPECT_THAT(NodesById(*gpu_->latest()), SizeIs(8));
  EXPECT_TRUE(AllocateGpus({"0000:1a:00.0"}).has_value());
  // The flag survives the checkpoint; without it the claim holds the GPU.
  auto loaded = draplugin::LoadClaims(dra_claims_);
  ASSERT_THAT(loaded.status(), IsOk());
  EXPECT_TRUE(loaded->at("m1").devices[0].admin_access);
  claims["m1"].devices[0].admin_access = false;
  ASSERT_THAT(draplugin::SaveClaims(dra_claims_, claims), IsOk());
  EXPECT_FALSE(AllocateGpus({"0000:1a:00.0"}).has_value());
}

// The device plugin beside the DRA driver, with no periodic rescans: a
// claim prepared after the last list is noticed at once (the checkpoint's
// directory is watched) and never allocated through the device plugin too
// (Allocate reads the checkpoint afresh); a checkpoint that cannot be read
// refuses every Allocate, and one unreadable at start offers nothing.
TEST_F(ReferencePluginTest, AClaimPreparedAfterTheListIsNeverAllocatedTwice) {
  dra_claims_ = root_.path() / "dra" / draplugin::kClaimCheckpointFile;
  std::filesystem::create_directories(dra_claims_.parent_path());
  StartPlugin();
  ASSERT_THAT(NodesById(*gpu_->latest()), SizeIs(8));
  draplugin::PreparedClaims claims;
  claims["c1"] = {.ref = {.ns = "default", .uid = "c1", .name = "one"},
                  .devices = {{.request_names = {"gpu"},
                               .pool = "node-a",
                               .device = "pci-0000-1a-00-0",
                               .cdi_device_ids = {}}}};
  ASSERT_THAT(draplugin::SaveClaims(dra_claims_, claims), IsOk());
  // Refused at once, from the file, whatever the last list said.
  EXPECT_FALSE(AllocateGpus({"0000:1a:00.0"}).has_value());
  // And the list follows without a rescan being asked for.
  EXPECT_TRUE(WaitForList(
      [](const v1beta1::ListAndWatchResponse& list) {
        return NodesById(list).size() == 7;
      },
      Scaled(5s)));
  // Unreadable: every Allocate is refused.
  std::ofstream(dra_claims_) << "{not json";
  EXPECT_FALSE(AllocateGpus({kNode1Gpus[0]}).has_value());
  ASSERT_THAT(draplugin::SaveClaims(dra_claims_, {}), IsOk());
  EXPECT_TRUE(AllocateGpus({kNode1Gpus[0]}).has_value());
  EXPECT_TRUE(WaitForList(
      [](const v1beta1::ListAndWatchResponse& list) {
        return NodesById(list).size() == 8;
      },
      Scaled(5s)));
}

// A claim checkpoint unreadable at start (a link): any device may be held,
// so none is offered or allocated until it is read whole.
TEST_F(ReferencePluginTest, AClaimCheckpointUnreadableAtStartOffersNothing) {
  dra_claims_ = root_.path() / "dra" / draplugin::kClaimCheckpointFile;
  std::filesystem::create_directories(dra_claims_.parent_path());
  const auto target = root_.path() / "elsewhere.json";
  ASSERT_THAT(draplugin::SaveClaims(target, {}), IsOk());
  std::filesystem::create_symlink(target, dra_claims_);
  StartPlugin();
  EXPECT_THAT(NodesById(*gpu_->latest()), IsEmpty());
  EXPECT_FALSE(AllocateGpus({kNode1Gpus[0]}).has_value());
  std::filesystem::remove(dra_claims_);
  ASSERT_THAT(draplugin::SaveClaims(dra_claims_, {}), IsOk());
  EXPECT_TRUE(WaitForList(
      [](const v1beta1::ListAndWatchResponse& list) {
        return NodesById(list).size() == 8;
      },
      Scaled(5s)));
}

// Both paths on one node, in random order: pods given GPUs through the
// device plugin (the kubelet's checkpoint written after each Allocate, as
// the kubelet writes it), claims prepared through the DRA driver's handler
// (its checkpoint written, as the runner writes it), releases of both. No
// GPU is ever held by both paths: each side reads the other's file when
// it hands one out.
TEST_F(ReferencePluginTest, BothPathsNeverHandOutOneDeviceTwice) {
  dra_claims_ = root_.path() / "dra" / draplugin::kClaimCheckpointFile;
  std::filesystem::create_directories(dra_claims_.parent_path());
  const auto kubelet_checkpoint = root_.path() / "kubelet_internal_checkpoint";
  StartPlugin();
  auto config = ParseConfig(
      "resources:\n"
      "  - name: example.com/gpu\n"
      "    selectors: [{vendors: [\"10de\"], classes: [\"0302\"]}]\n",
      "dra");
  ASSERT_THAT(config.status(), IsOk());
  auto sysfs = NewHostRootReader(root_.path());
  auto snapshot =
      DiscoverSnapshot(*config, root_.path(), *sysfs, cdi_dir(), {});
  ASSERT_THAT(snapshot.status(), IsOk());
  std::shared_ptr<const Snapshot> shared = *snapshot;
  DraHandler dra(
      *config, root_.path(), cdi_dir(), "pci.libtopology.dev", "node-a",
      [shared] { return shared; },
      [&] { return ReadHeldThroughDevicePlugins(kubelet_checkpoint); });
  std::map<std::string, std::string> by_plugin;  // GPU -> pod
  draplugin::PreparedClaims claims;
  const auto write_kubelet = [&] {
    std::string entries;
    for (const auto& [gpu, pod] : by_plugin) {
      entries += std::string(entries.empty() ? "" : ",") + R"({"PodUID":")" +
                 pod +
                 R"(","ContainerName":"c","ResourceName":"example.com/gpu",)"
                 R"("DeviceIDs":{"0":[")" +
                 gpu + R"("]},"AllocResp":""})";
    }
    std::ofstream(kubelet_checkpoint, std::ios::trunc)
        << R"({"Data":{"PodDeviceEntries":[)" << entries
        << R"(],"RegisteredDevices":{}},"Checksum":1})";
  };
  write_kubelet();
  std::mt19937_64 random(4815);
  const std::vector<std::string> gpus = AllGpus();
  int both = 0;
  int given_by_plugin = 0;
  int given_by_dra = 0;
  for (int step = 0; step < 120; ++step) {
    SCOPED_TRACE("step " + std::to_string(step));
    const std::string gpu = gpus[random() % gpus.size()];
    switch (random() % 4) {
      case 0:  // a pod asks the device plugin
        if (AllocateGpus({gpu}).has_value()) {
          by_plugin.emplace(gpu, "pod-" + std::to_string(step));
          write_kubelet();
          ++given_by_plugin;
        }
        break;
      case 1: {  // a claim is prepared
        draplugin::Claim claim;
        claim.ref = {"default", "claim-" + std::to_string(step), "c"};
        claim.results.push_back({"gpu", "pci.libtopology.dev", "node-a",
                                 dra::PciDeviceName(*PciAddress::Parse(gpu))});
        auto prepared = dra.Prepare(claim);
        if (prepared.ok()) {
          claims[claim.ref.uid] = {.ref = claim.ref, .devices = *prepared};
          ASSERT_THAT(draplugin::SaveClaims(dra_claims_, claims), IsOk());
          ++given_by_dra;
        }
        break;
      }
      case 2:  // a pod ends
        if (!by_plugin.empty()) {
          by_plugin.erase(std::next(
              by_plugin.begin(),
              static_cast<std::ptrdiff_t>(random() % by_plugin.size())));
          write_kubelet();
        }
        break;
      default:  // a claim is unprepared
        if (!claims.empty()) {
          claims.erase(
              std::next(claims.begin(),
                        static_cast<std::ptrdiff_t>(random() % claims.size())));
          ASSERT_THAT(draplugin::SaveClaims(dra_claims_, claims), IsOk());
        }
        break;
    }
    for (const auto& [uid, claim] : claims) {
      for (const draplugin::PreparedDevice& device : claim.devices) {
        const auto address = dra::AddressOfPciDeviceName(device.device);
        if (address && by_plugin.contains(address->ToString())) ++both;
      }
    }
    ASSERT_EQ(both, 0) << gpu << " is held by both paths";
  }
  // Both paths handed GPUs out along the way.
  EXPECT_GT(given_by_plugin, 0);
  EXPECT_GT(given_by_dra, 0);
}

TEST_F(ReferencePluginTest, ListsDevicesWithTheirNumaNodes) {
  StartPlugin();
  const auto nodes = NodesById(*gpu_->latest());
  ASSERT_THAT(nodes, SizeIs(8));
  for (const auto& id : kNode0Gpus) EXPECT_THAT(nodes.at(id), ElementsAre(0));
  for (const auto& id : kNode1Gpus) EXPECT_THAT(nodes.at(id), ElementsAre(1));
  auto nic = kubelet_.WaitForConnection(kNic, 5s);
  ASSERT_NE(nic, nullptr);
  ASSERT_TRUE(nic->WaitForMessages(1, Scaled(2s)));
  EXPECT_THAT(NodesById(*nic->latest()), SizeIs(4));
  EXPECT_TRUE(gpu_->options().get_preferred_allocation_available());
  EXPECT_FALSE(gpu_->options().pre_start_required());
}

TEST(ReferencePluginLocalityTest, MixedLocalityReportsNoTopologyAtAll) {
  // Two GPUs; the kernel knows the NUMA node of only one.
  testing::TempDir root;
  testing::TempDir plugins;
  testing::SysfsTreeBuilder builder(root.path());
  builder.AddNode(0, "0-1", 1 << 30);
  builder.AddNode(1, "2-3", 1 << 30);
  for (int cpu = 0; cpu < 4; ++cpu) {
    builder.AddCpu(cpu, cpu / 2, cpu, std::to_string(cpu));
  }
  testing::PciFunctionSpec known;
  known.host_bridge = "pci0000:00";
  known.path = {"0000:00:01.0", "0000:01:00.0"};
  known.numa_node = 0;
  known.driver = "nvidia";
  builder.AddPciFunction(known);
  testing::PciFunctionSpec unknown = known;
  unknown.host_bridge = "pci0000:80";
  unknown.path = {"0000:80:01.0", "0000:81:00.0"};
  unknown.numa_node = -1;
  builder.AddPciFunction(unknown);
  builder.Finish();
  FakeKubelet kubelet(plugins.path());
  kubelet.Start();
  PluginOptions options;
  options.config = *ParseConfig(
      "resources: [{name: example.com/gpu, selectors: [{vendors: "
      "[\"10de\"]}]}]",
      "t");
  options.host_root = root.path();
  options.runner.plugin_dir = plugins.path();
  options.watch_uevents = false;
  auto plugin = TopologyDevicePlugin::Create(std::move(options));
  ASSERT_THAT(plugin.status(), IsOk());
  ASSERT_EQ((*plugin)->snapshot()->topology.pci_devices().size(), 4u);
  ASSERT_THAT((*plugin)->Start(), IsOk());
  auto gpu = kubelet.WaitForConnection(kGpu, 10s);
  ASSERT_NE(gpu, nullptr);
  ASSERT_TRUE(gpu->WaitForMessages(1, Scaled(2s)));
  const auto nodes = NodesById(*gpu->latest());
  ASSERT_THAT(nodes, SizeIs(2));
  for (const auto& [id, list] : nodes) EXPECT_THAT(list, ElementsAre()) << id;
}

TEST_F(ReferencePluginTest, ExcludeTopologyOption) {
  StartPlugin("    excludeTopology: true\n");
  for (const auto& [id, nodes] : NodesById(*gpu_->latest())) {
    EXPECT_THAT(nodes, ElementsAre()) << id;
  }
}

TEST_F(ReferencePluginTest, P29_NumaAwarePreferredAllocation) {
  StartPlugin();
  auto four = Preferred(AllGpus(), {}, 4);
  ASSERT_THAT(four.status(), IsOk());
  std::set<std::string> chosen(four->begin(), four->end());
  const bool node0 =
      chosen == std::set<std::string>(kNode0Gpus.begin(), kNode0Gpus.end());
  const bool node1 =
      chosen == std::set<std::string>(kNode1Gpus.begin(), kNode1Gpus.end());
  EXPECT_TRUE(node0 || node1) << ::testing::PrintToString(*four);
  auto with_must = Preferred(AllGpus(), {"0000:ba:00.0"}, 4);
  ASSERT_THAT(with_must.status(), IsOk());
  EXPECT_THAT(*with_must, UnorderedElementsAre("0000:9a:00.0", "0000:9b:00.0",
                                               "0000:ba:00.0", "0000:bb:00.0"));
  // Two: a pair behind one switch.
  auto two = Preferred(AllGpus(), {"0000:3e:00.0"}, 2);
  ASSERT_THAT(two.status(), IsOk());
  EXPECT_THAT(*two, UnorderedElementsAre("0000:3d:00.0", "0000:3e:00.0"));
}

TEST_F(ReferencePluginTest, P28_PreferredAnswersAreAlwaysValid) {
  StartPlugin();
  const auto seed = static_cast<uint64_t>(testing::EnvOr("TOPOLOGY_SEED", 28));
  testing::SeededRandom random(seed);
  const std::vector<std::string> all = AllGpus();
  for (int round = 0; round < 200; ++round) {
    std::vector<std::string> available;
    for (const auto& id : all) {
      if (random.Uniform(0, 3) > 0) available.push_back(id);
    }
    if (available.empty()) continue;
    std::vector<std::string> must;
    for (const auto& id : available) {
      if (random.Uniform(0, 5) == 0) must.push_back(id);
    }
    const int size =
        random.Uniform(static_cast<int>(std::max<size_t>(must.size(), 1)),
                       static_cast<int>(available.size()));
    auto answer = Preferred(available, must, size);
    ASSERT_THAT(answer.status(), IsOk())
        << "seed " << seed << " round " << round;
    std::set<std::string> ids(answer->begin(), answer->end());
    EXPECT_EQ(ids.size(), static_cast<size_t>(size))
        << "seed " << seed << " round " << round;
    for (const auto& id : ids) {
      EXPECT_NE(std::find(available.begin(), available.end(), id),
                available.end());
    }
    for (const auto& id : must)
      EXPECT_TRUE(ids.contains(id)) << "seed " << seed << " round " << round;
  }
}

TEST_F(ReferencePluginTest, P33_KubeletShapedRequests) {
  StartPlugin();
  // TopologyManager chose NUMA 0: available is the aligned set plus reusable
  // devices, must-include the reusable ones, size the full request.
  auto aligned = Preferred(kNode0Gpus, {"0000:1a:00.0"}, 2);
  ASSERT_THAT(aligned.status(), IsOk());
  EXPECT_THAT(*aligned, UnorderedElementsAre("0000:1a:00.0", "0000:1b:00.0"));
  // Case B of the kubelet: all aligned devices already chosen, the rest from
  // everything available.
  std::vector<std::string> must = kNode0Gpus;
  auto spill = Preferred(AllGpus(), must, 6);
  ASSERT_THAT(spill.status(), IsOk());
  EXPECT_THAT(*spill, SizeIs(6));
  std::set<std::string> rest(spill->begin(), spill->end());
  for (const auto& id : kNode0Gpus) rest.erase(id);
  // The two extra devices share a switch.
  EXPECT_TRUE(rest == std::set<std::string>({"0000:9a:00.0", "0000:9b:00.0"}) ||
              rest == std::set<std::string>({"0000:ba:00.0", "0000:bb:00.0"}))
      << ::testing::PrintToString(rest);
}

// The CDI names of the reference plugin's Allocate answers resolve: each
// names a device of a spec file the runtime reads (<kind>=<name>, a valid
// kind and name, a released cdiVersion), and the edits of the named devices
// together are exactly the answer's device nodes.
void ExpectCdiNamesResolve(const std::filesystem::path& cdi_dir,
                           const v1beta1::ContainerAllocateResponse& answer) {
  std::map<std::string, nlohmann::json> defined;  // "kind=name" -> edits
  for (const auto& entry : std::filesystem::directory_iterator(cdi_dir)) {
    std::ifstream in(entry.path());
    const nlohmann::json spec = nlohmann::json::parse(in, nullptr, false);
    ASSERT_FALSE(spec.is_discarded()) << entry.path();
    ASSERT_TRUE(spec.contains("cdiVersion") && spec.contains("kind") &&
                spec.contains("devices"))
        << spec.dump();
    EXPECT_THAT(spec["cdiVersion"].get<std::string>(),
                ::testing::AnyOf("0.3.0", "0.5.0"));
    EXPECT_THAT(common::ValidateCdiKind(spec["kind"].get<std::string>()),
                IsOk());
    for (const auto& device : spec["devices"]) {
      const std::string name = device["name"].get<std::string>();
      EXPECT_THAT(common::ValidateCdiDeviceName(name), IsOk());
      EXPECT_TRUE(defined
                      .emplace(spec["kind"].get<std::string>() + "=" + name,
                               device["containerEdits"])
                      .second)
          << name << " defined twice";
    }
  }
  std::set<std::string> from_cdi;
  for (const auto& cdi : answer.cdi_devices()) {
    const auto it = defined.find(cdi.name());
    ASSERT_NE(it, defined.end()) << cdi.name() << " is defined by no spec";
    if (!it->second.contains("deviceNodes")) continue;
    for (const auto& node : it->second["deviceNodes"]) {
      from_cdi.insert(node["path"].get<std::string>());
    }
  }
  std::set<std::string> from_allocate;
  for (const auto& node : answer.devices()) {
    from_allocate.insert(node.container_path());
  }
  if (answer.cdi_devices_size() > 0) {
    EXPECT_EQ(from_cdi, from_allocate);
  }
}

TEST_F(ReferencePluginTest, CdiNamesResolveToTheSpecTheyWrite) {
  std::filesystem::create_directories(root_.path() / "dev/dri/by-path");
  // Every GPU but 0000:3e:00.0 has a render node.
  for (const char* gpu : {"0000:1a:00.0", "0000:1b:00.0", "0000:3d:00.0",
                          "0000:9a:00.0", "0000:bb:00.0"}) {
    std::ofstream(root_.path() /
                  (std::string("dev/dri/by-path/pci-") + gpu + "-render"));
  }
  StartPlugin(
      "    deviceNodes: [\"/dev/dri/by-path/pci-{address}-render\"]\n"
      "    cdiKind: example.com/gpu\n");
  const auto spec = cdi_dir() / "topology-device-plugin-example.com_gpu.json";
  ASSERT_TRUE(std::filesystem::exists(spec));
  EXPECT_EQ(std::filesystem::status(spec).permissions(),
            std::filesystem::perms(0644));
  for (const std::vector<std::string>& ids :
       std::vector<std::vector<std::string>>{
           {"0000:1a:00.0"},
           {"0000:1a:00.0", "0000:1b:00.0"},
           {"0000:3d:00.0", "0000:9a:00.0", "0000:bb:00.0"}}) {
    const auto answer = AllocateGpus(ids);
    ASSERT_TRUE(answer);
    EXPECT_EQ(answer->cdi_devices_size(), static_cast<int>(ids.size()));
    ExpectCdiNamesResolve(cdi_dir(), *answer);
  }
  // A device without any node has no edits: a runtime would refuse the
  // whole spec for it, so it is not in the spec and gets no name.
  const auto bare = AllocateGpus({"0000:3e:00.0"});
  ASSERT_TRUE(bare);
  EXPECT_EQ(bare->cdi_devices_size(), 0);
  EXPECT_THAT(plugin_->DescribeMatches(),
              HasSubstr("CDI: example.com/gpu as example.com/gpu in "));
}

// Without a place to write its spec the plugin returns no CDI name (a
// CDI-enabled runtime would refuse the container), and says so.
TEST_F(ReferencePluginTest, NoCdiNamesWithoutAWrittenSpec) {
  cdi_dir_override_ = root_.path() / "not-a-directory";
  std::ofstream(*cdi_dir_override_) << "a file, not a directory";
  StartPlugin("    cdiKind: example.com/gpu\n");
  const auto answer = AllocateGpus({"0000:1a:00.0"});
  ASSERT_TRUE(answer);
  EXPECT_EQ(answer->cdi_devices_size(), 0);
  EXPECT_THAT(plugin_->DescribeMatches(),
              HasSubstr("no spec written, no CDI names returned"));
}

// NVIDIA mode: nvidia.com/gpu=<UUID> only when a spec on the node (what
// nvidia-ctk cdi generate writes, YAML) defines it.
TEST_F(ReferencePluginTest, NvidiaCdiNamesOnlyWhenTheNodeDefinesThem) {
  const std::string uuid0 = "GPU-5a0c1d2e-7b3f-4c19-9e8a-00001d2e0000";
  std::filesystem::create_directories(root_.path() / "etc/cdi");
  std::ofstream(root_.path() / "etc/cdi/nvidia.yaml")
      << "cdiVersion: 0.5.0\nkind: nvidia.com/gpu\ndevices:\n"
      << "- name: \"0\"\n  containerEdits:\n    deviceNodes:\n"
      << "    - path: /dev/nvidia0\n"
      << "- name: " << uuid0 << "\n  containerEdits:\n    deviceNodes:\n"
      << "    - path: /dev/nvidia0\n";
  StartPlugin("    nvidia: true\n");
  const auto answer = AllocateGpus({"0000:1a:00.0", "0000:1b:00.0"});
  ASSERT_TRUE(answer);
  ASSERT_EQ(answer->cdi_devices_size(), 1);
  EXPECT_EQ(answer->cdi_devices(0).name(), "nvidia.com/gpu=" + uuid0);
  EXPECT_THAT(plugin_->DescribeMatches(),
              HasSubstr("no CDI spec on the node defines nvidia.com/gpu="
                        "GPU-5a0c1d2e-7b3f-4c19-9e8a-00001d2e0001"));
  EXPECT_THAT(plugin_->MetricsText(),
              HasSubstr("topology_device_plugin_cdi_names_undefined 7"));
}

TEST_F(ReferencePluginTest, P37_AllocateContent) {
  // Device nodes by glob under the host root, and CDI names.
  std::filesystem::create_directories(root_.path() / "dev/dri/by-path");
  std::ofstream render(root_.path() /
                       "dev/dri/by-path/pci-0000:1a:00.0-render");
  std::ofstream control(root_.path() / "dev/nvidiactl");
  StartPlugin(
      "    deviceNodes: [\"/dev/dri/by-path/pci-{address}-render\", "
      "\"/dev/nvidiactl\"]\n"
      "    cdiKind: example.com/gpu\n");
  v1beta1::AllocateRequest request;
  auto* container = request.add_container_requests();
  container->add_devices_ids("0000:1a:00.0");
  container->add_devices_ids("0000:1b:00.0");
  grpc::ClientContext context;
  v1beta1::AllocateResponse response;
  ASSERT_TRUE(gpu_->stub().Allocate(&context, request, &response).ok());
  ASSERT_EQ(response.container_responses_size(), 1);
  const auto& answer = response.container_responses(0);
  EXPECT_EQ(answer.envs().at("PCIDEVICE_EXAMPLE_COM_GPU"),
            "0000:1a:00.0,0000:1b:00.0");
  std::vector<std::string> nodes;
  for (const auto& device : answer.devices()) {
    nodes.push_back(device.host_path());
    EXPECT_EQ(device.container_path(), device.host_path());
    EXPECT_EQ(device.permissions(), "rw");
  }
  EXPECT_THAT(nodes,
              UnorderedElementsAre("/dev/dri/by-path/pci-0000:1a:00.0-render",
                                   "/dev/nvidiactl"));
  ASSERT_EQ(answer.cdi_devices_size(), 2);
  EXPECT_EQ(answer.cdi_devices(0).name(), "example.com/gpu=0000:1a:00.0");
  EXPECT_LT(response.ByteSizeLong(), 4u << 20);
}

// nvidia: true: what an NVIDIA container needs, from the driver's
// /proc/driver/nvidia/gpus/<bdf>/information (the fixture writes minors 0-7
// in address order).
TEST_F(ReferencePluginTest, NvidiaGpusGetMinorNodesUuidsAndCdiNames) {
  StartPlugin("    nvidia: true\n");
  v1beta1::AllocateRequest request;
  auto* container = request.add_container_requests();
  container->add_devices_ids("0000:1a:00.0");
  container->add_devices_ids("0000:1b:00.0");
  grpc::ClientContext context;
  v1beta1::AllocateResponse response;
  ASSERT_TRUE(gpu_->stub().Allocate(&context, request, &response).ok());
  const auto& answer = response.container_responses(0);
  const std::string uuid0 = "GPU-5a0c1d2e-7b3f-4c19-9e8a-00001d2e0000";
  const std::string uuid1 = "GPU-5a0c1d2e-7b3f-4c19-9e8a-00001d2e0001";
  EXPECT_EQ(answer.envs().at("NVIDIA_VISIBLE_DEVICES"), uuid0 + "," + uuid1);
  std::vector<std::string> nodes;
  for (const auto& node : answer.devices()) {
    EXPECT_EQ(node.host_path(), node.container_path());
    EXPECT_EQ(node.permissions(), "rw");
    nodes.push_back(node.host_path());
  }
  EXPECT_THAT(nodes, UnorderedElementsAre("/dev/nvidia0", "/dev/nvidia1",
                                          "/dev/nvidiactl", "/dev/nvidia-uvm",
                                          "/dev/nvidia-uvm-tools"));
  // No spec on the node defines their CDI names: none is returned (see
  // NvidiaCdiNamesOnlyWhenTheNodeDefinesThem).
  EXPECT_EQ(answer.cdi_devices_size(), 0);

  // A GPU whose driver entry is gone: refused, naming the file.
  std::filesystem::remove_all(root_.path() /
                              "proc/driver/nvidia/gpus/0000:1b:00.0");
  grpc::ClientContext again;
  const grpc::Status status = gpu_->stub().Allocate(&again, request, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_THAT(status.error_message(),
              HasSubstr("proc/driver/nvidia/gpus/0000:1b:00.0/information"));
}

// Two GPUs whose driver entries give the same Device Minor, a UUID given
// to two GPUs: each of them is advertised Unhealthy with the reason and
// refused at Allocate; never two GPUs with one /dev/nvidia<minor> or UUID.
TEST_F(ReferencePluginTest, NvidiaGpusSharingAMinorOrUuidAreRefused) {
  const auto information = [&](const char* address) {
    return root_.path() / "proc/driver/nvidia/gpus" / address / "information";
  };
  const auto rewrite = [&](const char* address, const std::string& from,
                           const std::string& to) {
    std::ifstream in(information(address));
    std::string text((std::istreambuf_iterator<char>(in)), {});
    const size_t at = text.find(from);
    ASSERT_NE(at, std::string::npos) << text;
    text.replace(at, from.size(), to);
    std::ofstream(information(address), std::ios::trunc) << text;
  };
  // 1b takes 1a's minor; 3e takes 3d's UUID.
  rewrite("0000:1b:00.0", "Device Minor: \t 1", "Device Minor: \t 0");
  rewrite("0000:3e:00.0", "00001d2e0003", "00001d2e0002");
  StartPlugin("    nvidia: true\n");
  auto latest = gpu_->latest();
  ASSERT_TRUE(latest);
  for (const char* id :
       {"0000:1a:00.0", "0000:1b:00.0", "0000:3d:00.0", "0000:3e:00.0"}) {
    EXPECT_EQ(HealthOf(*latest, id), "Unhealthy") << id;
  }
  EXPECT_EQ(HealthOf(*latest, "0000:9a:00.0"), "Healthy");
  const std::string matches = plugin_->DescribeMatches();
  EXPECT_THAT(matches, HasSubstr("Unhealthy (the NVIDIA driver gives Device "
                                 "Minor 0 (/dev/nvidia0) to this GPU and to "
                                 "0000:1b:00.0)"));
  EXPECT_THAT(matches, HasSubstr("GPU UUID GPU-5a0c1d2e-7b3f-4c19-9e8a-"
                                 "00001d2e0002 to this GPU and to "
                                 "0000:3d:00.0"));
  for (const char* id : {"0000:1a:00.0", "0000:3e:00.0"}) {
    v1beta1::AllocateRequest request;
    request.add_container_requests()->add_devices_ids(id);
    grpc::ClientContext context;
    v1beta1::AllocateResponse response;
    const grpc::Status status =
        gpu_->stub().Allocate(&context, request, &response);
    EXPECT_FALSE(status.ok()) << id;
    EXPECT_THAT(status.error_message(), HasSubstr("unhealthy"));
  }
  // Fixed in the driver's files: Healthy again at the next rescan.
  rewrite("0000:1b:00.0", "Device Minor: \t 0", "Device Minor: \t 1");
  ASSERT_THAT(plugin_->Rescan(), IsOk());
  EXPECT_TRUE(WaitForList(
      [](const auto& list) {
        return HealthOf(list, "0000:1a:00.0") == "Healthy" &&
               HealthOf(list, "0000:1b:00.0") == "Healthy" &&
               HealthOf(list, "0000:3e:00.0") == "Unhealthy";
      },
      2s));
}

// Without the host's /proc/driver/nvidia under the host root, every GPU
// would fail at Allocate: they are advertised Unhealthy with the reason,
// and --print-matches says why.
TEST_F(ReferencePluginTest, NvidiaWithoutTheDriversProcIsSaidAtStart) {
  std::filesystem::remove_all(root_.path() / "proc/driver/nvidia");
  StartPlugin("    nvidia: true\n");
  auto latest = gpu_->latest();
  ASSERT_TRUE(latest);
  ASSERT_EQ(latest->devices_size(), 8);
  for (const auto& device : latest->devices()) {
    EXPECT_EQ(device.health(), "Unhealthy") << device.id();
  }
  EXPECT_THAT(plugin_->DescribeMatches(),
              HasSubstr("proc/driver/nvidia is not there: the NVIDIA driver "
                        "is not loaded, or the host's /proc/driver/nvidia is "
                        "not mounted"));
}

TEST_F(ReferencePluginTest, VfioDevicesGetTheirGroupNodes) {
  // Rebind one GPU to vfio-pci with IOMMU group 42.
  const auto dir = DeviceDir("0000:9a:00.0");
  std::filesystem::create_directories(root_.path() /
                                      "sys/bus/pci/drivers/vfio-pci");
  std::filesystem::create_directories(root_.path() /
                                      "sys/kernel/iommu_groups/42");
  std::filesystem::remove(dir / "driver");
  std::filesystem::create_directory_symlink(
      std::filesystem::relative(root_.path() / "sys/bus/pci/drivers/vfio-pci",
                                dir),
      dir / "driver");
  std::filesystem::remove(dir / "iommu_group");
  std::filesystem::create_directory_symlink(
      std::filesystem::relative(root_.path() / "sys/kernel/iommu_groups/42",
                                dir),
      dir / "iommu_group");
  StartPlugin();
  v1beta1::AllocateRequest request;
  request.add_container_requests()->add_devices_ids("0000:9a:00.0");
  grpc::ClientContext context;
  v1beta1::AllocateResponse response;
  ASSERT_TRUE(gpu_->stub().Allocate(&context, request, &response).ok());
  std::vector<std::string> nodes;
  for (const auto& device : response.container_responses(0).devices()) {
    nodes.push_back(device.host_path());
  }
  EXPECT_THAT(nodes, UnorderedElementsAre("/dev/vfio/vfio", "/dev/vfio/42"));
}

TEST_F(ReferencePluginTest, P39_UnboundDriverIsUnhealthyThenRecovers) {
  StartPlugin();
  const auto dir = DeviceDir("0000:3d:00.0");
  const auto driver = std::filesystem::read_symlink(dir / "driver");
  std::filesystem::remove(dir / "driver");
  ASSERT_THAT(plugin_->Rescan(), IsOk());
  auto unhealthy = [](const v1beta1::ListAndWatchResponse& list) {
    for (const auto& device : list.devices()) {
      if (device.id() == "0000:3d:00.0") return device.health() == "Unhealthy";
    }
    return false;
  };
  ASSERT_TRUE(WaitForList(unhealthy, Scaled(1s)));
  EXPECT_THAT(NodesById(*gpu_->latest()), SizeIs(8));  // still listed
  v1beta1::AllocateRequest request;
  request.add_container_requests()->add_devices_ids("0000:3d:00.0");
  grpc::ClientContext context;
  v1beta1::AllocateResponse response;
  EXPECT_EQ(gpu_->stub().Allocate(&context, request, &response).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
  // Rebound: healthy only after the quiet period (300 ms here).
  std::filesystem::create_directory_symlink(driver, dir / "driver");
  ASSERT_THAT(plugin_->Rescan(), IsOk());
  EXPECT_TRUE(unhealthy(*gpu_->latest()));
  clock_.Advance(299ms);
  ASSERT_THAT(plugin_->Rescan(), IsOk());
  EXPECT_TRUE(unhealthy(*gpu_->latest()));  // not quiet long enough
  clock_.Advance(1ms);
  ASSERT_THAT(plugin_->Rescan(), IsOk());
  EXPECT_TRUE(
      WaitForList([&](const auto& list) { return !unhealthy(list); }, 1s));
}

TEST_F(ReferencePluginTest, RisingAerCounterIsUnhealthy) {
  const auto dir = DeviceDir("0000:bb:00.0");
  std::ofstream(dir / "aer_dev_fatal") << "DLP 0\nTOTAL_ERR_FATAL 0\n";
  StartPlugin();
  std::ofstream(dir / "aer_dev_fatal") << "DLP 1\nTOTAL_ERR_FATAL 1\n";
  ASSERT_THAT(plugin_->Rescan(), IsOk());
  EXPECT_TRUE(WaitForList(
      [](const auto& list) {
        return HealthOf(list, "0000:bb:00.0") == "Unhealthy";
      },
      1s));
}

TEST_F(ReferencePluginTest, P19_FaultInjectionFlipsOneDevice) {
  StartPlugin();
  ASSERT_THAT(
      plugin_->SetHealthOverride("0000:1b:00.0", plugin::Health::kUnhealthy),
      IsOk());
  ASSERT_TRUE(gpu_->WaitForMessages(2, Scaled(1s)));
  const auto list = *gpu_->latest();
  ASSERT_EQ(list.devices_size(), 8);
  for (const auto& device : list.devices()) {
    EXPECT_EQ(device.health(),
              device.id() == "0000:1b:00.0" ? "Unhealthy" : "Healthy");
  }
  EXPECT_THAT(
      plugin_->SetHealthOverride("0000:00:00.7", plugin::Health::kHealthy),
      StatusIs(StatusCode::kNotFound));
}

TEST_F(ReferencePluginTest, HotPlugRemovalAndReturnWithinASecond) {
  StartPlugin();
  const std::string gone = "0000:9b:00.0";
  const auto link = root_.path() / "sys/bus/pci/devices" / gone;
  const auto dir = DeviceDir(gone);
  const auto parked = root_.path() / "parked";
  const auto link_target = std::filesystem::read_symlink(link);
  std::filesystem::rename(dir, parked);
  std::filesystem::remove(link);
  const auto removed = std::chrono::steady_clock::now();
  plugin_->NotifyUevent("remove", "/devices/pci0000:97/0000:97:01.0/" + gone);
  clock_.Advance(50ms);  // the debounce
  ASSERT_TRUE(WaitForList(
      [&](const auto& list) { return list.devices_size() == 7; }, 1s));
  EXPECT_LT(std::chrono::steady_clock::now() - removed, 1s);
  EXPECT_FALSE(NodesById(*gpu_->latest()).contains(gone));
  // Back again.
  std::filesystem::rename(parked, dir);
  std::filesystem::create_directory_symlink(link_target, link);
  plugin_->NotifyUevent("add", "/devices/pci0000:97/0000:97:01.0/" + gone);
  clock_.Advance(50ms);  // the debounce
  ASSERT_TRUE(WaitForList(
      [&](const auto& list) { return list.devices_size() == 8; }, 1s));
  EXPECT_THAT(NodesById(*gpu_->latest()).at(gone), ElementsAre(1));
}

TEST_F(ReferencePluginTest, PeriodicRescanFindsChangesWithoutUevents) {
  auto config = ParseConfig(
      "resources: [{name: example.com/gpu, selectors: [{vendors: "
      "[\"10de\"]}]}]",
      "t");
  PluginOptions options;
  options.config = *config;
  options.host_root = root_.path();
  options.runner.plugin_dir = plugins_.path();
  options.rescan_interval = 100ms;
  options.watch_uevents = false;
  auto plugin = TopologyDevicePlugin::Create(std::move(options));
  ASSERT_THAT(plugin.status(), IsOk());
  ASSERT_THAT((*plugin)->Start(), IsOk());
  gpu_ = kubelet_.WaitForConnection(kGpu, 10s);
  ASSERT_NE(gpu_, nullptr);
  ASSERT_TRUE(gpu_->WaitForMessages(1, Scaled(2s)));
  std::filesystem::remove(DeviceDir("0000:1a:00.0") / "driver");
  EXPECT_TRUE(WaitForList(
      [](const auto& list) {
        return list.devices(0).id() == "0000:1a:00.0" &&
               list.devices(0).health() == "Unhealthy";
      },
      2s));
  (*plugin)->Stop();
}

// The reconcile reads the AER counters and nothing else: a rising counter
// is seen, a device removed without a uevent is not (that is the uevent's
// job), and the reconcile publishes nothing when no verdict changed.
TEST_F(ReferencePluginTest, ReconcileRereadsOnlyAerCounters) {
  const auto dir = DeviceDir("0000:bb:00.0");
  std::ofstream(dir / "aer_dev_fatal") << "DLP 0\nTOTAL_ERR_FATAL 0\n";
  StartPlugin();
  const size_t lists = gpu_->messages().size();
  ASSERT_THAT(plugin_->Reconcile(), IsOk());
  // Nothing changed, nothing sent: the next list on the stream is the next
  // change.
  ASSERT_THAT(
      plugin_->SetHealthOverride("0000:1a:00.0", plugin::Health::kUnhealthy),
      IsOk());
  ASSERT_TRUE(gpu_->WaitForMessages(lists + 1, Scaled(2s)));
  EXPECT_EQ(gpu_->messages().size(), lists + 1);
  EXPECT_EQ(HealthOf(gpu_->messages().back().response, "0000:1a:00.0"),
            "Unhealthy");
  ASSERT_THAT(plugin_->SetHealthOverride("0000:1a:00.0", std::nullopt), IsOk());
  ASSERT_TRUE(gpu_->WaitForMessages(lists + 2, Scaled(2s)));
  // Gone without a uevent, and another device's driver unbound: neither is
  // read by a reconcile.
  const auto parked = root_.path() / "parked";
  std::filesystem::rename(DeviceDir("0000:9b:00.0"), parked);
  std::filesystem::remove(DeviceDir("0000:1a:00.0") / "driver");
  std::ofstream(dir / "aer_dev_fatal") << "DLP 3\nTOTAL_ERR_FATAL 3\n";
  ASSERT_THAT(plugin_->Reconcile(), IsOk());
  ASSERT_TRUE(WaitForList(
      [](const auto& list) {
        return HealthOf(list, "0000:bb:00.0") == "Unhealthy";
      },
      1s));
  const v1beta1::ListAndWatchResponse sent = *gpu_->latest();
  EXPECT_THAT(NodesById(sent), SizeIs(8));
  for (const auto& device : sent.devices()) {
    EXPECT_EQ(device.health(),
              device.id() == "0000:bb:00.0" ? "Unhealthy" : "Healthy")
        << device.id();
  }
  // Quiet again: healthy after the recovery period, found by a reconcile.
  clock_.Advance(300ms);
  ASSERT_THAT(plugin_->Reconcile(), IsOk());
  EXPECT_TRUE(WaitForList(
      [](const auto& list) {
        return HealthOf(list, "0000:bb:00.0") == "Healthy";
      },
      1s));
  // A uevent makes the next pass a full rescan.
  plugin_->NotifyUevent("remove",
                        "/devices/pci0000:97/0000:97:01.0/0000:9b:00.0");
  clock_.Advance(50ms);  // the debounce
  EXPECT_TRUE(WaitForList(
      [](const auto& list) { return list.devices_size() == 7; }, 1s));
}

// A local user holding many idle connections to /metrics: the plugin keeps
// at most 64 of them open (its descriptors are for its rescans), and
// answers again as soon as they go.
TEST_F(ReferencePluginTest, IdleHttpConnectionsAreBounded) {
  StartPlugin();
  auto http = HttpEndpoint::Start(
      "127.0.0.1:0", {.health_problem = [] { return std::string(); },
                      .metrics = [] { return std::string("x 1\n"); }});
  ASSERT_THAT(http.status(), IsOk());
  const int port = (*http)->port();
  const auto count_fds = [] {
    size_t n = 0;
    for ([[maybe_unused]] const auto& entry :
         std::filesystem::directory_iterator("/proc/self/fd")) {
      ++n;
    }
    return n;
  };
  const size_t before = count_fds();
  std::vector<int> idle;
  for (int i = 0; i < 300; ++i) {
    const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_port = htons(static_cast<uint16_t>(port));
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) ==
        0) {
      idle.push_back(fd);
    } else {
      close(fd);
    }
  }
  // The plugin accepts each and closes the oldest beyond 64: the client
  // sees all but 64 of its connections closed.
  const auto closed_by_the_plugin = [&] {
    size_t closed = 0;
    for (int fd : idle) {
      char byte = 0;
      const ssize_t n = recv(fd, &byte, 1, MSG_DONTWAIT | MSG_PEEK);
      if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK)) {
        ++closed;
      }
    }
    return closed;
  };
  EXPECT_TRUE(WaitFor([&] {
    return closed_by_the_plugin() + 64 >= idle.size();
  })) << closed_by_the_plugin()
      << " of " << idle.size() << " closed";
  // Ours: 300 client ends; the server side holds at most 64 more.
  EXPECT_LE(count_fds(), before + idle.size() + 64 + 8);
  for (int fd : idle) close(fd);
  EXPECT_TRUE(WaitFor([&] {
    auto metrics = HttpGet(port, "/metrics");
    return metrics.ok() && metrics->first == 200;
  }));
}

TEST_F(ReferencePluginTest, MetricsAndHealthz) {
  StartPlugin();
  (void)Preferred(AllGpus(), {}, 2);
  auto http = HttpEndpoint::Start(
      "127.0.0.1:0",
      {.health_problem = [&] { return plugin_->HealthProblem(); },
       .readiness_problem = [&] { return plugin_->ReadinessProblem(); },
       .metrics = [&] { return plugin_->MetricsText(); }});
  ASSERT_THAT(http.status(), IsOk());
  const int port = (*http)->port();
  auto health = HttpGet(port, "/healthz");
  ASSERT_THAT(health.status(), IsOk());
  EXPECT_EQ(health->first, 200);
  // Ready once both resources' Register calls have returned (the kubelet
  // sees the GPU stream before the plugin sees the reply).
  (void)testing::WaitFor([&] { return plugin_->ReadinessProblem().empty(); },
                         10s);
  auto ready = HttpGet(port, "/readyz");
  ASSERT_THAT(ready.status(), IsOk());
  EXPECT_EQ(ready->first, 200) << ready->second;
  auto metrics = HttpGet(port, "/metrics");
  ASSERT_THAT(metrics.status(), IsOk());
  const std::string& body = metrics->second;
  EXPECT_THAT(body, HasSubstr("topology_device_plugin_build_info{version=\"" +
                              plugin_->options().version +
                              "\",api_version=\"v1beta1\"} 1"));
  EXPECT_THAT(body, HasSubstr("topology_device_plugin_registered{resource=\""
                              "example.com/gpu\"} 1"));
  EXPECT_THAT(body,
              HasSubstr("topology_device_plugin_devices{resource=\"example.com/"
                        "gpu\",health=\"Healthy\"} 8"));
  EXPECT_THAT(body,
              HasSubstr("topology_device_plugin_registrations_total{resource="
                        "\"example.com/gpu\"} 1"));
  EXPECT_THAT(
      body,
      HasSubstr("topology_device_plugin_preferred_allocation_seconds_count{"
                "resource=\"example.com/gpu\"} 1"));
  for (const char* bad : {"nonsense", ":", "127.0.0.1:", "127.0.0.1:99999",
                          "localhost:80", "1.2.3:4", ":http"}) {
    EXPECT_THAT(HttpEndpoint::Start(bad, {}).status(),
                StatusIs(StatusCode::kInvalidArgument, HasSubstr("host:port")))
        << bad;
  }
  EXPECT_THAT(
      HttpEndpoint::Start("127.0.0.1:" + std::to_string(port), {}).status(),
      StatusIs(StatusCode::kUnavailable));
  // Go's ":port" (as the kubelet's own flags): every address.
  auto any = HttpEndpoint::Start(
      ":0", {.health_problem = [] { return std::string(); },
             .metrics = [] { return std::string("up 1\n"); }});
  ASSERT_THAT(any.status(), IsOk());
  auto via_loopback = HttpGet((*any)->port(), "/healthz");
  ASSERT_THAT(via_loopback.status(), IsOk());
  EXPECT_EQ(via_loopback->first, 200);
  plugin_->Stop();
  auto stopped = HttpGet(port, "/healthz");
  ASSERT_THAT(stopped.status(), IsOk());
  EXPECT_EQ(stopped->first, 503);
  auto not_ready = HttpGet(port, "/readyz");
  ASSERT_THAT(not_ready.status(), IsOk());
  EXPECT_EQ(not_ready->first, 503);
  EXPECT_EQ(HttpGet(port, "/nope")->first, 404);
}

TEST_F(ReferencePluginTest, DescribeMatches) {
  StartPlugin();
  const std::string text = plugin_->DescribeMatches();
  EXPECT_THAT(text, HasSubstr("example.com/gpu: 8 device(s)"));
  EXPECT_THAT(text, HasSubstr("0000:1a:00.0  10de:20b0 class 030200  driver "
                              "nvidia  numa 0  Healthy"));
  EXPECT_THAT(text, HasSubstr("example.com/nic: 4 device(s)"));
  EXPECT_THAT(text, HasSubstr("unclaimed: 0 non-bridge PCI function(s)"));
}

// Readiness waits for the kubelet: serving but refused is alive, not ready.
TEST_F(ReferencePluginTest, ReadyOnlyOnceRegisteredWithTheKubelet) {
  kubelet_.SetDenial(grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                                  "Unsupported device plugin version"));
  auto config = ParseConfig(
      "resources:\n"
      "  - name: example.com/gpu\n"
      "    selectors: [{vendors: [\"10de\"]}]\n",
      "test");
  ASSERT_THAT(config.status(), IsOk());
  auto plugin = TopologyDevicePlugin::Create(Options(*config));
  ASSERT_THAT(plugin.status(), IsOk());
  EXPECT_EQ((*plugin)->ReadinessProblem(), "not serving");
  ASSERT_THAT((*plugin)->Start(), IsOk());
  EXPECT_EQ((*plugin)->HealthProblem(), "");
  EXPECT_EQ((*plugin)->ReadinessProblem(),
            "example.com/gpu is not registered with the kubelet");
  kubelet_.SetDenial(std::nullopt);
  (void)testing::WaitFor([&] { return (*plugin)->ReadinessProblem().empty(); },
                         10s);
  EXPECT_EQ((*plugin)->ReadinessProblem(), "");
  (*plugin)->Stop();
}

// --print-matches lists what no resource claims, and says when a pfNames
// entry names no interface (it would silently match nothing).
TEST_F(ReferencePluginTest, DescribeMatchesListsUnclaimedAndUnknownPfNames) {
  auto config = ParseConfig(
      "resources:\n"
      "  - name: example.com/gpu\n"
      "    selectors:\n"
      "      - {vendors: [\"10de\"], classes: [\"0302\"]}\n"
      "      - {pfNames: [\"ens9f0\"]}\n",
      "test");
  ASSERT_THAT(config.status(), IsOk());
  auto plugin = TopologyDevicePlugin::Create(Options(*config));
  ASSERT_THAT(plugin.status(), IsOk());
  const std::string text = (*plugin)->DescribeMatches();
  EXPECT_THAT(text, HasSubstr("unclaimed: 4 non-bridge PCI function(s)"));
  EXPECT_THAT(text, HasSubstr("0000:1c:00.0  15b3:101d class 020000  driver "
                              "mlx5_core  numa 0"));
  EXPECT_THAT(text, HasSubstr("warning: resources[0].selectors[1].pfNames[0]: "
                              "ens9f0 is not a network interface of any PCI "
                              "function"));
}

}  // namespace
}  // namespace topology::device_plugin
