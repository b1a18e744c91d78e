#include "topology/cpu_set.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "status_matchers.h"

namespace topology {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using testing::StatusIs;

TEST(CpuSetTest, ParsesListsWithRangesAndSingles) {
  auto set = CpuSet::ParseList("0-3,8,10-11\n");
  ASSERT_TRUE(set.ok());
  EXPECT_THAT(set->Ids(), ElementsAre(0, 1, 2, 3, 8, 10, 11));
  EXPECT_EQ(set->ToList(), "0-3,8,10-11");
  EXPECT_EQ(set->Count(), 7);
}

TEST(CpuSetTest, EmptyAndNulTerminatedText) {
  EXPECT_TRUE(CpuSet::ParseList("")->empty());
  EXPECT_TRUE(CpuSet::ParseList("\n")->empty());
  // Recorded files can end with "\n\0".
  auto set = CpuSet::ParseList(std::string("0-31\n\0", 6));
  ASSERT_TRUE(set.ok());
  EXPECT_EQ(set->Count(), 32);
}

TEST(CpuSetTest, KernelStrideForm) {
  auto set = CpuSet::ParseList("0-9:2/5");
  ASSERT_TRUE(set.ok());
  EXPECT_THAT(set->Ids(), ElementsAre(0, 1, 5, 6));
}

TEST(CpuSetTest, RejectsMalformedLists) {
  EXPECT_THAT(CpuSet::ParseList("3-1"),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("descending")));
  EXPECT_THAT(CpuSet::ParseList("0,,2"),
              StatusIs(StatusCode::kInvalidArgument));
  EXPECT_THAT(CpuSet::ParseList("0,"), StatusIs(StatusCode::kInvalidArgument));
  EXPECT_THAT(CpuSet::ParseList("a-b"), StatusIs(StatusCode::kInvalidArgument));
  EXPECT_THAT(CpuSet::ParseList("-1"), StatusIs(StatusCode::kInvalidArgument));
  EXPECT_THAT(
      CpuSet::ParseList("0-99999999"),
      StatusIs(StatusCode::kInvalidArgument, HasSubstr("out of range")));
  EXPECT_THAT(CpuSet::ParseList("0-9:0/5"),
              StatusIs(StatusCode::kInvalidArgument));
  EXPECT_THAT(CpuSet::ParseList("0-9:2"),
              StatusIs(StatusCode::kInvalidArgument));
  EXPECT_THAT(CpuSet::ParseList("1:2/4"),
              StatusIs(StatusCode::kInvalidArgument));
}

TEST(CpuSetTest, ParsesMasksMostSignificantWordFirst) {
  auto set = CpuSet::ParseMask("00000001,0000000f\n");
  ASSERT_TRUE(set.ok());
  EXPECT_THAT(set->Ids(), ElementsAre(0, 1, 2, 3, 32));
  EXPECT_THAT(CpuSet::ParseMask("0x3")->Ids(), ElementsAre(0, 1));
  EXPECT_TRUE(CpuSet::ParseMask("00000000")->empty());
  EXPECT_TRUE(CpuSet::ParseMask("")->empty());
}

TEST(CpuSetTest, RejectsMalformedMasks) {
  EXPECT_THAT(CpuSet::ParseMask("xyz"), StatusIs(StatusCode::kInvalidArgument));
  EXPECT_THAT(CpuSet::ParseMask("123456789"),
              StatusIs(StatusCode::kInvalidArgument));
  EXPECT_THAT(CpuSet::ParseMask("ff,,ff"),
              StatusIs(StatusCode::kInvalidArgument));
  EXPECT_THAT(CpuSet::ParseMask(std::string(3000, 'f') + ",0"),
              StatusIs(StatusCode::kInvalidArgument));
}

TEST(CpuSetTest, SetAlgebra) {
  const CpuSet a = CpuSet::Of({0, 1, 2, 70});
  const CpuSet b = CpuSet::Of({2, 3});
  EXPECT_TRUE(a.Intersects(b));
  EXPECT_FALSE(a.IsSubsetOf(b));
  EXPECT_TRUE(CpuSet::Of({2}).IsSubsetOf(b));
  EXPECT_TRUE(CpuSet().IsSubsetOf(b));
  EXPECT_EQ(a.Union(b).ToList(), "0-3,70");
  EXPECT_EQ(a.Intersection(b).ToList(), "2");
  EXPECT_EQ(a.Intersection(CpuSet::Of({70})), CpuSet::Of({70}));
  EXPECT_TRUE(a.Intersection(CpuSet::Of({5})).empty());
  EXPECT_FALSE(a.Contains(-1));
  EXPECT_FALSE(a.Contains(1000));
}

}  // namespace
}  // namespace topology
