// Publishing a node's devices as ResourceSlices, against an in-process
// HTTPS server that stores slices as an API server does (resourceVersion,
// 409 on a stale update or an existing name, field selectors optional).
#include "topology/draplugin/resource_slices.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <thread>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "topology/testing/fake_clock.h"

#include "fake_api_server.h"
#include "fake_resource_store.h"
#include "status_matchers.h"
#include "temp_dir.h"
#include "wait_for.h"

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

// The slices hold the devices `sent`, each a run of `per_slice` in order
// (the last one shorter), whichever slice holds which run.
::testing::AssertionResult InOrderRuns(const std::vector<json>& slices,
                                       const std::vector<SliceDevice>& sent,
                                       size_t per_slice) {
  std::map<std::string, size_t> index;
  for (size_t i = 0; i < sent.size(); ++i) index[sent[i].name] = i;
  std::vector<bool> seen(sent.size(), false);
  for (const json& slice : slices) {
    const json& devices = slice["spec"]["devices"];
    if (devices.empty() || devices.size() > per_slice) {
      return ::testing::AssertionFailure()
             << "a slice of " << devices.size() << " devices";
    }
    const auto first = index.find(devices[0]["name"].get<std::string>());
    if (first == index.end() || first->second % per_slice != 0) {
      return ::testing::AssertionFailure()
             << "a slice starts at " << devices[0]["name"];
    }
    for (size_t k = 0; k < devices.size(); ++k) {
      const size_t i = first->second + k;
      if (i >= sent.size() || devices[k]["name"] != sent[i].name || seen[i]) {
        return ::testing::AssertionFailure()
               << "device " << devices[k]["name"] << " out of order";
      }
      seen[i] = true;
    }
  }
  if (std::find(seen.begin(), seen.end(), false) != seen.end()) {
    return ::testing::AssertionFailure() << "a device is in no slice";
  }
  return ::testing::AssertionSuccess();
}

// The slice holding the inventory's first device.
json FirstSliceOf(const std::vector<json>& slices) {
  for (const json& slice : slices) {
    if (slice["spec"]["devices"][0]["name"] == "vf-0") return slice;
  }
  return slices.front();
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
  // Every device once, in order: each slice is a run of 128 devices in the
  // inventory's order (slices are written in parallel, so the server's
  // names say nothing of which run a slice holds).
  EXPECT_TRUE(InOrderRuns(slices, Devices(300), 128));
  const json first_slice = FirstSliceOf(slices);
  const json& first = first_slice["spec"]["devices"][0];
  EXPECT_EQ(first["attributes"]["resource.kubernetes.io/numaNode"],
            json({{"int", 0}}));
  EXPECT_EQ(first["attributes"]["driverVersion"], json({{"version", "1.2.3"}}));
  EXPECT_EQ(first["attributes"]["sriov"], json({{"bool", true}}));
  EXPECT_TRUE(publisher_->published());
}

// KEP-5491's list values as resource/v1 spells them: "ints", "bools",
// "strings", "versions" (a server without the gate drops them and refuses
// the slice: "exactly one value must be specified").
TEST_F(SlicePublisherTest, ListAttributesGoOutAsTheApiSpellsThem) {
  Serve();
  auto devices = Devices(2);
  devices[0].attributes["resource.kubernetes.io/numaNode"] = {
      std::vector<int64_t>{1, 0}, false};
  devices[0].attributes["links"] = {std::vector<std::string>{"a", "b"}, false};
  devices[0].attributes["firmware"] = {
      std::vector<std::string>{"1.0.0", "2.0.0-rc.1"}, true};
  devices[0].attributes["lanes"] = {std::vector<bool>{true, false}, false};
  ASSERT_THAT(publisher_->Publish("node-a", devices), IsOk());
  const auto slices = Ours();
  ASSERT_THAT(slices, SizeIs(1));
  const json& attributes = slices[0]["spec"]["devices"][0]["attributes"];
  EXPECT_EQ(attributes["resource.kubernetes.io/numaNode"],
            json::parse(R"({"ints": [1, 0]})"));
  EXPECT_EQ(attributes["links"], json::parse(R"({"strings": ["a", "b"]})"));
  EXPECT_EQ(attributes["firmware"],
            json::parse(R"({"versions": ["1.0.0", "2.0.0-rc.1"]})"));
  EXPECT_EQ(attributes["lanes"], json::parse(R"({"bools": [true, false]})"));
  // As the server gives it back, it is the same: nothing is sent again.
  const int writes = store_->writes;
  ASSERT_THAT(publisher_->Publish("node-a", devices), IsOk());
  EXPECT_EQ(store_->writes, writes);
  devices[0].attributes["resource.kubernetes.io/numaNode"] = {
      std::vector<int64_t>{}, false};
  EXPECT_THAT(
      publisher_->Publish("node-a", devices),
      StatusIs(StatusCode::kInvalidArgument, HasSubstr("must not be empty")));
  devices[0].attributes["resource.kubernetes.io/numaNode"] = {
      std::vector<int64_t>{0}, false};
  devices[0].attributes["firmware"] = {std::vector<std::string>{"1.0"}, true};
  EXPECT_THAT(publisher_->Publish("node-a", devices),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("semver")));
}

// A list attribute, like a taint, means slices of at most 64 devices.
TEST_F(SlicePublisherTest, AListAttributeMeansSlicesOf64) {
  Serve();
  auto devices = Devices(65);
  devices[64].attributes["resource.kubernetes.io/numaNode"] = {
      std::vector<int64_t>{0, 1}, false};
  ASSERT_THAT(publisher_->Publish("node-a", devices), IsOk());
  const auto slices = Ours();
  ASSERT_THAT(slices, SizeIs(2));
  for (const json& slice : slices) {
    EXPECT_LE(slice["spec"]["devices"].size(), 64u);
  }
  EXPECT_EQ(store_->refused, 0);
}

TEST_F(SlicePublisherTest, TaintsMeanSlicesOf64) {
  Serve();
  ASSERT_THAT(publisher_->Publish("node-a", Devices(130, true)), IsOk());
  const auto slices = Ours();
  ASSERT_THAT(slices, SizeIs(3));
  EXPECT_TRUE(InOrderRuns(slices, Devices(130, true), 64));
}

TEST_F(SlicePublisherTest, AnUnchangedInventorySendsNothing) {
  Serve();
  ASSERT_THAT(publisher_->Publish("node-a", Devices(200)), IsOk());
  const int writes = store_->writes;
  ASSERT_THAT(publisher_->Publish("node-a", Devices(200)), IsOk());
  EXPECT_EQ(store_->writes, writes);
  // A change within one slice is that slice's update alone, the
  // generation kept (the Go controller's rule: one update makes the pool
  // whole, so the scheduler never sees it half written).
  auto changed = Devices(200);
  changed[150].attributes["sriov"] = {false, false};
  ASSERT_THAT(publisher_->Publish("node-a", changed), IsOk());
  EXPECT_EQ(store_->writes, writes + 1);
  ASSERT_THAT(Ours(), SizeIs(2));
  for (const json& slice : Ours()) {
    EXPECT_EQ(slice["spec"]["pool"]["generation"], 1);
  }
  // Changes in two slices go out as the next generation, in every slice.
  changed[10].attributes["sriov"] = {false, false};
  changed[160].attributes["sriov"] = {false, false};
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
  // Another pool's slice is deleted; this pool's is updated in place.
  EXPECT_FALSE(all.contains("stale"));
  ASSERT_TRUE(all.contains("older"));
  EXPECT_TRUE(all.contains("theirs"));
  EXPECT_TRUE(all.contains("other-driver"));
  ASSERT_THAT(Ours(), SizeIs(1));
  // One update makes the pool whole: its generation is kept (the Go
  // controller's rule).
  EXPECT_EQ(all.at("older")["spec"]["pool"]["generation"], 1);
  EXPECT_THAT(all.at("older")["spec"]["devices"], SizeIs(3));
}

TEST_F(SlicePublisherTest, DeletedSlicesArePublishedAgain) {
  Serve();
  ASSERT_THAT(publisher_->Publish("node-a", Devices(5)), IsOk());
  publisher_->Start();
  store_->Clear();  // the kubelet wipes its node's slices at its start
  (void)::topology::testing::WaitFor([&] { return !Ours().empty(); }, 5s);
  ASSERT_THAT(Ours(), SizeIs(1));
  EXPECT_THAT(Ours()[0]["spec"]["devices"], SizeIs(5));
  publisher_->Stop();
}

// The resync runs on the publisher's clock: slices the kubelet wiped come
// back when the clock reaches the resync, not before.
TEST_F(SlicePublisherTest, TheResyncRunsOnThePublishersClock) {
  Serve();
  ::topology::testing::FakeClock clock;
  SlicePublisher::Options options;
  options.resync = std::chrono::minutes(5);
  options.clock = &clock;
  SlicePublisher publisher(client_.get(), kDriver, "node-a", options);
  ASSERT_THAT(publisher.Publish("node-a", Devices(5)), IsOk());
  publisher.Start();
  ASSERT_TRUE(
      ::topology::testing::WaitFor([&] { return clock.waiters() > 0; }, 10s));
  store_->Clear();
  clock.Advance(std::chrono::minutes(4));
  ASSERT_TRUE(
      ::topology::testing::WaitFor([&] { return clock.waiters() > 0; }, 10s));
  EXPECT_TRUE(Ours().empty());
  EXPECT_EQ(publisher.stats().syncs, 1u);
  clock.Advance(std::chrono::minutes(1));
  EXPECT_TRUE(
      ::topology::testing::WaitFor([&] { return !Ours().empty(); }, 10s));
  publisher.Stop();
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

// The API server's rules (validation.go), checked before anything is sent.
TEST_F(SlicePublisherTest, InvalidDevicesAreRefusedBeforeAnythingIsSent) {
  Serve();
  const auto refused = [&](std::vector<SliceDevice> devices) {
    return publisher_->Publish("node-a", std::move(devices));
  };
  auto devices = Devices(1);
  devices[0].name = "VF_0";
  EXPECT_THAT(refused(devices),
              StatusIs(StatusCode::kInvalidArgument,
                       HasSubstr("device \"VF_0\": name: Invalid value")));
  devices = Devices(2);
  devices[1].name = devices[0].name;
  EXPECT_THAT(refused(devices), StatusIs(StatusCode::kInvalidArgument,
                                         HasSubstr("listed twice")));
  devices = Devices(1);
  devices[0].attributes["resource.kubernetes.io/made-up"] = {int64_t{1}, false};
  EXPECT_THAT(refused(devices),
              StatusIs(StatusCode::kInvalidArgument,
                       HasSubstr("attributes: Invalid value: "
                                 "\"resource.kubernetes.io/made-up\": a "
                                 "valid C identifier")));
  devices = Devices(1);
  devices[0].attributes["Not_A_Domain/model"] = {std::string("x"), false};
  EXPECT_THAT(refused(devices), StatusIs(StatusCode::kInvalidArgument,
                                         HasSubstr("RFC 1123 subdomain")));
  // A name of two slashes the 1.37 server stores unchecked, and so does
  // the check (kube_apiserver_tests hold both to one table).
  devices = Devices(1);
  devices[0].attributes["a/b/c"] = {std::string("x"), false};
  EXPECT_THAT(ValidateDevices("gpu.example.com", devices), IsOk());
  devices = Devices(1);
  devices[0].attributes["model"] = {std::string(65, 'x'), false};
  EXPECT_THAT(refused(devices),
              StatusIs(StatusCode::kInvalidArgument,
                       HasSubstr("attributes[model].string: Too long: may "
                                 "not be more than 64 bytes")));
  devices = Devices(1);
  devices[0].attributes["firmware"] = {std::string("1.2"), true};
  EXPECT_THAT(refused(devices), StatusIs(StatusCode::kInvalidArgument,
                                         HasSubstr("semver.org spec 2.0.0")));
  // 33 attributes and capacities (5 of Devices() and 28 more).
  devices = Devices(1);
  for (int i = 0; i < 28; ++i) {
    devices[0].attributes["a" + std::to_string(i)] = {int64_t{i}, false};
  }
  EXPECT_THAT(refused(devices),
              StatusIs(StatusCode::kInvalidArgument,
                       HasSubstr("the total number of attributes and "
                                 "capacities must not exceed 32")));
  // 49 attribute values: a list of 45 and the 4 other attributes.
  devices = Devices(1);
  devices[0].attributes["resource.kubernetes.io/numaNode"] = {
      std::vector<int64_t>(45, 0), false};
  EXPECT_THAT(refused(devices),
              StatusIs(StatusCode::kInvalidArgument,
                       HasSubstr("the total number of attribute values must "
                                 "not exceed 48")));
  devices = Devices(1);
  devices[0].taints.push_back(
      {"unhealthy", std::string(64, 'x'), "NoSchedule"});
  EXPECT_THAT(refused(devices), StatusIs(StatusCode::kInvalidArgument,
                                         HasSubstr("taints[0].value")));
  devices = Devices(1);
  devices[0].taints.push_back({"not a key", "", "NoSchedule"});
  EXPECT_THAT(refused(devices), StatusIs(StatusCode::kInvalidArgument,
                                         HasSubstr("taints[0].key")));
  devices = Devices(1);
  devices[0].taints.push_back({"gpu.example.com/hot", "", "Sometimes"});
  EXPECT_THAT(refused(devices),
              StatusIs(StatusCode::kInvalidArgument,
                       HasSubstr("taints[0].effect: Unsupported value")));
  devices = Devices(1);
  for (int i = 0; i < 17; ++i) {
    devices[0].taints.push_back({"t" + std::to_string(i), "", "NoSchedule"});
  }
  EXPECT_THAT(
      refused(devices),
      StatusIs(StatusCode::kInvalidArgument,
               HasSubstr("taints: Too many: 17: must have at most 16")));
  EXPECT_EQ(store_->writes, 0);
  EXPECT_TRUE(server_->requests().empty());
  // Legal: attributes in any domain, the effect None, 16 taints.
  devices = Devices(1);
  devices[0].attributes["gpu.example.com/model"] = {std::string("x"), false};
  for (int i = 0; i < 15; ++i) {
    devices[0].taints.push_back({"t" + std::to_string(i), "", "NoSchedule"});
  }
  devices[0].taints.push_back({"example.com/note", "v1.2_x", "None"});
  EXPECT_THAT(refused(devices), IsOk());
  EXPECT_EQ(store_->refused, 0);
}

// The API server allows driver names of at most 63 characters
// (DriverNameMaxLength): a longer one is refused before anything is sent.
TEST_F(SlicePublisherTest, ADriverNameOfSixtyFourCharactersIsRefused) {
  Serve();
  const std::string driver = std::string(60, 'a') + ".dev";
  ASSERT_EQ(driver.size(), 64u);
  SlicePublisher publisher(client_.get(), driver, "node-a", {});
  EXPECT_THAT(publisher.Publish("node-a", Devices(1)),
              StatusIs(StatusCode::kInvalidArgument,
                       HasSubstr("driver name: Too long")));
  EXPECT_THAT(ValidateDriverName(std::string(59, 'a') + ".dev"), IsOk());
  EXPECT_TRUE(server_->requests().empty());
}

// Slices are created with generateName and recognised by their spec: a
// slice of another node or driver holding the name this publisher once
// used ("<node>-<driver>-0") blocks nothing.
TEST_F(SlicePublisherTest, ASliceHoldingOurOldNameBlocksNothing) {
  Serve();
  store_->Put(std::string("node-a-") + kDriver + "-0", "node-b", kDriver,
              "node-b", 1);
  store_->Put(std::string("node-a-") + kDriver + "-1", "node-a",
              "other.example.com", "node-a", 1);
  ASSERT_THAT(publisher_->Publish("node-a", Devices(200)), IsOk());
  const auto ours = Ours();
  ASSERT_THAT(ours, SizeIs(2));
  for (const json& slice : ours) {
    EXPECT_TRUE(slice["metadata"]["name"].get<std::string>().starts_with(
        std::string("node-a-") + kDriver + "-"));
  }
  EXPECT_EQ(store_->slices().size(), 4u);
  // In the filtering mode too (no field selectors on spec.*).
  Serve(/*field_selectors=*/false);
  store_->Put(std::string("node-a-") + kDriver + "-0", "node-b", kDriver,
              "node-b", 1);
  ASSERT_THAT(publisher_->Publish("node-a", Devices(3)), IsOk());
  EXPECT_THAT(Ours(), SizeIs(1));
}

// Slices are owned by their Node (a controller reference, as the Go
// controller sets it), so they go when the Node goes; without the right to
// read the Node they are published without one.
TEST_F(SlicePublisherTest, SlicesAreOwnedByTheirNode) {
  Serve();
  ASSERT_THAT(publisher_->Publish("node-a", Devices(3)), IsOk());
  EXPECT_FALSE(Ours()[0]["metadata"].contains("ownerReferences"));
  store_->node_uid = "8d5c2d1e-0000-4000-8000-000000000001";
  // The next change reads the Node again and the slices are rewritten
  // with the reference.
  auto changed = Devices(3);
  changed[0].attributes["sriov"] = {false, false};
  ASSERT_THAT(publisher_->Publish("node-a", changed), IsOk());
  const json owners = Ours()[0]["metadata"]["ownerReferences"];
  EXPECT_EQ(owners, json::parse(R"([{"apiVersion": "v1", "kind": "Node",
      "name": "node-a", "uid": "8d5c2d1e-0000-4000-8000-000000000001",
      "controller": true}])"));
}

// A Node's uid is copied into every slice: one that is not a Kubernetes
// UID (a megabyte, a path) is refused, and the slices go without an owner
// rather than carry it.
TEST_F(SlicePublisherTest, ANodeUidThatIsNoUidIsNeverCopied) {
  Serve();
  bool sriov = true;
  for (const std::string& uid :
       {std::string(1 << 20, 'a'), std::string("../x"), std::string("a b")}) {
    store_->node_uid = uid;
    auto changed = Devices(3);
    sriov = !sriov;  // a change each round: the Node is read again
    changed[0].attributes["sriov"] = {sriov, false};
    ASSERT_THAT(publisher_->Publish("node-a", changed), IsOk());
    EXPECT_FALSE(Ours()[0]["metadata"].contains("ownerReferences"))
        << uid.substr(0, 8);
  }
}

// The Node is read for the owner reference only: one short try, an answer
// no larger than an object can be. A server that hangs on it, or answers
// without end, holds up no publish and costs no memory; the slices go
// without an owner until the Node can be read.
TEST_F(SlicePublisherTest, ANodeThatCannotBeReadHoldsNothingUp) {
  Serve();
  store_->node_uid = "8d5c2d1e-0000-4000-8000-000000000001";
  store_->node_padding = kMaxObjectBytes + 1;
  ASSERT_THAT(publisher_->Publish("node-a", Devices(3)), IsOk());
  EXPECT_FALSE(Ours()[0]["metadata"].contains("ownerReferences"));
  EXPECT_EQ(store_->node_gets.load(), 1);
  store_->node_padding = 0;
  store_->node_hangs = true;
  auto changed = Devices(3);
  changed[0].attributes["sriov"] = {false, false};
  ASSERT_THAT(publisher_->Publish("node-a", changed), IsOk());
  EXPECT_FALSE(Ours()[0]["metadata"].contains("ownerReferences"));
  EXPECT_EQ(store_->node_gets.load(), 2);  // one try, not the client's four
  // Readable again: owned from the next change on.
  store_->node_hangs = false;
  changed[0].attributes["sriov"] = {true, false};
  ASSERT_THAT(publisher_->Publish("node-a", changed), IsOk());
  EXPECT_TRUE(Ours()[0]["metadata"].contains("ownerReferences"));
}

// A taint's timeAdded is the server's, kept at every republish (the Go
// controller's copyTaintTimeAdded): a NoExecute toleration's seconds do not
// start again.
TEST_F(SlicePublisherTest, ATaintKeepsItsTimeAcrossRepublishes) {
  Serve();
  auto devices = Devices(3, /*taint_first=*/true);
  ASSERT_THAT(publisher_->Publish("node-a", devices), IsOk());
  const std::string added =
      Ours()[0]["spec"]["devices"][0]["taints"][0]["timeAdded"];
  ASSERT_FALSE(added.empty());
  devices[1].attributes["sriov"] = {false, false};
  ASSERT_THAT(publisher_->Publish("node-a", devices), IsOk());
  EXPECT_EQ(Ours()[0]["spec"]["devices"][1]["attributes"]["sriov"]["bool"],
            false);
  EXPECT_EQ(Ours()[0]["spec"]["devices"][0]["taints"][0]["timeAdded"], added);
}

// A server that drops fields (taints with the gate off) is not written to
// again and again: what it stored counts as in step, and the gate that is
// off is named (the stats, the driver's metric).
TEST_F(SlicePublisherTest, FieldsTheServerDropsAreNotRewrittenForever) {
  Serve();
  store_->drop_taints = true;
  ASSERT_THAT(publisher_->Publish("node-a", Devices(3, true)), IsOk());
  EXPECT_FALSE(Ours()[0]["spec"]["devices"][0].contains("taints"));
  EXPECT_EQ(publisher_->stats().disabled_features,
            std::set<std::string>{"DRADeviceTaints"});
  const int writes = store_->writes;
  for (int i = 0; i < 3; ++i) {
    ASSERT_THAT(publisher_->Publish("node-a", Devices(3, true)), IsOk());
  }
  EXPECT_EQ(store_->writes, writes);
  EXPECT_EQ(Ours()[0]["spec"]["pool"]["generation"], 1);
}

// Answers of a hostile API server: nesting 100,000 deep, a resourceVersion
// that is a number, items that are not objects. Each is an error of that
// sync, never a crash, and the next good answer is used.
TEST_F(SlicePublisherTest, HostileListAnswersAreErrorsNotCrashes) {
  std::atomic<int> mode{0};
  auto server = FakeApiServer::Start(
      dir_.path() / "pki", [&](const FakeApiServer::Request& request) {
        if (request.method == "GET" &&
            request.target.starts_with(::topology::testing::kSlicesPath)) {
          switch (mode.load()) {
            case 0:
              return FakeApiServer::Answer{
                  200, "{\"items\": " + std::string(100000, '[') +
                           std::string(100000, ']') + "}"};
            case 1:
              return FakeApiServer::Answer{
                  200, R"({"items": [{"metadata": {"name": "x",
                      "resourceVersion": 7}, "spec": {"nodeName": "node-a",
                      "driver": "pci.libtopology.dev", "pool": {"name":
                      "node-a", "generation": 1, "resourceSliceCount": 1}}}]})"};
            default:
              return FakeApiServer::Answer{200, R"({"items": [1, "x", null]})"};
          }
        }
        return FakeApiServer::Answer{404, "{}"};
      });
  ASSERT_THAT(server.status(), IsOk());
  KubeConfig config;
  config.server = (*server)->url();
  config.ca_pem = (*server)->ca_pem();
  auto client = KubeClient::Create(config, {});
  ASSERT_THAT(client.status(), IsOk());
  SlicePublisher publisher(client->get(), kDriver, "node-a", {});
  for (int m = 0; m < 3; ++m) {
    mode = m;
    EXPECT_THAT(publisher.Publish("node-a", Devices(1)),
                StatusIs(StatusCode::kUnavailable, HasSubstr("unreadable")))
        << "mode " << m;
  }
}

}  // namespace
}  // namespace topology::draplugin
