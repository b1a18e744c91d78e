// Publishing a node's devices as ResourceSlices, against an in-process
// HTTPS server that stores slices as an API server does (resourceVersion,
// 409 on a stale update or an existing name, field selectors optional).
#include "topology/draplugin/resource_slices.h"

#include <atomic>
#include <chrono>
#include <map>
#include <mutex>
#include <string>
#include <thread>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "fake_api_server.h"
#include "fake_resource_store.h"
#include "status_matchers.h"
#include "temp_dir.h"

namespace topology::draplugin {
namespace {

using nlohmann::json;
using ::testing::HasSubstr;
using ::testing::SizeIs;
using ::topology::testing::FakeApiServer;
using ::topology::testing::IsOk;
using ::topology::testing::StatusIs;
using namespace std::chrono_literals;

constexpr char kDriver[] = "pci.libtopology.dev";

std::vector<SliceDevice> Devices(int count, bool taint_first = false) {
  std::vector<SliceDevice> devices;
  for (int i = 0; i < count; ++i) {
    SliceDevice device;
    device.name = "vf-" + std::to_string(i);
    device.attributes["resource.kubernetes.io/pciBusID"] = {
        std::string("0000:3b:00.") + std::to_string(i % 8), false};
    device.attributes["resource.kubernetes.io/numaNode"] = {int64_t{i % 2},
                                                            false};
    device.attributes["resource"] = {std::string("example.com/vf"), false};
    device.attributes["driverVersion"] = {std::string("1.2.3"), true};
    device.attributes["sriov"] = {true, false};
    if (taint_first && i == 0)
      device.taints.push_back({"unhealthy", "", "NoSchedule"});
    devices.push_back(std::move(device));
  }
  return devices;
}

class SlicePublisherTest : public ::testing::Test {
 protected:
  void Serve(bool field_selectors = true) {
    store_ = std::make_unique<::topology::testing::FakeResourceStore>(
        "node-a", kDriver, field_selectors);
    auto server = FakeApiServer::Start(
        dir_.path() / "pki",
        [this](const FakeApiServer::Request& r) { return store_->Handle(r); });
    ASSERT_THAT(server.status(), IsOk());
    server_ = std::move(*server);
    KubeConfig config;
    config.server = server_->url();
    config.ca_pem = server_->ca_pem();
    KubeClient::Options options;
    options.backoff = 10ms;
    auto client = KubeClient::Create(config, options);
    ASSERT_THAT(client.status(), IsOk());
    client_ = std::move(*client);
    SlicePublisher::Options publish;
    publish.resync = 100ms;
    publisher_ = std::make_unique<SlicePublisher>(client_.get(), kDriver,
                                                  "node-a", publish);
  }
  std::vector<json> Ours() const {
    std::vector<json> out;
    for (const auto& [name, slice] : store_->slices()) {
      if (slice["spec"]["nodeName"] == "node-a" &&
          slice["spec"]["driver"] == kDriver) {
        out.push_back(slice);
      }
    }
    return out;
  }

  ::topology::testing::TempDir dir_;
  std::unique_ptr<::topology::testing::FakeResourceStore> store_;
  std::unique_ptr<FakeApiServer> server_;
  std::unique_ptr<KubeClient> client_;
  std::unique_ptr<SlicePublisher> publisher_;
};

TEST_F(SlicePublisherTest, SlicesOf128DevicesOneGenerationTypedAttributes) {
  Serve();
  ASSERT_THAT(publisher_->Publish("node-a", Devices(300)), IsOk());
  const auto slices = Ours();
  ASSERT_THAT(slices, SizeIs(3));
  size_t devices = 0;
  for (const json& slice : slices) {
    EXPECT_EQ(slice["spec"]["pool"]["name"], "node-a");
    EXPECT_EQ(slice["spec"]["pool"]["generation"], 1);
    EXPECT_EQ(slice["spec"]["pool"]["resourceSliceCount"], 3);
    EXPECT_LE(slice["spec"]["devices"].size(), 128u);
    devices += slice["spec"]["devices"].size();
  }
  EXPECT_EQ(devices, 300u);
  // Every device once, in order: slice i has devices 128 i to 128 i + 127.
  const auto sent = Devices(300);
  size_t k = 0;
  for (const json& slice : slices) {
    for (const json& device : slice["spec"]["devices"]) {
      ASSERT_LT(k, sent.size());
      EXPECT_EQ(device["name"], sent[k++].name);
    }
  }
  const json& first = slices[0]["spec"]["devices"][0];
  EXPECT_EQ(first["attributes"]["resource.kubernetes.io/numaNode"],
            json({{"int", 0}}));
  EXPECT_EQ(first["attributes"]["driverVersion"], json({{"version", "1.2.3"}}));
  EXPECT_EQ(first["attributes"]["sriov"], json({{"bool", true}}));
  EXPECT_TRUE(publisher_->published());
}

TEST_F(SlicePublisherTest, AListOfIntsGoesOutInTheListForm) {
  Serve();
  auto devices = Devices(2);
  devices[0].attributes["resource.kubernetes.io/numaNode"] = {
      std::vector<int64_t>{1, 0}, false};
  ASSERT_THAT(publisher_->Publish("node-a", devices), IsOk());
  const auto slices = Ours();
  ASSERT_THAT(slices, SizeIs(1));
  EXPECT_EQ(slices[0]["spec"]["devices"][0]["attributes"]
                  ["resource.kubernetes.io/numaNode"],
            json::parse(R"({"list": {"int": [1, 0]}})"));
  // As the server gives it back, it is the same: nothing is sent again.
  const int writes = store_->writes;
  ASSERT_THAT(publisher_->Publish("node-a", devices), IsOk());
  EXPECT_EQ(store_->writes, writes);
  devices[0].attributes["resource.kubernetes.io/numaNode"] = {
      std::vector<int64_t>{}, false};
  EXPECT_THAT(publisher_->Publish("node-a", devices),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("1 to 64")));
}

TEST_F(SlicePublisherTest, TaintsMeanSlicesOf64) {
  Serve();
  ASSERT_THAT(publisher_->Publish("node-a", Devices(130, true)), IsOk());
  const auto slices = Ours();
  ASSERT_THAT(slices, SizeIs(3));
  const auto sent = Devices(130, true);
  size_t k = 0;
  for (const json& slice : slices) {
    EXPECT_LE(slice["spec"]["devices"].size(), 64u);
    for (const json& device : slice["spec"]["devices"]) {
      ASSERT_LT(k, sent.size());
      EXPECT_EQ(device["name"], sent[k++].name);
    }
  }
  EXPECT_EQ(k, 130u);
}

TEST_F(SlicePublisherTest, AnUnchangedInventorySendsNothing) {
  Serve();
  ASSERT_THAT(publisher_->Publish("node-a", Devices(200)), IsOk());
  const int writes = store_->writes;
  ASSERT_THAT(publisher_->Publish("node-a", Devices(200)), IsOk());
  EXPECT_EQ(store_->writes, writes);
  // A change goes out as the next generation, in every slice.
  auto changed = Devices(200);
  changed[150].attributes["sriov"] = {false, false};
  ASSERT_THAT(publisher_->Publish("node-a", changed), IsOk());
  for (const json& slice : Ours()) {
    EXPECT_EQ(slice["spec"]["pool"]["generation"], 2);
  }
  // Fewer devices: the slice no longer needed is deleted.
  ASSERT_THAT(publisher_->Publish("node-a", Devices(10)), IsOk());
  EXPECT_THAT(Ours(), SizeIs(1));
}

TEST_F(SlicePublisherTest, OnlyThisNodesAndDriversSlicesAreTouched) {
  Serve();
  store_->Put("stale", "node-a", kDriver, "old-pool", 7);
  store_->Put("older", "node-a", kDriver, "node-a", 1);
  store_->Put("theirs", "node-b", kDriver, "node-b", 1);
  store_->Put("other-driver", "node-a", "gpu.example.com", "node-a", 1);
  ASSERT_THAT(publisher_->Publish("node-a", Devices(3)), IsOk());
  const auto all = store_->slices();
  EXPECT_FALSE(all.contains("stale"));
  EXPECT_FALSE(all.contains("older"));
  EXPECT_TRUE(all.contains("theirs"));
  EXPECT_TRUE(all.contains("other-driver"));
  ASSERT_THAT(Ours(), SizeIs(1));
  // Above the old generation of the same pool.
  EXPECT_EQ(Ours()[0]["spec"]["pool"]["generation"], 2);
}

TEST_F(SlicePublisherTest, DeletedSlicesArePublishedAgain) {
  Serve();
  ASSERT_THAT(publisher_->Publish("node-a", Devices(5)), IsOk());
  publisher_->Start();
  store_->Clear();  // the kubelet wipes its node's slices at its start
  const auto end = std::chrono::steady_clock::now() + 5s;
  while (Ours().empty() && std::chrono::steady_clock::now() < end) {
    std::this_thread::sleep_for(20ms);
  }
  ASSERT_THAT(Ours(), SizeIs(1));
  EXPECT_THAT(Ours()[0]["spec"]["devices"], SizeIs(5));
  publisher_->Stop();
}

TEST_F(SlicePublisherTest, AServerWithoutSpecFieldSelectorsIsFilteredHere) {
  Serve(/*field_selectors=*/false);
  store_->Put("theirs", "node-b", kDriver, "node-b", 1);
  ASSERT_THAT(publisher_->Publish("node-a", Devices(3)), IsOk());
  EXPECT_THAT(Ours(), SizeIs(1));
  EXPECT_TRUE(store_->slices().contains("theirs"));
}

TEST_F(SlicePublisherTest, AConflictIsReadAgainAndRetried) {
  Serve();
  ASSERT_THAT(publisher_->Publish("node-a", Devices(3)), IsOk());
  store_->conflicts = 1;
  auto changed = Devices(3);
  changed[0].attributes["sriov"] = {false, false};
  ASSERT_THAT(publisher_->Publish("node-a", changed), IsOk());
  EXPECT_EQ(Ours()[0]["spec"]["devices"][0]["attributes"]["sriov"],
            json({{"bool", false}}));
}

TEST_F(SlicePublisherTest, InvalidDevicesAreRefusedBeforeAnythingIsSent) {
  Serve();
  const auto refused = [&](std::vector<SliceDevice> devices) {
    return publisher_->Publish("node-a", std::move(devices));
  };
  auto devices = Devices(1);
  devices[0].name = "VF_0";
  EXPECT_THAT(refused(devices), StatusIs(StatusCode::kInvalidArgument,
                                         HasSubstr("not a DNS label")));
  devices = Devices(2);
  devices[1].name = devices[0].name;
  EXPECT_THAT(refused(devices), StatusIs(StatusCode::kInvalidArgument,
                                         HasSubstr("listed twice")));
  devices = Devices(1);
  devices[0].attributes["resource.kubernetes.io/made-up"] = {int64_t{1}, false};
  EXPECT_THAT(refused(devices),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("made-up")));
  devices = Devices(1);
  devices[0].attributes["gpu.example.com/model"] = {std::string("x"), false};
  EXPECT_THAT(refused(devices), StatusIs(StatusCode::kInvalidArgument,
                                         HasSubstr("under its domain")));
  devices = Devices(1);
  devices[0].attributes["model"] = {std::string(65, 'x'), false};
  EXPECT_THAT(refused(devices), StatusIs(StatusCode::kInvalidArgument,
                                         HasSubstr("longer than 64")));
  devices = Devices(1);
  for (int i = 0; i < 30; ++i) {
    devices[0].attributes["a" + std::to_string(i)] = {int64_t{i}, false};
  }
  EXPECT_THAT(refused(devices), StatusIs(StatusCode::kInvalidArgument,
                                         HasSubstr("more than 32")));
  devices = Devices(1);
  devices[0].taints.push_back(
      {"unhealthy", std::string(64, 'x'), "NoSchedule"});
  EXPECT_THAT(refused(devices), StatusIs(StatusCode::kInvalidArgument,
                                         HasSubstr("longer than 63")));
  EXPECT_EQ(store_->writes, 0);
  EXPECT_TRUE(server_->requests().empty());
}

}  // namespace
}  // namespace topology::draplugin
