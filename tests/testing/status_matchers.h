// gMock matchers for topology::Status and StatusOr<T>.
#ifndef TOPOLOGY_TESTS_TESTING_STATUS_MATCHERS_H_
#define TOPOLOGY_TESTS_TESTING_STATUS_MATCHERS_H_

#include <gmock/gmock.h>

#include "topology/status.h"

namespace topology::testing {

inline const Status& GetStatus(const Status& status) { return status; }
template <typename T>
const Status& GetStatus(const StatusOr<T>& status_or) {
  return status_or.status();
}

MATCHER(IsOk, "is OK") {
  const Status& status = GetStatus(arg);
  if (!status.ok()) *result_listener << "status is " << status.ToString();
  return status.ok();
}

MATCHER_P(StatusIs, code, "has code " + std::string(StatusCodeName(code))) {
  const Status& status = GetStatus(arg);
  *result_listener << "status is " << status.ToString();
  return status.code() == code;
}

MATCHER_P2(StatusIs, code, message_matcher,
           "has code " + std::string(StatusCodeName(code))) {
  const Status& status = GetStatus(arg);
  *result_listener << "status is " << status.ToString();
  return status.code() == code &&
         ::testing::ExplainMatchResult(message_matcher, status.message(),
                                       result_listener);
}

}  // namespace topology::testing

#endif  // TOPOLOGY_TESTS_TESTING_STATUS_MATCHERS_H_
