// Time limits of tests that check latency, stretched under sanitizers that
// slow everything down: TOPOLOGY_TEST_TIME_SCALE (default 1) multiplies
// them. The tsan test preset sets it; the default preset keeps the limits.
#ifndef TOPOLOGY_TESTS_TESTING_TIME_SCALE_H_
#define TOPOLOGY_TESTS_TESTING_TIME_SCALE_H_

#include <chrono>
#include <cstdlib>

namespace topology::testing {

template <typename Rep, typename Period>
std::chrono::duration<Rep, Period> Scaled(
    std::chrono::duration<Rep, Period> limit) {
  const char* text = std::getenv("TOPOLOGY_TEST_TIME_SCALE");
  const int64_t scale = text != nullptr ? std::strtol(text, nullptr, 10) : 1;
  return limit * (scale > 1 ? scale : 1);
}

}  // namespace topology::testing

#endif  // TOPOLOGY_TESTS_TESTING_TIME_SCALE_H_
