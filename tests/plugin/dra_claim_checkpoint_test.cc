// The DRA framework's checkpoint of prepared claims: what it writes reads
// back the same; damage of every kind is DATA_LOSS naming what.
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "topology/draplugin/claim_checkpoint.h"

#include "status_matchers.h"

namespace topology::draplugin {
namespace {

using ::testing::HasSubstr;
using ::topology::testing::IsOk;
using ::topology::testing::StatusIs;

PreparedClaims TwoClaims() {
  PreparedClaims claims;
  claims["u1"] = {{"default", "u1", "gpu"},
                  {{{"gpu"}, "node-a", "gpu-0", {"vendor.com/gpu=u1-gpu-0"}},
                   {{"gpu", "nic"}, "node-a", "gpu-1", {}}}};
  claims["u2"] = {{"team", "u2", "nic"}, {}};
  return claims;
}

TEST(DraClaimCheckpointTest, WhatIsWrittenReadsBackTheSame) {
  const std::string text = EncodeClaims(TwoClaims());
  auto decoded = DecodeClaims(text);
  ASSERT_THAT(decoded.status(), IsOk());
  ASSERT_EQ(decoded->size(), 2u);
  EXPECT_EQ(decoded->at("u1").ref, (ClaimRef{"default", "u1", "gpu"}));
  EXPECT_EQ(decoded->at("u1").devices, TwoClaims().at("u1").devices);
  EXPECT_TRUE(decoded->at("u2").devices.empty());
  EXPECT_EQ(EncodeClaims(*decoded), text);
}

TEST(DraClaimCheckpointTest, DamageIsDataLossNamingWhat) {
  std::string text = EncodeClaims(TwoClaims());
  const size_t at = text.find("gpu-0");
  ASSERT_NE(at, std::string::npos);
  std::string flipped = text;
  flipped[at] = 'h';
  EXPECT_THAT(DecodeClaims(flipped),
              StatusIs(StatusCode::kDataLoss, HasSubstr("checksum")));
  EXPECT_THAT(DecodeClaims(text.substr(0, text.size() / 2)),
              StatusIs(StatusCode::kDataLoss, HasSubstr("not a JSON object")));
  EXPECT_THAT(DecodeClaims(R"({"version":2,"claims":[],"checksum":""})"),
              StatusIs(StatusCode::kDataLoss, HasSubstr("version")));
  EXPECT_THAT(DecodeClaims(R"({"version":1,"checksum":"x"})"),
              StatusIs(StatusCode::kDataLoss, HasSubstr("\"claims\"")));
}

}  // namespace
}  // namespace topology::draplugin
