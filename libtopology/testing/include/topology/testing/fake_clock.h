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
#include <cstdint>
#include <set>
#include <stop_token>

#include "topology/clock.h"

namespace topology::testing {

class FakeClock final : public Clock {
 public:
  // Starts at the real clocks' now, so that time points from it and from
  // the real clocks compare sensibly.
  FakeClock()
      : ticks_(std::chrono::steady_clock::now().time_since_epoch().count()),
        wall_start_(std::chrono::system_clock::now()),
        steady_start_(ticks_.load()) {}

  TimePoint Now() const override { return TimePoint(Duration(ticks_.load())); }
  // Moves with Now(): the start's date plus the time advanced since.
  std::chrono::system_clock::time_point WallNow() const override {
    return wall_start_ +
           std::chrono::duration_cast<std::chrono::system_clock::duration>(
               Duration(ticks_.load() - steady_start_));
  }

  // Returns at once when the deadline has passed; otherwise waits until
  // notified, or until Advance() moves the time (every waiter is woken, so
  // the caller's loop sees the time the test has set). No real time bounds
  // the wait: Advance() stops each waiter's stop source, and the wait on a
  // stop token either sees the stop before it sleeps or is woken by it, so
  // an Advance() between the caller's look at the time and the wait is
  // not lost.
  void WaitUntil(std::condition_variable_any& cv, MutexLock& lock,
                 TimePoint deadline) const override {
    if (Now() >= deadline) return;
    std::stop_source advanced;
    {
      MutexLock waiters(waiters_mu_);
      waiters_.insert(&advanced);
      ++waits_;
    }
    waits_cv_.notify_all();
    if (Now() < deadline) {
      // One wait: the first look only lets it sleep; any wake-up ends it.
      bool looked = false;
      cv.wait(lock, advanced.get_token(), [&looked] {
        const bool again = looked;
        looked = true;
        return again;
      });
    }
    MutexLock waiters(waiters_mu_);
    waiters_.erase(&advanced);
  }

  // Moves the time forward and wakes every thread waiting on this clock.
  void Advance(Duration by) {
    ticks_.fetch_add(by.count());
    MutexLock waiters(waiters_mu_);
    for (std::stop_source* waiter : waiters_) waiter->request_stop();
  }

  // Threads waiting on this clock now (a test can wait for a waiter before
  // it advances the time).
  size_t waiters() const {
    MutexLock waiters(waiters_mu_);
    return waiters_.size();
  }

  // How many waits have begun on this clock.
  uint64_t waits() const {
    MutexLock waiters(waiters_mu_);
    return waits_;
  }

  // Advance(by), then waits until every thread that was waiting on this
  // clock has looked at the new time and waits again, for at most
  // `patience` of real time. Proves without sleeping that the time `by`
  // fires nothing: false when a waiter did not wait again (it went on, or
  // the patience ran out).
  //
  //   ASSERT_TRUE(clock.AdvanceAndLetWaitersLook(199ms));
  //   EXPECT_EQ(attempts, 1);  // the 200 ms back-off is not over
  bool AdvanceAndLetWaitersLook(
      Duration by,
      std::chrono::milliseconds patience = std::chrono::seconds(10)) {
    uint64_t until = 0;
    {
      MutexLock waiters(waiters_mu_);
      until = waits_ + waiters_.size();
    }
    Advance(by);
    const auto give_up = std::chrono::steady_clock::now() + patience;
    MutexLock waiters(waiters_mu_);
    while (waits_ < until) {
      if (waits_cv_.wait_until(waiters, give_up) == std::cv_status::timeout) {
        return waits_ >= until;
      }
    }
    return true;
  }

 private:
  std::atomic<Duration::rep> ticks_;
  const std::chrono::system_clock::time_point wall_start_;
  const Duration::rep steady_start_;
  // Each waiting thread's stop source, stopped by Advance. Taken inside a
  // waiter's own lock (registering, leaving) and by Advance, which only
  // stops sources (their callbacks notify the waiters' condition
  // variables): it never waits for a waiter's lock.
  mutable Mutex waiters_mu_;
  mutable std::set<std::stop_source*> waiters_ TOPOLOGY_GUARDED_BY(waiters_mu_);
  mutable uint64_t waits_ TOPOLOGY_GUARDED_BY(waiters_mu_) = 0;
  mutable std::condition_variable_any waits_cv_;
};

}  // namespace topology::testing

#endif  // TOPOLOGY_TESTING_FAKE_CLOCK_H_
