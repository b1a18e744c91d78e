// What a pool must hold across its slices (ValidatePool: counter sets,
// what devices consume of them, the partition type attribute) and the
// partition type attribute's rule of one slice, as the 1.37 API server
// checks it (validatePartitionTypeAttribute); a server with the gate
// DRAPartitionableDevicesType off drops the field before validating, so
// the real server cannot judge these.
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "topology/draplugin/resource_slices.h"
#include "topology/draplugin/slice_validation.h"

#include "status_matchers.h"

namespace topology::draplugin {
namespace {

using ::testing::HasSubstr;
using ::topology::testing::IsOk;
using ::topology::testing::StatusIs;

constexpr char kDriver[] = "pci.libtopology.dev";
constexpr char kType[] = "pci.libtopology.dev/partitionType";

// A PF and two VFs drawing on one counter set, as the reference driver
// publishes SR-IOV functions.
Pool SriovPool() {
  Pool pool;
  pool.name = "node-a";
  pool.counter_sets = {
      {.name = "pci-0000-3b-00-0", .counters = {{"vfs", "2"}}}};
  pool.devices.push_back(
      {.name = "pci-0000-3b-00-0",
       .attributes = {{"partitionType", {std::string("pf"), false}}},
       .consumes_counters = {
           {.counter_set = "pci-0000-3b-00-0", .counters = {{"vfs", "2"}}}}});
  for (const char* vf : {"pci-0000-3b-00-1", "pci-0000-3b-00-2"}) {
    pool.devices.push_back(
        {.name = vf,
         .attributes = {{"partitionType", {std::string("vf"), false}}},
         .consumes_counters = {
             {.counter_set = "pci-0000-3b-00-0", .counters = {{"vfs", "1"}}}}});
  }
  pool.partition_type_attribute = kType;
  return pool;
}

TEST(ValidatePoolTest, ASriovPoolIsValid) {
  EXPECT_THAT(ValidatePool(kDriver, SriovPool()), IsOk());
}

TEST(ValidatePoolTest, ADeviceMayOnlyDrawOnCountersThePoolHas) {
  Pool pool = SriovPool();
  pool.devices[1].consumes_counters[0].counter_set = "pci-0000-5e-00-0";
  EXPECT_THAT(ValidatePool(kDriver, pool),
              StatusIs(StatusCode::kInvalidArgument,
                       HasSubstr("device \"pci-0000-3b-00-1\" consumes "
                                 "counter set \"pci-0000-5e-00-0\"")));
  pool = SriovPool();
  pool.devices[2].consumes_counters[0].counters = {{"queues", "1"}};
  EXPECT_THAT(ValidatePool(kDriver, pool),
              StatusIs(StatusCode::kInvalidArgument,
                       HasSubstr("counter \"queues\" of set")));
}

TEST(ValidatePoolTest, CounterSetNamesAreUniqueAndValidInThePool) {
  Pool pool = SriovPool();
  pool.counter_sets.push_back(pool.counter_sets[0]);
  EXPECT_THAT(ValidatePool(kDriver, pool),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("twice")));
  pool = SriovPool();
  pool.counter_sets[0].counters = {{"VFs", "2"}};
  EXPECT_THAT(ValidatePool(kDriver, pool),
              StatusIs(StatusCode::kInvalidArgument,
                       HasSubstr("counter set \"pci-0000-3b-00-0\"")));
  pool = SriovPool();
  pool.counter_sets[0].counters.clear();
  EXPECT_THAT(ValidatePool(kDriver, pool),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("counters")));
}

TEST(ValidatePoolTest, EveryPartitionCarriesThePartitionTypeAsAString) {
  Pool pool = SriovPool();
  pool.devices[1].attributes.clear();
  EXPECT_THAT(ValidatePool(kDriver, pool),
              StatusIs(StatusCode::kInvalidArgument,
                       HasSubstr("device \"pci-0000-3b-00-1\" consumes "
                                 "counters but has no attribute")));
  pool = SriovPool();
  pool.devices[1].attributes["partitionType"] = {int64_t{1}, false};
  EXPECT_THAT(ValidatePool(kDriver, pool),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("string")));
  // The qualified name in the device's attributes does as well.
  pool = SriovPool();
  pool.devices[1].attributes = {{kType, {std::string("vf"), false}}};
  EXPECT_THAT(ValidatePool(kDriver, pool), IsOk());
  // No device consumes counters: the type names nothing.
  pool = SriovPool();
  for (SliceDevice& device : pool.devices) device.consumes_counters.clear();
  EXPECT_THAT(ValidatePool(kDriver, pool),
              StatusIs(StatusCode::kInvalidArgument,
                       HasSubstr("no device of the pool consumes counters")));
}

// The slices the publisher makes of the pool: the devices' slice names the
// partition type, the counter sets are in a slice of their own, and each
// is valid by ValidateResourceSlice.
TEST(ValidatePoolTest, ThePoolsSlicesAreValidOneByOne) {
  auto bodies = NewPoolSliceBodies(kDriver, "node-a", SriovPool());
  ASSERT_THAT(bodies.status(), IsOk());
  ASSERT_EQ(bodies->size(), 2u);
  for (const std::string& body : *bodies) {
    EXPECT_THAT(ValidateResourceSlice(body), IsOk()) << body;
  }
  const auto devices = nlohmann::json::parse((*bodies)[0])["spec"];
  const auto counters = nlohmann::json::parse((*bodies)[1])["spec"];
  EXPECT_EQ(devices["partitionTypeAttribute"], kType);
  EXPECT_EQ(devices["pool"]["resourceSliceCount"], 2);
  EXPECT_EQ(counters["sharedCounters"][0]["counters"]["vfs"]["value"], "2");
  EXPECT_FALSE(counters.contains("devices"));
}

// validatePartitionTypeAttribute, slice by slice.
TEST(PartitionTypeTest, OnlyOnASliceOfPartitionsThatCarryIt) {
  auto bodies = NewPoolSliceBodies(kDriver, "node-a", SriovPool());
  ASSERT_THAT(bodies.status(), IsOk());
  nlohmann::json slice = nlohmann::json::parse((*bodies)[0]);
  slice["spec"]["devices"][1]["attributes"].erase("partitionType");
  EXPECT_THAT(ValidateResourceSlice(slice.dump()),
              StatusIs(StatusCode::kInvalidArgument,
                       HasSubstr("spec.devices[1].attributes[" +
                                 std::string(kType) + "]: Required value")));
  slice = nlohmann::json::parse((*bodies)[0]);
  slice["spec"]["partitionTypeAttribute"] = "partitionType";
  EXPECT_THAT(
      ValidateResourceSlice(slice.dump()),
      StatusIs(StatusCode::kInvalidArgument, HasSubstr("fully qualified")));
  slice = nlohmann::json::parse((*bodies)[0]);
  for (auto& device : slice["spec"]["devices"]) {
    device.erase("consumesCounters");
  }
  EXPECT_THAT(ValidateResourceSlice(slice.dump()),
              StatusIs(StatusCode::kInvalidArgument,
                       HasSubstr("may only be set on a slice which declares "
                                 "devices that consume counters")));
}

}  // namespace
}  // namespace topology::draplugin
