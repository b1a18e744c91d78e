// GallopLowerBound gives std::lower_bound's answer from any start, for
// every value: below, between, on and past the elements, with duplicates.
#include "topology/sorted_search.h"

#include <algorithm>
#include <vector>

#include <gtest/gtest.h>

namespace topology {
namespace {

TEST(GallopLowerBoundTest, SameAnswerAsLowerBoundFromEveryStart) {
  const auto before = [](int a, int b) { return a < b; };
  for (const std::vector<int>& sorted :
       {std::vector<int>{}, {5}, {1, 3, 3, 3, 8, 20, 21, 22, 40},
        {0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30, 32}}) {
    for (size_t start = 0; start <= sorted.size(); ++start) {
      const auto first = sorted.begin() + static_cast<std::ptrdiff_t>(start);
      for (int value = -1; value <= 42; ++value) {
        EXPECT_EQ(GallopLowerBound(first, sorted.end(), value, before),
                  std::lower_bound(first, sorted.end(), value, before))
            << "start " << start << " value " << value;
      }
    }
  }
}

}  // namespace
}  // namespace topology
