// Parts P.c to P.e of the device plugin conformance checklist: the
// kubelet's calls, GetPreferredAllocation, Allocate and PreStartContainer
// (the fixture: framework_test_fixture.h).
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <future>
#include <mutex>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "framework_test_fixture.h"

namespace topology::testing {
namespace {

using namespace std::chrono_literals;

// --- P.c GetPreferredAllocation (framework checks) --------------------------

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
  // The run lasts as many health flips as asked, each streamed to the
  // kubelet before the next: the calls go on meanwhile.
  const char* stress_flips = std::getenv("TOPOLOGY_STRESS_FLIPS");
  const int flips = std::stoi(stress_flips != nullptr ? stress_flips : "1000");
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
  auto devices = MakeDevices(8);
  const size_t listed = connection_->messages().size();
  int streamed = 0;
  for (int i = 0; i < flips; ++i) {
    auto& health = devices[static_cast<size_t>(i % 8)].health;
    health = health == plugin::Health::kHealthy ? plugin::Health::kUnhealthy
                                                : plugin::Health::kHealthy;
    EXPECT_THAT(publisher_->SetDevices(devices), IsOk());
    // The stream keeps up: each flip reaches the kubelet before the next.
    if (!connection_->WaitForMessages(listed + static_cast<size_t>(i) + 1,
                                      Scaled(5s))) {
      break;
    }
    ++streamed;
  }
  stop.store(true);
  for (auto& worker : workers) worker.join();
  EXPECT_EQ(streamed, flips);
  EXPECT_EQ(unanswered.load(), 0);
  ASSERT_FALSE(latencies.empty());
  std::sort(latencies.begin(), latencies.end());
  const double p99 = latencies[latencies.size() * 99 / 100];
  EXPECT_LT(p99, 1000.0) << "p99 " << p99 << " ms over " << latencies.size();
  // The stream still works.
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

}  // namespace
}  // namespace topology::testing
