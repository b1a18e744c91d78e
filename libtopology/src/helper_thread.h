// One thread beside discovery, for the work that can run next to it.
#ifndef TOPOLOGY_SRC_HELPER_THREAD_H_
#define TOPOLOGY_SRC_HELPER_THREAD_H_

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>

namespace topology::internal {

// Runs posted jobs one after another on a thread of its own. The thread is
// started once, before the work exists (hwloc's FIFO watchdog, then
// libpci's run), and sleeps until a job comes: a new thread is queued behind
// its creator until the creator blocks or its slice ends (a millisecond or
// more, as long as discovering a small machine takes), or, with the other
// cores busy, behind the work there, while a thread woken from sleep is
// run at once. A job the thread has not started when its poster needs it
// is taken back (Job::TakeBack), and one it has started is never waited
// for, so a thread that is slow to be scheduled, or slow once running,
// delays nothing: every job holds what it uses by shared ownership. The
// thread is detached (joining it would wait for it to be scheduled) and
// shares only the queue and the jobs: one that first runs after discovery
// has returned finds the queue closed and ends.
class HelperThread {
 public:
  class Job {
   public:
    explicit Job(std::function<void()> run) : run_(std::move(run)) {}
    // If the thread has not started the job, it never will: returns true
    // and the caller does the work itself (or skips it). Else returns false
    // at once: the job runs, or ran, on the thread.
    bool TakeBack();

   private:
    friend class HelperThread;
    enum class State : uint8_t { kPending, kRunning, kTakenBack };
    // The thread: claims a pending job; false if it was taken back.
    bool Claim();

    std::function<void()> run_;
    std::atomic<State> state_{State::kPending};
  };

  // Starts the thread (without one to be had, every job is taken back).
  HelperThread();
  HelperThread(const HelperThread&) = delete;
  HelperThread& operator=(const HelperThread&) = delete;
  // Closes the queue: jobs not started never start.
  ~HelperThread();

  // Queues `run` for the thread. `run` must hold everything it uses by
  // shared ownership: nothing waits for it to end.
  std::shared_ptr<Job> Post(std::function<void()> run);

 private:
  struct Queue {
    std::mutex mutex;
    std::condition_variable wake;
    std::deque<std::shared_ptr<Job>> jobs;
    bool closed = false;
  };
  static void Serve(const std::shared_ptr<Queue>& queue);

  std::shared_ptr<Queue> queue_ = std::make_shared<Queue>();
};

}  // namespace topology::internal

#endif  // TOPOLOGY_SRC_HELPER_THREAD_H_
