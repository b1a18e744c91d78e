// The test kit's FakeClock: the time moves only when told, and moving it
// wakes every thread waiting on it (no waiter sleeps through an Advance).
#include "topology/testing/fake_clock.h"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "wait_for.h"

namespace topology::testing {
namespace {

using namespace std::chrono_literals;

TEST(FakeClockTest, TimeMovesOnlyWhenAdvanced) {
  FakeClock clock;
  const Clock::TimePoint start = clock.Now();
  EXPECT_EQ(clock.Now(), start);
  clock.Advance(5min);
  EXPECT_EQ(clock.Now() - start, 5min);
}

TEST(FakeClockTest, AdvanceWakesEveryWaiter) {
  FakeClock clock;
  Mutex mu;
  std::condition_variable_any first_cv;
  std::condition_variable_any second_cv;
  const Clock::TimePoint deadline = clock.Now() + 1h;
  std::atomic<int> done{0};
  const auto waiter = [&](std::condition_variable_any& cv) {
    MutexLock lock(mu);
    // The waiters' loop: wait until the clock reaches the deadline.
    while (clock.Now() < deadline) clock.WaitUntil(cv, lock, deadline);
    ++done;
  };
  std::vector<std::thread> threads;
  threads.emplace_back(waiter, std::ref(first_cv));
  threads.emplace_back(waiter, std::ref(first_cv));
  threads.emplace_back(waiter, std::ref(second_cv));
  ASSERT_TRUE(WaitFor([&] { return clock.waiters() > 0; }, 5s));
  clock.Advance(59min);
  // Not yet: the waiters keep waiting.
  EXPECT_EQ(done.load(), 0);
  clock.Advance(1min);
  EXPECT_TRUE(WaitFor([&] { return done.load() == 3; }, 5s));
  for (std::thread& thread : threads) thread.join();
  EXPECT_EQ(clock.waiters(), 0u);
}

TEST(FakeClockTest, APassedDeadlineDoesNotWait) {
  FakeClock clock;
  Mutex mu;
  std::condition_variable_any cv;
  MutexLock lock(mu);
  clock.WaitUntil(cv, lock, clock.Now());
  EXPECT_EQ(clock.waiters(), 0u);
}

}  // namespace
}  // namespace topology::testing
