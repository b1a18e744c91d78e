// DisabledFeatures: which feature gates an API server has off, read from
// what it dropped of a slice (the strategy's dropDisabledFields, v1.37,
// read backwards), for every gate the strategy covers; the real server's
// drops are the oracle in KubeApiServerTest.DroppedFieldsNameTheGatesOff.
#include "dropped_fields.h"

#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace topology::draplugin {
namespace {

using nlohmann::json;
using ::testing::ElementsAre;
using ::testing::Field;
using ::testing::IsEmpty;

std::vector<std::string> Gates(const json& sent, const json& stored) {
  std::vector<std::string> gates;
  for (const DisabledFeature& feature : DisabledFeatures(sent, stored)) {
    gates.push_back(feature.gate);
  }
  return gates;
}

// One device with `fields` merged in.
json Spec(const json& device_fields, const json& spec_fields = json::object()) {
  json device = {{"name", "gpu-0"}};
  device.update(device_fields);
  json spec = {{"driver", "pci.libtopology.dev"}, {"devices", {device}}};
  spec.update(spec_fields);
  return spec;
}

struct Case {
  const char* name;
  json sent;
  const char* gate;
};

// Each gate's fields sent and all dropped: that gate is named, alone.
TEST(DisabledFeaturesTest, EachGateOfTheStrategyIsNamedFromItsDroppedFields) {
  const json plain = Spec(json::object());
  const std::vector<Case> cases = {
      {"taints", Spec({{"taints", {{{"key", "k"}, {"effect", "NoSchedule"}}}}}),
       "DRADeviceTaints"},
      {"consumesCounters",
       Spec({{"consumesCounters",
              {{{"counterSet", "pf"},
                {"counters", {{"vfs", {{"value", "1"}}}}}}}}}),
       "DRAPartitionableDevices"},
      {"sharedCounters",
       Spec(json::object(), {{"sharedCounters", {{{"name", "pf"}}}}}),
       "DRAPartitionableDevices"},
      {"perDeviceNodeSelection",
       Spec(json::object(), {{"perDeviceNodeSelection", true}}),
       "DRAPartitionableDevices"},
      {"device nodeName", Spec({{"nodeName", "node-a"}}),
       "DRAPartitionableDevices"},
      {"bindingConditions", Spec({{"bindingConditions", {"Ready"}}}),
       "DRADeviceBindingConditions (with DRAResourceClaimDeviceStatus)"},
      {"bindsToNode", Spec({{"bindsToNode", true}}),
       "DRADeviceBindingConditions (with DRAResourceClaimDeviceStatus)"},
      {"allowMultipleAllocations", Spec({{"allowMultipleAllocations", true}}),
       "DRAConsumableCapacity"},
      {"nodeAllocatableResources",
       Spec({{"nodeAllocatableResources", {{"cpu", {{"perContainer", "1"}}}}}}),
       "DRANodeAllocatableResources"},
      {"list attribute",
       Spec({{"attributes", {{"ports", {{"ints", {1, 2}}}}}}}),
       "DRAListTypeAttributes"},
      {"partitionTypeAttribute",
       Spec(json::object(), {{"partitionTypeAttribute", "example.com/type"}}),
       "DRAPartitionableDevicesType"},
      {"skipNodeOperations",
       Spec(json::object(), {{"skipNodeOperations", {"*"}}}),
       "DRAOptionalNodeOperations"},
  };
  for (const Case& c : cases) {
    EXPECT_THAT(Gates(c.sent, plain), ElementsAre(c.gate)) << c.name;
    // Kept as sent: no gate is off.
    EXPECT_THAT(Gates(c.sent, c.sent), IsEmpty()) << c.name;
  }
}

// A capacity's requestPolicy alone stands for consumable capacity.
TEST(DisabledFeaturesTest, ARequestPolicyDroppedIsConsumableCapacity) {
  const json sent = Spec(
      {{"capacity",
        {{"memory",
          {{"value", "80Gi"}, {"requestPolicy", {{"default", "1Gi"}}}}}}}});
  const json stored = Spec({{"capacity", {{"memory", {{"value", "80Gi"}}}}}});
  EXPECT_THAT(Gates(sent, stored), ElementsAre("DRAConsumableCapacity"));
}

// Compatibility groups live inside counter consumptions: dropped with them
// (partitionable devices off) they name no gate of their own; dropped alone
// they do.
TEST(DisabledFeaturesTest, CompatibilityGroupsAreNamedOnlyWhenDroppedAlone) {
  const json with_groups =
      Spec({{"consumesCounters",
             {{{"counterSet", "pf"},
               {"compatibilityGroups", {"a"}},
               {"counters", {{"vfs", {{"value", "1"}}}}}}}}});
  const json without_groups = Spec(
      {{"consumesCounters",
        {{{"counterSet", "pf"}, {"counters", {{"vfs", {{"value", "1"}}}}}}}}});
  EXPECT_THAT(Gates(with_groups, Spec(json::object())),
              ElementsAre("DRAPartitionableDevices"));
  EXPECT_THAT(Gates(with_groups, without_groups),
              ElementsAre("DRADeviceCompatibilityGroups"));
}

// Several gates off at once are named in the strategy's order, each with
// the fields it covers; a spec that is not an object uses nothing.
TEST(DisabledFeaturesTest, SeveralGatesInTheStrategysOrderWithTheirFields) {
  const json sent =
      Spec({{"taints", {{{"key", "k"}, {"effect", "NoSchedule"}}}},
            {"allowMultipleAllocations", true}},
           {{"skipNodeOperations", {"*"}}});
  const auto disabled = DisabledFeatures(sent, Spec(json::object()));
  EXPECT_THAT(
      disabled,
      ElementsAre(Field(&DisabledFeature::gate, "DRADeviceTaints"),
                  Field(&DisabledFeature::gate, "DRAConsumableCapacity"),
                  Field(&DisabledFeature::gate, "DRAOptionalNodeOperations")));
  EXPECT_EQ(disabled[0].fields, "devices[].taints");
  EXPECT_THAT(Gates(json::array(), json("x")), IsEmpty());
  EXPECT_THAT(Gates(json("x"), json::object()), IsEmpty());
}

}  // namespace
}  // namespace topology::draplugin
