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

// A job the thread is running is waited for, not taken back.
TEST(HelperThreadTest, TakeBackWaitsForARunningJob) {
  HelperThread helper;
  std::mutex mutex;
  std::condition_variable changed;
  bool started = false;
  bool release = false;
  std::atomic<bool> finished{false};
  auto job = helper.Post([&] {
    std::unique_lock<std::mutex> lock(mutex);
    started = true;
    changed.notify_all();
    changed.wait(lock, [&] { return release; });
    finished = true;
  });
  {
    std::unique_lock<std::mutex> lock(mutex);
    changed.wait(lock, [&] { return started; });
  }
  std::thread releaser([&] {
    std::lock_guard<std::mutex> lock(mutex);
    release = true;
    changed.notify_all();
  });
  EXPECT_FALSE(job->TakeBack());
  EXPECT_TRUE(finished.load());
  releaser.join();
}

// A job not started when its poster needs it never starts.
TEST(HelperThreadTest, AJobTakenBackNeverRuns) {
  HelperThread helper;
  std::mutex mutex;
  std::condition_variable changed;
  bool started = false;
  bool release = false;
  // Keeps the thread busy so that the second job waits in the queue.
  auto blocker = helper.Post([&] {
    std::unique_lock<std::mutex> lock(mutex);
    started = true;
    changed.notify_all();
    changed.wait(lock, [&] { return release; });
  });
  {
    std::unique_lock<std::mutex> lock(mutex);
    changed.wait(lock, [&] { return started; });
  }
  std::atomic<int> runs{0};
  auto job = helper.Post([&] { ++runs; });
  EXPECT_TRUE(job->TakeBack());
  {
    std::lock_guard<std::mutex> lock(mutex);
    release = true;
  }
  changed.notify_all();
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
