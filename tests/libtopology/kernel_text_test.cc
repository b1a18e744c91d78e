#include "kernel_text.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "status_matchers.h"

namespace topology::internal {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using testing::StatusIs;

TEST(KernelTextTest, TrimsWhitespaceAndNul) {
  EXPECT_EQ(TrimKernelText(std::string(" 0-3\n\0\0\0", 8)), "0-3");
  EXPECT_EQ(TrimKernelText("\n"), "");
}

TEST(KernelTextTest, Decimal) {
  EXPECT_EQ(*ParseDecimal("-1\n"), -1);
  EXPECT_EQ(*ParseDecimal("+7"), 7);
  EXPECT_THAT(ParseDecimal("1x"), StatusIs(StatusCode::kInvalidArgument));
  EXPECT_THAT(ParseDecimal(""), StatusIs(StatusCode::kInvalidArgument));
  EXPECT_THAT(ParseDecimal("99999999999999999999999"),
              StatusIs(StatusCode::kInvalidArgument));
}

TEST(KernelTextTest, Hex) {
  EXPECT_EQ(*ParseHex("0x10de\n", 16), 0x10deu);
  EXPECT_EQ(*ParseHex("030200", 24), 0x030200u);
  EXPECT_THAT(ParseHex("0x10000", 16),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("16 bits")));
  EXPECT_THAT(ParseHex("0x", 16), StatusIs(StatusCode::kInvalidArgument));
  EXPECT_THAT(ParseHex("g", 16), StatusIs(StatusCode::kInvalidArgument));
}

TEST(KernelTextTest, DistanceRows) {
  EXPECT_THAT(*ParseDistanceRow("10 21 21 31\n"), ElementsAre(10, 21, 21, 31));
  EXPECT_THAT(*ParseDistanceRow("10\t 11"), ElementsAre(10, 11));
  EXPECT_THAT(ParseDistanceRow("10 x"),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("\"x\"")));
  EXPECT_THAT(ParseDistanceRow("10 0"), StatusIs(StatusCode::kInvalidArgument));
  EXPECT_THAT(ParseDistanceRow(""), StatusIs(StatusCode::kInvalidArgument));
}

TEST(KernelTextTest, CanonicalDecimal) {
  for (const char* yes : {"0", "7", "12", "2048"}) {
    EXPECT_TRUE(IsCanonicalDecimal(yes)) << yes;
  }
  for (const char* no : {"", "00", "012", "+1", "-1", "1x", " 1"}) {
    EXPECT_FALSE(IsCanonicalDecimal(no)) << no;
  }
  EXPECT_FALSE(ParseHugePagesDirName("hugepages-02048kB").ok());
  EXPECT_EQ(*ParseHugePagesDirName("hugepages-2048kB"), 2048u * 1024);
}

TEST(KernelTextTest, NodeMemTotal) {
  EXPECT_EQ(*ParseNodeMemTotal("Node 0 MemTotal:       1024 kB\n"
                               "Node 0 MemFree:         512 kB\n"),
            1024u * 1024u);
  EXPECT_THAT(ParseNodeMemTotal("Node 0 MemFree: 1 kB"),
              StatusIs(StatusCode::kInvalidArgument));
  EXPECT_THAT(ParseNodeMemTotal("MemTotal: lots"),
              StatusIs(StatusCode::kInvalidArgument));
}

TEST(KernelTextTest, QuoteEscapesUnprintable) {
  EXPECT_EQ(QuoteText(std::string("a\0b", 3)), "\"a\\x00b\"");
  EXPECT_EQ(QuoteText(std::string(50, 'x')).size(), 45u);
}

}  // namespace
}  // namespace topology::internal
