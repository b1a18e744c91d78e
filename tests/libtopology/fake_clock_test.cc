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
  const auto wall_start = clock.WallNow();
  EXPECT_EQ(clock.Now(), start);
  EXPECT_EQ(clock.WallNow(), wall_start);
  clock.Advance(5min);
  EXPECT_EQ(clock.Now() - start, 5min);
  EXPECT_EQ(clock.WallNow() - wall_start, 5min);
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

// An Advance the moment a waiter has registered, before its wait has begun,
// is never lost: the waiter's wait has no real-time bound, so a lost one
// would hang here.
TEST(FakeClockTest, AnAdvanceBetweenTheLookAndTheWaitIsNotLost) {
  for (int round = 0; round < 500; ++round) {
    FakeClock clock;
    Mutex mu;
    std::condition_variable_any cv;
    const Clock::TimePoint deadline = clock.Now() + 1s;
    std::atomic<bool> done{false};
    std::thread waiter([&] {
      MutexLock lock(mu);
      while (clock.Now() < deadline) clock.WaitUntil(cv, lock, deadline);
      done = true;
    });
    while (clock.waiters() == 0) std::this_thread::yield();
    clock.Advance(1s);
    ASSERT_TRUE(WaitFor([&] { return done.load(); }, 5s)) << "round " << round;
    waiter.join();
  }
}

// A waiter's lock held by another thread that is not waiting: Advance
// wakes the waiter once that lock is free.
TEST(FakeClockTest, AdvanceReachesAWaiterWhoseLockIsBusy) {
  FakeClock clock;
  Mutex mu;
  std::condition_variable_any cv;
  const Clock::TimePoint deadline = clock.Now() + 1min;
  std::atomic<bool> done{false};
  std::thread waiter([&] {
    MutexLock lock(mu);
    while (clock.Now() < deadline) clock.WaitUntil(cv, lock, deadline);
    done = true;
  });
  ASSERT_TRUE(WaitFor([&] { return clock.waiters() > 0; }, 5s));
  std::atomic<bool> holding{false};
  std::atomic<bool> release{false};
  std::thread holder([&] {
    MutexLock lock(mu);
    holding = true;
    while (!release) std::this_thread::yield();
  });
  ASSERT_TRUE(WaitFor([&] { return holding.load(); }, 5s));
  std::thread advancer([&] { clock.Advance(1min); });
  release = true;
  holder.join();
  advancer.join();
  EXPECT_TRUE(WaitFor([&] { return done.load(); }, 5s));
  waiter.join();
}

TEST(FakeClockTest, APassedDeadlineDoesNotWait) {
  FakeClock clock;
  Mutex mu;
  std::condition_variable_any cv;
  MutexLock lock(mu);
  clock.WaitUntil(cv, lock, clock.Now());
  EXPECT_EQ(clock.waiters(), 0u);
}

// What a test reads to prove that a timer has not fired: after an advance
// short of the deadline, the waiter begins a new wait (it has looked at the
// new time), and only an advance to the deadline lets it through.
TEST(FakeClockTest, AWaiterThatLookedAndSleptAgainIsCounted) {
  FakeClock clock;
  Mutex mu;
  std::condition_variable_any cv;
  const Clock::TimePoint deadline = clock.Now() + 200ms;
  std::atomic<bool> fired{false};
  std::thread timer([&] {
    MutexLock lock(mu);
    while (clock.Now() < deadline) clock.WaitUntil(cv, lock, deadline);
    fired = true;
  });
  ASSERT_TRUE(WaitFor([&] { return clock.waiters() == 1; }, 5s));
  const uint64_t waits = clock.waits();
  EXPECT_GE(waits, 1u);
  ASSERT_TRUE(clock.AdvanceAndLetWaitersLook(199ms));
  EXPECT_FALSE(fired.load());
  EXPECT_EQ(clock.waits(), waits + 1);
  clock.Advance(1ms);
  EXPECT_TRUE(WaitFor([&] { return fired.load(); }, 5s));
  timer.join();
  EXPECT_EQ(clock.waits(), waits + 1);
  // Nobody waits: nothing to look.
  EXPECT_TRUE(clock.AdvanceAndLetWaitersLook(1h, 0ms));
}

// A waiter the time lets through does not wait again: the look says so.
TEST(FakeClockTest, AWaiterLetThroughIsNoLook) {
  FakeClock clock;
  Mutex mu;
  std::condition_variable_any cv;
  const Clock::TimePoint deadline = clock.Now() + 200ms;
  std::thread timer([&] {
    MutexLock lock(mu);
    while (clock.Now() < deadline) clock.WaitUntil(cv, lock, deadline);
  });
  ASSERT_TRUE(WaitFor([&] { return clock.waiters() == 1; }, 5s));
  EXPECT_FALSE(clock.AdvanceAndLetWaitersLook(200ms, 50ms));
  timer.join();
}

}  // namespace
}  // namespace topology::testing
