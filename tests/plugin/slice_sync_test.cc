// The publisher's sync in its phases (slice_sync.h, as the Go controller's
// syncPool: what is there, what should be, compare, plan), and the testing
// kit's slice validator, which judges what a driver's publisher would send
// by the API server's rules.
#include "slice_sync.h"

#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "topology/draplugin/resource_slices.h"
#include "topology/testing/slice_validator.h"

#include "status_matchers.h"

namespace topology::draplugin::slice_sync {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::SizeIs;
using ::topology::testing::IsOk;
using ::topology::testing::StatusIs;

constexpr char kDriver[] = "pci.libtopology.dev";

json Slice(const std::string& name, const std::string& node,
           const std::string& driver, const std::string& pool,
           int64_t generation, int64_t count, json devices,
           const std::string& owner_uid = "") {
  json slice = {{"metadata", {{"name", name}, {"resourceVersion", "7"}}},
                {"spec",
                 {{"nodeName", node},
                  {"driver", driver},
                  {"pool",
                   {{"name", pool},
                    {"generation", generation},
                    {"resourceSliceCount", count}}},
                  {"devices", std::move(devices)}}}};
  if (!owner_uid.empty()) {
    slice["metadata"]["ownerReferences"] = {
        {{"kind", "Node"}, {"uid", owner_uid}, {"controller", true}}};
  }
  return slice;
}

std::string List(std::vector<json> items) {
  return json{{"items", std::move(items)}}.dump();
}

// A slice's content (slice_sync::Content) holding `list`, a JSON list of
// devices.
std::string Held(const std::string& list) {
  return "{\"devices\":" + list + "}";
}

json Devices(std::initializer_list<const char*> names) {
  json out = json::array();
  for (const char* name : names) out.push_back({{"name", name}});
  return out;
}

// Phase 1: another node's or driver's slices are never ours; this pool's
// come first by name, then the obsolete ones; a taint's time is kept.
TEST(SliceSyncTest, ObservedAreThisNodesAndDriversWithThisPoolFirst) {
  json tainted = Devices({"d-2"});
  tainted[0]["taints"] = {{{"key", "k"},
                           {"effect", "NoSchedule"},
                           {"timeAdded", "2026-01-01T00:00:00Z"}}};
  auto observed = ReadObserved(
      List({Slice("b", "node-a", kDriver, "node-a", 3, 2, Devices({"d-1"})),
            Slice("old", "node-a", kDriver, "gone", 9, 1, json::array()),
            Slice("a", "node-a", kDriver, "node-a", 2, 2, tainted),
            Slice("x", "node-b", kDriver, "node-b", 1, 1, json::array()),
            Slice("y", "node-a", "gpu.example.com", "node-a", 1, 1,
                  json::array())}),
      "node-a", kDriver, "node-a");
  ASSERT_THAT(observed.status(), IsOk());
  ASSERT_THAT(observed->slices, SizeIs(3));
  EXPECT_EQ(observed->slices[0].name, "a");
  EXPECT_EQ(observed->slices[1].name, "b");
  EXPECT_EQ(observed->slices[2].name, "old");
  EXPECT_EQ(observed->in_pool, 2u);
  EXPECT_EQ(observed->generation, 3);
  EXPECT_EQ(observed->taint_times.at("d-2").size(), 1u);
  // What the comparison keeps of a device leaves the server's time out.
  EXPECT_FALSE(observed->slices[0].content["devices"][0]["taints"][0].contains(
      "timeAdded"));
}

TEST(SliceSyncTest, AnUnreadableListIsNamed) {
  EXPECT_THAT(
      ReadObserved("{\"items\": 3}", "node-a", kDriver, "node-a").status(),
      StatusIs(StatusCode::kUnavailable, HasSubstr("items")));
  EXPECT_THAT(ReadObserved("[", "node-a", kDriver, "node-a").status(),
              StatusIs(StatusCode::kUnavailable, HasSubstr("not JSON")));
}

// Phase 2: blocks of 64 devices, two to a slice (128), or one when a
// device has taints, counters or a list attribute; no devices is one empty
// slice.
TEST(SliceSyncTest, DesiredSlicesHold128DevicesOr64) {
  const std::vector<std::string> blocks = {
      "{\"name\":\"a\"}", "{\"name\":\"b\"}", "{\"name\":\"c\"}"};
  EXPECT_THAT(DesiredSlices(blocks, false),
              ElementsAre(Held("[{\"name\":\"a\"},{\"name\":\"b\"}]"),
                          Held("[{\"name\":\"c\"}]")));
  EXPECT_THAT(DesiredSlices(blocks, true), SizeIs(3));
  EXPECT_THAT(DesiredSlices({}, false), ElementsAre(Held("[]")));
}

// Counter sets go in slices of their own, 8 a slice, after the devices';
// the partition type only to a slice whose devices consume counters.
TEST(SliceSyncTest, CounterSetsHaveSlicesOfTheirOwn) {
  std::vector<std::string> sets;
  for (int i = 0; i < 9; ++i) {
    sets.push_back(Dump(CounterSetJson(
        {.name = "set-" + std::to_string(i), .counters = {{"vfs", "4"}}})));
  }
  const std::string consumer = Dump(
      DeviceJson({.name = "vf",
                  .attributes = {{"partitionType", {std::string("vf"), false}}},
                  .consumes_counters = {
                      {.counter_set = "set-0", .counters = {{"vfs", "1"}}}}}));
  const std::vector<std::string> wanted =
      DesiredSlices({"{\"name\":\"plain\"}", consumer}, true, sets,
                    "pci.libtopology.dev/partitionType");
  ASSERT_THAT(wanted, SizeIs(4));
  EXPECT_EQ(wanted[0], Held("[{\"name\":\"plain\"}]"));
  EXPECT_EQ(json::parse(wanted[1])["partitionTypeAttribute"],
            "pci.libtopology.dev/partitionType");
  EXPECT_THAT(json::parse(wanted[2])["sharedCounters"], SizeIs(8));
  EXPECT_THAT(json::parse(wanted[3])["sharedCounters"], SizeIs(1));
  // Each as Content() reads the slice back: the plan's bodies are valid
  // slices, and what the server lists of them compares equal.
  auto plan =
      PlanWrites(Observation(), wanted, "node-a", kDriver, "node-a", "");
  ASSERT_THAT(plan.status(), IsOk());
  ASSERT_THAT(plan->writes, SizeIs(4));
  for (size_t i = 0; i < wanted.size(); ++i) {
    EXPECT_THAT(plan->writes[i].valid, IsOk()) << wanted[i];
    const json spec = json::parse(plan->writes[i].body)["spec"];
    EXPECT_EQ(Dump(Content(spec, nullptr)), wanted[i]);
  }
}

// Phase 3: in step only with the same device lists, one generation, the
// right count and owner; a list the server stored without a dropped field
// counts as what was sent.
TEST(SliceSyncTest, InStepComparesDevicesGenerationCountAndOwner) {
  const std::vector<std::string> wanted = {Held("[{\"name\":\"d-1\"}]"),
                                           Held("[{\"name\":\"d-2\"}]")};
  const auto observe = [](std::vector<json> items) {
    return *ReadObserved(List(std::move(items)), "node-a", kDriver, "node-a");
  };
  const json one = Devices({"d-1"});
  const json two = Devices({"d-2"});
  EXPECT_TRUE(
      InStep(observe({Slice("a", "node-a", kDriver, "node-a", 4, 2, two, "u"),
                      Slice("b", "node-a", kDriver, "node-a", 4, 2, one, "u")}),
             wanted, "node-a", "u", {}));
  // Another generation, count or owner, or a device of its own.
  EXPECT_FALSE(
      InStep(observe({Slice("a", "node-a", kDriver, "node-a", 3, 2, two, "u"),
                      Slice("b", "node-a", kDriver, "node-a", 4, 2, one, "u")}),
             wanted, "node-a", "u", {}));
  EXPECT_FALSE(
      InStep(observe({Slice("a", "node-a", kDriver, "node-a", 4, 3, two, "u"),
                      Slice("b", "node-a", kDriver, "node-a", 4, 3, one, "u")}),
             wanted, "node-a", "u", {}));
  EXPECT_FALSE(
      InStep(observe({Slice("a", "node-a", kDriver, "node-a", 4, 2, two),
                      Slice("b", "node-a", kDriver, "node-a", 4, 2, one)}),
             wanted, "node-a", "u", {}));
  EXPECT_FALSE(
      InStep(observe({Slice("a", "node-a", kDriver, "node-a", 4, 2, two, "u"),
                      Slice("b", "node-a", kDriver, "node-a", 4, 2,
                            Devices({"d-9"}), "u")}),
             wanted, "node-a", "u", {}));
  // The server dropped a field: what it stored stands for what was sent.
  const std::vector<std::string> with_taint = {Held(
      "[{\"name\":\"d-1\",\"taints\":[{\"effect\":\"None\",\"key\":\"k\"}]}]")};
  EXPECT_FALSE(
      InStep(observe({Slice("a", "node-a", kDriver, "node-a", 1, 1, one, "u")}),
             with_taint, "node-a", "u", {}));
  EXPECT_TRUE(
      InStep(observe({Slice("a", "node-a", kDriver, "node-a", 1, 1, one, "u")}),
             with_taint, "node-a", "u",
             {{with_taint[0], Held("[{\"name\":\"d-1\"}]")}}));
}

// Phase 4: the obsolete pool's slice deleted, this pool's updated in
// place with their versions, the rest created with generateName; all of
// the next generation, judged before anything is sent.
TEST(SliceSyncTest, PlanDeletesObsoleteUpdatesInPlaceAndCreatesTheRest) {
  auto observed = ReadObserved(
      List({Slice("keep", "node-a", kDriver, "node-a", 5, 1, Devices({"d"})),
            Slice("old", "node-a", kDriver, "gone", 1, 1, json::array())}),
      "node-a", kDriver, "node-a");
  ASSERT_THAT(observed.status(), IsOk());
  auto plan = PlanWrites(
      *observed, {Held("[{\"name\":\"d-1\"}]"), Held("[{\"name\":\"d-2\"}]")},
      "node-a", kDriver, "node-a", "");
  ASSERT_THAT(plan.status(), IsOk());
  EXPECT_EQ(plan->generation, 6);
  EXPECT_THAT(plan->deletes, ElementsAre("old"));
  ASSERT_THAT(plan->writes, SizeIs(2));
  EXPECT_TRUE(plan->writes[0].update);
  EXPECT_EQ(plan->writes[0].name, "keep");
  const json updated = json::parse(plan->writes[0].body);
  EXPECT_EQ(updated["metadata"]["name"], "keep");
  EXPECT_EQ(updated["metadata"]["resourceVersion"], "7");
  EXPECT_EQ(updated["spec"]["pool"]["generation"], 6);
  EXPECT_EQ(updated["spec"]["pool"]["resourceSliceCount"], 2);
  EXPECT_FALSE(plan->writes[1].update);
  EXPECT_EQ(plan->writes[1].name, "");
  const json created = json::parse(plan->writes[1].body);
  EXPECT_EQ(created["metadata"]["generateName"], "node-a-pci.libtopology.dev-");
  EXPECT_FALSE(created["metadata"].contains("name"));
  for (const auto& write : plan->writes) EXPECT_THAT(write.valid, IsOk());
}

// Phase 4, as the Go controller: no slice new and one kept slice changed
// is that slice's update alone at the same generation; two changed, or a
// new slice, are the next generation for every slice.
TEST(SliceSyncTest, OneUpdateKeepsTheGeneration) {
  const auto listed = [](const std::vector<std::string>& devices) {
    std::vector<json> items;
    for (size_t i = 0; i < devices.size(); ++i) {
      items.push_back(Slice("s" + std::to_string(i), "node-a", kDriver,
                            "node-a", 4, static_cast<int64_t>(devices.size()),
                            json::parse(devices[i])["devices"]));
    }
    return List(std::move(items));
  };
  const std::vector<std::string> now = {Held(R"([{"name":"d-1"}])"),
                                        Held(R"([{"name":"d-2"}])")};
  auto observed = ReadObserved(listed(now), "node-a", kDriver, "node-a");
  ASSERT_THAT(observed.status(), IsOk());

  auto one = PlanWrites(*observed, {now[0], Held(R"([{"name":"d-3"}])")},
                        "node-a", kDriver, "node-a", "");
  ASSERT_THAT(one.status(), IsOk());
  EXPECT_EQ(one->generation, 4);
  ASSERT_THAT(one->writes, SizeIs(1));
  EXPECT_EQ(one->writes[0].index, 1u);
  EXPECT_EQ(one->writes[0].name, "s1");
  EXPECT_EQ(json::parse(one->writes[0].body)["spec"]["pool"]["generation"], 4);
  EXPECT_THAT(one->unchanged, SizeIs(1));
  EXPECT_TRUE(one->unchanged.contains("s0"));

  auto two = PlanWrites(
      *observed, {Held(R"([{"name":"d-4"}])"), Held(R"([{"name":"d-3"}])")},
      "node-a", kDriver, "node-a", "");
  ASSERT_THAT(two.status(), IsOk());
  EXPECT_EQ(two->generation, 5);
  EXPECT_THAT(two->writes, SizeIs(2));
  EXPECT_THAT(two->unchanged, SizeIs(0));

  auto grown =
      PlanWrites(*observed, {now[0], now[1], Held(R"([{"name":"d-5"}])")},
                 "node-a", kDriver, "node-a", "");
  ASSERT_THAT(grown.status(), IsOk());
  EXPECT_EQ(grown->generation, 5);
  EXPECT_THAT(grown->writes, SizeIs(3));
}

// Slices are matched to the wanted lists by content, not by the order of
// their names (ours encode no index): the same lists wanted in the other
// order send nothing new, and one changed list is written to the slice
// that held it.
TEST(SliceSyncTest, SlicesAreMatchedByContentNotByNameOrder) {
  const std::vector<std::string> now = {Held(R"([{"name":"d-1"}])"),
                                        Held(R"([{"name":"d-2"}])")};
  auto observed = ReadObserved(List({Slice("a", "node-a", kDriver, "node-a", 4,
                                           2, json::parse(now[1])["devices"]),
                                     Slice("b", "node-a", kDriver, "node-a", 4,
                                           2, json::parse(now[0])["devices"])}),
                               "node-a", kDriver, "node-a");
  ASSERT_THAT(observed.status(), IsOk());
  auto same = PlanWrites(*observed, now, "node-a", kDriver, "node-a", "");
  ASSERT_THAT(same.status(), IsOk());
  EXPECT_EQ(same->generation, 4);
  EXPECT_THAT(same->writes, SizeIs(0));
  EXPECT_THAT(same->deletes, SizeIs(0));
  EXPECT_THAT(same->unchanged, SizeIs(2));

  auto one = PlanWrites(*observed, {now[0], Held(R"([{"name":"d-3"}])")},
                        "node-a", kDriver, "node-a", "");
  ASSERT_THAT(one.status(), IsOk());
  EXPECT_EQ(one->generation, 4);
  ASSERT_THAT(one->writes, SizeIs(1));
  EXPECT_EQ(one->writes[0].name, "a");  // it held d-2, which went
  EXPECT_TRUE(one->unchanged.contains("b"));

  // One slice fewer: the rest updated with the new count (one update) and
  // the other deleted, at the same generation (the Go controller's rule).
  auto shrunk =
      PlanWrites(*observed, {now[0]}, "node-a", kDriver, "node-a", "");
  ASSERT_THAT(shrunk.status(), IsOk());
  EXPECT_EQ(shrunk->generation, 4);
  ASSERT_THAT(shrunk->writes, SizeIs(1));
  EXPECT_THAT(shrunk->deletes, SizeIs(1));
}

}  // namespace
}  // namespace topology::draplugin::slice_sync

namespace topology::testing {
namespace {

using ::testing::HasSubstr;
using ::topology::draplugin::SliceDevice;

std::vector<SliceDevice> Tainted(size_t n) {
  std::vector<SliceDevice> devices;
  for (size_t i = 0; i < n; ++i) {
    devices.push_back({.name = "gpu-" + std::to_string(i),
                       .attributes = {{"index", {int64_t(i)}}},
                       .taints = {{.key = "example.com/maintenance"}}});
  }
  return devices;
}

// What a driver publishes, as the API server receives it: 200 tainted
// devices go out as four slices of at most 64, each accepted.
TEST(SliceValidatorTest, WhatThePublisherSendsIsJudgedSliceBySlice) {
  auto bodies = draplugin::NewPoolSliceBodies("gpu.example.com", "node-a",
                                              "node-a", Tainted(200));
  ASSERT_THAT(bodies.status(), IsOk());
  ASSERT_EQ(bodies->size(), 4u);
  for (const std::string& body : *bodies) {
    EXPECT_LE(nlohmann::json::parse(body)["spec"]["devices"].size(), 64u);
    EXPECT_THAT(ValidateResourceSlice(body), IsOk());
  }
  EXPECT_THAT(
      ValidatePublishedSlices("gpu.example.com", "node-a", Tainted(200)),
      IsOk());
}

// The server's refusals, named by slice and field: 33 attributes on a
// device of the second slice, a node name the API refuses, a taint key
// that is not a label name.
TEST(SliceValidatorTest, TheServersRefusalsAreNamedBySliceAndField) {
  std::vector<SliceDevice> devices = Tainted(70);
  for (int i = 0; i < 33; ++i) {
    devices[65].attributes["a" + std::to_string(i)] = {int64_t{1}};
  }
  EXPECT_THAT(
      ValidatePublishedSlices("gpu.example.com", "node-a", devices),
      StatusIs(StatusCode::kInvalidArgument,
               AllOf(HasSubstr("resourceslice 2 of 2, from device gpu-64"),
                     HasSubstr("spec.devices[1]"))));
  EXPECT_THAT(ValidatePublishedSlices("gpu.example.com", "Node_A", Tainted(1)),
              StatusIs(StatusCode::kInvalidArgument,
                       HasSubstr("resourceslice 1 of 1, from device gpu-0: "
                                 "spec.pool.name")));
  std::vector<SliceDevice> bad_key = Tainted(1);
  bad_key[0].taints[0].key = "not a key";
  EXPECT_THAT(ValidatePublishedSlices("gpu.example.com", "node-a", bad_key),
              StatusIs(StatusCode::kInvalidArgument,
                       HasSubstr("spec.devices[0].taints[0].key")));
}

}  // namespace
}  // namespace topology::testing
