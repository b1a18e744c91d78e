#include "instance_lock.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

namespace topology::draplugin {

StatusOr<std::unique_ptr<InstanceLock>> InstanceLock::Open(
    const std::filesystem::path& path, const Clock* clock) {
  const int fd =
      open(path.c_str(), O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) {
    return FailedPreconditionError("cannot open " + path.string() + ": " +
                                   std::strerror(errno));
  }
  return std::unique_ptr<InstanceLock>(new InstanceLock(fd, path, clock));
}

InstanceLock::~InstanceLock() { close(fd_); }

InstanceLock::Held::~Held() { lock_->Release(); }

StatusOr<std::unique_ptr<InstanceLock::Held>> InstanceLock::Acquire(
    Clock::TimePoint deadline, const std::function<bool()>& stopping) {
  MutexLock lock(mu_);
  // This process's turn first: flock does not serialise its threads.
  while (busy_) {
    if (stopping && stopping()) {
      return CancelledError("the driver is stopping");
    }
    if (clock_->Now() >= deadline) {
      return DeadlineExceededError(
          "the kubelet's deadline passed while another call of this driver "
          "held " +
          path_.string());
    }
    clock_->WaitUntil(turn_, lock, std::min(deadline, clock_->Now() + kRetry));
  }
  busy_ = true;
  // Then the other instances'.
  while (flock(fd_, LOCK_EX | LOCK_NB) != 0) {
    const int error = errno;
    if (error != EWOULDBLOCK && error != EINTR) {
      busy_ = false;
      turn_.notify_one();
      return FailedPreconditionError("cannot lock " + path_.string() + ": " +
                                     std::strerror(error));
    }
    const bool stopped = stopping && stopping();
    if (stopped || clock_->Now() >= deadline) {
      busy_ = false;
      turn_.notify_one();
      if (stopped) return CancelledError("the driver is stopping");
      return DeadlineExceededError(
          "the kubelet's deadline passed while another instance of the "
          "driver held " +
          path_.string());
    }
    clock_->WaitUntil(turn_, lock, std::min(deadline, clock_->Now() + kRetry));
  }
  return std::unique_ptr<Held>(new Held(this));
}

void InstanceLock::Interrupt() {
  // Under the lock: a waiter has either seen `stopping` or waits already.
  MutexLock lock(mu_);
  turn_.notify_all();
}

void InstanceLock::Release() {
  (void)flock(fd_, LOCK_UN);
  {
    MutexLock lock(mu_);
    busy_ = false;
  }
  turn_.notify_one();
}

}  // namespace topology::draplugin
