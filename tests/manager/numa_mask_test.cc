#include "topology/manager/numa_mask.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "topology/manager/numa_info.h"

#include "status_matchers.h"

namespace topology::manager {
namespace {

using ::testing::ElementsAre;
using testing::StatusIs;

NumaMask M(const std::vector<int>& ids) { return *NumaMask::FromIds(ids); }

TEST(NumaMaskTest, IdsOutOfRangeFailWithTheKubeletMessage) {
  EXPECT_THAT(NumaMask::FromIds({0, 64}),
              StatusIs(StatusCode::kInvalidArgument,
                       "bit number must be in range 0-63"));
  EXPECT_THAT(NumaMask::FromIds({-1}), StatusIs(StatusCode::kInvalidArgument));
  EXPECT_EQ(M({63}).bits(), uint64_t{1} << 63);
}

TEST(NumaMaskTest, BasicQueries) {
  const NumaMask m = M({1, 3});
  EXPECT_EQ(m.Count(), 2);
  EXPECT_TRUE(m.IsSet(3));
  EXPECT_FALSE(m.IsSet(64));
  EXPECT_FALSE(m.IsSet(-1));
  EXPECT_TRUE(m.AnySet({0, 3}));
  EXPECT_FALSE(m.AnySet({0, 2}));
  EXPECT_THAT(m.Ids(), ElementsAre(1, 3));
  EXPECT_EQ(m.ToString(), "[1,3]");
  EXPECT_TRUE(NumaMask().IsEmpty());
  EXPECT_EQ(m.And(M({3, 4})), M({3}));
  EXPECT_EQ(m.Or(M({0})), M({0, 1, 3}));
}

TEST(NumaMaskTest, NarrowerIsFewerBitsThenSmallerValue) {
  EXPECT_TRUE(M({0}).IsNarrowerThan(M({0, 1})));
  EXPECT_TRUE(M({3}).IsNarrowerThan(M({0, 1})));
  // Numeric, not "lower-numbered bits": {1,2} (=6) beats {0,3} (=9).
  EXPECT_TRUE(M({1, 2}).IsNarrowerThan(M({0, 3})));
  EXPECT_FALSE(M({0, 3}).IsNarrowerThan(M({1, 2})));
  EXPECT_FALSE(M({0, 1}).IsNarrowerThan(M({0, 1})));
  EXPECT_TRUE(M({0, 1}).IsLessThan(M({2})));
  EXPECT_TRUE(M({2}).IsGreaterThan(M({0, 1})));
}

TEST(NumaMaskTest, IterateMasksInTheKubeletOrder) {
  std::vector<std::string> seen;
  IterateMasks({0, 1, 2, 3}, [&](NumaMask m) { seen.push_back(m.ToString()); });
  EXPECT_THAT(seen, ElementsAre("[0]", "[1]", "[2]", "[3]", "[0,1]", "[0,2]",
                                "[0,3]", "[1,2]", "[1,3]", "[2,3]", "[0,1,2]",
                                "[0,1,3]", "[0,2,3]", "[1,2,3]", "[0,1,2,3]"));
  seen.clear();
  IterateMasks({5, 2}, [&](NumaMask m) { seen.push_back(m.ToString()); });
  EXPECT_THAT(seen, ElementsAre("[5]", "[2]", "[2,5]"));
  int count = 0;
  IterateMasks({}, [&](NumaMask) { ++count; });
  EXPECT_EQ(count, 0);
}

// The kubelet's numa_info_test fixture.
NumaInfo FourNodes() {
  return *NumaInfo::Create(
      {0, 1, 2, 3}, std::map<int, std::vector<int>>{{0, {10, 11, 12, 12}},
                                                    {1, {11, 10, 12, 12}},
                                                    {2, {12, 12, 10, 11}},
                                                    {3, {12, 12, 11, 10}}});
}

TEST(NumaInfoTest, AverageDistanceIncludesSelfPairs) {
  const NumaInfo info = FourNodes();
  EXPECT_DOUBLE_EQ(info.AverageDistance(M({0})), 10);
  EXPECT_DOUBLE_EQ(info.AverageDistance(M({0, 1})), 10.5);
  EXPECT_DOUBLE_EQ(info.AverageDistance(M({0, 2})), 11);
  EXPECT_DOUBLE_EQ(info.AverageDistance(M({0, 2, 3})), 100.0 / 9);
  EXPECT_DOUBLE_EQ(info.AverageDistance(NumaMask()), 0);
  EXPECT_EQ(info.DefaultAffinity(), M({0, 1, 2, 3}));
}

TEST(NumaInfoTest, SparseIdsAndAsymmetricRows) {
  auto info = NumaInfo::Create({0, 2}, std::map<int, std::vector<int>>{
                                           {0, {10, 0, 20}}, {2, {21, 0, 10}}});
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info->Distance(0, 2), 20);
  EXPECT_EQ(info->Distance(2, 0), 21);
  EXPECT_EQ(info->DefaultAffinity(), M({0, 2}));
}

TEST(NumaInfoTest, RejectsBadInput) {
  EXPECT_THAT(NumaInfo::Create({0, 64}, std::nullopt),
              StatusIs(StatusCode::kInvalidArgument));
  EXPECT_THAT(NumaInfo::Create({1, 1}, std::nullopt),
              StatusIs(StatusCode::kInvalidArgument));
  EXPECT_THAT(
      NumaInfo::Create({0, 1}, std::map<int, std::vector<int>>{{0, {10, 20}}}),
      StatusIs(StatusCode::kInvalidArgument));
  EXPECT_THAT(
      NumaInfo::Create(
          {0, 1}, std::map<int, std::vector<int>>{{0, {10, 20}}, {1, {20}}}),
      StatusIs(StatusCode::kInvalidArgument));
}

}  // namespace
}  // namespace topology::manager
