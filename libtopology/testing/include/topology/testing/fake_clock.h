// A Clock that moves only when told: tests of grace periods, back-off and
// pauses advance it instead of sleeping. Header-only.
//
//   topology::testing::FakeClock clock;
//   config.clock = &clock;
//   ...
//   clock.Advance(std::chrono::minutes(5));  // the grace period is over
#ifndef TOPOLOGY_TESTING_FAKE_CLOCK_H_
#define TOPOLOGY_TESTING_FAKE_CLOCK_H_

#include <atomic>
#include <chrono>
#include <condition_variable>

#include "topology/clock.h"

namespace topology::testing {

class FakeClock final : public Clock {
 public:
  // Starts at the real steady clock's now, so that time points from it and
  // from the real clock compare sensibly.
  FakeClock()
      : ticks_(std::chrono::steady_clock::now().time_since_epoch().count()) {}

  TimePoint Now() const override { return TimePoint(Duration(ticks_.load())); }

  // Waits at most a few real milliseconds (or until notified): the caller's
  // loop then sees the time the test has set meanwhile. No wake-up is lost
  // between the caller's check and the wait.
  void WaitUntil(std::condition_variable_any& cv, MutexLock& lock,
                 TimePoint deadline) const override {
    if (Now() >= deadline) return;
    cv.wait_for(lock, std::chrono::milliseconds(2));
  }

  void Advance(Duration by) { ticks_.fetch_add(by.count()); }

 private:
  std::atomic<Duration::rep> ticks_;
};

}  // namespace topology::testing

#endif  // TOPOLOGY_TESTING_FAKE_CLOCK_H_
