// Time for the daemons, injectable. The host module and the device plugin
// and DRA frameworks read the time and wait for it through a Clock: grace
// periods, garbage collection, back-off, pauses and dates. Production uses
// Clock::Real(); tests give a FakeClock (topology/testing/fake_clock.h) and
// advance it instead of sleeping.
#ifndef TOPOLOGY_CLOCK_H_
#define TOPOLOGY_CLOCK_H_

#include <chrono>
#include <condition_variable>

#include "topology/export.h"
#include "topology/thread_annotations.h"

namespace topology {

class TOPOLOGY_EXPORT Clock {
 public:
  using TimePoint = std::chrono::steady_clock::time_point;
  using Duration = std::chrono::steady_clock::duration;

  virtual ~Clock() = default;

  virtual TimePoint Now() const = 0;

  // The wall clock's time, for what is read by others as a date (a health
  // report's time, a status's timestamp); durations and deadlines are
  // Now()'s. A fake clock moves both together.
  virtual std::chrono::system_clock::time_point WallNow() const = 0;

  // Waits on `cv`, `lock` held, until it is notified or Now() reaches
  // `deadline`. It may return early (a spurious wake-up, or a fake clock's
  // poll): callers check their condition and the time in a loop, as with
  // std::condition_variable_any::wait_until.
  virtual void WaitUntil(std::condition_variable_any& cv, MutexLock& lock,
                         TimePoint deadline) const = 0;

  // The steady clock; lives for the whole program.
  static const Clock& Real();
};

}  // namespace topology

#endif  // TOPOLOGY_CLOCK_H_
