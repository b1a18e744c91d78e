// The kubelet device manager's hint situations (topology_hints_test.go).
#include "topology/manager/numa_hints.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace topology::manager {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

NumaMask M(const std::vector<int>& ids) { return *NumaMask::FromIds(ids); }
TopologyHint H(const std::vector<int>& ids, bool preferred) {
  return TopologyHint{M(ids), preferred};
}

HintRequest TwoNodesFourDevices(int request) {
  HintRequest r;
  r.node_ids = {0, 1};
  r.all_items = {M({0}), M({0}), M({1}), M({1})};
  r.available_items = r.all_items;
  r.request = request;
  return r;
}

TEST(NumaHintsTest, SingleDeviceFitsEitherNode) {
  EXPECT_THAT(GenerateNumaHints(TwoNodesFourDevices(1)),
              ElementsAre(H({0}, true), H({1}, true), H({0, 1}, false)));
}

TEST(NumaHintsTest, RequestLargerThanANodeNeedsBoth) {
  EXPECT_THAT(GenerateNumaHints(TwoNodesFourDevices(3)),
              ElementsAre(H({0, 1}, true)));
}

TEST(NumaHintsTest, PreferenceIsRelativeToAllDevicesNotFreeOnes) {
  HintRequest r = TwoNodesFourDevices(2);
  r.available_items = {M({0}), M({1})};  // one free per node
  // Two devices would fit on one node if all were free: {0,1} is the only
  // hint and it is not preferred.
  EXPECT_THAT(GenerateNumaHints(r), ElementsAre(H({0, 1}, false)));
}

TEST(NumaHintsTest, DevicesWithoutTopologyNeverCount) {
  HintRequest r;
  r.node_ids = {0, 1};
  r.all_items = {M({0}), NumaMask(), NumaMask()};
  r.available_items = r.all_items;
  r.request = 2;
  EXPECT_THAT(GenerateNumaHints(r), IsEmpty());
}

TEST(NumaHintsTest, MultiNodeDeviceCountsForEachOfItsNodes) {
  HintRequest r;
  r.node_ids = {0, 1};
  r.all_items = {M({0, 1}), M({1})};
  r.available_items = r.all_items;
  r.request = 2;
  EXPECT_THAT(GenerateNumaHints(r),
              ElementsAre(H({1}, true), H({0, 1}, false)));
}

TEST(NumaHintsTest, ReusableDevicesPinTheMask) {
  HintRequest r = TwoNodesFourDevices(2);
  r.available_items = {M({0}), M({1}), M({1})};
  r.reusable_items = {M({0})};
  EXPECT_THAT(GenerateNumaHints(r),
              ElementsAre(H({0}, true), H({0, 1}, false)));
}

TEST(NumaHintsTest, NothingFitsGivesNoHints) {
  HintRequest r = TwoNodesFourDevices(5);
  EXPECT_THAT(GenerateNumaHints(r), IsEmpty());
}

}  // namespace
}  // namespace topology::manager
