#include "topology/plugin/rescan_loop.h"

#include <utility>

#include <glog/logging.h>

#include "topology/common/dir_watcher.h"
#include "topology/plugin/uevent_monitor.h"

namespace topology::plugin {

RescanLoop::RescanLoop(Options options) : options_(options) {}

RescanLoop::~RescanLoop() {
  // Their threads call RequestPass: gone before anything they touch.
  file_watchers_.clear();
  Stop();
}

bool RescanLoop::WatchFile(const std::filesystem::path& file) {
  auto watcher = common::DirWatcher::Start(
      file.parent_path(),
      [this, name = file.filename().string()](const common::DirEvent& event) {
        if (event.name == name) RequestPass();
      });
  if (!watcher.ok()) {
    // A directory that does not exist (no DRA driver on the node yet) is
    // not a fault: said once, quietly.
    std::error_code error;
    LOG_IF(WARNING, std::filesystem::exists(file.parent_path(), error))
        << "cannot watch " << file.string() << " ("
        << watcher.status().message()
        << "); its changes are seen at periodic passes only";
    LOG_IF(INFO, !std::filesystem::exists(file.parent_path(), error))
        << file.parent_path().string() << " does not exist: changes of "
        << file.filename().string() << " are seen at periodic passes only";
    return false;
  }
  file_watchers_.push_back(std::move(*watcher));
  return true;
}

bool RescanLoop::WatchUevents() {
  if (monitor_) return true;
  {
    // Live from the start: a uevent may come before Start returns.
    MutexLock lock(mu_);
    uevents_live_ = true;
  }
  auto monitor = UeventMonitor::Start(
      [this](const std::string& action, const std::string& devpath) {
        OnUevent(action, devpath);
      },
      {"pci", "net"});
  if (!monitor.ok()) {
    LOG(WARNING) << monitor.status().message() << "; rescans every "
                 << std::chrono::duration_cast<std::chrono::milliseconds>(
                        options_.interval)
                        .count()
                 << " ms instead";
    MutexLock lock(mu_);
    uevents_live_ = false;
    return false;
  }
  monitor_ = std::move(*monitor);
  return true;
}

void RescanLoop::Start(PassFn pass) {
  MutexLock lock(mu_);
  if (running_) return;
  pass_ = std::move(pass);
  stopping_ = false;
  running_ = true;
  thread_ = std::thread([this] { Loop(); });
}

void RescanLoop::Stop() {
  // No uevent after this: the monitor's thread is gone.
  monitor_.reset();
  {
    MutexLock lock(mu_);
    uevents_live_ = false;
    stopping_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
  MutexLock lock(mu_);
  running_ = false;
}

bool RescanLoop::Relevant(std::string_view devpath) {
  return !devpath.starts_with("/devices/virtual/");
}

void RescanLoop::OnUevent(const std::string& action,
                          const std::string& devpath) {
  if (!Relevant(devpath)) {
    VLOG(3) << "uevent " << action << " " << devpath << " ignored";
    return;
  }
  VLOG(2) << "uevent " << action << " " << devpath;
  {
    MutexLock lock(mu_);
    // The monitor's socket failed: what changes from now on is seen only
    // by periodic passes; one full pass for what may have been missed.
    if (action == "closed") uevents_live_ = false;
    if (!uevent_due_) uevent_due_ = options_.clock->Now() + options_.debounce;
  }
  wake_.notify_all();
}

void RescanLoop::RequestPass() {
  {
    MutexLock lock(mu_);
    const Clock::TimePoint now = options_.clock->Now();
    if (!uevent_due_ || *uevent_due_ > now) uevent_due_ = now;
  }
  wake_.notify_all();
}

bool RescanLoop::uevents_live() const {
  MutexLock lock(mu_);
  return uevents_live_;
}

bool RescanLoop::pending() const {
  MutexLock lock(mu_);
  return uevent_due_.has_value();
}

bool RescanLoop::running() const {
  MutexLock lock(mu_);
  return running_ && !stopping_;
}

void RescanLoop::Loop() {
  const Clock& clock = *options_.clock;
  const bool periodic_on = options_.interval.count() > 0;
  MutexLock lock(mu_);
  Clock::TimePoint next_periodic =
      clock.Now() +
      std::chrono::duration_cast<Clock::Duration>(options_.interval);
  while (!stopping_) {
    const Clock::TimePoint now = clock.Now();
    const bool periodic = periodic_on && now >= next_periodic;
    const bool uevent = uevent_due_ && now >= *uevent_due_;
    if (periodic || uevent) {
      const Pass pass{.uevent = uevent,
                      .periodic = periodic,
                      .uevents_live = uevents_live_,
                      .now = now};
      if (uevent) uevent_due_.reset();
      const PassFn run = pass_;
      lock.unlock();
      run(pass);
      lock.lock();
      // The period counts from the end of a periodic pass; a uevent's pass
      // does not move it (a node with many uevents still gets its
      // periodic passes).
      if (periodic) {
        next_periodic =
            clock.Now() +
            std::chrono::duration_cast<Clock::Duration>(options_.interval);
      }
      continue;
    }
    std::optional<Clock::TimePoint> wake;
    if (periodic_on) wake = next_periodic;
    if (uevent_due_ && (!wake || *uevent_due_ < *wake)) wake = uevent_due_;
    if (wake) {
      clock.WaitUntil(wake_, lock, *wake);
    } else {
      wake_.wait(lock);
    }
  }
}

}  // namespace topology::plugin
