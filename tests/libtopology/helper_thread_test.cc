#include "helper_thread.h"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <stdexcept>
#include <vector>

#include <gtest/gtest.h>

namespace topology::internal {
namespace {

// Set once, waited for; a test that waits longer than a minute fails
// instead of hanging.
class Flag {
 public:
  void Set() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      set_ = true;
    }
    changed_.notify_all();
  }
  bool Wait() {
    std::unique_lock<std::mutex> lock(mutex_);
    return changed_.wait_for(lock, std::chrono::minutes(1),
                             [this] { return set_; });
  }
  bool IsSet() {
    std::lock_guard<std::mutex> lock(mutex_);
    return set_;
  }

 private:
  std::mutex mutex_;
  std::condition_variable changed_;
  bool set_ = false;
};

// A job that holds the helper's thread until released.
class Gate {
 public:
  void Hold() {
    held_.Set();
    released_.Wait();
  }
  bool WaitHeld() { return held_.Wait(); }
  void Release() { released_.Set(); }

 private:
  Flag held_;
  Flag released_;
};

TEST(HelperThreadTest, RunsJobsInOrder) {
  HelperThread helper;
  std::mutex mutex;
  std::vector<int> ran;
  Flag first_done;
  Flag second_done;
  auto first = helper.Post([&] {
    {
      std::lock_guard<std::mutex> lock(mutex);
      ran.push_back(1);
    }
    first_done.Set();
  });
  auto second = helper.Post([&] {
    {
      std::lock_guard<std::mutex> lock(mutex);
      ran.push_back(2);
    }
    second_done.Set();
  });
  ASSERT_TRUE(first_done.Wait());
  ASSERT_TRUE(second_done.Wait());
  std::lock_guard<std::mutex> lock(mutex);
  EXPECT_EQ(ran, (std::vector<int>{1, 2}));
}

// A job the thread is running is neither taken back nor waited for.
TEST(HelperThreadTest, TakeBackLeavesARunningJobRunning) {
  HelperThread helper;
  Gate gate;
  Flag finished;
  auto job = helper.Post([&] {
    gate.Hold();
    finished.Set();
  });
  ASSERT_TRUE(gate.WaitHeld());
  EXPECT_FALSE(job->TakeBack());
  EXPECT_FALSE(finished.IsSet());
  gate.Release();
  EXPECT_TRUE(finished.Wait());
}

// A job not started when its poster needs it never starts.
TEST(HelperThreadTest, AJobTakenBackNeverRuns) {
  HelperThread helper;
  Gate gate;
  // Keeps the thread busy so that the second job waits in the queue.
  auto blocker = helper.Post([&] { gate.Hold(); });
  ASSERT_TRUE(gate.WaitHeld());
  std::atomic<int> runs{0};
  auto job = helper.Post([&] { ++runs; });
  EXPECT_TRUE(job->TakeBack());
  EXPECT_FALSE(job->TakeBack());  // once
  Flag last_done;
  auto last = helper.Post([&] { last_done.Set(); });
  gate.Release();
  // The thread runs jobs in order: past `last`, it has passed `job`.
  ASSERT_TRUE(last_done.Wait());
  EXPECT_EQ(runs.load(), 0);
}

// A job that throws ends; the thread goes on with the next.
TEST(HelperThreadTest, AJobThatThrowsDoesNotStopTheThread) {
  HelperThread helper;
  auto job = helper.Post([] { throw std::runtime_error("no memory"); });
  Flag next_done;
  auto next = helper.Post([&] { next_done.Set(); });
  EXPECT_TRUE(next_done.Wait());
}

}  // namespace
}  // namespace topology::internal
