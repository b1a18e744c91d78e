#include "helper_thread.h"

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <stdexcept>
#include <thread>

#include <gtest/gtest.h>

namespace topology::internal {
namespace {

TEST(HelperThreadTest, RunsJobsInOrder) {
  HelperThread helper;
  std::mutex mutex;
  std::vector<int> ran;
  auto first = helper.Post([&] {
    std::lock_guard<std::mutex> lock(mutex);
    ran.push_back(1);
  });
  auto second = helper.Post([&] {
    std::lock_guard<std::mutex> lock(mutex);
    ran.push_back(2);
  });
  // Whoever runs a job, it runs once; taken back, the caller runs it.
  if (second->TakeBack()) {
    std::lock_guard<std::mutex> lock(mutex);
    ran.push_back(2);
  }
  if (first->TakeBack()) {
    std::lock_guard<std::mutex> lock(mutex);
    ran.push_back(1);
  }
  std::lock_guard<std::mutex> lock(mutex);
  ASSERT_EQ(ran.size(), 2u);
  EXPECT_NE(ran[0], ran[1]);
}

// A job that holds the helper's thread until released.
class Gate {
 public:
  void Hold() {
    std::unique_lock<std::mutex> lock(mutex_);
    held_ = true;
    changed_.notify_all();
    changed_.wait(lock, [this] { return released_; });
  }
  void WaitHeld() {
    std::unique_lock<std::mutex> lock(mutex_);
    changed_.wait(lock, [this] { return held_; });
  }
  void Release() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      released_ = true;
    }
    changed_.notify_all();
  }

 private:
  std::mutex mutex_;
  std::condition_variable changed_;
  bool held_ = false;
  bool released_ = false;
};

// A job the thread is running is waited for, not taken back.
TEST(HelperThreadTest, TakeBackWaitsForARunningJob) {
  HelperThread helper;
  Gate gate;
  std::atomic<bool> finished{false};
  auto job = helper.Post([&] {
    gate.Hold();
    finished = true;
  });
  gate.WaitHeld();
  std::thread releaser([&] { gate.Release(); });
  EXPECT_FALSE(job->TakeBack());
  EXPECT_TRUE(finished.load());
  releaser.join();
}

// A job not started when its poster needs it never starts.
TEST(HelperThreadTest, AJobTakenBackNeverRuns) {
  HelperThread helper;
  Gate gate;
  // Keeps the thread busy so that the second job waits in the queue.
  auto blocker = helper.Post([&] { gate.Hold(); });
  gate.WaitHeld();
  std::atomic<int> runs{0};
  auto job = helper.Post([&] { ++runs; });
  EXPECT_TRUE(job->TakeBack());
  gate.Release();
  EXPECT_FALSE(blocker->TakeBack());
  // The thread has moved past the taken-back job by now or never reaches
  // it; either way it does not run.
  auto last = helper.Post([] {});
  last->TakeBack();
  EXPECT_EQ(runs.load(), 0);
}

TEST(HelperThreadTest, AJobThatThrowsStillFinishes) {
  HelperThread helper;
  auto job = helper.Post([] { throw std::runtime_error("no memory"); });
  job->TakeBack();  // returns either way
  SUCCEED();
}

}  // namespace
}  // namespace topology::internal
