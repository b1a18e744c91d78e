// Outside JSON is parsed with bounded nesting (topology/common/json_fields.h):
// the depth is checked by one pass over the bytes before the plain parser
// builds the document.
#include "topology/common/json_fields.h"

#include <string>

#include <gtest/gtest.h>

namespace topology::json_fields {
namespace {

std::string Nested(int depth) {
  return std::string(static_cast<size_t>(depth), '[') +
         std::string(static_cast<size_t>(depth), ']');
}

TEST(ParseBoundedTest, NestingUpToTheLimitParsesDeeperIsRefused) {
  EXPECT_FALSE(ParseBounded(Nested(32), 32).is_discarded());
  EXPECT_TRUE(ParseBounded(Nested(33), 32).is_discarded());
  // A hostile answer of 100,000 brackets: refused, no recursion.
  EXPECT_TRUE(ParseBounded(Nested(100000), 64).is_discarded());
  EXPECT_TRUE(ParseBounded(std::string(100000, '{'), 64).is_discarded());
}

TEST(ParseBoundedTest, BracketsInStringsAreNotNesting) {
  const std::string deep_text = "{\"a\": \"" + std::string(100, '[') + "\\\"" +
                                std::string(100, '{') + "\"}";
  const nlohmann::json doc = ParseBounded(deep_text, 2);
  ASSERT_FALSE(doc.is_discarded());
  EXPECT_EQ(doc["a"].get<std::string>().size(), 201u);
  // An escaped backslash ends before the quote: the string ends there.
  EXPECT_FALSE(ParseBounded(R"({"a": "x\\", "b": [[1]]})", 3).is_discarded());
  EXPECT_TRUE(ParseBounded(R"({"a": "x\\", "b": [[1]]})", 2).is_discarded());
}

TEST(ParseBoundedTest, NotJsonIsDiscardedNeverThrown) {
  EXPECT_TRUE(ParseBounded("{\"a\": ", 8).is_discarded());
  EXPECT_TRUE(ParseBounded("]]]]", 8).is_discarded());
  EXPECT_TRUE(ParseBounded("", 8).is_discarded());
  EXPECT_TRUE(ParseBounded("\"unterminated", 8).is_discarded());
}

}  // namespace
}  // namespace topology::json_fields
