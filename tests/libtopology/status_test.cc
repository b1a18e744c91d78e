#include "topology/status.h"

#include <string>

#include <gtest/gtest.h>

#include "status_macros.h"

namespace topology {
namespace {

TEST(StatusTest, DefaultIsOkAndDropsMessage) {
  EXPECT_TRUE(Status().ok());
  const Status ok(StatusCode::kOk, "ignored");
  EXPECT_TRUE(ok.ok());
  EXPECT_EQ(ok.message(), "");
  EXPECT_EQ(ok.ToString(), "OK");
}

TEST(StatusTest, CodesKeepGoogleRpcNumbers) {
  EXPECT_EQ(static_cast<int>(StatusCode::kInvalidArgument), 3);
  EXPECT_EQ(static_cast<int>(StatusCode::kNotFound), 5);
  EXPECT_EQ(static_cast<int>(StatusCode::kFailedPrecondition), 9);
  EXPECT_EQ(static_cast<int>(StatusCode::kUnavailable), 14);
  EXPECT_EQ(static_cast<int>(StatusCode::kDataLoss), 15);
}

TEST(StatusTest, ToStringAndContext) {
  const Status s = NotFoundError("no node 3");
  EXPECT_EQ(s.ToString(), "NOT_FOUND: no node 3");
  EXPECT_EQ(s.WithContext("reading distances").message(),
            "reading distances: no node 3");
  EXPECT_TRUE(OkStatus().WithContext("x").ok());
}

TEST(StatusOrTest, HoldsValueOrError) {
  StatusOr<std::string> value(std::string("abc"));
  ASSERT_TRUE(value.ok());
  EXPECT_EQ(*value, "abc");
  EXPECT_EQ(value->size(), 3u);
  StatusOr<std::string> error(InvalidArgumentError("bad"));
  EXPECT_FALSE(error.ok());
  EXPECT_EQ(error.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(error.value_or("fallback"), "fallback");
}

TEST(StatusOrTest, OkStatusWithoutValueBecomesInternal) {
  StatusOr<int> odd{OkStatus()};
  EXPECT_FALSE(odd.ok());
  EXPECT_EQ(odd.status().code(), StatusCode::kInternal);
}

StatusOr<int> Half(int x) {
  if (x % 2 != 0) return InvalidArgumentError("odd");
  return x / 2;
}

StatusOr<int> Quarter(int x) {
  TOPOLOGY_ASSIGN_OR_RETURN(int half, Half(x));
  TOPOLOGY_ASSIGN_OR_RETURN(int quarter, Half(half));
  return quarter;
}

Status CheckEven(int x) {
  TOPOLOGY_RETURN_IF_ERROR(Half(x).status());
  return OkStatus();
}

TEST(StatusMacrosTest, PropagateErrors) {
  EXPECT_EQ(*Quarter(8), 2);
  EXPECT_EQ(Quarter(6).status().message(), "odd");
  EXPECT_TRUE(CheckEven(4).ok());
  EXPECT_FALSE(CheckEven(3).ok());
}

}  // namespace
}  // namespace topology
