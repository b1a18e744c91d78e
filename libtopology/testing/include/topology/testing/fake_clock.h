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
#include <cstddef>
#include <map>

#include "topology/clock.h"

namespace topology::testing {

class FakeClock final : public Clock {
 public:
  // Starts at the real steady clock's now, so that time points from it and
  // from the real clock compare sensibly.
  FakeClock()
      : ticks_(std::chrono::steady_clock::now().time_since_epoch().count()) {}

  TimePoint Now() const override { return TimePoint(Duration(ticks_.load())); }

  // Returns at once when the deadline has passed; otherwise waits until
  // notified, or until Advance() moves the time (every waiter is woken, so
  // the caller's loop sees the time the test has set), or at most a few
  // real milliseconds: an Advance between the caller's check and its wait
  // is not lost.
  void WaitUntil(std::condition_variable_any& cv, MutexLock& lock,
                 TimePoint deadline) const override {
    if (Now() >= deadline) return;
    {
      MutexLock waiters(waiters_mu_);
      ++waiters_[&cv];
    }
    if (Now() < deadline) cv.wait_for(lock, std::chrono::milliseconds(2));
    MutexLock waiters(waiters_mu_);
    if (auto it = waiters_.find(&cv); it != waiters_.end() && --it->second == 0)
      waiters_.erase(it);
  }

  // Moves the time forward and wakes every thread waiting on this clock.
  void Advance(Duration by) {
    ticks_.fetch_add(by.count());
    MutexLock waiters(waiters_mu_);
    for (const auto& [cv, count] : waiters_) cv->notify_all();
  }

  // Threads waiting on this clock now (a test can wait for a waiter before
  // it advances the time).
  size_t waiters() const {
    MutexLock waiters(waiters_mu_);
    size_t total = 0;
    for (const auto& [cv, count] : waiters_) total += count;
    return total;
  }

 private:
  std::atomic<Duration::rep> ticks_;
  // The condition variables threads wait on, with how many wait on each.
  // Taken inside the waiter's own lock, never around it: Advance only
  // notifies.
  mutable Mutex waiters_mu_;
  mutable std::map<std::condition_variable_any*, size_t> waiters_
      TOPOLOGY_GUARDED_BY(waiters_mu_);
};

}  // namespace topology::testing

#endif  // TOPOLOGY_TESTING_FAKE_CLOCK_H_
