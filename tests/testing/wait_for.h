// The one way tests wait for something to happen in another thread or
// process (a registration, a socket, a status): `condition` is polled until
// it holds or `timeout` passes, and its last answer is returned. A wait that
// is met returns at once; only a failing test waits the whole timeout. To
// prove that something does not happen, advance a FakeClock instead.
#ifndef TOPOLOGY_TESTS_TESTING_WAIT_FOR_H_
#define TOPOLOGY_TESTS_TESTING_WAIT_FOR_H_

#include <chrono>
#include <thread>

namespace topology::testing {

template <typename Condition>
bool WaitFor(Condition condition,
             std::chrono::milliseconds timeout = std::chrono::seconds(10),
             std::chrono::milliseconds every = std::chrono::milliseconds(5)) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    if (condition()) return true;
    std::this_thread::sleep_for(every);
  }
  return condition();
}

}  // namespace topology::testing

#endif  // TOPOLOGY_TESTS_TESTING_WAIT_FOR_H_
