// Part P of the device plugin conformance checklist for the framework, over
// real gRPC on unix sockets in a temp directory against an in-process fake
// kubelet. Test names carry the checklist number (P01 = item 1).
#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <future>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>

#include <grpcpp/generic/generic_stub.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "topology/plugin/plugin_runner.h"
#include "topology/plugin/resource_name.h"
#include "topology/testing/fake_clock.h"
#include "topology/testing/fake_kubelet.h"

#include "plugin_test_support.h"
#include "socket_util.h"
#include "status_matchers.h"
#include "temp_dir.h"
#include "time_scale.h"
#include "wait_for.h"

namespace topology::testing {
namespace {

using namespace std::chrono_literals;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::SizeIs;

constexpr char kResource[] = "example.com/dev";

class FrameworkTest : public ::testing::Test {
 protected:
  plugin::RunnerOptions Options() const {
    plugin::RunnerOptions options;
    options.plugin_dir = dir_.path();
    options.initial_backoff = 200ms;
    options.max_backoff = 1s;
    options.stream_gap = 0ms;
    return options;
  }

  // Starts the plugin with `devices` (and a fake kubelet first when asked).
  void StartPlugin(std::vector<plugin::Device> devices,
                   const plugin::RunnerOptions& options,
                   const std::shared_ptr<ScriptedHandler>& handler = nullptr) {
    handler_ = handler ? handler : std::make_shared<ScriptedHandler>();
    runner_ = std::make_unique<plugin::PluginRunner>(options);
    auto publisher =
        runner_->AddResource(kResource, handler_, std::move(devices));
    ASSERT_THAT(publisher.status(), IsOk());
    publisher_ = *publisher;
    ASSERT_THAT(runner_->Start(), IsOk());
  }
  void StartPlugin(std::vector<plugin::Device> devices) {
    StartPlugin(std::move(devices), Options());
  }

  // The fake kubelet serving, the plugin started with `devices`, and the
  // kubelet's connection to it (null on failure).
  std::shared_ptr<PluginConnection> Connected(
      std::vector<plugin::Device> devices,
      const std::shared_ptr<ScriptedHandler>& handler = nullptr) {
    kubelet_.Start();
    StartPlugin(std::move(devices), Options(), handler);
    auto connection = Connection();
    // As the kubelet, which only allocates devices it has been sent: the
    // first list has arrived before the test calls the plugin.
    if (connection && !connection->WaitForMessages(1, 5s)) return nullptr;
    return connection;
  }

  std::shared_ptr<PluginConnection> Connection(
      size_t min_accepted = 1, std::chrono::milliseconds timeout = 10s) {
    return kubelet_.WaitForConnection(kResource, timeout, min_accepted);
  }

  TempDir dir_;
  FakeKubelet kubelet_{dir_.path()};
  std::shared_ptr<ScriptedHandler> handler_;
  // For tests that set options.clock = &clock_ and advance it rather than
  // sleep through a back-off. Outlives the runner.
  topology::testing::FakeClock clock_;
  std::unique_ptr<plugin::PluginRunner> runner_;
  plugin::ResourcePublisher* publisher_ = nullptr;
};

// Whether GetDevicePluginOptions answers on `connection`.
bool OptionsAnswer(PluginConnection& connection) {
  grpc::ClientContext context;
  v1beta1::DevicePluginOptions options;
  return connection.stub()
      .GetDevicePluginOptions(&context, v1beta1::Empty(), &options)
      .ok();
}

// Calls `path` on `channel` with `bytes` as the request, as any client
// could (no generated stub, so the bytes need not be a valid message).
grpc::Status RawUnaryCall(const std::shared_ptr<grpc::Channel>& channel,
                          const std::string& path, const std::string& bytes) {
  grpc::GenericStub generic(channel);
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + 5s);
  grpc::Slice slice(bytes);
  grpc::ByteBuffer in(&slice, 1);
  grpc::ByteBuffer out;
  std::promise<grpc::Status> done;
  generic.UnaryCall(
      &context, path, grpc::StubOptions(), &in, &out,
      [&](const grpc::Status& status) { done.set_value(status); });
  return done.get_future().get();
}

std::vector<std::string> Ids(const v1beta1::ListAndWatchResponse& response) {
  std::vector<std::string> ids;
  for (const auto& device : response.devices()) ids.push_back(device.id());
  return ids;
}

// --- P.a Startup and registration -----------------------------------------

TEST_F(FrameworkTest, P01_ServesBeforeRegistering) {
  auto connection = Connected(MakeDevices(2));
  ASSERT_NE(connection, nullptr);
  (void)WaitFor([&] { return publisher_->registered(); }, 1s);
  ASSERT_TRUE(publisher_->registered());
  // The fake kubelet dialled back and read the options inside Register.
  EXPECT_TRUE(kubelet_.options_before_reply());
}

TEST_F(FrameworkTest, P02_RegisterRequestFields) {
  auto connection = Connected(MakeDevices(2));
  ASSERT_NE(connection, nullptr);
  const auto& request = connection->request();
  EXPECT_EQ(request.version(), "v1beta1");
  EXPECT_THAT(plugin::ValidateEndpointName(request.endpoint()), IsOk());
  EXPECT_EQ(request.endpoint().find('/'), std::string::npos);
  EXPECT_NE(request.endpoint(), "kubelet.sock");
  EXPECT_EQ(request.resource_name(), kResource);
  EXPECT_TRUE(std::filesystem::exists(dir_.path() / request.endpoint()));
}

TEST_F(FrameworkTest, P03_RegisterOptionsEqualGetDevicePluginOptions) {
  auto connection = Connected(MakeDevices(2));
  ASSERT_NE(connection, nullptr);
  EXPECT_EQ(connection->request().options().SerializeAsString(),
            connection->options().SerializeAsString());
  EXPECT_TRUE(connection->options().pre_start_required());
  EXPECT_TRUE(connection->options().get_preferred_allocation_available());
}

TEST_F(FrameworkTest, P04_MethodPathsAndUnknownMethod) {
  auto connection = Connected(MakeDevices(2));
  ASSERT_NE(connection, nullptr);
  auto call = [&](const std::string& path,
                  const google::protobuf::Message& request) {
    return RawUnaryCall(connection->channel(), path,
                        request.SerializeAsString());
  };
  v1beta1::Empty empty;
  v1beta1::AllocateRequest allocate;
  allocate.add_container_requests()->add_devices_ids("dev-0");
  v1beta1::PreferredAllocationRequest preferred;
  auto* container = preferred.add_container_requests();
  container->add_available_deviceids("dev-0");
  container->set_allocation_size(1);
  v1beta1::PreStartContainerRequest pre_start;
  pre_start.add_devices_ids("dev-0");
  EXPECT_TRUE(call("/v1beta1.DevicePlugin/GetDevicePluginOptions", empty).ok());
  EXPECT_TRUE(call("/v1beta1.DevicePlugin/Allocate", allocate).ok());
  EXPECT_TRUE(
      call("/v1beta1.DevicePlugin/GetPreferredAllocation", preferred).ok());
  EXPECT_TRUE(call("/v1beta1.DevicePlugin/PreStartContainer", pre_start).ok());
  EXPECT_EQ(call("/v1beta2.DevicePlugin/Allocate", allocate).error_code(),
            grpc::StatusCode::UNIMPLEMENTED);
  // ListAndWatch answers on its path too (it is server-streaming).
  EXPECT_TRUE(connection->WaitForMessages(1, Scaled(2s)));
}

// GetPreferredAllocation reads its request itself (into an arena): bytes
// that are no PreferredAllocationRequest get a clear error, and the socket
// goes on answering.
TEST_F(FrameworkTest, UnreadablePreferredRequestIsRefusedAndServingGoesOn) {
  auto connection = Connected(MakeDevices(2));
  ASSERT_NE(connection, nullptr);
  const auto call = [&](const std::string& bytes) {
    return RawUnaryCall(connection->channel(),
                        "/v1beta1.DevicePlugin/GetPreferredAllocation", bytes);
  };
  // Field 1 (container_requests) says 100 bytes follow; 2 do.
  const grpc::Status garbage = call(std::string("\x0a\x64\x0a\x01", 4));
  EXPECT_EQ(garbage.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(garbage.error_message(),
              HasSubstr("GetPreferredAllocation: the request could not be "
                        "read"));
  v1beta1::PreferredAllocationRequest request;
  auto* container = request.add_container_requests();
  container->add_available_deviceids("dev-0");
  container->add_available_deviceids("dev-1");
  container->set_allocation_size(1);
  EXPECT_TRUE(call(request.SerializeAsString()).ok());
  v1beta1::PreferredAllocationResponse response;
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + 5s);
  ASSERT_TRUE(connection->stub()
                  .GetPreferredAllocation(&context, request, &response)
                  .ok());
  ASSERT_EQ(response.container_responses_size(), 1);
  EXPECT_EQ(response.container_responses(0).deviceids_size(), 1);
}

TEST_F(FrameworkTest, P05_NoDeadlockWhileRegisterPending) {
  kubelet_.SetReplyDelay(3s);
  kubelet_.Start();
  const auto start = std::chrono::steady_clock::now();
  StartPlugin(MakeDevices(2));
  auto connection = Connection(1, 5s);
  ASSERT_NE(connection, nullptr);
  // Options were read and the list streamed while Register was held.
  EXPECT_TRUE(connection->WaitForMessages(1, Scaled(2s)));
  EXPECT_LT(connection->messages()[0].received - start, 2500ms);
  EXPECT_TRUE(OptionsAnswer(*connection));
  (void)WaitFor([&] { return publisher_->registered(); }, 4s);
  EXPECT_TRUE(publisher_->registered());
}

TEST_F(FrameworkTest, P06_ListAndWatchBeforeRegisterReply) {
  kubelet_.SetReplyDelay(1s);
  auto connection = Connected(MakeDevices(3));
  ASSERT_NE(connection, nullptr);
  ASSERT_TRUE(connection->WaitForMessages(1, Scaled(2s)));
  (void)WaitFor([&] { return publisher_->registered(); }, 3s);
  EXPECT_TRUE(kubelet_.first_list_before_reply());
  EXPECT_THAT(Ids(connection->messages()[0].response), SizeIs(3));
}

TEST_F(FrameworkTest, P07_RejectedRegisterRetriesWithBackoff) {
  kubelet_.SetDenial(grpc::Status(
      grpc::StatusCode::UNKNOWN,
      "requested API version \"v1beta1\" is not supported by kubelet. "
      "Supported version is [\"v1\"]"));
  kubelet_.Start();
  auto options = Options();
  options.initial_backoff = 1min;
  options.max_backoff = 4min;
  options.clock = &clock_;
  StartPlugin(MakeDevices(2), options);
  // Attempts the plugin has seen fail (so its back-off is set), waiting at
  // most `wait` of real time for the n-th.
  const auto failures_within = [&](uint64_t n, std::chrono::milliseconds wait) {
    (void)WaitFor(
        [&] { return publisher_->stats().registration_failures >= n; }, wait);
    return publisher_->stats().registration_failures;
  };
  // At 0, 1 and 3 minutes by the plugin's clock: a back-off of 1 minute,
  // doubling; never a busy loop, however much real time passes between.
  EXPECT_EQ(failures_within(1, 5s), 1u);
  EXPECT_EQ(failures_within(2, 200ms), 1u);
  clock_.Advance(1min);
  EXPECT_EQ(failures_within(2, 5s), 2u);
  clock_.Advance(1min);
  EXPECT_EQ(failures_within(3, 200ms), 2u);
  clock_.Advance(1min);
  EXPECT_EQ(failures_within(3, 5s), 3u);
  EXPECT_EQ(kubelet_.register_attempts(), 3u);
  EXPECT_FALSE(publisher_->registered());
  kubelet_.SetDenial(std::nullopt);
  clock_.Advance(4min);
  EXPECT_NE(Connection(1, 6s), nullptr);
  EXPECT_EQ(kubelet_.accepted_registrations(), 1u);
}

TEST_F(FrameworkTest, P08_InvalidResourceNameIsAConfigurationError) {
  plugin::PluginRunner runner(Options());
  for (const char* name : {"foo", "example.com/", "Example.com/foo",
                           "kubernetes.io/foo", "example.com/-foo"}) {
    auto added = runner.AddResource(name, std::make_shared<ScriptedHandler>(),
                                    MakeDevices(1));
    EXPECT_THAT(added.status(),
                StatusIs(StatusCode::kInvalidArgument,
                         HasSubstr("the ResourceName \"" + std::string(name) +
                                   "\" is invalid")));
  }
}

TEST_F(FrameworkTest, P09_KubeletSocketAppearsLater) {
  StartPlugin(MakeDevices(2));
  // Retrying with back-off (200 ms, doubling) while there is no kubelet.
  ASSERT_TRUE(WaitFor(
      [&] { return publisher_->stats().registration_failures >= 2; }, 10s));
  EXPECT_FALSE(publisher_->registered());
  const auto created = std::chrono::steady_clock::now();
  kubelet_.Start();
  auto connection = Connection(1, 5s);
  ASSERT_NE(connection, nullptr);
  // The directory watch registers at once, well inside one retry interval.
  EXPECT_LT(kubelet_.register_times().back() - created, 1s);
}

TEST_F(FrameworkTest, P10_StaleKubeletSocketIsRetried) {
  MakeDeadSocket(dir_.path() / "kubelet.sock");
  StartPlugin(MakeDevices(2));
  ASSERT_TRUE(WaitFor(
      [&] { return publisher_->stats().registration_failures >= 1; }, 10s));
  EXPECT_FALSE(publisher_->registered());
  kubelet_.Start();
  EXPECT_NE(Connection(1, 5s), nullptr);
}

TEST_F(FrameworkTest, P11_CannotBindIsAClearErrorAndNothingRegisters) {
  kubelet_.Start();
  // Occupy the first socket path with a non-empty directory.
  plugin::RunnerOptions options = Options();
  options.instance = "1-cafe0001";
  const auto blocked =
      dir_.path() / "topology-example.com_dev-1-cafe0001-0.sock";
  std::filesystem::create_directories(blocked / "child");
  plugin::PluginRunner runner(options);
  ASSERT_THAT(runner
                  .AddResource(kResource, std::make_shared<ScriptedHandler>(),
                               MakeDevices(1))
                  .status(),
              IsOk());
  // Not ours: never deleted, and nothing registers.
  EXPECT_THAT(runner.Start(),
              StatusIs(StatusCode::kFailedPrecondition,
                       HasSubstr("exists and is not this instance's")));
  EXPECT_TRUE(std::filesystem::exists(blocked / "child"));
  std::this_thread::sleep_for(500ms);
  EXPECT_EQ(kubelet_.register_attempts(), 0u);

  plugin::RunnerOptions missing = Options();
  missing.plugin_dir = dir_.path() / "does-not-exist";
  plugin::PluginRunner runner2(missing);
  ASSERT_THAT(runner2
                  .AddResource(kResource, std::make_shared<ScriptedHandler>(),
                               MakeDevices(1))
                  .status(),
              IsOk());
  EXPECT_THAT(runner2.Start(), StatusIs(StatusCode::kFailedPrecondition,
                                        HasSubstr("does not exist")));
}

TEST_F(FrameworkTest, P13_LongSocketPathRefusedAtStartup) {
  const auto deep = dir_.path() / std::string(90, 'd');
  std::filesystem::create_directories(deep);
  plugin::RunnerOptions options = Options();
  options.plugin_dir = deep;
  plugin::PluginRunner runner(options);
  ASSERT_THAT(runner
                  .AddResource(kResource, std::make_shared<ScriptedHandler>(),
                               MakeDevices(1))
                  .status(),
              IsOk());
  EXPECT_THAT(runner.Start(), StatusIs(StatusCode::kInvalidArgument,
                                       HasSubstr("unix sockets allow 107")));
}

TEST_F(FrameworkTest, P14_StaleOwnSocketsAreRemoved) {
  const auto stale =
      dir_.path() / "topology-example.com_dev-999999-0badf00d-3.sock";
  MakeDeadSocket(stale);
  const auto unrelated = dir_.path() / "other-plugin.sock";
  MakeDeadSocket(unrelated);
  kubelet_.Start();
  StartPlugin(MakeDevices(1));
  EXPECT_FALSE(std::filesystem::exists(stale));
  EXPECT_TRUE(std::filesystem::exists(unrelated));  // not ours to remove
  auto connection = Connection();
  ASSERT_NE(connection, nullptr);
  // "<prefix>-<resource>-<pid>-<8 random hex>-<n>.sock".
  EXPECT_THAT(connection->request().endpoint(),
              ::testing::MatchesRegex("topology-example\\.com_dev-" +
                                      std::to_string(getpid()) +
                                      "-[0-9a-f]{8}-0\\.sock"));
  EXPECT_TRUE(connection->WaitForMessages(1, Scaled(2s)));
}

// A surge rollout: a second instance starts beside the first in the same
// directory (both pid 1 in their containers), registers, and exits later.
// Neither deletes the other's socket; the first stands aside while the
// second serves (not ready, no registration of its own), and registers
// again once the second's socket is gone.
TEST_F(FrameworkTest, TwoInstancesOverlapAndTheFirstOutlivesTheSecond) {
  kubelet_.Start();
  const auto until = [](const std::function<bool()>& done) {
    return WaitFor(done, 5s);
  };
  plugin::RunnerOptions first_options = Options();
  first_options.instance = "1-aaaaaaaa";
  plugin::PluginRunner first(first_options);
  auto first_resource = first.AddResource(
      kResource, std::make_shared<ScriptedHandler>(), MakeDevices(2));
  ASSERT_THAT(first_resource.status(), IsOk());
  ASSERT_THAT(first.Start(), IsOk());
  auto connection = Connection(1);
  ASSERT_NE(connection, nullptr);
  const std::string first_endpoint = connection->request().endpoint();
  EXPECT_EQ(first_endpoint, "topology-example.com_dev-1-aaaaaaaa-0.sock");
  ASSERT_TRUE(until([&] { return (*first_resource)->registered(); }));

  auto second = std::make_unique<plugin::PluginRunner>([&] {
    plugin::RunnerOptions options = Options();
    options.instance = "1-bbbbbbbb";
    return options;
  }());
  ASSERT_THAT(second
                  ->AddResource(kResource, std::make_shared<ScriptedHandler>(),
                                MakeDevices(3))
                  .status(),
              IsOk());
  ASSERT_THAT(second->Start(), IsOk());
  connection = Connection(2);
  ASSERT_NE(connection, nullptr);
  EXPECT_EQ(connection->request().endpoint(),
            "topology-example.com_dev-1-bbbbbbbb-0.sock");
  EXPECT_TRUE(until([&] {
    return (*first_resource)->superseded() && !(*first_resource)->registered();
  }));
  // No tug of war: the two register once each, both sockets stay.
  std::this_thread::sleep_for(500ms);
  EXPECT_EQ(kubelet_.accepted_registrations(), 2U);
  EXPECT_TRUE(std::filesystem::exists(dir_.path() / first_endpoint));

  second->Stop();
  second.reset();
  connection = Connection(3, 5s);
  ASSERT_NE(connection, nullptr);
  EXPECT_EQ(connection->request().endpoint(), first_endpoint);
  EXPECT_TRUE(connection->WaitForMessages(1, Scaled(2s)));
  EXPECT_EQ(connection->latest()->devices_size(), 2);
  EXPECT_TRUE(until([&] {
    return (*first_resource)->registered() && !(*first_resource)->superseded();
  }));
}

// A newer instance killed with -9 leaves its socket file, served by nobody:
// the older one notices within seconds and registers again.
TEST_F(FrameworkTest, ANewerInstanceThatDiedLeavesNoSilence) {
  kubelet_.Start();
  StartPlugin(MakeDevices(1));
  ASSERT_NE(Connection(1), nullptr);
  (void)WaitFor([&] { return publisher_->registered(); }, 5s);
  ASSERT_TRUE(publisher_->registered());
  // What a killed instance leaves: a socket file nobody listens on.
  MakeDeadSocket(dir_.path() / "topology-example.com_dev-1-deadbeef-0.sock");
  (void)WaitFor([&] { return publisher_->superseded(); }, 2s);
  EXPECT_TRUE(publisher_->superseded());
  auto again = Connection(2, 10s);
  ASSERT_NE(again, nullptr);
  EXPECT_FALSE(publisher_->superseded());
}

TEST_F(FrameworkTest, P15_OptionsAreStable) {
  auto connection = Connected(MakeDevices(1));
  ASSERT_NE(connection, nullptr);
  std::string first;
  for (int i = 0; i < 5; ++i) {
    grpc::ClientContext context;
    v1beta1::DevicePluginOptions options;
    ASSERT_TRUE(
        connection->stub()
            .GetDevicePluginOptions(&context, v1beta1::Empty(), &options)
            .ok());
    if (i == 0) first = options.SerializeAsString();
    EXPECT_EQ(options.SerializeAsString(), first);
  }
}

// --- P.b ListAndWatch -------------------------------------------------------

TEST_F(FrameworkTest, P16_FirstMessageIsImmediateAndFull) {
  auto connection = Connected(MakeDevices(16));
  ASSERT_NE(connection, nullptr);
  ASSERT_TRUE(connection->WaitForMessages(1, Scaled(1s)));
  const auto first = connection->messages()[0];
  EXPECT_LT(first.received - connection->stream_opened(), 1s);
  EXPECT_THAT(Ids(first.response), SizeIs(16));
}

TEST_F(FrameworkTest, P17_P18_HealthStringsIdsAndTopology) {
  kubelet_.Start();
  auto devices = MakeDevices(6);
  devices[1].health = plugin::Health::kUnhealthy;
  devices[2].numa_nodes.clear();
  devices[3].numa_nodes = {0, 1};
  StartPlugin(devices);
  auto connection = Connection();
  ASSERT_NE(connection, nullptr);
  ASSERT_TRUE(connection->WaitForMessages(1, Scaled(2s)));
  std::set<std::string> ids;
  const v1beta1::ListAndWatchResponse latest = *connection->latest();
  for (const auto& device : latest.devices()) {
    EXPECT_TRUE(device.health() == "Healthy" || device.health() == "Unhealthy");
    EXPECT_FALSE(device.id().empty());
    EXPECT_LE(device.id().size(), 63u);
    EXPECT_TRUE(ids.insert(device.id()).second);
    if (device.has_topology()) {
      EXPECT_GE(device.topology().nodes_size(), 1);
      for (const auto& node : device.topology().nodes())
        EXPECT_GE(node.id(), 0);
    }
  }
  EXPECT_EQ(latest.devices(1).health(), "Unhealthy");
  EXPECT_FALSE(latest.devices(2).has_topology());
  EXPECT_EQ(latest.devices(3).topology().nodes_size(), 2);

  // The publisher refuses what the kubelet would mis-read, keeping the list.
  auto bad = MakeDevices(2);
  bad[1].numa_nodes = {-1};
  EXPECT_THAT(
      publisher_->SetDevices(bad),
      StatusIs(StatusCode::kInvalidArgument, HasSubstr("negative NUMA")));
  bad = MakeDevices(2);
  bad[1].id = std::string(64, 'x');
  EXPECT_THAT(publisher_->SetDevices(bad),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("63 bytes")));
  bad = MakeDevices(2);
  bad[1].id = bad[0].id;
  EXPECT_THAT(publisher_->SetDevices(bad),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("twice")));
  bad[1].id = "";
  EXPECT_THAT(publisher_->SetDevices(bad),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("empty id")));
  EXPECT_THAT(publisher_->devices(), SizeIs(6));
}

TEST_F(FrameworkTest, P19_HealthChangeStreamsTheFullList) {
  kubelet_.Start();
  auto devices = MakeDevices(8);
  StartPlugin(devices);
  auto connection = Connection();
  ASSERT_NE(connection, nullptr);
  ASSERT_TRUE(connection->WaitForMessages(1, Scaled(2s)));
  devices[5].health = plugin::Health::kUnhealthy;
  const auto changed = std::chrono::steady_clock::now();
  ASSERT_THAT(publisher_->SetDevices(devices), IsOk());
  ASSERT_TRUE(connection->WaitForMessages(2, Scaled(1s)));
  const auto messages = connection->messages();
  EXPECT_LT(messages[1].received - changed, 1s);
  ASSERT_EQ(messages[1].response.devices_size(), 8);
  for (int i = 0; i < 8; ++i) {
    EXPECT_EQ(messages[1].response.devices(i).id(),
              messages[0].response.devices(i).id());
    EXPECT_EQ(messages[1].response.devices(i).health(),
              i == 5 ? "Unhealthy" : "Healthy");
  }
  // An unchanged list is not streamed again: the next message is the next
  // change (the stream keeps the order of the lists).
  ASSERT_THAT(publisher_->SetDevices(devices), IsOk());
  devices.pop_back();
  ASSERT_THAT(publisher_->SetDevices(devices), IsOk());
  ASSERT_TRUE(connection->WaitForMessages(3, Scaled(2s)));
  EXPECT_EQ(connection->messages()[2].response.devices_size(), 7);
}

TEST_F(FrameworkTest, P20_RemovalSendsTheRemainingDevices) {
  kubelet_.Start();
  auto devices = MakeDevices(4);
  StartPlugin(devices);
  auto connection = Connection();
  ASSERT_NE(connection, nullptr);
  ASSERT_TRUE(connection->WaitForMessages(1, Scaled(2s)));
  devices.erase(devices.begin() + 1);
  ASSERT_THAT(publisher_->SetDevices(devices), IsOk());
  ASSERT_TRUE(connection->WaitForMessages(2, Scaled(1s)));
  EXPECT_THAT(Ids(*connection->latest()),
              ElementsAre("dev-0", "dev-2", "dev-3"));
}

TEST_F(FrameworkTest, P21_IdleStreamStaysOpen) {
  auto connection = Connected(MakeDevices(2));
  ASSERT_NE(connection, nullptr);
  ASSERT_TRUE(connection->WaitForMessages(1, Scaled(2s)));
  // Nothing changes for a while: the stream neither ends nor repeats.
  EXPECT_FALSE(connection->WaitForEnd(3s).has_value());
  EXPECT_THAT(connection->messages(), SizeIs(1));
}

TEST_F(FrameworkTest, P22_P23_NewStreamsGetTheCurrentList) {
  kubelet_.Start();
  auto devices = MakeDevices(3);
  StartPlugin(devices);
  auto first = Connection();
  ASSERT_NE(first, nullptr);
  ASSERT_TRUE(first->WaitForMessages(1, Scaled(2s)));
  // A second stream on the same socket while the first lives (takeover).
  grpc::ClientContext context;
  auto second = first->stub().ListAndWatch(&context, v1beta1::Empty());
  v1beta1::ListAndWatchResponse response;
  ASSERT_TRUE(second->Read(&response));
  EXPECT_THAT(Ids(response), SizeIs(3));
  devices.pop_back();
  ASSERT_THAT(publisher_->SetDevices(devices), IsOk());
  ASSERT_TRUE(second->Read(&response));
  EXPECT_THAT(Ids(response), SizeIs(2));
  ASSERT_TRUE(first->WaitForMessages(2, Scaled(1s)));
  EXPECT_EQ(publisher_->stats().open_streams, 2u);
  // The first stream is cancelled; later changes reach the second.
  first->Cancel();
  ASSERT_TRUE(first->WaitForEnd(2s).has_value());
  devices.pop_back();
  ASSERT_THAT(publisher_->SetDevices(devices), IsOk());
  ASSERT_TRUE(second->Read(&response));
  EXPECT_THAT(Ids(response), SizeIs(1));
  context.TryCancel();
  second->Finish().IgnoreError();
}

TEST_F(FrameworkTest, P24_CancelCyclesDoNotLeak) {
  auto connection = Connected(MakeDevices(4));
  ASSERT_NE(connection, nullptr);
  auto cycle = [&](int n) {
    for (int i = 0; i < n; ++i) {
      grpc::ClientContext context;
      auto stream = connection->stub().ListAndWatch(&context, v1beta1::Empty());
      v1beta1::ListAndWatchResponse response;
      ASSERT_TRUE(stream->Read(&response));
      context.TryCancel();
      (void)stream->Finish();
    }
  };
  cycle(50);  // warm up gRPC's lazily created threads
  std::this_thread::sleep_for(200ms);
  const size_t threads = CountThreads();
  const size_t fds = CountOpenFds();
  cycle(1000);
  (void)WaitFor([&] { return publisher_->stats().open_streams <= 1; }, 1s);
  EXPECT_EQ(publisher_->stats().open_streams, 1u);  // the fake kubelet's
  // gRPC sizes its own thread pools with the load (a few threads either
  // way); a leak would grow with the 1,000 cycles.
  EXPECT_LE(CountThreads(), threads + 8);
  EXPECT_LE(CountOpenFds(), fds + 4);
}

// 10,000 devices with 63-byte ids and one NUMA node each.
std::vector<plugin::Device> LongIdDevices(int count) {
  std::vector<plugin::Device> devices;
  for (int i = 0; i < count; ++i) {
    std::string id = "device-" + std::to_string(i) + "-";
    id.resize(63, 'x');
    devices.push_back(
        {.id = id, .health = plugin::Health::kHealthy, .numa_nodes = {i % 8}});
  }
  return devices;
}

TEST_F(FrameworkTest, P25_TenThousandDevicesInOneMessage) {
  auto connection = Connected(LongIdDevices(10000));
  ASSERT_NE(connection, nullptr);
  ASSERT_TRUE(connection->WaitForMessages(1, Scaled(2s)));
  const auto first = connection->messages()[0];
  EXPECT_EQ(first.response.devices_size(), 10000);
  EXPECT_LT(first.response.ByteSizeLong(), 4u << 20);
  EXPECT_LT(first.received - connection->stream_opened(), 1s);
}

TEST_F(FrameworkTest, P26_OversizedListIsRefusedNotSent) {
  auto connection = Connected(MakeDevices(2));
  ASSERT_NE(connection, nullptr);
  ASSERT_TRUE(connection->WaitForMessages(1, Scaled(2s)));
  EXPECT_THAT(publisher_->SetDevices(LongIdDevices(60000)),
              StatusIs(StatusCode::kResourceExhausted,
                       HasSubstr("more than the kubelet receives")));
  EXPECT_THAT(publisher_->devices(), SizeIs(2));
  // Not sent: the next message is the next list accepted (the stream keeps
  // the order of the lists).
  ASSERT_THAT(publisher_->SetDevices(MakeDevices(3)), IsOk());
  ASSERT_TRUE(connection->WaitForMessages(2, Scaled(2s)));
  EXPECT_EQ(connection->messages()[1].response.devices_size(), 3);
  // And at start-up, before anything is served.
  plugin::PluginRunner runner(Options());
  EXPECT_THAT(
      runner
          .AddResource("example.com/other", std::make_shared<ScriptedHandler>(),
                       LongIdDevices(60000))
          .status(),
      StatusIs(StatusCode::kResourceExhausted));
}

// --- P.c GetPreferredAllocation (framework checks) --------------------------

class FrameworkRpcTest : public FrameworkTest {
 protected:
  void SetUp() override {
    kubelet_.Start();
    StartPlugin(MakeDevices(8));
    connection_ = Connection();
    ASSERT_NE(connection_, nullptr);
    ASSERT_TRUE(connection_->WaitForMessages(1, Scaled(2s)));
  }

  grpc::Status Preferred(const std::vector<std::string>& available,
                         const std::vector<std::string>& must, int size,
                         v1beta1::PreferredAllocationResponse* response) {
    v1beta1::PreferredAllocationRequest request;
    auto* container = request.add_container_requests();
    for (const auto& id : available) container->add_available_deviceids(id);
    for (const auto& id : must) container->add_must_include_deviceids(id);
    container->set_allocation_size(size);
    grpc::ClientContext context;
    return connection_->stub().GetPreferredAllocation(&context, request,
                                                      response);
  }

  grpc::Status Allocate(const std::vector<std::vector<std::string>>& containers,
                        v1beta1::AllocateResponse* response) {
    v1beta1::AllocateRequest request;
    for (const auto& ids : containers) {
      auto* container = request.add_container_requests();
      for (const auto& id : ids) container->add_devices_ids(id);
    }
    grpc::ClientContext context;
    return connection_->stub().Allocate(&context, request, response);
  }

  std::shared_ptr<PluginConnection> connection_;
};

TEST_F(FrameworkRpcTest, P27_OneAnswerPerRequestInOrder) {
  v1beta1::PreferredAllocationRequest request;
  for (int size : {1, 3, 2}) {
    auto* container = request.add_container_requests();
    for (int i = 0; i < 8; ++i) {
      container->add_available_deviceids("dev-" + std::to_string(i));
    }
    container->set_allocation_size(size);
  }
  grpc::ClientContext context;
  v1beta1::PreferredAllocationResponse response;
  ASSERT_TRUE(connection_->stub()
                  .GetPreferredAllocation(&context, request, &response)
                  .ok());
  ASSERT_EQ(response.container_responses_size(), 3);
  EXPECT_EQ(response.container_responses(0).deviceids_size(), 1);
  EXPECT_EQ(response.container_responses(1).deviceids_size(), 3);
  EXPECT_EQ(response.container_responses(2).deviceids_size(), 2);
}

TEST_F(FrameworkRpcTest, P30_P31_MalformedRequestsAreInvalidArgument) {
  v1beta1::PreferredAllocationResponse response;
  auto code = [&](const std::vector<std::string>& available,
                  const std::vector<std::string>& must, int size) {
    response.Clear();
    return Preferred(available, must, size, &response).error_code();
  };
  const auto invalid = grpc::StatusCode::INVALID_ARGUMENT;
  EXPECT_EQ(code({"dev-0", "dev-1"}, {"dev-2"}, 2), invalid);  // must ⊄ avail
  EXPECT_EQ(code({"dev-0", "dev-1"}, {}, 3), invalid);         // size > avail
  EXPECT_EQ(code({"dev-0", "dev-1"}, {"dev-0", "dev-1"}, 1), invalid);
  EXPECT_EQ(code({"dev-0", "dev-1"}, {}, 0), invalid);
  EXPECT_EQ(code({"dev-0", "dev-1"}, {}, -4), invalid);
  // The plugin stays healthy.
  EXPECT_EQ(code({"dev-0", "dev-1"}, {}, 1), grpc::StatusCode::OK);
}

TEST_F(FrameworkRpcTest, P32_UnknownIdsRejectedDuplicatesCollapsed) {
  v1beta1::PreferredAllocationResponse response;
  grpc::Status status = Preferred({"dev-0", "nope"}, {}, 1, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(status.error_message(), HasSubstr("unknown device \"nope\""));
  // In ascending order (one walk along the index) and in any other order
  // (a search each), an unknown id anywhere is named: first, between known
  // ones, past the last.
  for (const std::vector<std::string>& ids :
       {std::vector<std::string>{"dev-0", "dev-1", "dev-15", "dev-2", "dev-7"},
        {"dev-15", "dev-7", "dev-0"},
        {"dev-", "dev-0", "dev-7"},
        {"dev-0", "dev-3", "dev-6", "dev-7", "dev-8"},
        {"dev-7", "dev-6", "dev-8"}}) {
    const std::string unknown =
        *std::find_if(ids.begin(), ids.end(), [](const std::string& id) {
          return id == "dev-15" || id == "dev-" || id == "dev-8";
        });
    status = Preferred(ids, {}, 1, &response);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_THAT(status.error_message(),
                HasSubstr("unknown device \"" + unknown + "\""));
  }
  ASSERT_TRUE(
      Preferred({"dev-0", "dev-2", "dev-3", "dev-5", "dev-7"}, {}, 2, &response)
          .ok());
  ASSERT_TRUE(Preferred({"dev-7", "dev-2", "dev-5"}, {}, 2, &response).ok());
  response.Clear();
  ASSERT_TRUE(Preferred({"dev-0", "dev-0", "dev-1", "dev-1"},
                        {"dev-1", "dev-1"}, 2, &response)
                  .ok());
  ASSERT_EQ(response.container_responses_size(), 1);
  std::set<std::string> ids(response.container_responses(0).deviceids().begin(),
                            response.container_responses(0).deviceids().end());
  EXPECT_EQ(ids, (std::set<std::string>{"dev-0", "dev-1"}));
}

TEST(MustIncludeThenInOrderTest, MustIncludeFirstThenAvailableOrder) {
  const plugin::PreferredAllocationRequest request{
      .available = {"a", "b", "c", "d"}, .must_include = {"c"}, .size = 3};
  EXPECT_THAT(plugin::MustIncludeThenInOrder(request),
              ElementsAre("c", "a", "b"));
  const plugin::PreferredAllocationRequest all{
      .available = {"a", "b"}, .must_include = {"b", "a"}, .size = 2};
  EXPECT_THAT(plugin::MustIncludeThenInOrder(all), ElementsAre("b", "a"));
}

TEST_F(FrameworkTest, P35_PreferredWithoutTheOptionDoesNotCrash) {
  auto connection = Connected(
      MakeDevices(2),
      std::make_shared<ScriptedHandler>(plugin::DevicePluginOptions{}));
  ASSERT_NE(connection, nullptr);
  EXPECT_FALSE(connection->options().get_preferred_allocation_available());
  v1beta1::PreferredAllocationRequest request;
  request.add_container_requests()->add_available_deviceids("dev-0");
  grpc::ClientContext context;
  v1beta1::PreferredAllocationResponse response;
  EXPECT_EQ(connection->stub()
                .GetPreferredAllocation(&context, request, &response)
                .error_code(),
            grpc::StatusCode::UNIMPLEMENTED);
  EXPECT_TRUE(OptionsAnswer(*connection));
}

// A handler's answer is checked before it is sent: the size asked, only
// available devices, none twice, every must-include one.
class AnswerHandler : public ScriptedHandler {
 public:
  StatusOr<std::vector<std::string>> GetPreferredAllocation(
      const plugin::PreferredAllocationRequest&) override {
    std::lock_guard lock(mu_);
    return answer;
  }
  std::vector<std::string> answer;
};

TEST_F(FrameworkTest, WrongPreferredAnswersAreInternalErrors) {
  auto handler = std::make_shared<AnswerHandler>();
  auto connection = Connected(MakeDevices(8), handler);
  ASSERT_NE(connection, nullptr);
  const auto ask = [&](std::vector<std::string> answer) {
    {
      std::lock_guard lock(handler->mu_);
      handler->answer = std::move(answer);
    }
    v1beta1::PreferredAllocationRequest request;
    auto* container = request.add_container_requests();
    // Not sorted: the framework sorts its own view.
    for (const char* id : {"dev-5", "dev-1", "dev-3", "dev-0"}) {
      container->add_available_deviceids(id);
    }
    container->add_must_include_deviceids("dev-3");
    container->set_allocation_size(2);
    grpc::ClientContext context;
    v1beta1::PreferredAllocationResponse response;
    return connection->stub().GetPreferredAllocation(&context, request,
                                                     &response);
  };
  EXPECT_TRUE(ask({"dev-3", "dev-0"}).ok());
  const struct {
    std::vector<std::string> answer;
    std::string message;
  } cases[] = {
      {{"dev-3"}, "chose 1 devices instead of 2"},
      {{"dev-3", "dev-2"}, "chose \"dev-2\", which is not available"},
      {{"dev-3", "dev-3"},
       "chose \"dev-3\", which is not available or chosen "
       "twice"},
      {{"dev-1", "dev-5"}, "left out must-include \"dev-3\""},
  };
  for (const auto& c : cases) {
    const grpc::Status status = ask(c.answer);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INTERNAL) << c.message;
    EXPECT_THAT(status.error_message(), HasSubstr(c.message));
  }
}

// --- P.d Allocate -----------------------------------------------------------

TEST_F(FrameworkRpcTest, P36_P37_OneResponsePerContainerInOrder) {
  v1beta1::AllocateResponse response;
  ASSERT_TRUE(
      Allocate({{"dev-1"}, {"dev-2", "dev-3"}, {"dev-0"}}, &response).ok());
  ASSERT_EQ(response.container_responses_size(), 3);
  EXPECT_EQ(response.container_responses(0).envs().at("DEVICES"), "dev-1");
  EXPECT_EQ(response.container_responses(1).envs().at("DEVICES"),
            "dev-2,dev-3");
  EXPECT_EQ(response.container_responses(2).envs().at("DEVICES"), "dev-0");
  for (const auto& container : response.container_responses()) {
    for (const auto& [key, value] : container.envs()) EXPECT_FALSE(key.empty());
    for (const auto& device : container.devices()) {
      EXPECT_EQ(device.permissions().find_first_not_of("rwm"),
                std::string::npos);
    }
  }
  response.Clear();
  ASSERT_TRUE(Allocate({{"dev-4"}}, &response).ok());
  EXPECT_EQ(response.container_responses_size(), 1);
}

TEST_F(FrameworkRpcTest, P38_UnknownIdRejectedWithoutSideEffects) {
  v1beta1::AllocateResponse response;
  const int calls = handler_->allocate_calls.load();
  grpc::Status status = Allocate({{"dev-0", "ghost"}}, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(status.error_message(), HasSubstr("\"ghost\""));
  EXPECT_EQ(handler_->allocate_calls.load(), calls);  // handler never saw it
  response.Clear();
  EXPECT_TRUE(Allocate({{"dev-0"}}, &response).ok());
}

TEST_F(FrameworkRpcTest, P39_UnhealthyIdRejected) {
  auto devices = MakeDevices(8);
  devices[3].health = plugin::Health::kUnhealthy;
  ASSERT_THAT(publisher_->SetDevices(devices), IsOk());
  ASSERT_TRUE(connection_->WaitForMessages(2, Scaled(1s)));
  v1beta1::AllocateResponse response;
  grpc::Status status = Allocate({{"dev-3"}}, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(status.error_message(), HasSubstr("unhealthy"));
}

TEST_F(FrameworkRpcTest, P40_P41_ReallocationAndEmptyRequests) {
  v1beta1::AllocateResponse first;
  v1beta1::AllocateResponse second;
  ASSERT_TRUE(Allocate({{"dev-5"}}, &first).ok());
  ASSERT_TRUE(Allocate({{"dev-5"}}, &second).ok());
  EXPECT_EQ(first.SerializeAsString(), second.SerializeAsString());
  v1beta1::AllocateResponse empty;
  ASSERT_TRUE(Allocate({{}}, &empty).ok());
  EXPECT_EQ(empty.container_responses_size(), 1);
}

TEST_F(FrameworkRpcTest, P42_ConcurrentAllocate) {
  auto devices = MakeDevices(128);
  ASSERT_THAT(publisher_->SetDevices(devices), IsOk());
  const auto start = std::chrono::steady_clock::now();
  std::vector<std::future<bool>> results;
  results.reserve(64);
  for (int i = 0; i < 64; ++i) {
    results.push_back(std::async(std::launch::async, [&, i] {
      const std::vector<std::string> ids = {"dev-" + std::to_string(2 * i),
                                            "dev-" + std::to_string(2 * i + 1)};
      v1beta1::AllocateResponse response;
      if (!Allocate({ids}, &response).ok()) return false;
      return response.container_responses(0).envs().at("DEVICES") ==
             ids[0] + "," + ids[1];
    }));
  }
  for (auto& result : results) EXPECT_TRUE(result.get());
  EXPECT_LT(std::chrono::steady_clock::now() - start, Scaled(2s));
}

TEST_F(FrameworkRpcTest, P43_P44_StressMixedCallsAndHealthFlips) {
  const char* stress_ms = std::getenv("TOPOLOGY_STRESS_MS");
  const auto duration = std::chrono::milliseconds(
      std::stoi(stress_ms != nullptr ? stress_ms : "3000"));
  std::atomic<bool> stop{false};
  std::atomic<int> unanswered{0};
  std::mutex latencies_mu;
  std::vector<double> latencies;
  std::vector<std::thread> workers;
  workers.reserve(6);
  for (int w = 0; w < 6; ++w) {
    workers.emplace_back([&, w] {
      int i = 0;
      while (!stop.load()) {
        const auto begin = std::chrono::steady_clock::now();
        grpc::ClientContext context;
        context.set_deadline(std::chrono::system_clock::now() + 5s);
        grpc::Status status;
        const std::string id = "dev-" + std::to_string((w + i) % 8);
        if (w % 3 == 0) {
          v1beta1::AllocateRequest request;
          request.add_container_requests()->add_devices_ids(id);
          v1beta1::AllocateResponse response;
          status = connection_->stub().Allocate(&context, request, &response);
        } else if (w % 3 == 1) {
          v1beta1::PreferredAllocationRequest request;
          auto* c = request.add_container_requests();
          for (int d = 0; d < 8; ++d)
            c->add_available_deviceids("dev-" + std::to_string(d));
          c->set_allocation_size(2);
          v1beta1::PreferredAllocationResponse response;
          status = connection_->stub().GetPreferredAllocation(&context, request,
                                                              &response);
        } else {
          v1beta1::PreStartContainerRequest request;
          request.add_devices_ids(id);
          v1beta1::PreStartContainerResponse response;
          status = connection_->stub().PreStartContainer(&context, request,
                                                         &response);
        }
        // Unhealthy devices may be refused; deadlines must never pass.
        if (status.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED ||
            status.error_code() == grpc::StatusCode::UNAVAILABLE) {
          unanswered.fetch_add(1);
        }
        const double ms = std::chrono::duration<double, std::milli>(
                              std::chrono::steady_clock::now() - begin)
                              .count();
        std::lock_guard lock(latencies_mu);
        latencies.push_back(ms);
        ++i;
      }
    });
  }
  std::thread flipper([&] {
    auto devices = MakeDevices(8);
    int i = 0;
    while (!stop.load()) {
      devices[static_cast<size_t>(i % 8)].health =
          devices[static_cast<size_t>(i % 8)].health == plugin::Health::kHealthy
              ? plugin::Health::kUnhealthy
              : plugin::Health::kHealthy;
      EXPECT_THAT(publisher_->SetDevices(devices), IsOk());
      ++i;
      std::this_thread::sleep_for(2ms);
    }
  });
  std::this_thread::sleep_for(duration);
  stop.store(true);
  for (auto& worker : workers) worker.join();
  flipper.join();
  EXPECT_EQ(unanswered.load(), 0);
  ASSERT_FALSE(latencies.empty());
  std::sort(latencies.begin(), latencies.end());
  const double p99 = latencies[latencies.size() * 99 / 100];
  EXPECT_LT(p99, 1000.0) << "p99 " << p99 << " ms over " << latencies.size();
  // The stream kept up with the flips and still works.
  EXPECT_GT(connection_->messages().size(), 10u);
  EXPECT_FALSE(connection_->ended());
}

TEST_F(FrameworkRpcTest, P45_OversizedResponseIsAClearError) {
  // The scripted handler answers with a mount, a device node, an env and an
  // annotation per id: for 10,000 long ids that exceeds what the kubelet
  // receives, and the plugin says so instead of sending it.
  std::vector<plugin::Device> devices = LongIdDevices(10000);
  ASSERT_THAT(publisher_->SetDevices(devices), IsOk());
  std::vector<std::string> all;
  all.reserve(devices.size());
  for (const auto& device : devices) all.push_back(device.id);
  v1beta1::AllocateResponse response;
  grpc::Status status = Allocate({all}, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_THAT(status.error_message(),
              HasSubstr("more than the kubelet receives"));
  all.resize(1000);
  response.Clear();
  ASSERT_TRUE(Allocate({all}, &response).ok());
  EXPECT_LT(response.ByteSizeLong(), 4u << 20);
}

// --- P.e PreStartContainer --------------------------------------------------

TEST_F(FrameworkRpcTest, P46_P47_PreStart) {
  for (int i = 0; i < 2; ++i) {
    v1beta1::PreStartContainerRequest request;
    request.add_devices_ids("dev-1");
    request.add_devices_ids("dev-2");
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + 30s);
    v1beta1::PreStartContainerResponse response;
    EXPECT_TRUE(connection_->stub()
                    .PreStartContainer(&context, request, &response)
                    .ok());
  }
  {
    std::lock_guard lock(handler_->mu_);
    ASSERT_THAT(handler_->pre_start_calls, SizeIs(2));
    EXPECT_THAT(handler_->pre_start_calls[1], ElementsAre("dev-1", "dev-2"));
  }
  v1beta1::PreStartContainerRequest request;
  request.add_devices_ids("ghost");
  grpc::ClientContext context;
  v1beta1::PreStartContainerResponse response;
  EXPECT_EQ(connection_->stub()
                .PreStartContainer(&context, request, &response)
                .error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
}

// A vendor's handler that throws: the kubelet gets INTERNAL naming the
// resource, the call and the exception (gRPC alone would answer "Unexpected
// error in RPC handling" and log nothing), and the plugin keeps serving.
class ThrowingHandler : public plugin::ResourceHandler {
 public:
  plugin::DevicePluginOptions Options() const override {
    if (throw_in_options_) throw std::runtime_error("no options today");
    return {.pre_start_required = true,
            .get_preferred_allocation_available = true};
  }
  StatusOr<std::vector<std::string>> GetPreferredAllocation(
      const plugin::PreferredAllocationRequest&) override {
    throw 42;  // not even a std::exception
  }
  StatusOr<plugin::ContainerAllocation> Allocate(
      const std::vector<std::string>&) override {
    throw std::runtime_error("the device vanished");
  }
  Status PreStartContainer(const std::vector<std::string>&) override {
    throw std::logic_error("not ready");
  }
  bool throw_in_options_ = false;
};

TEST_F(FrameworkTest, HandlerExceptionsAreInternalErrorsNamingTheCall) {
  kubelet_.Start();
  runner_ = std::make_unique<plugin::PluginRunner>(Options());
  auto broken = std::make_shared<ThrowingHandler>();
  broken->throw_in_options_ = true;
  EXPECT_THAT(runner_->AddResource("example.com/other", broken, MakeDevices(1))
                  .status(),
              StatusIs(StatusCode::kInternal,
                       "example.com/other: the Options handler threw: no "
                       "options today"));
  auto publisher = runner_->AddResource(
      kResource, std::make_shared<ThrowingHandler>(), MakeDevices(4));
  ASSERT_THAT(publisher.status(), IsOk());
  ASSERT_THAT(runner_->Start(), IsOk());
  auto connection = Connection();
  ASSERT_NE(connection, nullptr);
  ASSERT_TRUE(connection->WaitForMessages(1, 5s));

  v1beta1::AllocateRequest allocate;
  allocate.add_container_requests()->add_devices_ids("dev-0");
  v1beta1::AllocateResponse allocated;
  grpc::ClientContext allocate_context;
  grpc::Status status =
      connection->stub().Allocate(&allocate_context, allocate, &allocated);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INTERNAL);
  EXPECT_EQ(status.error_message(),
            "example.com/dev: the Allocate handler threw: the device vanished");

  v1beta1::PreferredAllocationRequest preferred;
  auto* container = preferred.add_container_requests();
  container->add_available_deviceids("dev-0");
  container->add_available_deviceids("dev-1");
  container->set_allocation_size(1);
  v1beta1::PreferredAllocationResponse chosen;
  grpc::ClientContext preferred_context;
  status = connection->stub().GetPreferredAllocation(&preferred_context,
                                                     preferred, &chosen);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INTERNAL);
  EXPECT_THAT(status.error_message(),
              HasSubstr("GetPreferredAllocation handler threw a non-standard "
                        "exception"));

  v1beta1::PreStartContainerRequest prestart;
  prestart.add_devices_ids("dev-1");
  v1beta1::PreStartContainerResponse started;
  grpc::ClientContext prestart_context;
  status = connection->stub().PreStartContainer(&prestart_context, prestart,
                                                &started);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INTERNAL);
  EXPECT_THAT(status.error_message(),
              HasSubstr("PreStartContainer handler threw: not ready"));
  // Still serving, and the errors are counted.
  EXPECT_TRUE(OptionsAnswer(*connection));
  EXPECT_EQ((*publisher)->stats().allocate_errors, 1u);
  EXPECT_EQ((*publisher)->stats().preferred_errors, 1u);
}

TEST_F(FrameworkTest, P48_PreStartWithoutTheOption) {
  auto connection = Connected(
      MakeDevices(2),
      std::make_shared<ScriptedHandler>(plugin::DevicePluginOptions{}));
  ASSERT_NE(connection, nullptr);
  v1beta1::PreStartContainerRequest request;
  request.add_devices_ids("dev-0");
  grpc::ClientContext context;
  v1beta1::PreStartContainerResponse response;
  (void)connection->stub().PreStartContainer(&context, request, &response);
  EXPECT_TRUE(OptionsAnswer(*connection));
}

// --- P.f Lifecycle ----------------------------------------------------------

TEST_F(FrameworkTest, P49_KubeletRestartInTheRealOrder) {
  auto first = Connected(MakeDevices(5));
  ASSERT_NE(first, nullptr);
  kubelet_.Restart(1s);
  auto second = Connection(2, 15s);
  ASSERT_NE(second, nullptr);
  EXPECT_NE(second->request().endpoint(), first->request().endpoint());
  EXPECT_TRUE(
      std::filesystem::exists(dir_.path() / second->request().endpoint()));
  ASSERT_TRUE(second->WaitForMessages(1, Scaled(1s)));
  EXPECT_THAT(Ids(*second->latest()), SizeIs(5));
}

// A node whose other daemons used up its inotify instances: the runner
// lists the plugin directory instead (what poll_plugin_dir asks for), and
// a kubelet restart is still noticed and registered again.
TEST_F(FrameworkTest, KubeletRestartNoticedWhenThePluginDirectoryIsListed) {
  kubelet_.Start();
  auto options = Options();
  options.poll_plugin_dir = true;
  StartPlugin(MakeDevices(4), options);
  auto first = Connection();
  ASSERT_NE(first, nullptr);
  kubelet_.Restart(1s);
  auto second = Connection(2, 15s);
  ASSERT_NE(second, nullptr);
  EXPECT_NE(second->request().endpoint(), first->request().endpoint());
  ASSERT_TRUE(second->WaitForMessages(1, Scaled(2s)));
  EXPECT_THAT(Ids(*second->latest()), SizeIs(4));
  // Only our own socket deleted: a new one, registered again.
  std::filesystem::remove(dir_.path() / second->request().endpoint());
  auto third = Connection(3, 15s);
  ASSERT_NE(third, nullptr);
  EXPECT_TRUE(third->WaitForMessages(1, Scaled(2s)));
}

TEST_F(FrameworkTest, P50_OnlyKubeletSocketRecreated) {
  kubelet_.Start();
  StartPlugin(MakeDevices(2));
  ASSERT_NE(Connection(), nullptr);
  kubelet_.Stop();
  std::filesystem::remove(kubelet_.socket_path());
  kubelet_.Start();
  auto second = Connection(2, 15s);
  ASSERT_NE(second, nullptr);
  EXPECT_TRUE(second->WaitForMessages(1, Scaled(1s)));
}

TEST_F(FrameworkTest, P51_OnlyPluginSocketDeleted) {
  auto first = Connected(MakeDevices(3));
  ASSERT_NE(first, nullptr);
  ASSERT_TRUE(first->WaitForMessages(1, Scaled(2s)));
  kubelet_.SetReplyDelay(1s);
  std::filesystem::remove(dir_.path() / first->request().endpoint());
  auto second = Connection(2, 15s);
  ASSERT_NE(second, nullptr);
  // While the new registration is pending the old connection still works.
  EXPECT_TRUE(OptionsAnswer(*first));
  // The kubelet answers the registration after its 1 s delay, then lists.
  EXPECT_TRUE(second->WaitForMessages(1, Scaled(3s)));
  EXPECT_TRUE(
      std::filesystem::exists(dir_.path() / second->request().endpoint()));
}

TEST_F(FrameworkTest, P52_ReRegistersWhenTheStreamIsGone) {
  kubelet_.Start();
  auto options = Options();
  options.stream_gap = 10min;
  options.clock = &clock_;
  StartPlugin(MakeDevices(2), options);
  auto first = Connection();
  ASSERT_NE(first, nullptr);
  ASSERT_TRUE(first->WaitForMessages(1, Scaled(2s)));
  // As the kubelet, which answers Register before it dials the plugin, the
  // stream may come before the plugin has the answer; the gap starts at the
  // later of the two, so the clock moves only once the plugin has both.
  (void)WaitFor([&] { return publisher_->stats().registrations != 0; }, 5s);
  ASSERT_EQ(publisher_->stats().registrations, 1u);
  first->Cancel();  // the kubelet dropped the stream without a restart
  // The plugin has seen the stream go (the gap starts then).
  (void)WaitFor([&] { return publisher_->stats().open_streams == 0; }, 5s);
  ASSERT_EQ(publisher_->stats().open_streams, 0u);
  // Within the gap the plugin waits, whatever the real time.
  clock_.Advance(9min);
  EXPECT_EQ(Connection(2, 300ms), nullptr);
  clock_.Advance(1min);
  auto second = Connection(2, 5s);
  ASSERT_NE(second, nullptr);
  EXPECT_TRUE(second->WaitForMessages(1, Scaled(1s)));
}

TEST_F(FrameworkTest, P55_P56_DeniedTwiceThenAcceptedOnce) {
  kubelet_.SetDenial(grpc::Status(grpc::StatusCode::UNKNOWN, "not yet"));
  kubelet_.Start();
  StartPlugin(MakeDevices(2));
  (void)WaitFor([&] { return kubelet_.register_attempts() >= 2; }, 2s);
  kubelet_.SetDenial(std::nullopt);
  auto connection = Connection(1, 5s);
  ASSERT_NE(connection, nullptr);
  std::this_thread::sleep_for(1s);
  EXPECT_EQ(kubelet_.accepted_registrations(), 1u);
  EXPECT_EQ(publisher_->stats().registrations, 1u);
  const auto times = kubelet_.register_times();
  ASSERT_GE(times.size(), 3u);
  EXPECT_GE(times[1] - times[0], 190ms);  // initial back-off 200 ms
  EXPECT_GE(times[2] - times[1], 390ms);  // doubled
  EXPECT_TRUE(
      std::filesystem::exists(dir_.path() / connection->request().endpoint()));
}

TEST_F(FrameworkTest, KubeletRestartsFiftyTimesWithoutLeaks) {
  kubelet_.Start();
  StartPlugin(MakeDevices(4));
  ASSERT_NE(Connection(), nullptr);
  const uint64_t sockets_before = publisher_->stats().server_restarts;
  size_t threads = 0;
  size_t fds = 0;
  for (size_t i = 2; i <= 51; ++i) {
    kubelet_.Restart(50ms);
    auto connection = Connection(i, 15s);
    ASSERT_NE(connection, nullptr) << "restart " << i - 1;
    ASSERT_TRUE(connection->WaitForMessages(1, Scaled(2s)));
    if (i == 6) {  // after warm-up
      std::this_thread::sleep_for(300ms);
      threads = CountThreads();
      fds = CountOpenFds();
    }
  }
  // The fake kubelet keeps its closed connections; allow it their fds.
  // Threads and descriptors of the last restart go as their streams end.
  EXPECT_TRUE(WaitFor(
      [&] {
        return CountThreads() <= threads + 8 && CountOpenFds() <= fds + 8;
      },
      Scaled(5s)))
      << CountThreads() << " threads (" << threads << " after warm-up), "
      << CountOpenFds() << " descriptors (" << fds << ")";
  // One new socket per restart, though the plugin may see its socket gone
  // both by looking and from the directory watch, in either order.
  EXPECT_EQ(publisher_->stats().server_restarts - sockets_before, 50u);
  // Only the live socket (and kubelet.sock) remain.
  size_t sockets = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir_.path())) {
    if (entry.path().filename() != "kubelet.sock") ++sockets;
  }
  EXPECT_EQ(sockets, 1u);
}

TEST_F(FrameworkTest, P54_StopClosesStreamsAndRemovesSockets) {
  auto connection = Connected(MakeDevices(2));
  ASSERT_NE(connection, nullptr);
  ASSERT_TRUE(connection->WaitForMessages(1, Scaled(2s)));
  const auto socket = dir_.path() / connection->request().endpoint();
  const auto start = std::chrono::steady_clock::now();
  runner_->Stop();
  EXPECT_LT(std::chrono::steady_clock::now() - start, 5s);
  auto end = connection->WaitForEnd(2s);
  ASSERT_TRUE(end.has_value());
  EXPECT_FALSE(end->ok());  // never ended with OK
  EXPECT_FALSE(std::filesystem::exists(socket));
}

// --- Hardening ----------------------------------------------------------

// A kubelet (or topology-manager serve) starting at the same moment deletes
// every socket in the directory, the plugin's fresh one included: the
// plugin serves a new socket and registers once kubelet.sock appears.
TEST_F(FrameworkTest, SocketDeletedAtStartupIsServedAgain) {
  StartPlugin(MakeDevices(2));
  kubelet_.DeleteSockets();
  kubelet_.Start();
  auto connection = Connection(1, 10s);
  ASSERT_NE(connection, nullptr);
  EXPECT_TRUE(connection->WaitForMessages(1, Scaled(2s)));
  EXPECT_TRUE(OptionsAnswer(*connection));
  EXPECT_TRUE(
      std::filesystem::exists(dir_.path() / connection->request().endpoint()));
}

// One kubelet restart (sockets deleted, then kubelet.sock created): one
// new socket and exactly one registration, whichever event is seen first.
TEST_F(FrameworkTest, OneKubeletRestartIsOneRegistration) {
  auto first = Connected(MakeDevices(2));
  ASSERT_NE(first, nullptr);
  for (int restart = 1; restart <= 5; ++restart) {
    SCOPED_TRACE(restart);
    const size_t before = kubelet_.register_attempts();
    kubelet_.Restart(std::chrono::milliseconds(restart % 2 == 0 ? 0 : 300));
    ASSERT_NE(Connection(1, 10s), nullptr);
    // Long enough for a second, redundant registration to arrive.
    std::this_thread::sleep_for(1500ms);
    EXPECT_EQ(kubelet_.register_attempts() - before, 1u);
  }
}

// An empty container request is answered with an empty response; the
// handler is not asked (no PCIDEVICE_...= variable with an empty list).
TEST_F(FrameworkTest, EmptyContainerRequestGetsAnEmptyResponse) {
  auto connection = Connected(MakeDevices(2));
  ASSERT_NE(connection, nullptr);
  v1beta1::AllocateRequest request;
  request.add_container_requests();
  v1beta1::AllocateResponse response;
  grpc::ClientContext context;
  ASSERT_TRUE(connection->stub().Allocate(&context, request, &response).ok());
  ASSERT_EQ(response.container_responses_size(), 1);
  EXPECT_EQ(response.container_responses(0).envs_size(), 0);
  EXPECT_EQ(handler_->allocate_calls.load(), 0);
}

// Before any ListAndWatch the kubelet has been offered no device: an
// Allocate then comes from something else and is refused.
TEST_F(FrameworkTest, AllocateBeforeAnyListAndWatchIsRefused) {
  StartPlugin(MakeDevices(2));
  std::filesystem::path socket;
  for (const auto& entry : std::filesystem::directory_iterator(dir_.path())) {
    if (entry.path().filename().string() != "kubelet.sock")
      socket = entry.path();
  }
  ASSERT_FALSE(socket.empty());
  auto channel = grpc::CreateChannel("unix:" + socket.string(),
                                     grpc::InsecureChannelCredentials());
  auto stub = v1beta1::DevicePlugin::NewStub(channel);
  v1beta1::AllocateRequest request;
  request.add_container_requests()->add_devices_ids(MakeDevices(2)[0].id);
  v1beta1::AllocateResponse response;
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + 5s);
  const grpc::Status status = stub->Allocate(&context, request, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_EQ(handler_->allocate_calls.load(), 0);
}

// Sockets get mode 0600 whatever the umask.
TEST_F(FrameworkTest, SocketModeIsExplicit) {
  const mode_t old = umask(0);
  auto connection = Connected(MakeDevices(1));
  umask(old);
  ASSERT_NE(connection, nullptr);
  struct stat info {};
  ASSERT_EQ(
      lstat((dir_.path() / connection->request().endpoint()).c_str(), &info),
      0);
  EXPECT_EQ(info.st_mode & 0777, 0600u);
}

// The daemons' gRPC engine: "poll", unless the operator named one.
TEST(ProcessSetupTest, PollEngineUnlessTheOperatorChoseOne) {
  constexpr char kVariable[] = "GRPC_POLL_STRATEGY";
  const char* before = std::getenv(kVariable);
  const std::optional<std::string> saved =
      before != nullptr ? std::optional<std::string>(before) : std::nullopt;
  unsetenv(kVariable);
  EXPECT_EQ(plugin::ChooseGrpcPollEngine(), "poll");
  EXPECT_STREQ(std::getenv(kVariable), "poll");
  setenv(kVariable, "", 1);  // set, but naming nothing
  EXPECT_EQ(plugin::ChooseGrpcPollEngine(), "poll");
  setenv(kVariable, "epoll1", 1);
  EXPECT_EQ(plugin::ChooseGrpcPollEngine(), "epoll1");
  EXPECT_STREQ(std::getenv(kVariable), "epoll1");
  // A daemon that prefers another engine (topology-manager serve: epoll1)
  // gets it unless the operator named one.
  unsetenv(kVariable);
  EXPECT_EQ(plugin::ChooseGrpcPollEngine("epoll1"), "epoll1");
  setenv(kVariable, "poll", 1);
  EXPECT_EQ(plugin::ChooseGrpcPollEngine("epoll1"), "poll");
  if (saved) {
    setenv(kVariable, saved->c_str(), 1);
  } else {
    unsetenv(kVariable);
  }
}

// A stop stuck past the limit ends the process with the code given, and
// says so on stderr in the log's ERROR format.
TEST(ProcessSetupTest, StuckStopEndsAtTheLimit) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        plugin::ExitIfStillRunningAfter(std::chrono::milliseconds(50), 3);
        std::this_thread::sleep_for(10s);
        std::exit(0);
      },
      ::testing::ExitedWithCode(3),
      "^E[0-9]{4} [0-9:.]+ +[0-9]+ plugin_runner.cc\\] shutdown did not "
      "finish within 50 ms; exiting now");
}

}  // namespace
}  // namespace topology::testing
