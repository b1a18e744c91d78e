// The lock instances of one driver on a node take around their calls
// during a rolling update with surge (two pods, each with its pod UID, one
// plugin directory): <plugin dir>/serialize.lock, as the Go helper's
// kubeletplugin takes it. flock serialises processes; the threads of one
// process take turns on a mutex first. flock's wait cannot be bounded, so
// the lock is tried again every few milliseconds on the driver's clock
// until the kubelet's deadline on the same clock. Private to the DRA
// framework.
#ifndef TOPOLOGY_DRAPLUGIN_INSTANCE_LOCK_H_
#define TOPOLOGY_DRAPLUGIN_INSTANCE_LOCK_H_

#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>

#include "topology/clock.h"
#include "topology/status.h"
#include "topology/thread_annotations.h"

namespace topology::draplugin {

class InstanceLock {
 public:
  // Opens (creates, 0600, never through a link) the lock file `path`.
  static StatusOr<std::unique_ptr<InstanceLock>> Open(
      const std::filesystem::path& path, const Clock* clock);
  ~InstanceLock();
  InstanceLock(const InstanceLock&) = delete;
  InstanceLock& operator=(const InstanceLock&) = delete;

  // Held from Acquire until destroyed: this process's turn, then the file.
  class Held {
   public:
    ~Held();
    Held(const Held&) = delete;
    Held& operator=(const Held&) = delete;

   private:
    friend class InstanceLock;
    explicit Held(InstanceLock* lock) : lock_(lock) {}
    InstanceLock* const lock_;
  };

  // Takes the lock by `deadline`; an error saying why not (the deadline
  // passed while another instance held it, `stopping` said so, or flock
  // failed).
  StatusOr<std::unique_ptr<Held>> Acquire(Clock::TimePoint deadline,
                                          const std::function<bool()>& stopping)
      TOPOLOGY_EXCLUDES(mu_);

  // Wakes the calls waiting in Acquire to look at their `stopping` again
  // (call it once `stopping` says so).
  void Interrupt() TOPOLOGY_EXCLUDES(mu_);

  // How often a lock another process holds is tried again.
  static constexpr std::chrono::milliseconds kRetry{5};

 private:
  InstanceLock(int fd, std::filesystem::path path, const Clock* clock)
      : fd_(fd), path_(std::move(path)), clock_(clock) {}
  void Release() TOPOLOGY_EXCLUDES(mu_);

  const int fd_;
  const std::filesystem::path path_;
  const Clock* const clock_;
  Mutex mu_;
  std::condition_variable_any turn_;  // busy_ went false
  bool busy_ TOPOLOGY_GUARDED_BY(mu_) = false;
};

}  // namespace topology::draplugin

#endif  // TOPOLOGY_DRAPLUGIN_INSTANCE_LOCK_H_
