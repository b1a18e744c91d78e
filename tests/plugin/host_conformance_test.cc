// Part K of the device plugin conformance checklist: the host-side module
// (the kubelet's side) against programmable fake plugins over real unix
// sockets. Test names carry the checklist number (K01 = item 1).
#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <future>
#include <set>
#include <thread>
#include <utility>

#include <signal.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "topology/common/pod_fingerprint.h"
#include "topology/discovery.h"
#include "topology/testing/fake_clock.h"

#include "checkpoint_store.h"
#include "fake_plugin.h"
#include "gate.h"
#include "host_manager.h"
#include "host_start.h"
#include "pod_manifest.h"
#include "socket_util.h"
#include "status_matchers.h"
#include "synthetic_machines.h"
#include "temp_dir.h"
#include "time_scale.h"
#include "topologymanager/v1alpha1/control.grpc.pb.h"
#include "wait_for.h"

namespace topology::host {
namespace {

using namespace std::chrono_literals;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::SizeIs;
using ::topology::testing::FakePlugin;
using ::topology::testing::Gate;
using ::topology::testing::IsOk;
using ::topology::testing::MakeDeadSocket;
using ::topology::testing::MakeDevice;
using ::topology::testing::Scaled;
using ::topology::testing::StatusIs;

constexpr char kGpu[] = "example.com/gpu";

manager::Pod MakePod(
    const std::string& name,
    const std::vector<std::pair<std::string, int64_t>>& limits,
    const std::vector<std::pair<std::string, int64_t>>& init = {}) {
  manager::Pod pod;
  pod.name = name;
  pod.uid = "uid-" + name;
  manager::Container main;
  main.name = "main";
  for (auto& [resource, count] : limits) main.limits[resource] = count;
  pod.containers.push_back(main);
  if (!init.empty()) {
    manager::Container first;
    first.name = "init";
    for (auto& [resource, count] : init) first.limits[resource] = count;
    pod.init_containers.push_back(first);
  }
  return pod;
}

// Four GPUs, two per NUMA node.
std::vector<v1beta1::Device> FourGpus() {
  return {MakeDevice("gpu-0", {0}), MakeDevice("gpu-1", {0}),
          MakeDevice("gpu-2", {1}), MakeDevice("gpu-3", {1})};
}

class HostTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(testing::WriteMachine("dual-socket-8gpu", root_.path()));
    DiscoveryOptions options;
    options.host_root = root_.path();
    auto topology = Discover(options);
    ASSERT_THAT(topology.status(), IsOk());
    topology_ = std::move(*topology);
  }

  HostConfig Config() const {
    HostConfig config;
    config.plugin_dir = dir();
    config.control_socket.clear();
    config.node_name = "test-node";
    config.grace_period = 500ms;
    config.dial_timeout = 1s;
    return config;
  }

  void StartHost(HostConfig config) {
    auto host = HostManager::Create(std::move(config), topology_);
    ASSERT_THAT(host.status(), IsOk());
    host_ = std::move(*host);
    ASSERT_THAT(testing::StartHost(*host_), IsOk());
  }
  void StartHost() { StartHost(Config()); }

  // A started, registered fake plugin with `devices`.
  std::unique_ptr<FakePlugin> Plugin(const std::string& endpoint,
                                     std::vector<v1beta1::Device> devices,
                                     v1beta1::DevicePluginOptions options = {},
                                     const std::string& resource = kGpu) {
    auto plugin = std::make_unique<FakePlugin>(dir(), resource, endpoint);
    plugin->SetOptions(std::move(options));
    plugin->SetDevices(std::move(devices));
    plugin->Start();
    EXPECT_TRUE(plugin->Register().ok());
    return plugin;
  }

  // Conditions here are met within milliseconds; two seconds fail fast.
  template <typename Predicate>
  static bool WaitFor(Predicate predicate,
                      std::chrono::milliseconds timeout = 2s) {
    return ::topology::testing::WaitFor(predicate, timeout);
  }

  HostManager::ResourceView View(const std::string& resource = kGpu) const {
    auto resources = host_->Resources();
    auto it = resources.find(resource);
    return it == resources.end() ? HostManager::ResourceView{} : it->second;
  }
  bool Has(const std::string& resource = kGpu) const {
    return host_->Resources().contains(resource);
  }

  std::filesystem::path dir() const { return dir_.path() / "device-plugins"; }

  // The checkpoint snapshot on disk (after a Stop, which compacts into it),
  // read and written whole.
  StatusOr<Checkpoint> ReadCheckpoint() const {
    std::ifstream in(dir() / kCheckpointFile);
    return DecodeCheckpoint(
        std::string(std::istreambuf_iterator<char>(in), {}));
  }
  void WriteCheckpoint(const Checkpoint& checkpoint) const {
    std::ofstream(dir() / kCheckpointFile, std::ios::trunc)
        << EncodeCheckpoint(checkpoint);
  }

  // A crash: the checkpoint's files as they are now come back after the
  // host and `plugin` have stopped (whatever a clean stop wrote), and the
  // host starts again on them.
  void CrashAndRestart(FakePlugin& plugin) {
    const auto saved = dir_.path() / "saved";
    std::filesystem::remove_all(saved);
    std::filesystem::create_directories(saved);
    const std::filesystem::path snapshot = dir() / kCheckpointFile;
    const std::filesystem::path journal =
        dir() / (std::string(kCheckpointFile) + ".journal");
    std::filesystem::copy_file(snapshot, saved / "snapshot");
    std::filesystem::copy_file(journal, saved / "journal");
    host_->Stop();
    host_.reset();
    plugin.Stop();
    std::filesystem::copy_file(
        saved / "snapshot", snapshot,
        std::filesystem::copy_options::overwrite_existing);
    std::filesystem::copy_file(
        saved / "journal", journal,
        std::filesystem::copy_options::overwrite_existing);
    StartHost();
  }

  testing::TempDir root_;
  testing::TempDir dir_;
  Topology topology_;
  // Time for tests that set config.clock = &clock_: they advance it rather
  // than sleep through a grace period. Outlives the host.
  topology::testing::FakeClock clock_;
  std::unique_ptr<HostManager> host_;
};

// --- K.a Registration server ----------------------------------------------

TEST_F(HostTest, K01_K46_StartRemovesOnlySocketsAndServesKubeletSock) {
  std::filesystem::create_directories(dir() / "subdir");
  std::ofstream(dir() / "regular-file") << "x";
  std::ofstream(dir() / "kubelet_internal_checkpoint") << "{}";
  MakeDeadSocket(dir() / "old-plugin.sock");
  MakeDeadSocket(dir() / "kubelet.sock");  // stale
  StartHost();
  EXPECT_TRUE(std::filesystem::exists(dir() / "subdir"));
  EXPECT_TRUE(std::filesystem::exists(dir() / "regular-file"));
  EXPECT_TRUE(std::filesystem::exists(dir() / "kubelet_internal_checkpoint"));
  EXPECT_FALSE(std::filesystem::exists(dir() / "old-plugin.sock"));
  struct stat info {};
  ASSERT_EQ(stat(dir().c_str(), &info), 0);
  EXPECT_EQ(info.st_mode & 0777, 0750u);
  auto plugin = Plugin("a.sock", FourGpus());  // kubelet.sock answers
  EXPECT_TRUE(WaitFor([&] { return View().capacity == 4; }));
}

TEST_F(HostTest, K02_RegisterAnswersAfterReadingOptions) {
  StartHost();
  FakePlugin plugin(dir(), kGpu, "a.sock");
  plugin.SetDevices(FourGpus());
  plugin.Start();
  ASSERT_TRUE(plugin.Register().ok());
  EXPECT_EQ(plugin.options_calls(), 1);  // before Register returned
}

TEST_F(HostTest, K03_BadVersionsAreRefusedWithoutDialling) {
  StartHost();
  FakePlugin plugin(dir(), kGpu, "a.sock");
  plugin.Start();
  for (const char* version : {"", "v1alpha", "V1BETA1", "v1"}) {
    const grpc::Status status = plugin.Register(version);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::UNKNOWN);
    EXPECT_EQ(status.error_message(),
              "requested API version \"" + std::string(version) +
                  "\" is not supported by kubelet. Supported version is "
                  "[\"v1beta1\"]");
  }
  EXPECT_EQ(plugin.options_calls(), 0);
}

TEST_F(HostTest, K04_ResourceNames) {
  StartHost();
  FakePlugin plugin(dir(), kGpu, "a.sock");
  plugin.Start();
  const std::string long_name = "example.com/" + std::string(64, 'a');
  const std::string long_domain = std::string(245, 'a') + "/x";
  for (const std::string& name :
       {std::string("foo"), std::string("example.com/"), std::string("/foo"),
        std::string("Example.com/foo"), std::string("example.com/a/b"),
        std::string("kubernetes.io/foo"), std::string("x.kubernetes.io/foo"),
        std::string("requests.example.com/foo"),
        std::string("example.com/-foo"), long_name, long_domain}) {
    const grpc::Status status = plugin.Register(std::nullopt, name);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::UNKNOWN) << name;
    EXPECT_EQ(status.error_message(),
              "the ResourceName \"" + name + "\" is invalid");
  }
  EXPECT_EQ(plugin.options_calls(), 0);
  for (const char* name :
       {"example.com/foo", "example.com/Foo_1.x", "a.b-c.d/e"}) {
    EXPECT_TRUE(plugin.Register(std::nullopt, std::string(name)).ok()) << name;
  }
}

TEST_F(HostTest, K05_EndpointsOutsideTheDirectoryAreRefused) {
  StartHost();
  FakePlugin plugin(dir(), kGpu, "a.sock");
  plugin.Start();
  for (const char* endpoint :
       {"../x.sock", "sub/x.sock", "/abs/x.sock", "", "kubelet.sock"}) {
    EXPECT_EQ(plugin.Register(std::nullopt, std::nullopt, std::string(endpoint))
                  .error_code(),
              grpc::StatusCode::UNKNOWN)
        << endpoint;
  }
  EXPECT_EQ(plugin.options_calls(), 0);
}

TEST_F(HostTest, K06_MissingEndpointFailsToDial) {
  StartHost();
  FakePlugin plugin(dir(), kGpu, "absent.sock");  // never started
  const grpc::Status status = plugin.Register();
  EXPECT_EQ(status.error_code(), grpc::StatusCode::UNKNOWN);
  EXPECT_THAT(status.error_message(),
              HasSubstr("failed to dial device plugin"));
  EXPECT_FALSE(Has());
}

TEST_F(HostTest, K07_OptionsErrorFailsRegister) {
  StartHost();
  FakePlugin plugin(dir(), kGpu, "a.sock");
  plugin.SetOptionsError(grpc::Status(grpc::StatusCode::INTERNAL, "boom"));
  plugin.Start();
  const grpc::Status status = plugin.Register();
  EXPECT_THAT(status.error_message(),
              HasSubstr("failed to get device plugin options: boom"));
  EXPECT_FALSE(Has());
}

TEST_F(HostTest, K08_K29_OptionsFromGetDevicePluginOptionsCount) {
  StartHost();
  FakePlugin plugin(dir(), kGpu, "a.sock");
  v1beta1::DevicePluginOptions in_register;
  in_register.set_get_preferred_allocation_available(true);
  plugin.SetRegisterOptions(in_register);             // A
  plugin.SetOptions(v1beta1::DevicePluginOptions());  // B: no GPA
  plugin.SetDevices(FourGpus());
  plugin.Start();
  ASSERT_TRUE(plugin.Register().ok());
  ASSERT_TRUE(WaitFor([&] { return View().allocatable == 4; }));
  // 1 of 4 (aligned 2 > 1 needed) would call GPA if it were enabled.
  EXPECT_TRUE(host_->Admit(MakePod("p", {{kGpu, 1}}), false).admitted);
  EXPECT_THAT(plugin.preferred_requests(), SizeIs(0));
  EXPECT_THAT(plugin.allocate_requests(), SizeIs(1));
}

TEST_F(HostTest, K09_OneStreamPerConnectionAndNoRedial) {
  auto config = Config();
  config.clock = &clock_;
  StartHost(config);
  auto plugin = Plugin("a.sock", FourGpus());
  ASSERT_TRUE(WaitFor([&] { return View().capacity == 4; }));
  EXPECT_EQ(plugin->stream_opens(), 1);
  plugin->EndStreams(grpc::Status::OK);
  // The stream's end is handled where a redial would be made, and no timer
  // short of the grace period makes one.
  ASSERT_TRUE(WaitFor([&] { return View().stopped; }));
  ASSERT_TRUE(clock_.AdvanceAndLetWaitersLook(config.grace_period - 1ms));
  EXPECT_EQ(plugin->stream_opens(), 1);
  EXPECT_EQ(plugin->options_calls(), 1);
}

TEST_F(HostTest, K10_K11_TakeoverNewestRegistrationWins) {
  StartHost();
  auto first = Plugin("a.sock", FourGpus());
  ASSERT_TRUE(WaitFor([&] { return View().capacity == 4; }));
  auto second = Plugin("b.sock", {MakeDevice("gpu-9", {0})});
  ASSERT_TRUE(WaitFor([&] { return View().capacity == 1; }));
  EXPECT_THAT(View().endpoint, HasSubstr("b.sock"));
  // The old plugin's late messages and its exit change nothing (Stop
  // returns once its streams have ended).
  first->SetDevices(FourGpus());
  first->Stop();
  EXPECT_EQ(View().capacity, 1u);
  EXPECT_EQ(View().allocatable, 1u);
  EXPECT_FALSE(View().stopped);
  // The same (resource, socket) again: the new connection replaces the old.
  ASSERT_TRUE(second->Register().ok());
  second->SetDevices({MakeDevice("gpu-9", {0}), MakeDevice("gpu-8", {1})});
  EXPECT_TRUE(WaitFor([&] { return View().capacity == 2; }));
  EXPECT_EQ(second->stream_opens(), 2);
}

TEST_F(HostTest, K12_TwentyResourcesConcurrently) {
  StartHost();
  std::vector<std::unique_ptr<FakePlugin>> plugins;
  for (int i = 0; i < 20; ++i) {
    plugins.push_back(
        std::make_unique<FakePlugin>(dir(), "example.com/r" + std::to_string(i),
                                     "p" + std::to_string(i) + ".sock"));
    std::vector<v1beta1::Device> devices;
    for (int d = 0; d <= i; ++d)
      devices.push_back(MakeDevice("d" + std::to_string(d), {d % 2}));
    plugins.back()->SetDevices(devices);
    plugins.back()->Start();
  }
  std::vector<std::future<bool>> results;
  results.reserve(plugins.size());
  for (auto& plugin : plugins) {
    results.push_back(std::async(
        std::launch::async, [&plugin] { return plugin->Register().ok(); }));
  }
  for (auto& result : results) EXPECT_TRUE(result.get());
  for (int i = 0; i < 20; ++i) {
    const std::string name = "example.com/r" + std::to_string(i);
    EXPECT_TRUE(WaitFor([&] {
      return View(name).capacity == static_cast<size_t>(i + 1);
    })) << name;
  }
}

// --- K.b ListAndWatch consumption and health -------------------------------

TEST_F(HostTest, K13_K14_K16_K17_EachListReplacesTheLast) {
  StartHost();
  auto plugin = Plugin("a.sock", FourGpus());
  ASSERT_TRUE(
      WaitFor([&] { return View().capacity == 4 && View().allocatable == 4; }));
  plugin->SetDevices(
      {MakeDevice("gpu-0", {0}), MakeDevice("gpu-1", {0}, "healthy"),
       MakeDevice("gpu-2", {1}, ""), MakeDevice("gpu-3", {1}, "bogus")});
  EXPECT_TRUE(
      WaitFor([&] { return View().capacity == 4 && View().allocatable == 1; }));
  // Duplicates count once, the last entry wins.
  plugin->SetDevices({MakeDevice("gpu-0", {0}, "Unhealthy"),
                      MakeDevice("gpu-0", {0}), MakeDevice("gpu-1", {0})});
  EXPECT_TRUE(
      WaitFor([&] { return View().capacity == 2 && View().allocatable == 2; }));
  plugin->SetDevices({});
  EXPECT_TRUE(WaitFor([&] { return View().capacity == 0; }));
  EXPECT_TRUE(Has());
  EXPECT_FALSE(View().stopped);
}

TEST_F(HostTest, K15_DroppedDeviceStaysWithItsPod) {
  StartHost();
  auto plugin = Plugin("a.sock", FourGpus());
  ASSERT_TRUE(WaitFor([&] { return View().allocatable == 4; }));
  const PodResult pod = host_->Admit(MakePod("p", {{kGpu, 1}}), false);
  ASSERT_TRUE(pod.admitted);
  const std::string held = pod.containers[0].devices.at(kGpu)[0];
  std::vector<v1beta1::Device> rest;
  for (const auto& device : FourGpus()) {
    if (device.id() != held) rest.push_back(device);
  }
  plugin->SetDevices(rest);
  ASSERT_TRUE(WaitFor([&] { return View().capacity == 3; }));
  const auto status = host_->StatusJson();
  EXPECT_EQ(status["pods"][0]["containers"][0]["devices"][kGpu][0], held);
}

TEST_F(HostTest, K18_LargeListsAndOversizedMessages) {
  StartHost();
  std::vector<v1beta1::Device> many;
  many.reserve(10000);
  for (int i = 0; i < 10000; ++i) {
    many.push_back(MakeDevice("device-" + std::to_string(i), {i % 2}));
  }
  auto plugin = Plugin("a.sock", many);
  ASSERT_TRUE(WaitFor([&] { return View().capacity == 10000; }, 5s));
  // Over 4 MiB: the stream fails like a disconnect.
  std::vector<v1beta1::Device> huge;
  for (int i = 0; i < 80000; ++i) {
    std::string id = "device-" + std::to_string(i) + "-";
    id.resize(63, 'x');
    huge.push_back(MakeDevice(id, {i % 2}));
  }
  plugin->SetDevices(huge);
  EXPECT_TRUE(
      WaitFor([&] { return View().stopped && View().allocatable == 0; }, 5s));
  EXPECT_EQ(View().capacity, 10000u);
  // The cause, not merely "disconnected": the status names it and the limit.
  const auto status = host_->StatusJson();
  ASSERT_TRUE(status["resources"][0]["problem"].is_string());
  const std::string problem = status["resources"][0]["problem"];
  EXPECT_THAT(problem, HasSubstr("RESOURCE_EXHAUSTED"));
  EXPECT_THAT(problem, HasSubstr("a ListAndWatch message is at most 4 MiB"));
}

// Ids nothing downstream can carry are refused and named; the rest of the
// list counts. A clean list clears the problem.
TEST_F(HostTest, DeviceIdsThatCannotBeCarriedAreRefused) {
  StartHost();
  auto plugin =
      Plugin("a.sock", {MakeDevice("gpu-0", {0}), MakeDevice("", {0}),
                        MakeDevice("gpu\n1", {1}), MakeDevice("gpu-2", {1})});
  ASSERT_TRUE(
      WaitFor([&] { return View().capacity == 2 && View().allocatable == 2; }));
  auto status = host_->StatusJson();
  ASSERT_TRUE(status["resources"][0]["problem"].is_string());
  const std::string problem = status["resources"][0]["problem"];
  EXPECT_THAT(problem, HasSubstr("2 device(s) of the last list refused"));
  EXPECT_THAT(problem, HasSubstr("id \"\" is empty"));
  EXPECT_THAT(problem, HasSubstr("has control characters"));
  // Never allocated: a pod asking for all four gets none of them.
  EXPECT_FALSE(host_->Admit(MakePod("p", {{kGpu, 3}}), false).admitted);
  const PodResult two = host_->Admit(MakePod("q", {{kGpu, 2}}), false);
  ASSERT_TRUE(two.admitted);
  EXPECT_THAT(two.containers[0].devices.at(kGpu),
              ::testing::UnorderedElementsAre("gpu-0", "gpu-2"));
  plugin->SetDevices(FourGpus());
  ASSERT_TRUE(WaitFor([&] { return View().capacity == 4; }));
  EXPECT_TRUE(host_->StatusJson()["resources"][0]["problem"].is_null());
}

TEST_F(HostTest, K19_K20_DisconnectZeroesAllocatableThenGraceThenReturn) {
  auto config = Config();
  config.grace_period = 5min;
  config.clock = &clock_;
  StartHost(config);
  auto plugin = Plugin("a.sock", FourGpus());
  ASSERT_TRUE(WaitFor([&] { return View().allocatable == 4; }));
  const PodResult first = host_->Admit(MakePod("first", {{kGpu, 1}}), false);
  ASSERT_TRUE(first.admitted);
  plugin->EndStreams(grpc::Status(grpc::StatusCode::INTERNAL, "crash"));
  ASSERT_TRUE(WaitFor([&] { return View().stopped; }, Scaled(1s)));
  EXPECT_EQ(View().allocatable, 0u);
  EXPECT_EQ(View().capacity, 4u);
  const PodResult refused = host_->Admit(MakePod("second", {{kGpu, 1}}), false);
  EXPECT_FALSE(refused.admitted);
  EXPECT_THAT(refused.message,
              HasSubstr("no healthy devices present; cannot allocate unhealthy "
                        "devices example.com/gpu"));
  // Back within the grace period (4 of its 5 minutes gone): capacity
  // restored, allocations intact.
  clock_.Advance(4min);
  ASSERT_TRUE(plugin->Register().ok());
  ASSERT_TRUE(
      WaitFor([&] { return View().allocatable == 4 && !View().stopped; }));
  const PodResult third = host_->Admit(MakePod("third", {{kGpu, 3}}), false);
  ASSERT_TRUE(third.admitted) << third.reason << ": " << third.message;
  for (const auto& id : third.containers[0].devices.at(kGpu)) {
    EXPECT_NE(id, first.containers[0].devices.at(kGpu)[0]);
  }
}

TEST_F(HostTest, K19_K42_ResourceRemovedAfterTheGracePeriod) {
  auto config = Config();
  config.grace_period = 5min;
  config.clock = &clock_;
  StartHost(config);
  auto plugin = Plugin("a.sock", FourGpus());
  ASSERT_TRUE(WaitFor([&] { return View().capacity == 4; }));
  plugin->Stop();
  ASSERT_TRUE(WaitFor([&] { return View().stopped; }, Scaled(1s)));
  // A second short of the grace period: still there, however long the
  // collector looks.
  clock_.Advance(5min - 1s);
  EXPECT_FALSE(WaitFor([&] { return !Has(); }, 100ms));
  clock_.Advance(1s);
  EXPECT_TRUE(WaitFor([&] { return !Has(); }, Scaled(2s)));
}

TEST_F(HostTest, K21_CheckpointFollowsEveryListUpdate) {
  StartHost();
  auto plugin = Plugin("a.sock", FourGpus());
  ASSERT_TRUE(WaitFor([&] { return View().allocatable == 4; }));
  // What a restart would restore: the snapshot with the journal replayed.
  auto registered = [&] {
    std::string warning;
    auto checkpoint =
        CheckpointStore(dir() / kCheckpointFile, 1 << 20).Load(&warning);
    if (!checkpoint.ok() || !warning.empty()) return std::string();
    std::string ids;
    for (const auto& id : checkpoint->registered[kGpu]) ids += id + ",";
    return ids;
  };
  ASSERT_TRUE(
      WaitFor([&] { return registered().find("gpu-3") != std::string::npos; }));
  plugin->SetDevices({MakeDevice("gpu-7", {1})});
  EXPECT_TRUE(WaitFor([&] { return registered() == "gpu-7,"; }));
}

// --- K.c Allocation and topology -------------------------------------------

TEST_F(HostTest, K22_K28_OneAllocatePerContainerAndResourceInitFirst) {
  StartHost();
  v1beta1::DevicePluginOptions options;
  options.set_get_preferred_allocation_available(true);
  auto plugin = Plugin("a.sock", FourGpus(), options);
  ASSERT_TRUE(WaitFor([&] { return View().allocatable == 4; }));
  const PodResult pod =
      host_->Admit(MakePod("p", {{kGpu, 2}}, /*init=*/{{kGpu, 1}}), false);
  ASSERT_TRUE(pod.admitted) << pod.message;
  const auto requests = plugin->allocate_requests();
  ASSERT_THAT(requests, SizeIs(2));
  for (const auto& request : requests) {
    EXPECT_EQ(request.container_requests_size(), 1);
  }
  EXPECT_EQ(requests[0].container_requests(0).devices_ids_size(), 1);  // init
  EXPECT_EQ(requests[1].container_requests(0).devices_ids_size(), 2);
  // The init container's device is reused by the app container.
  const std::string init_device =
      requests[0].container_requests(0).devices_ids(0);
  const auto& app = requests[1].container_requests(0).devices_ids();
  EXPECT_NE(std::find(app.begin(), app.end(), init_device), app.end());
  bool must_include_seen = false;
  for (const auto& gpa : plugin->preferred_requests()) {
    for (const auto& id : gpa.container_requests(0).must_include_deviceids()) {
      must_include_seen |= id == init_device;
    }
  }
  EXPECT_TRUE(must_include_seen);
}

TEST_F(HostTest, K23_K24_AllocateFailuresFailAdmissionAndFreeDevices) {
  StartHost();
  auto plugin = Plugin("a.sock", FourGpus());
  ASSERT_TRUE(WaitFor([&] { return View().allocatable == 4; }));
  plugin->SetAllocate(
      [](const v1beta1::AllocateRequest&, v1beta1::AllocateResponse*) {
        return grpc::Status::OK;  // zero container responses
      });
  PodResult pod = host_->Admit(MakePod("empty", {{kGpu, 4}}), false);
  EXPECT_FALSE(pod.admitted);
  EXPECT_THAT(pod.message,
              HasSubstr("no containers return in allocation response"));
  plugin->SetAllocate(
      [](const v1beta1::AllocateRequest&, v1beta1::AllocateResponse*) {
        return grpc::Status(grpc::StatusCode::INTERNAL, "driver busy");
      });
  pod = host_->Admit(MakePod("error", {{kGpu, 4}}), false);
  EXPECT_FALSE(pod.admitted);
  EXPECT_THAT(pod.message, HasSubstr("driver busy"));
  plugin->SetAllocate(nullptr);
  EXPECT_TRUE(host_->Admit(MakePod("ok", {{kGpu, 4}}), false).admitted);
}

TEST_F(HostTest, K25_K26_NotEnoughOrUnhealthyDevices) {
  StartHost();
  auto plugin = Plugin("a.sock", {MakeDevice("gpu-0", {0}),
                                  MakeDevice("gpu-1", {0}, "Unhealthy")});
  ASSERT_TRUE(WaitFor([&] { return View().capacity == 2; }));
  PodResult pod = host_->Admit(MakePod("two", {{kGpu, 2}}), false);
  EXPECT_FALSE(pod.admitted);
  EXPECT_THAT(pod.message,
              HasSubstr("requested number of devices unavailable for "
                        "example.com/gpu. Requested: 2, Available: 1"));
  EXPECT_THAT(plugin->allocate_requests(), SizeIs(0));
  pod = host_->Admit(MakePod("one", {{kGpu, 1}}), false);
  ASSERT_TRUE(pod.admitted);
  EXPECT_THAT(pod.containers[0].devices.at(kGpu), ElementsAre("gpu-0"));
  plugin->SetDevices({MakeDevice("gpu-0", {0}, "Unhealthy")});
  ASSERT_TRUE(WaitFor([&] { return View().allocatable == 0; }));
  pod = host_->Admit(MakePod("none", {{kGpu, 1}}), false);
  EXPECT_THAT(pod.message,
              HasSubstr("no healthy devices present; cannot allocate "
                        "unhealthy devices example.com/gpu"));
}

TEST_F(HostTest, K27_ReadmissionReusesTheAllocation) {
  StartHost();
  auto plugin = Plugin("a.sock", FourGpus());
  ASSERT_TRUE(WaitFor([&] { return View().allocatable == 4; }));
  const PodResult first = host_->Admit(MakePod("p", {{kGpu, 2}}), false);
  const PodResult again = host_->Admit(MakePod("p", {{kGpu, 2}}), false);
  EXPECT_EQ(first.containers[0].devices, again.containers[0].devices);
  EXPECT_THAT(plugin->allocate_requests(), SizeIs(1));
}

TEST_F(HostTest, K30_K31_PreferredAllocationParametersAndAnswers) {
  auto config = Config();
  config.topology.policy = manager::kPolicySingleNumaNode;
  StartHost(config);
  v1beta1::DevicePluginOptions options;
  options.set_get_preferred_allocation_available(true);
  std::vector<v1beta1::Device> eight;
  eight.reserve(8);
  for (int i = 0; i < 8; ++i)
    eight.push_back(MakeDevice("d" + std::to_string(i), {i / 4}));
  auto plugin = Plugin("a.sock", eight, options);
  ASSERT_TRUE(WaitFor([&] { return View().allocatable == 8; }));
  // The plugin answers with a foreign id and too few: the rest is filled.
  plugin->SetPreferred([](const v1beta1::PreferredAllocationRequest&,
                          v1beta1::PreferredAllocationResponse* response) {
    auto* answer = response->add_container_responses();
    answer->add_deviceids("elsewhere");
    answer->add_deviceids("d2");
    return grpc::Status::OK;
  });
  PodResult pod = host_->Admit(MakePod("p", {{kGpu, 2}}), false);
  ASSERT_TRUE(pod.admitted) << pod.message;
  const auto requests = plugin->preferred_requests();
  ASSERT_THAT(requests, SizeIs(1));
  const auto& request = requests[0].container_requests(0);
  EXPECT_EQ(request.allocation_size(), 2);
  EXPECT_EQ(request.available_deviceids_size(), 4);  // aligned node only
  EXPECT_EQ(request.must_include_deviceids_size(), 0);
  const auto& chosen = pod.containers[0].devices.at(kGpu);
  EXPECT_THAT(chosen, SizeIs(2));
  EXPECT_NE(std::find(chosen.begin(), chosen.end(), "d2"), chosen.end());
  // Too many: trimmed to the need.
  plugin->SetPreferred([](const v1beta1::PreferredAllocationRequest& r,
                          v1beta1::PreferredAllocationResponse* response) {
    auto* answer = response->add_container_responses();
    for (const auto& id : r.container_requests(0).available_deviceids()) {
      answer->add_deviceids(id);
    }
    return grpc::Status::OK;
  });
  pod = host_->Admit(MakePod("q", {{kGpu, 1}}), false);
  ASSERT_TRUE(pod.admitted);
  EXPECT_THAT(pod.containers[0].devices.at(kGpu), SizeIs(1));
}

TEST_F(HostTest, K32_PreferredAllocationErrorFailsAdmission) {
  StartHost();
  v1beta1::DevicePluginOptions options;
  options.set_get_preferred_allocation_available(true);
  auto plugin = Plugin("a.sock", FourGpus(), options);
  ASSERT_TRUE(WaitFor([&] { return View().allocatable == 4; }));
  plugin->SetPreferred([](const v1beta1::PreferredAllocationRequest&,
                          v1beta1::PreferredAllocationResponse*) {
    return grpc::Status(grpc::StatusCode::INTERNAL, "selection failed");
  });
  const PodResult pod = host_->Admit(MakePod("p", {{kGpu, 1}}), false);
  EXPECT_FALSE(pod.admitted);
  EXPECT_THAT(pod.message, HasSubstr("selection failed"));
  EXPECT_THAT(plugin->allocate_requests(), SizeIs(0));
}

TEST_F(HostTest, K35_ConcurrentAdmissionsNeverShareADevice) {
  StartHost();
  std::vector<v1beta1::Device> devices;
  devices.reserve(32);
  for (int i = 0; i < 32; ++i)
    devices.push_back(MakeDevice("d" + std::to_string(i), {i % 2}));
  auto plugin = Plugin("a.sock", devices);
  ASSERT_TRUE(WaitFor([&] { return View().allocatable == 32; }));
  std::vector<std::future<PodResult>> results;
  results.reserve(32);
  for (int i = 0; i < 32; ++i) {
    results.push_back(std::async(std::launch::async, [&, i] {
      return host_->Admit(MakePod("p" + std::to_string(i), {{kGpu, 1}}), false);
    }));
  }
  std::set<std::string> seen;
  for (auto& result : results) {
    const PodResult pod = result.get();
    ASSERT_TRUE(pod.admitted) << pod.message;
    EXPECT_TRUE(seen.insert(pod.containers[0].devices.at(kGpu)[0]).second);
  }
  EXPECT_THAT(plugin->allocate_requests(), SizeIs(32));
}

// Many clients admit the same pod at once, then release it at once, round
// after round: the kubelet's pod workers never do, but clients of the
// control socket may. One request admits and commits the pod; every other
// answer is the same admission (same devices), or "being admitted" for a
// batch that holds admissions of its own (two such batches waiting on each
// other's pods would wait forever), never a second allocation; one release
// succeeds, the others say the pod is gone. (A request answered from another's
// pending admission once committed it too, and the second commit found nothing
// to move.)
TEST_F(HostTest, SamePodAdmittedAndReleasedFromManyClientsAtOnce) {
  StartHost();
  auto plugin = Plugin("a.sock", FourGpus());
  ASSERT_TRUE(WaitFor([&] { return View().allocatable == 4; }));
  constexpr int kClients = 20;
  for (int round = 0; round < 10; ++round) {
    SCOPED_TRACE("round " + std::to_string(round));
    const manager::Pod pod = MakePod("same", {{kGpu, 2}});
    std::vector<std::future<PodResult>> admits;
    admits.reserve(kClients);
    for (int i = 0; i < kClients; ++i) {
      admits.push_back(std::async(std::launch::async, [&, i] {
        // Some as a batch naming the pod twice: one request, one answer.
        return i % 4 == 0 ? host_
                                ->AdmitAll(std::vector<manager::Pod>{pod, pod},
                                           false, nullptr)
                                .back()
                          : host_->Admit(pod, false);
      }));
    }
    std::set<std::vector<std::string>> held;
    int admitted = 0;
    for (auto& future : admits) {
      const PodResult result = future.get();
      if (result.admitted) {
        ++admitted;
        ASSERT_THAT(result.containers, SizeIs(1));
        held.insert(result.containers[0].devices.at(kGpu));
      } else {
        EXPECT_EQ(result.reason, "UnexpectedAdmissionError");
        EXPECT_THAT(result.message, HasSubstr("is being admitted"));
      }
    }
    EXPECT_GE(admitted, 1);
    EXPECT_THAT(held, SizeIs(1)) << "one allocation, whoever answered";
    EXPECT_EQ(View().allocatable, 4u);
    std::vector<std::future<Status>> releases;
    releases.reserve(kClients);
    for (int i = 0; i < kClients; ++i) {
      releases.push_back(std::async(std::launch::async, [&, i] {
        return host_->Release(i % 2 == 0 ? pod.uid : pod.name);
      }));
    }
    int released = 0;
    for (auto& future : releases) {
      const Status status = future.get();
      if (status.ok()) {
        ++released;
      } else {
        EXPECT_EQ(status.code(), StatusCode::kNotFound) << status.message();
      }
    }
    EXPECT_EQ(released, 1);
    if (::testing::Test::HasFailure()) return;
  }
  // Every allocation was made once per round, and nothing is held now.
  EXPECT_THAT(plugin->allocate_requests(), SizeIs(10));
  EXPECT_TRUE(host_->Admit(MakePod("after", {{kGpu, 4}}), false).admitted);
}

TEST_F(HostTest, K36_StalledAllocateDoesNotBlockListUpdates) {
  StartHost();
  auto plugin = Plugin("a.sock", FourGpus());
  ASSERT_TRUE(WaitFor([&] { return View().allocatable == 4; }));
  std::promise<void> release;
  auto released = release.get_future().share();
  std::promise<void> entered;
  plugin->SetAllocate(
      [released, &entered](const v1beta1::AllocateRequest& request,
                           v1beta1::AllocateResponse* response) {
        entered.set_value();
        released.wait_for(std::chrono::seconds(10));
        response->add_container_responses();
        (void)request;
        return grpc::Status::OK;
      });
  auto admission = std::async(std::launch::async, [&] {
    return host_->Admit(MakePod("slow", {{kGpu, 1}}), false);
  });
  entered.get_future().wait();  // the admission is in the plugin's call
  plugin->SetDevices({MakeDevice("gpu-0", {0}), MakeDevice("gpu-1", {0}),
                      MakeDevice("gpu-2", {1}), MakeDevice("gpu-3", {1}),
                      MakeDevice("gpu-4", {1})});
  EXPECT_TRUE(WaitFor([&] { return View().capacity == 5; }, Scaled(1s)));
  release.set_value();
  EXPECT_TRUE(admission.get().admitted);
}

// --- K.d PreStartContainer -------------------------------------------------

TEST_F(HostTest, K37_PreStartCarriesTheContainersDevices) {
  StartHost();
  v1beta1::DevicePluginOptions options;
  options.set_pre_start_required(true);
  auto plugin = Plugin("a.sock", FourGpus(), options);
  ASSERT_TRUE(WaitFor([&] { return View().allocatable == 4; }));
  const PodResult pod = host_->Admit(MakePod("p", {{kGpu, 2}}), false);
  ASSERT_TRUE(pod.admitted);
  const auto requests = plugin->pre_start_requests();
  ASSERT_THAT(requests, SizeIs(1));
  EXPECT_THAT(
      std::vector<std::string>(requests[0].devices_ids().begin(),
                               requests[0].devices_ids().end()),
      ::testing::UnorderedElementsAreArray(pod.containers[0].devices.at(kGpu)));
  plugin->SetPreStart([](const v1beta1::PreStartContainerRequest&) {
    return grpc::Status(grpc::StatusCode::INTERNAL, "not ready");
  });
  const PodResult failed = host_->Admit(MakePod("q", {{kGpu, 1}}), false);
  EXPECT_FALSE(failed.admitted);
  EXPECT_THAT(failed.message, HasSubstr("not ready"));
}

// --- K.e Restart and checkpoint -------------------------------------------

TEST_F(HostTest, K40_K41_K44_RestartRestoresAllocations) {
  StartHost();
  auto plugin = Plugin("a.sock", FourGpus());
  ASSERT_TRUE(WaitFor([&] { return View().allocatable == 4; }));
  const PodResult old_pod = host_->Admit(MakePod("old", {{kGpu, 1}}), false);
  ASSERT_TRUE(old_pod.admitted);
  const std::string held = old_pod.containers[0].devices.at(kGpu)[0];
  host_->Stop();
  host_.reset();
  plugin->Stop();  // the restart deleted its socket anyway
  StartHost();
  // Capacity 0 until the plugin is back; a new pod cannot get a device.
  ASSERT_TRUE(Has());
  EXPECT_EQ(View().capacity, 0u);
  EXPECT_EQ(View().allocatable, 0u);
  const PodResult early = host_->Admit(MakePod("early", {{kGpu, 1}}), false);
  EXPECT_THAT(early.message, HasSubstr("no healthy devices present"));
  const auto status = host_->StatusJson();
  ASSERT_THAT(status["pods"], SizeIs(1));
  EXPECT_EQ(status["pods"][0]["containers"][0]["devices"][kGpu][0], held);
  // The plugin comes back (new socket, like the stub): the old pod keeps its
  // device, a new pod gets another one, with no Allocate for the old pod.
  FakePlugin back(dir(), kGpu, "b.sock");
  back.SetDevices(FourGpus());
  back.Start();
  ASSERT_TRUE(back.Register().ok());
  ASSERT_TRUE(WaitFor([&] { return View().allocatable == 4; }));
  const PodResult fresh = host_->Admit(MakePod("new", {{kGpu, 3}}), false);
  ASSERT_TRUE(fresh.admitted) << fresh.message;
  for (const auto& id : fresh.containers[0].devices.at(kGpu))
    EXPECT_NE(id, held);
  EXPECT_THAT(back.allocate_requests(), SizeIs(1));
  EXPECT_FALSE(host_->Admit(MakePod("more", {{kGpu, 1}}), false).admitted);
}

TEST_F(HostTest, K43_CorruptCheckpointStartsEmpty) {
  std::filesystem::create_directories(dir());
  std::ofstream(dir() / kCheckpointFile)
      << R"({"version":1,"checksum":"0","data":{}})";
  StartHost();
  EXPECT_THAT(host_->StatusJson()["pods"], SizeIs(0));
  EXPECT_TRUE(std::filesystem::exists(
      dir() / (std::string(kCheckpointFile) + ".corrupt")));
  host_.reset();
  std::ofstream(dir() / kCheckpointFile) << "garbage\x01\x02";
  StartHost();
  EXPECT_THAT(host_->StatusJson()["pods"], SizeIs(0));
}

// --- K.f Robustness ---------------------------------------------------------

TEST_F(HostTest, K45_DirectoryThatCannotBeCreated) {
  std::ofstream(dir_.path() / "file") << "x";
  auto config = Config();
  config.plugin_dir = dir_.path() / "file" / "device-plugins";
  auto host = HostManager::Create(config, topology_);
  ASSERT_THAT(host.status(), IsOk());
  EXPECT_THAT(
      testing::StartHost(**host),
      StatusIs(StatusCode::kFailedPrecondition, HasSubstr("cannot create")));
}

TEST_F(HostTest, K47_GarbageResponsesAreErrors) {
  StartHost();
  auto plugin = Plugin("a.sock", FourGpus());
  ASSERT_TRUE(WaitFor([&] { return View().allocatable == 4; }));
  plugin->SetAllocate(
      [](const v1beta1::AllocateRequest&, v1beta1::AllocateResponse* r) {
        auto* c = r->add_container_responses();
        (*c->mutable_envs())["BIG"] = std::string(5 << 20, 'x');  // > 4 MiB
        return grpc::Status::OK;
      });
  const PodResult pod = host_->Admit(MakePod("p", {{kGpu, 1}}), false);
  EXPECT_FALSE(pod.admitted);
  EXPECT_EQ(pod.reason, "UnexpectedAdmissionError");
}

TEST_F(HostTest, TopologyAffinityErrorUnderSingleNumaNode) {
  auto config = Config();
  config.topology.policy = manager::kPolicySingleNumaNode;
  StartHost(config);
  auto plugin = Plugin("a.sock", FourGpus());
  ASSERT_TRUE(WaitFor([&] { return View().allocatable == 4; }));
  const PodResult pod = host_->Admit(MakePod("p", {{kGpu, 3}}), true);
  EXPECT_FALSE(pod.admitted);
  EXPECT_EQ(pod.reason, "TopologyAffinityError");
  EXPECT_EQ(pod.message,
            "Resources cannot be allocated with Topology locality");
  ASSERT_TRUE(pod.explanation.is_array());
  EXPECT_FALSE(pod.explanation.empty());
  const PodResult two = host_->Admit(MakePod("q", {{kGpu, 2}}), false);
  ASSERT_TRUE(two.admitted);
  ASSERT_TRUE(two.containers[0].numa_nodes.has_value());
  EXPECT_THAT(*two.containers[0].numa_nodes, SizeIs(1));
}

// GPUs 0000:1a:00.0 and 0000:3e:00.0 sit behind different switches of
// socket 0, with NICs 0000:1c:00.0 and 0000:3f:00.0 next to them.
TEST_F(HostTest, CostBasedSelectionKeepsGpuAndNicOnOneSwitch) {
  for (const bool cost_based : {false, true}) {
    auto config = Config();
    config.topology.policy = manager::kPolicySingleNumaNode;
    config.cost_based_selection = cost_based;
    host_.reset();
    std::filesystem::remove_all(dir());
    StartHost(config);
    auto gpus = Plugin("gpu.sock", {MakeDevice("0000:1a:00.0", {0}),
                                    MakeDevice("0000:3e:00.0", {0})});
    auto nics = Plugin(
        "nic.sock",
        {MakeDevice("0000:1c:00.0", {0}), MakeDevice("0000:3f:00.0", {0})}, {},
        "example.com/nic");
    ASSERT_TRUE(WaitFor([&] {
      return View().allocatable == 2 &&
             View("example.com/nic").allocatable == 2;
    }));
    // A first pod takes the NIC next to the first GPU.
    const PodResult first =
        host_->Admit(MakePod("nic-only", {{"example.com/nic", 1}}), false);
    ASSERT_TRUE(first.admitted);
    ASSERT_EQ(first.containers[0].devices.at("example.com/nic")[0],
              "0000:1c:00.0");
    const PodResult pod = host_->Admit(
        MakePod("pair", {{kGpu, 1}, {"example.com/nic", 1}}), false);
    ASSERT_TRUE(pod.admitted) << pod.message;
    EXPECT_EQ(pod.containers[0].devices.at("example.com/nic")[0],
              "0000:3f:00.0");
    // The kubelet takes the first aligned GPU, across switches; the cost
    // graph takes the one behind the NIC's switch.
    EXPECT_EQ(pod.containers[0].devices.at(kGpu)[0],
              cost_based ? "0000:3e:00.0" : "0000:1a:00.0")
        << "cost_based=" << cost_based;
  }
}

TEST_F(HostTest, NodeResourceTopologyZones) {
  StartHost();
  auto plugin = Plugin("a.sock", FourGpus());
  ASSERT_TRUE(WaitFor([&] { return View().allocatable == 4; }));
  const manager::Pod pod = MakePod("p", {{kGpu, 1}});
  ASSERT_TRUE(host_->Admit(pod, false).admitted);
  const auto nrt = host_->NodeResourceTopology();
  EXPECT_EQ(nrt["apiVersion"], "topology.node.k8s.io/v1alpha2");
  // The admitted pods' fingerprint, as the schedulers' podfingerprint
  // signs it (pod_fingerprint_tests hold that to upstream).
  common::PodFingerprint fingerprint;
  fingerprint.Add(pod.ns, pod.name);
  std::map<std::string, std::string> attributes;
  for (const auto& attribute : nrt["attributes"]) {
    attributes[attribute["name"]] = attribute["value"];
  }
  EXPECT_EQ(attributes["nodeTopologyPodsFingerprint"], fingerprint.Sign());
  EXPECT_EQ(attributes["nodeTopologyPodsFingerprintMethod"], "all");
  EXPECT_EQ(nrt["kind"], "NodeResourceTopology");
  ASSERT_THAT(nrt["zones"], SizeIs(2));
  EXPECT_EQ(nrt["zones"][0]["name"], "node-0");
  EXPECT_EQ(nrt["zones"][0]["type"], "Node");
  EXPECT_EQ(nrt["zones"][0]["costs"][1]["value"], 21);
  int available = 0;
  for (const auto& zone : nrt["zones"]) {
    for (const auto& resource : zone["resources"]) {
      if (resource["name"] == kGpu) {
        EXPECT_EQ(resource["capacity"], "2");
        available += std::stoi(resource["available"].get<std::string>());
      }
    }
  }
  EXPECT_EQ(available, 3);
}

// --- Hardening: hostile plugins, files and restarts ---------------------

// A plugin that re-registers (new socket) while an Allocate is in flight:
// the endpoint the call uses stays alive (the old code freed it), the
// admission ends, and the node keeps working with the new plugin.
TEST_F(HostTest, ReRegistrationDuringAllocateIsSafe) {
  auto config = Config();
  config.grace_period = 50ms;
  StartHost(config);
  auto first = Plugin("a.sock", FourGpus());
  ASSERT_TRUE(WaitFor([&] { return View().allocatable == 4; }));
  std::promise<void> in_call;
  std::atomic<bool> signalled{false};
  std::promise<void> replaced;
  auto replaced_future = replaced.get_future().share();
  first->SetAllocate(
      [&, replaced_future](const v1beta1::AllocateRequest& request,
                           v1beta1::AllocateResponse* response) {
        if (!signalled.exchange(true)) in_call.set_value();
        // Answers once the new plugin has registered.
        replaced_future.wait_for(10s);
        for (int i = 0; i < request.container_requests_size(); ++i) {
          response->add_container_responses();
        }
        return grpc::Status::OK;
      });
  auto admitted = std::async(std::launch::async, [&] {
    return host_->Admit(MakePod("racing", {{kGpu, 1}}), false);
  });
  in_call.get_future().wait();
  auto second = Plugin("b.sock", FourGpus());
  replaced.set_value();
  first->Stop();  // the old plugin exits; its endpoint is collected
  const PodResult result = admitted.get();
  EXPECT_TRUE(result.admitted || !result.message.empty());
  ASSERT_TRUE(WaitFor([&] {
    return View().allocatable == 4 &&
           View().endpoint == (dir() / "b.sock").string();
  }));
  EXPECT_TRUE(host_->Admit(MakePod("after", {{kGpu, 1}}), false).admitted);
}

// The Allocate response lives with the allocation (the kubelet's
// podDevices): each container shows its own plugin answer (the app
// container reusing the init container's GPU had its own call), status
// shows them, and a release drops them with the devices.
TEST_F(HostTest, AllocateResponsesAreKeptWithTheAllocation) {
  StartHost();
  auto plugin = Plugin("a.sock", FourGpus());
  ASSERT_TRUE(WaitFor([&] { return View().allocatable == 4; }));
  std::atomic<int> calls{0};
  plugin->SetAllocate([&](const v1beta1::AllocateRequest& request,
                          v1beta1::AllocateResponse* response) {
    const int call = ++calls;
    for (const auto& container : request.container_requests()) {
      auto* out = response->add_container_responses();
      (*out->mutable_envs())["GPU_IDS"] = container.devices_ids(0);
      (*out->mutable_envs())["CALL"] = std::to_string(call);
    }
    return grpc::Status::OK;
  });
  const PodResult result =
      host_->Admit(MakePod("p", {{kGpu, 1}}, {{kGpu, 1}}), false);
  ASSERT_TRUE(result.admitted) << result.message;
  ASSERT_THAT(result.containers, SizeIs(2));
  std::set<std::string> answered_by;
  for (const ContainerResult& container : result.containers) {
    const auto& ids = container.devices.at(kGpu);
    ASSERT_THAT(ids, SizeIs(1));
    const auto& envs = container.allocate_responses[kGpu]["envs"];
    EXPECT_EQ(envs["GPU_IDS"], ids[0]) << container.name;
    answered_by.insert(envs["CALL"].get<std::string>());
  }
  EXPECT_EQ(answered_by, (std::set<std::string>{"1", "2"}));
  const auto shown = host_->StatusJson()["pods"][0]["containers"];
  ASSERT_THAT(shown, SizeIs(2));
  EXPECT_EQ(shown[1]["allocate_responses"][kGpu]["envs"]["CALL"], "2");
  ASSERT_THAT(host_->Release("p"), IsOk());
  EXPECT_THAT(host_->StatusJson()["pods"], SizeIs(0));
}

// A plugin whose Allocate never answers fails only the admission that
// needs it (within the deadline); a release does not wait for it; Stop()
// returns promptly even with the call in flight.
TEST_F(HostTest, HungPluginHasADeadlineAndDoesNotBlockStop) {
  // Declared first: the plugins' handlers wait at it until they are gone.
  Gate hang;
  auto config = Config();
  config.rpc_timeout = 500ms;
  StartHost(config);
  auto plugin = Plugin("a.sock", FourGpus());
  ASSERT_TRUE(WaitFor([&] { return View().allocatable == 4; }));
  ASSERT_TRUE(host_->Admit(MakePod("held", {{kGpu, 1}}), false).admitted);
  std::atomic<int> entered{0};
  plugin->SetAllocate(
      [&](const v1beta1::AllocateRequest&, v1beta1::AllocateResponse*) {
        ++entered;
        hang.Wait();
        return grpc::Status::OK;
      });
  const auto start = std::chrono::steady_clock::now();
  auto hung = std::async(std::launch::async, [&] {
    return host_->Admit(MakePod("hung", {{kGpu, 1}}), false);
  });
  ASSERT_TRUE(WaitFor([&] { return entered.load() == 1; }));
  EXPECT_THAT(host_->Release("held"), IsOk());  // does not wait for it
  EXPECT_LT(std::chrono::steady_clock::now() - start, 400ms);
  const PodResult result = hung.get();
  EXPECT_FALSE(result.admitted);
  EXPECT_EQ(result.reason, "UnexpectedAdmissionError");
  EXPECT_THAT(result.message, HasSubstr("did not answer within 500 ms"));
  EXPECT_THAT(host_->StatusJson()["resources"][0]["in_use"], 0);

  // A call in flight at Stop() is cancelled.
  auto config_long = Config();
  config_long.rpc_timeout = 60s;
  host_->Stop();
  host_.reset();
  StartHost(config_long);
  auto again = Plugin("b.sock", FourGpus());
  again->SetAllocate(
      [&](const v1beta1::AllocateRequest&, v1beta1::AllocateResponse*) {
        ++entered;
        hang.Wait();
        return grpc::Status::OK;
      });
  ASSERT_TRUE(WaitFor([&] { return View().allocatable == 4; }));
  auto stuck = std::async(std::launch::async, [&] {
    return host_->Admit(MakePod("stuck", {{kGpu, 1}}), false);
  });
  ASSERT_TRUE(WaitFor([&] { return entered.load() == 2; }));
  const auto stop_start = std::chrono::steady_clock::now();
  host_->Stop();
  EXPECT_LT(std::chrono::steady_clock::now() - stop_start, 3s);
  EXPECT_FALSE(stuck.get().admitted);
  hang.Open();
  plugin->Stop();
  again->Stop();
}

// The plugin directory is writable by every plugin: a link planted where a
// temporary file or the checkpoint would be is never written through or
// read; a FIFO there does not block the start; modes ignore the umask.
TEST_F(HostTest, CheckpointFilesAreNeverFollowedAndHaveExplicitModes) {
  std::filesystem::create_directories(dir());
  const std::filesystem::path victim = dir_.path() / "victim";
  std::ofstream(victim) << "precious";
  for (const char* name :
       {".topology_manager_checkpoint.tmp", ".topology_manager_checkpoint"}) {
    std::filesystem::create_symlink(victim, dir() / name);
  }
  const mode_t old = umask(0);
  auto config = Config();
  config.control_socket = dir_.path() / "control.sock";
  StartHost(config);
  auto plugin = Plugin("a.sock", FourGpus());
  ASSERT_TRUE(WaitFor([&] { return View().allocatable == 4; }));
  ASSERT_TRUE(host_->Admit(MakePod("p", {{kGpu, 1}}), false).admitted);
  umask(old);
  std::ifstream in(victim);
  std::string text((std::istreambuf_iterator<char>(in)), {});
  EXPECT_EQ(text, "precious");
  struct stat info {};
  for (const std::string& name : {std::string(kCheckpointFile),
                                  std::string(kCheckpointFile) + ".journal"}) {
    ASSERT_EQ(lstat((dir() / name).c_str(), &info), 0) << name;
    EXPECT_TRUE(S_ISREG(info.st_mode)) << name;
    EXPECT_EQ(info.st_mode & 0777, 0600u) << name;
  }
  ASSERT_EQ(lstat((dir() / "kubelet.sock").c_str(), &info), 0);
  EXPECT_EQ(info.st_mode & 0777, 0600u);
  ASSERT_EQ(lstat(config.control_socket.c_str(), &info), 0);
  EXPECT_EQ(info.st_mode & 0777, 0600u);
  ASSERT_EQ(lstat(dir().c_str(), &info), 0);
  EXPECT_EQ(info.st_mode & 0777, 0750u);

  // The checkpoint itself replaced by a link, then by a FIFO.
  host_->Stop();
  host_.reset();
  std::filesystem::remove(dir() / kCheckpointFile);
  std::filesystem::create_symlink(victim, dir() / kCheckpointFile);
  StartHost();
  EXPECT_THAT(host_->StatusJson()["pods"], SizeIs(0));
  host_->Stop();
  host_.reset();
  std::filesystem::remove(dir() / (std::string(kCheckpointFile) + ".corrupt"));
  std::filesystem::remove(dir() / kCheckpointFile);
  ASSERT_EQ(mkfifo((dir() / kCheckpointFile).c_str(), 0600), 0);
  const auto start = std::chrono::steady_clock::now();
  StartHost();
  EXPECT_LT(std::chrono::steady_clock::now() - start, 2s);
  EXPECT_TRUE(std::filesystem::exists(
      dir() / (std::string(kCheckpointFile) + ".corrupt")));
}

// A checkpoint that gives one device to two pods, or CPUs the machine does
// not have: the conflicts are dropped, nothing is double-booked.
TEST_F(HostTest, ConflictingCheckpointIsNeverDoubleBooked) {
  StartHost();
  auto plugin = Plugin("a.sock", FourGpus());
  ASSERT_TRUE(WaitFor([&] { return View().allocatable == 4; }));
  ASSERT_TRUE(host_->Admit(MakePod("a", {{kGpu, 1}}), false).admitted);
  ASSERT_TRUE(host_->Admit(MakePod("b", {{kGpu, 1}}), false).admitted);
  host_->Stop();
  host_.reset();
  auto checkpoint = ReadCheckpoint();
  ASSERT_THAT(checkpoint.status(), IsOk());
  auto& pods = checkpoint->pods;
  ASSERT_EQ(pods.size(), 2u);
  pods[1].containers[0].devices[kGpu][0] =
      pods[0].containers[0].devices[kGpu][0];
  pods[1].containers[0].cpus = *CpuSet::ParseList("4000-4001");
  WriteCheckpoint(*checkpoint);
  StartHost();
  auto back = Plugin("b.sock", FourGpus());
  ASSERT_TRUE(WaitFor([&] { return View().allocatable == 4; }));
  const auto status = host_->StatusJson();
  EXPECT_EQ(status["resources"][0]["in_use"], 1);
  // Three more GPUs are free, exactly.
  EXPECT_TRUE(host_->Admit(MakePod("c", {{kGpu, 3}}), false).admitted);
  EXPECT_FALSE(host_->Admit(MakePod("d", {{kGpu, 1}}), false).admitted);
}

// A checkpoint whose pod holds a device its resource's recorded plugin list
// never offered: kept, as the kubelet keeps it (the list holds healthy
// devices only), but said, naming pod, container, resource and device; a
// device of a resource no plugin is recorded for likewise.
TEST_F(HostTest, RestoreNamesAHeldDeviceNoRecordedListOffers) {
  StartHost();
  auto plugin = Plugin("a.sock", FourGpus());
  ASSERT_TRUE(WaitFor([&] { return View().allocatable == 4; }));
  ASSERT_TRUE(host_->Admit(MakePod("a", {{kGpu, 1}}), false).admitted);
  host_->Stop();
  host_.reset();
  auto checkpoint = ReadCheckpoint();
  ASSERT_THAT(checkpoint.status(), IsOk());
  ASSERT_THAT(checkpoint->pods, SizeIs(1));
  ASSERT_TRUE(checkpoint->registered.contains(kGpu));
  checkpoint->pods[0].containers[0].devices[kGpu] = {"no-such-device"};
  checkpoint->pods[0].containers[0].devices["example.com/gone"] = {"g-0"};
  WriteCheckpoint(*checkpoint);
  StartHost();
  EXPECT_THAT(
      host_->RestoreWarnings(),
      ElementsAre(
          HasSubstr("pod default/a (uid-a) container \"main\" holds "
                    "example.com/gone device \"g-0\", but no plugin of "
                    "example.com/gone is recorded"),
          HasSubstr("pod default/a (uid-a) container \"main\" holds "
                    "example.com/gpu device \"no-such-device\", which the "
                    "last list of example.com/gpu's plugin in the checkpoint "
                    "does not offer")));
  // Kept: the pod still holds it.
  const auto status = host_->StatusJson();
  ASSERT_THAT(status["pods"], SizeIs(1));
  EXPECT_EQ(status["pods"][0]["containers"][0]["devices"][kGpu][0],
            "no-such-device");
}

// A crash (no Stop, so no compaction): what was admitted and released since
// the last snapshot is in the journal, and a restart restores exactly it.
TEST_F(HostTest, CrashRestoresAdmissionsAndReleasesFromTheJournal) {
  StartHost();
  auto plugin = Plugin("a.sock", FourGpus());
  ASSERT_TRUE(WaitFor([&] { return View().allocatable == 4; }));
  const PodResult a = host_->Admit(MakePod("a", {{kGpu, 1}}), false);
  const PodResult b = host_->Admit(MakePod("b", {{kGpu, 2}}), false);
  ASSERT_TRUE(a.admitted && b.admitted);
  ASSERT_THAT(host_->Release("a"), IsOk());
  const std::filesystem::path snapshot = dir() / kCheckpointFile;
  const std::filesystem::path journal =
      dir() / (std::string(kCheckpointFile) + ".journal");
  EXPECT_GT(std::filesystem::file_size(journal), 0u);
  CrashAndRestart(*plugin);
  const auto pods = host_->StatusJson()["pods"];
  ASSERT_THAT(pods, SizeIs(1));
  EXPECT_EQ(pods[0]["uid"], "uid-b");
  auto back = Plugin("b.sock", FourGpus());
  ASSERT_TRUE(WaitFor([&] { return View().allocatable == 4; }));
  // b's two GPUs stay held: two are free, exactly.
  EXPECT_TRUE(host_->Admit(MakePod("c", {{kGpu, 2}}), false).admitted);
  EXPECT_FALSE(host_->Admit(MakePod("d", {{kGpu, 1}}), false).admitted);
  // A clean stop folds the journal into the snapshot.
  host_->Stop();
  EXPECT_EQ(std::filesystem::file_size(journal), 0u);
  std::ifstream in(snapshot);
  auto decoded =
      DecodeCheckpoint(std::string(std::istreambuf_iterator<char>(in), {}));
  ASSERT_THAT(decoded.status(), IsOk());
  ASSERT_THAT(decoded->pods, SizeIs(2));
  EXPECT_EQ(decoded->pods[0].pod.uid, "uid-b");
  EXPECT_EQ(decoded->pods[1].pod.uid, "uid-c");
}

// The kubelet's isDevicePluginResource and resource fit: a resource whose
// plugin is gone (grace period over) while pods hold its devices, or one
// nobody ever offered, is refused, never admitted without devices.
TEST_F(HostTest, GoneOrUnknownResourcesAreRefused) {
  auto config = Config();
  config.grace_period = 5min;
  config.clock = &clock_;
  StartHost(config);
  auto plugin = Plugin("a.sock", FourGpus());
  ASSERT_TRUE(WaitFor([&] { return View().allocatable == 4; }));
  ASSERT_TRUE(host_->Admit(MakePod("holder", {{kGpu, 1}}), false).admitted);
  plugin->Stop();
  ASSERT_TRUE(WaitFor([&] { return View().stopped; }));
  clock_.Advance(5min);
  ASSERT_TRUE(WaitFor([&] { return !Has(); }));
  const PodResult gone = host_->Admit(MakePod("late", {{kGpu, 1}}), false);
  EXPECT_FALSE(gone.admitted);
  EXPECT_THAT(gone.message, HasSubstr("cannot allocate unregistered device"));
  const PodResult unknown =
      host_->Admit(MakePod("odd", {{"example.com/never", 2}}), false);
  EXPECT_FALSE(unknown.admitted);
  EXPECT_EQ(unknown.reason, "OutOfexample.com/never");
  EXPECT_EQ(unknown.message,
            "Node didn't have enough resource: example.com/never, requested: "
            "2, used: 0, capacity: 0");
}

// 64-bit quantities end to end: 2^32 + 1 GPUs is not 1 GPU.
TEST_F(HostTest, HugeQuantitiesAreNotTruncated) {
  StartHost();
  auto plugin = Plugin("a.sock", FourGpus());
  ASSERT_TRUE(WaitFor([&] { return View().allocatable == 4; }));
  auto pods = ParsePodManifests(R"(kind: Pod
metadata: {name: huge}
spec:
  containers:
  - name: main
    resources:
      limits: {example.com/gpu: 4294967297}
)",
                                "huge.yaml");
  ASSERT_THAT(pods.status(), IsOk());
  EXPECT_EQ((*pods)[0].containers[0].limits.at(kGpu), 4294967297);
  const PodResult result = host_->Admit((*pods)[0], false);
  EXPECT_FALSE(result.admitted);
  EXPECT_THAT(host_->StatusJson()["resources"][0]["in_use"], 0);
}

// A raw connection to a unix socket that never speaks (fd, or -1).
int ConnectIdle(const std::filesystem::path& path) {
  const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  std::snprintf(address.sun_path, sizeof(address.sun_path), "%s", path.c_str());
  if (connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) !=
      0) {
    close(fd);
    return -1;
  }
  return fd;
}

bool ControlAnswers(const std::filesystem::path& socket) {
  auto channel = grpc::CreateChannel("unix:" + socket.string(),
                                     grpc::InsecureChannelCredentials());
  auto stub = topologymanager::v1alpha1::Control::NewStub(channel);
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + 2s);
  topologymanager::v1alpha1::StatusRequest request;
  request.set_format("json");
  topologymanager::v1alpha1::JsonReply reply;
  return stub->Status(&context, request, &reply).ok();
}

// Thousands of idle connections to the control socket (any local user who
// may connect): the manager keeps answering, and once descriptors ran out
// and the connections close, it answers again.
TEST_F(HostTest, IdleConnectionsDoNotDeafenTheControlSocket) {
  auto config = Config();
  config.control_socket = dir_.path() / "control.sock";
  StartHost(config);
  std::vector<int> idle;
  for (int i = 0; i < 2000; ++i) {
    const int fd = ConnectIdle(config.control_socket);
    if (fd < 0) break;
    idle.push_back(fd);
  }
  EXPECT_GE(idle.size(), 1000u);
  // Answering, not answering within one 2 s call: a loaded machine under a
  // sanitizer may still be accepting (and evicting) the idle ones.
  EXPECT_TRUE(
      WaitFor([&] { return ControlAnswers(config.control_socket); }, 10s));
  for (int fd : idle) close(fd);
  idle.clear();

  // Now run the process out of descriptors while the connections arrive.
  rlimit old{};
  ASSERT_EQ(getrlimit(RLIMIT_NOFILE, &old), 0);
  rlimit low = old;
  low.rlim_cur = 256;
  ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &low), 0);
  for (int i = 0; i < 400; ++i) {
    const int fd = ConnectIdle(config.control_socket);
    if (fd < 0) break;
    idle.push_back(fd);
  }
  // The acceptor ran out of descriptors (and keeps trying).
  EXPECT_TRUE(
      WaitFor([&] { return host_->ControlConnections().starved > 0; }, 10s));
  for (int fd : idle) close(fd);
  ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &old), 0);
  EXPECT_TRUE(
      WaitFor([&] { return ControlAnswers(config.control_socket); }, 10s));
}

// One request of many pods stops as soon as its client gives up: the pods
// not yet admitted are not admitted (and hold nothing).
TEST_F(HostTest, BatchStopsWhenTheClientGivesUp) {
  StartHost();
  auto plugin = Plugin("a.sock", FourGpus());
  ASSERT_TRUE(WaitFor([&] { return View().allocatable == 4; }));
  std::vector<manager::Pod> pods;
  pods.reserve(4);
  for (int i = 0; i < 4; ++i) {
    pods.push_back(MakePod("batch-" + std::to_string(i), {{kGpu, 1}}));
  }
  int asked = 0;
  // The client goes away after the second pod.
  const auto results =
      host_->AdmitAll(pods, false, [&] { return ++asked > 2; });
  ASSERT_EQ(results.size(), 4u);
  EXPECT_TRUE(results[0].admitted);
  EXPECT_TRUE(results[1].admitted);
  EXPECT_FALSE(results[2].admitted);
  EXPECT_EQ(results[2].reason, "Cancelled");
  EXPECT_FALSE(results[3].admitted);
  EXPECT_EQ(host_->StatusJson()["resources"][0]["in_use"], 2);
  // The checkpoint was written once, with the two admitted pods.
  host_->Stop();
  host_.reset();
  StartHost();
  EXPECT_THAT(host_->StatusJson()["pods"], SizeIs(2));
}

// A plugin re-registers and its new stream never sends a list: the old
// connection exits and is collected while the device list it sent stays.
// Calls go to the new connection (as in the kubelet, the endpoint switches
// at registration); nothing is used after it is freed.
TEST_F(HostTest, ReRegistrationWithASilentStreamIsSafe) {
  auto config = Config();
  config.grace_period = 50ms;
  config.clock = &clock_;  // the collector's rounds are the test's
  StartHost(config);
  v1beta1::DevicePluginOptions options;
  options.set_get_preferred_allocation_available(true);
  auto first = Plugin("a.sock", FourGpus(), options);
  ASSERT_TRUE(WaitFor([&] { return View().allocatable == 4; }));
  auto second = std::make_unique<FakePlugin>(dir(), kGpu, "b.sock");
  second->SetOptions(options);
  second->SetSilent(true);
  second->Start();
  ASSERT_TRUE(second->Register().ok());
  first->Stop();
  first.reset();
  for (int round = 0; round < 3; ++round) {  // three collection rounds
    ASSERT_TRUE(clock_.AdvanceAndLetWaitersLook(config.grace_period));
  }
  for (int i = 0; i < 3; ++i) {
    const PodResult result =
        host_->Admit(MakePod("p" + std::to_string(i), {{kGpu, 1}}), false);
    EXPECT_TRUE(result.admitted) << result.message;
  }
  EXPECT_THAT(second->allocate_requests(), SizeIs(3));
  EXPECT_EQ(View().endpoint, (dir() / "b.sock").string());
}

// The journal is the order of the state. A batch admits p0, m and q while
// another client releases p0 during m's Allocate: p0 is not released before
// its own record is durable, so q can never be given p0's device ahead of
// p0's release in the journal. After a crash (the files as they are, no
// compaction) the restored state holds every answered admission, none of
// the answered releases, and no device twice.
TEST_F(HostTest, ReleaseDuringABatchNeverReordersTheJournal) {
  StartHost();
  auto plugin = Plugin("a.sock", FourGpus());
  ASSERT_TRUE(WaitFor([&] { return View().allocatable == 4; }));
  std::promise<void> in_second_allocate;
  std::promise<void> let_it_answer;
  std::shared_future<void> answer = let_it_answer.get_future().share();
  std::atomic<int> allocates{0};
  plugin->SetAllocate([&](const v1beta1::AllocateRequest& request,
                          v1beta1::AllocateResponse* response) {
    for (int i = 0; i < request.container_requests_size(); ++i) {
      response->add_container_responses();
    }
    if (++allocates == 2) {
      in_second_allocate.set_value();
      answer.wait();
    }
    return grpc::Status::OK;
  });
  std::vector<PodResult> batch;
  std::thread admitting([&] {
    batch =
        host_->AdmitAll({MakePod("p0", {{kGpu, 1}}), MakePod("m", {{kGpu, 1}}),
                         MakePod("q", {{kGpu, 3}})},
                        false, nullptr);
  });
  in_second_allocate.get_future().wait();
  // p0 is decided, but its record is not durable: a release of it waits
  // for the batch to commit (never "busy, try again"), then goes through.
  auto early =
      std::async(std::launch::async, [&] { return host_->Release("p0"); });
  let_it_answer.set_value();
  admitting.join();
  ASSERT_THAT(batch, SizeIs(3));
  EXPECT_TRUE(batch[0].admitted && batch[1].admitted);
  EXPECT_THAT(early.get(), IsOk());
  // q needs three of the two GPUs that were free: refused.
  EXPECT_FALSE(batch[2].admitted);
  // Another pod gets p0's GPU.
  const PodResult r = host_->Admit(MakePod("r", {{kGpu, 3}}), false);
  ASSERT_TRUE(r.admitted) << r.message;

  // The crash: the files as they are now.
  CrashAndRestart(*plugin);
  const auto status = host_->StatusJson();
  std::set<std::string> uids;
  std::map<std::string, std::string> holder;
  for (const auto& pod : status["pods"]) {
    const std::string uid = pod["uid"];
    uids.insert(uid);
    for (const auto& container : pod["containers"]) {
      for (const auto& id : container["devices"][kGpu]) {
        auto [it, fresh] = holder.emplace(id.get<std::string>(), uid);
        EXPECT_TRUE(fresh) << id << " held by " << it->second << " and " << uid;
      }
    }
  }
  EXPECT_EQ(uids, (std::set<std::string>{"uid-m", "uid-r"}));
  EXPECT_EQ(holder.size(), 4u);
}

// A journal that cannot be written (a full disk; here a file-size limit):
// an admission is refused and leaves nothing behind, a release is refused
// and the pod keeps its devices, and a restart shows exactly that.
TEST_F(HostTest, AnAdmissionOrReleaseThatCannotBeCheckpointedChangesNothing) {
  StartHost();
  auto plugin = Plugin("a.sock", FourGpus());
  ASSERT_TRUE(WaitFor([&] { return View().allocatable == 4; }));
  ASSERT_TRUE(host_->Admit(MakePod("a", {{kGpu, 1}}), false).admitted);
  // Writes at or past byte 1 fail with EFBIG (SIGXFSZ ignored) from here.
  struct sigaction ignore {};
  ignore.sa_handler = SIG_IGN;
  struct sigaction previous {};
  ASSERT_EQ(sigaction(SIGXFSZ, &ignore, &previous), 0);
  rlimit saved_limit{};
  ASSERT_EQ(getrlimit(RLIMIT_FSIZE, &saved_limit), 0);
  rlimit limit = saved_limit;
  limit.rlim_cur = 1;
  ASSERT_EQ(setrlimit(RLIMIT_FSIZE, &limit), 0);
  const PodResult b = host_->Admit(MakePod("b", {{kGpu, 1}}), false);
  const Status released = host_->Release("a");
  const auto status = host_->StatusJson();
  host_->Stop();  // its compaction fails too: the files stay as they were
  host_.reset();
  ASSERT_EQ(setrlimit(RLIMIT_FSIZE, &saved_limit), 0);
  ASSERT_EQ(sigaction(SIGXFSZ, &previous, nullptr), 0);

  EXPECT_FALSE(b.admitted);
  EXPECT_EQ(b.reason, "UnexpectedAdmissionError");
  EXPECT_THAT(b.message, HasSubstr("could not be checkpointed"));
  EXPECT_THAT(b.containers, SizeIs(0));
  EXPECT_THAT(released, StatusIs(StatusCode::kFailedPrecondition,
                                 HasSubstr("keeps its devices")));
  ASSERT_THAT(status["pods"], SizeIs(1));
  EXPECT_EQ(status["pods"][0]["uid"], "uid-a");
  EXPECT_EQ(status["resources"][0]["in_use"], 1);

  plugin->Stop();
  StartHost();
  auto back = Plugin("b.sock", FourGpus());
  ASSERT_TRUE(WaitFor([&] { return View().allocatable == 4; }));
  const auto restored = host_->StatusJson();
  ASSERT_THAT(restored["pods"], SizeIs(1));
  EXPECT_EQ(restored["pods"][0]["uid"], "uid-a");
  // a still holds one GPU: three are free, exactly.
  EXPECT_TRUE(host_->Admit(MakePod("c", {{kGpu, 3}}), false).admitted);
  EXPECT_FALSE(host_->Admit(MakePod("d", {{kGpu, 1}}), false).admitted);
}

// The copy of a damaged journal is written like every other file: a link
// planted at its name (any plugin can write the directory) is replaced,
// never written through.
TEST_F(HostTest, TheDamagedJournalsCopyNeverFollowsAPlantedLink) {
  StartHost();
  auto plugin = Plugin("a.sock", FourGpus());
  ASSERT_TRUE(WaitFor([&] { return View().allocatable == 4; }));
  ASSERT_TRUE(host_->Admit(MakePod("a", {{kGpu, 1}}), false).admitted);
  ASSERT_TRUE(host_->Admit(MakePod("b", {{kGpu, 1}}), false).admitted);
  const std::filesystem::path journal =
      dir() / (std::string(kCheckpointFile) + ".journal");
  std::ifstream in(journal);
  std::string text((std::istreambuf_iterator<char>(in)), {});
  in.close();
  const auto saved = dir_.path() / "journal";
  std::filesystem::copy_file(journal, saved);
  host_->Stop();
  host_.reset();
  plugin->Stop();
  // Damage in the first record, with a good one after it: not a torn tail.
  const size_t first_line = text.find('\n');
  ASSERT_NE(first_line, std::string::npos);
  ASSERT_NE(text.find('\n', first_line + 1), std::string::npos);
  text[first_line / 2] = text[first_line / 2] == 'x' ? 'y' : 'x';
  std::ofstream(journal, std::ios::trunc) << text;
  const std::filesystem::path victim = dir_.path() / "victim";
  std::ofstream(victim) << "precious";
  const auto copy = dir() / (std::string(kCheckpointFile) + ".journal.corrupt");
  std::filesystem::create_symlink(victim, copy);
  StartHost();
  std::ifstream victim_in(victim);
  EXPECT_EQ(std::string(std::istreambuf_iterator<char>(victim_in), {}),
            "precious");
  struct stat info {};
  ASSERT_EQ(lstat(copy.c_str(), &info), 0);
  EXPECT_TRUE(S_ISREG(info.st_mode));
  EXPECT_EQ(info.st_mode & 0777, 0600u);
  EXPECT_EQ(std::filesystem::file_size(copy), text.size());
}

// Restore checks what it restores: a device listed twice in one container
// is held once.
TEST_F(HostTest, RestoreDropsADeviceListedTwiceInAContainer) {
  StartHost();
  auto plugin = Plugin("a.sock", FourGpus());
  ASSERT_TRUE(WaitFor([&] { return View().allocatable == 4; }));
  ASSERT_TRUE(host_->Admit(MakePod("a", {{kGpu, 1}}), false).admitted);
  host_->Stop();
  host_.reset();
  plugin->Stop();
  auto checkpoint = ReadCheckpoint();
  ASSERT_THAT(checkpoint.status(), IsOk());
  auto& ids = checkpoint->pods.at(0).containers.at(0).devices[kGpu];
  ASSERT_THAT(ids, SizeIs(1));
  ids.push_back(ids[0]);
  // And one the plugin never offered, kept but said.
  ids.push_back("gpu-unknown");
  WriteCheckpoint(*checkpoint);
  StartHost();
  const auto status = host_->StatusJson();
  ASSERT_THAT(status["pods"], SizeIs(1));
  const auto& held = status["pods"][0]["containers"][0]["devices"][kGpu];
  ASSERT_THAT(held, SizeIs(2));
  EXPECT_NE(held[0], held[1]);
}

// Head-of-line blocking costs one deadline, not K: with K pods queued on a
// hung plugin, a pod that needs nothing from it is admitted after at most
// about one --plugin-rpc-timeout; the K are refused, the first after its
// deadline, the rest at once (the plugin is not called again until a
// cool-off has passed). A plugin that answers again is called again.
TEST_F(HostTest, PodsQueuedOnAHungPluginCostOneDeadline) {
  Gate hang;
  auto config = Config();
  config.rpc_timeout = 400ms;
  config.clock = &clock_;  // the cool-off ends when the test says
  StartHost(config);
  auto gpus = Plugin("a.sock", FourGpus());
  auto nics =
      Plugin("n.sock", {MakeDevice("nic-0", {0})}, {}, "example.com/nic");
  ASSERT_TRUE(WaitFor([&] {
    return View().allocatable == 4 && View("example.com/nic").allocatable == 1;
  }));
  gpus->SetAllocate([&](const v1beta1::AllocateRequest& request,
                        v1beta1::AllocateResponse* response) {
    hang.Wait();
    for (int i = 0; i < request.container_requests_size(); ++i) {
      response->add_container_responses();
    }
    return grpc::Status::OK;
  });
  constexpr int kQueued = 5;
  const auto start = std::chrono::steady_clock::now();
  std::vector<std::future<PodResult>> queued;
  for (int i = 0; i < kQueued; ++i) {
    queued.push_back(std::async(std::launch::async, [&, i] {
      return host_->Admit(MakePod("gpu-pod-" + std::to_string(i), {{kGpu, 1}}),
                          false);
    }));
  }
  // The GPU pods are in the queue first: one holds the plugin.
  ASSERT_TRUE(WaitFor([&] { return hang.waiting() == 1; }));
  const PodResult unrelated =
      host_->Admit(MakePod("nic-pod", {{"example.com/nic", 1}}), false);
  const auto waited = std::chrono::steady_clock::now() - start;
  EXPECT_TRUE(unrelated.admitted) << unrelated.message;
  // One deadline (and scheduling), never K of them.
  EXPECT_LT(waited, 2 * config.rpc_timeout)
      << "waited "
      << std::chrono::duration_cast<std::chrono::milliseconds>(waited).count()
      << " ms";
  for (auto& pod : queued) {
    const PodResult result = pod.get();
    EXPECT_FALSE(result.admitted);
    EXPECT_EQ(result.reason, "UnexpectedAdmissionError");
  }
  EXPECT_EQ(host_->StatusJson()["resources"][0]["in_use"], 0);
  // The plugin answers again: after the cool-off it is tried and used.
  hang.Open();
  clock_.Advance(config.rpc_timeout);
  const PodResult later = host_->Admit(MakePod("later", {{kGpu, 1}}), false);
  EXPECT_TRUE(later.admitted) << later.message;
}

// An admission through the control socket whose Allocate takes a while.
// `channel`: the client's connection, shared with the calls the test makes
// meanwhile.
std::future<grpc::Status> AdmitThrough(
    const std::shared_ptr<grpc::Channel>& channel, const std::string& name,
    std::string* reply_json) {
  return std::async(std::launch::async, [channel, name, reply_json] {
    auto stub = topologymanager::v1alpha1::Control::NewStub(channel);
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + 20s);
    topologymanager::v1alpha1::AdmitRequest request;
    auto* manifest = request.add_manifests();
    manifest->set_source(name + ".yaml");
    manifest->set_yaml("apiVersion: v1\nkind: Pod\nmetadata: {name: " + name +
                       ", uid: uid-" + name +
                       "}\nspec:\n  containers:\n  - name: main\n    "
                       "resources:\n      limits: {example.com/gpu: 1}\n");
    topologymanager::v1alpha1::JsonReply reply;
    grpc::Status status = stub->Admit(&context, request, &reply);
    *reply_json = reply.json();
    return status;
  });
}

// A flood of connections beyond the cap closes idle connections only: an
// admission in flight on the control socket is answered, and the pod it
// admitted is the one the answer names.
TEST_F(HostTest, TheConnectionCapNeverCutsACallInFlight) {
  auto config = Config();
  config.control_socket = dir_.path() / "control.sock";
  StartHost(config);
  auto plugin = Plugin("a.sock", FourGpus());
  ASSERT_TRUE(WaitFor([&] { return View().allocatable == 4; }));
  std::promise<void> allocating;
  std::atomic<bool> first{true};
  Gate hold;
  plugin->SetAllocate([&](const v1beta1::AllocateRequest& request,
                          v1beta1::AllocateResponse* response) {
    if (first.exchange(false)) allocating.set_value();
    hold.Wait();
    for (int i = 0; i < request.container_requests_size(); ++i) {
      response->add_container_responses();
    }
    return grpc::Status::OK;
  });
  auto channel = grpc::CreateChannel("unix:" + config.control_socket.string(),
                                     grpc::InsecureChannelCredentials());
  std::string reply;
  auto admitted = AdmitThrough(channel, "busy", &reply);
  allocating.get_future().wait();
  std::vector<int> flood;
  for (int i = 0; i < 300; ++i) {
    const int fd = ConnectIdle(config.control_socket);
    if (fd >= 0) flood.push_back(fd);
  }
  // Accepted, and the cap enforced on the idle ones.
  EXPECT_TRUE(
      WaitFor([&] { return host_->ControlConnections().evicted > 0; }, 10s));
  EXPECT_EQ(host_->ControlConnections().refused, 0u);
  hold.Open();
  const grpc::Status status = admitted.get();
  for (int fd : flood) close(fd);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_THAT(reply, HasSubstr("\"admitted\":true"));
  EXPECT_THAT(host_->StatusJson()["pods"], SizeIs(1));
}

}  // namespace
}  // namespace topology::host
