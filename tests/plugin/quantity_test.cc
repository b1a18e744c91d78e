// k8s::Quantity against the API machinery's own reading of quantities
// (k8s.io/apimachinery resource.Quantity: suffixes, exponents, rounding up
// below a nano) and the arithmetic the DRA framework needs of it.
#include "topology/common/quantity.h"

#include <gtest/gtest.h>

namespace topology::k8s {
namespace {

Quantity Q(const char* text) {
  const auto q = Quantity::Parse(text);
  EXPECT_TRUE(q.has_value()) << text;
  return q.value_or(Quantity());
}

TEST(QuantityTest, SuffixesAndExponentsReadAsTheApiReadsThem) {
  EXPECT_EQ(Q("1Ki"), Quantity::FromInt(1024));
  EXPECT_EQ(Q("80Gi"), Quantity::FromInt(80LL << 30));
  EXPECT_EQ(Q("1.5Gi"), Quantity::FromInt(3LL << 29));
  EXPECT_EQ(Q("1k"), Quantity::FromInt(1000));
  EXPECT_EQ(Q("1e3"), Q("1k"));
  EXPECT_EQ(Q("1E3"), Q("1k"));
  EXPECT_EQ(Q("2e-3"), Q("2m"));
  EXPECT_EQ(Q("+.5"), Q("500m"));
  EXPECT_EQ(Q("1000000u"), Quantity::FromInt(1));
  EXPECT_EQ(Q("1Ei"), Quantity::FromInt(1LL << 60));
  EXPECT_EQ(Q("0"), Quantity());
  EXPECT_TRUE(Q("-1").negative());
  EXPECT_EQ(Q("1.5").ToString(), "1.5");
  EXPECT_EQ(Q("80Gi").ToString(), "85899345920");
  EXPECT_EQ(Q("-250m").ToString(), "-0.25");
}

// Below a nano the API rounds up, as Quantity does on parse.
TEST(QuantityTest, AmountsBelowANanoRoundUp) {
  EXPECT_EQ(Q("0.0000000001"), Q("1n"));
  EXPECT_EQ(Q("1.0000000001"), Q("1.000000001"));
  EXPECT_EQ(Q("0.1n"), Q("1n"));
}

TEST(QuantityTest, WhatIsNoQuantityOrTooLargeIsRefused) {
  for (const char* text :
       {"", "lots", "1.2.3", "1x", "Gi", ".", "1e", "1e+", "1Gib", "--1",
        "1 Gi", "99999999999999999999999999999999999999999", "1e9999", "1e40",
        // 38 significant digits: not kept exactly
        "1.0000000000000000000000000000000000001"}) {
    EXPECT_FALSE(Quantity::Parse(text).has_value()) << text;
  }
}

// Zeros beyond the 37 digits kept are exact: a long integer part scales,
// a long fraction's zeros go.
TEST(QuantityTest, LongRunsOfZerosStayExact) {
  EXPECT_EQ(Q("1000000000000000000000000000000000000000e-30"), Q("1e9"));
  EXPECT_EQ(Q("1.000000000000000000000000000000000000000"), Q("1"));
}

TEST(QuantityTest, StepsAndSums) {
  EXPECT_TRUE(Q("30Gi").OnStep(Q("10Gi"), Q("10Gi")));
  EXPECT_FALSE(Q("15Gi").OnStep(Q("10Gi"), Q("10Gi")));
  EXPECT_FALSE(Q("5Gi").OnStep(Q("10Gi"), Q("10Gi")));
  EXPECT_EQ(Q("15Gi").RoundUpToStep(Q("10Gi"), Q("10Gi")), Q("20Gi"));
  EXPECT_EQ(Q("1").RoundUpToStep(Q("10Gi"), Q("10Gi")), Q("10Gi"));
  EXPECT_EQ(Q("250m").RoundUpToStep(Quantity(), Q("1")), Q("1"));
  EXPECT_EQ(*Q("10Gi").Plus(Q("30Gi")), Q("40Gi"));
  EXPECT_EQ(Q("40Gi").Minus(Q("30Gi")), Q("10Gi"));
  EXPECT_LT(Q("999Mi"), Q("1Gi"));
  EXPECT_FALSE(Q("6e27").Plus(Q("6e27")).has_value());
}

}  // namespace
}  // namespace topology::k8s
