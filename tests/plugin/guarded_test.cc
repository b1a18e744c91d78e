// The one exception guard (topology/common/guarded.h): a call's exception
// becomes its INTERNAL status, a program's one line and exit 1.
#include "topology/common/guarded.h"

#include <stdexcept>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "status_matchers.h"

namespace topology::common {
namespace {

using ::testing::HasSubstr;
using ::topology::testing::IsOk;
using ::topology::testing::StatusIs;

TEST(GuardedTest, AStandardExceptionBecomesInternalNamingWhoAndWhat) {
  const Status status = CallGuarded("the driver", []() -> Status {
    throw std::runtime_error("the device vanished");
  });
  EXPECT_THAT(status, StatusIs(StatusCode::kInternal,
                               "the driver threw: the device vanished"));
}

TEST(GuardedTest, AnyOtherThrownValueIsCaughtToo) {
  const StatusOr<int> value =
      CallGuarded("handler", []() -> StatusOr<int> { throw 42; });
  EXPECT_THAT(value.status(),
              StatusIs(StatusCode::kInternal,
                       "handler threw a non-standard exception"));
}

TEST(GuardedTest, WhatTheCallReturnsIsPassedOn) {
  EXPECT_THAT(CallGuarded("x", [] { return OkStatus(); }), IsOk());
  const StatusOr<int> value = CallGuarded("x", [] { return StatusOr<int>(7); });
  ASSERT_TRUE(value.ok());
  EXPECT_EQ(*value, 7);
  EXPECT_THAT(CallGuarded("x", [] { return NotFoundError("gone"); }),
              StatusIs(StatusCode::kNotFound, "gone"));
}

TEST(GuardedTest, AProgramThatThrowsEndsWithOneLineAndExitOne) {
  ::testing::internal::CaptureStderr();
  const int code = RunGuarded("topology-x", []() -> int {
    throw std::length_error("vector too long");
  });
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(code, 1);
  EXPECT_EQ(err, "topology-x: the program threw: vector too long\n");
  EXPECT_EQ(RunGuarded("topology-x", [] { return 3; }), 3);
}

}  // namespace
}  // namespace topology::common
