#include "helper_thread.h"

#include <system_error>
#include <thread>
#include <utility>

namespace topology::internal {

bool HelperThread::Job::TakeBack() {
  State expected = State::kPending;
  return state_.compare_exchange_strong(expected, State::kTakenBack,
                                        std::memory_order_acq_rel);
}

bool HelperThread::Job::Claim() {
  State expected = State::kPending;
  return state_.compare_exchange_strong(expected, State::kRunning,
                                        std::memory_order_acq_rel);
}

HelperThread::HelperThread() {
  try {
    std::thread([queue = queue_] { Serve(queue); }).detach();
  } catch (const std::system_error&) {
    // No thread: jobs stay pending and their posters take them back.
  }
}

HelperThread::~HelperThread() {
  {
    std::lock_guard<std::mutex> lock(queue_->mutex);
    queue_->closed = true;
    queue_->jobs.clear();
  }
  queue_->wake.notify_all();
}

std::shared_ptr<HelperThread::Job> HelperThread::Post(
    std::function<void()> run) {
  auto job = std::make_shared<Job>(std::move(run));
  {
    std::lock_guard<std::mutex> lock(queue_->mutex);
    queue_->jobs.push_back(job);
  }
  queue_->wake.notify_one();
  return job;
}

void HelperThread::Serve(const std::shared_ptr<Queue>& queue) {
  while (true) {
    std::shared_ptr<Job> job;
    {
      std::unique_lock<std::mutex> lock(queue->mutex);
      queue->wake.wait(lock,
                       [&] { return queue->closed || !queue->jobs.empty(); });
      if (queue->closed) return;
      job = std::move(queue->jobs.front());
      queue->jobs.pop_front();
    }
    if (!job->Claim()) continue;  // its poster did the work
    try {
      job->run_();
    } catch (...) {  // NOLINT(bugprone-empty-catch): the job reports itself
    }
  }
}

}  // namespace topology::internal
