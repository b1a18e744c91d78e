#include "topology/manager/policy_options.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "status_matchers.h"

namespace topology::manager {
namespace {

using testing::StatusIs;

TEST(PolicyOptionsTest, Defaults) {
  auto options = PolicyOptions::Parse({});
  ASSERT_TRUE(options.ok());
  EXPECT_FALSE(options->prefer_closest_numa);
  EXPECT_EQ(options->max_allowable_numa_nodes, 8);
}

TEST(PolicyOptionsTest, GoBooleanSyntax) {
  for (const char* yes : {"1", "t", "T", "TRUE", "true", "True"}) {
    EXPECT_TRUE(PolicyOptions::Parse({{"prefer-closest-numa-nodes", yes}})
                    ->prefer_closest_numa)
        << yes;
  }
  for (const char* no : {"0", "f", "F", "FALSE", "false", "False"}) {
    EXPECT_FALSE(PolicyOptions::Parse({{"prefer-closest-numa-nodes", no}})
                     ->prefer_closest_numa)
        << no;
  }
  EXPECT_THAT(PolicyOptions::Parse({{"prefer-closest-numa-nodes", "yes"}}),
              StatusIs(StatusCode::kInvalidArgument,
                       "bad value for option \"prefer-closest-numa-nodes\": "
                       "strconv.ParseBool: parsing \"yes\": invalid syntax"));
}

TEST(PolicyOptionsTest, MaxAllowableNumaNodes) {
  EXPECT_EQ(PolicyOptions::Parse({{"max-allowable-numa-nodes", "64"}})
                ->max_allowable_numa_nodes,
            64);
  EXPECT_EQ(PolicyOptions::Parse({{"max-allowable-numa-nodes", "8"}})
                ->max_allowable_numa_nodes,
            8);
  EXPECT_THAT(PolicyOptions::Parse({{"max-allowable-numa-nodes", "4"}}),
              StatusIs(StatusCode::kInvalidArgument,
                       "the minimum value of \"max-allowable-numa-nodes\" "
                       "should not be less than 8"));
  EXPECT_THAT(PolicyOptions::Parse({{"max-allowable-numa-nodes", "eight"}}),
              StatusIs(StatusCode::kInvalidArgument,
                       "unable to convert policy option to integer "
                       "\"max-allowable-numa-nodes\" due to error: "
                       "strconv.Atoi: parsing \"eight\": invalid syntax"));
}

TEST(PolicyOptionsTest, UnknownOption) {
  EXPECT_THAT(PolicyOptions::Parse({{"numa-allocation-strategy", "x"}}),
              StatusIs(StatusCode::kInvalidArgument,
                       "unknown Topology Manager Policy option: "
                       "\"numa-allocation-strategy\""));
}

}  // namespace
}  // namespace topology::manager
