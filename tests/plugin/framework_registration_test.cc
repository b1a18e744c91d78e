// Part P.a of the device plugin conformance checklist: start-up and
// registration (the fixture: framework_test_fixture.h).
#include <chrono>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>

#include <unistd.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "topology/plugin/resource_name.h"

#include "framework_test_fixture.h"
#include "socket_util.h"
#include "wait_for.h"

namespace topology::testing {
namespace {

using namespace std::chrono_literals;

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
  {
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
  }
  // The runner is gone: a registration it made would have been counted.
  EXPECT_TRUE(std::filesystem::exists(blocked / "child"));
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
  EXPECT_EQ(kubelet_.accepted_registrations(), 2U);
  EXPECT_TRUE(std::filesystem::exists(dir_.path() / first_endpoint));

  second->Stop();
  second.reset();
  connection = Connection(3, 5s);
  ASSERT_NE(connection, nullptr);
  EXPECT_EQ(connection->request().endpoint(), first_endpoint);
  // The first's comeback is the third registration: none came between the
  // second's and the second's stop (a tug of war would have).
  EXPECT_EQ(kubelet_.accepted_registrations(), 3U);
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

}  // namespace
}  // namespace topology::testing
