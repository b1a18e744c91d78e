#include "topology/clock.h"

namespace topology {
namespace {

class RealClock final : public Clock {
 public:
  TimePoint Now() const override { return std::chrono::steady_clock::now(); }
  std::chrono::system_clock::time_point WallNow() const override {
    return std::chrono::system_clock::now();
  }
  void WaitUntil(std::condition_variable_any& cv, MutexLock& lock,
                 TimePoint deadline) const override {
    cv.wait_until(lock, deadline);
  }
};

}  // namespace

const Clock& Clock::Real() {
  static const RealClock* const clock = new RealClock();
  return *clock;
}

}  // namespace topology
