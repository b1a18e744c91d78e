// The one rescan loop of the project's programs (topology-device-plugin and
// topology-dra-driver), for vendors' plugins too: it decides when a node's
// devices are looked at again, and runs the caller's pass on a thread of
// its own.
//
//  - Kernel uevents (UeventMonitor, PCI and net): a device added, removed,
//    bound or unbound, or an interface renamed, starts a full pass
//    `debounce` after the first uevent of a burst (a VF batch, a driver
//    rebind). Uevents of virtual devices (the veth pairs of every pod that
//    starts) cannot change what a node offers and are ignored (Relevant).
//  - A period: every `interval` a periodic pass. Without uevents (none in a
//    user namespace, the monitor's socket closed, or watch_uevents off) it
//    is all that tells of a change; the pass says so (uevents_live).
//  - Time through the Clock seam: tests advance a FakeClock.
//
//   plugin::RescanLoop loop({.interval = 10s});
//   loop.WatchUevents();          // before the first discovery
//   ... discover ...
//   loop.Start([&](const plugin::RescanLoop::Pass& pass) {
//     if (pass.uevent || !pass.uevents_live) Rescan(); else Reconcile();
//   });
//
// Thread safety: WatchUevents, Start and Stop from one thread; the others
// from any. The pass runs on the loop's thread with no lock of the loop
// held (it may call OnUevent or RequestPass).
#ifndef TOPOLOGY_PLUGIN_RESCAN_LOOP_H_
#define TOPOLOGY_PLUGIN_RESCAN_LOOP_H_

#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "topology/clock.h"
#include "topology/thread_annotations.h"

namespace topology::common {
class DirWatcher;
}  // namespace topology::common

namespace topology::plugin {

class UeventMonitor;

class RescanLoop {
 public:
  struct Options {
    // A periodic pass every `interval`; zero: none.
    std::chrono::nanoseconds interval{0};
    // A full pass this long after the first uevent of a burst.
    std::chrono::nanoseconds debounce = std::chrono::milliseconds(50);
    const Clock* clock = &Clock::Real();
  };
  struct Pass {
    // A relevant uevent came (or RequestPass): look at everything again.
    bool uevent = false;
    // The period has passed.
    bool periodic = false;
    // Uevents are heard: a change comes as a uevent. Otherwise periodic
    // passes are all that tells of one.
    bool uevents_live = false;
    Clock::TimePoint now;
  };
  using PassFn = std::function<void(const Pass&)>;

  explicit RescanLoop(Options options);
  // Stops.
  ~RescanLoop();
  RescanLoop(const RescanLoop&) = delete;
  RescanLoop& operator=(const RescanLoop&) = delete;

  // Starts the uevent monitor (PCI and net), once: before the first
  // discovery, so that nothing changes unseen in between. False, with a
  // warning, when uevents cannot be had (periodic passes then).
  bool WatchUevents();
  // Starts the loop's thread (again after a Stop).
  void Start(PassFn pass);
  // Stops the thread and the monitor; a pass running finishes first.
  void Stop();

  // Which uevents can change what a node offers: not those of virtual
  // devices.
  static bool Relevant(std::string_view devpath);
  // One uevent (the monitor's, or a caller's): a relevant one schedules a
  // full pass; "closed" (the monitor's socket failed) means uevents are no
  // longer heard.
  void OnUevent(const std::string& action, const std::string& devpath);
  // A full pass as soon as possible (at start, after a configuration
  // change).
  void RequestPass();
  // Watches `file` through its directory (inotify): each time it is
  // created or replaced (an atomic write renames over it) or removed, a
  // full pass as soon as possible, whatever the interval. For a file
  // another daemon writes that changes what a node offers. False, with a
  // warning, when the directory cannot be watched: the file's changes are
  // then seen at the periodic passes only.
  bool WatchFile(const std::filesystem::path& file);
  bool uevents_live() const;
  bool running() const;
  // A uevent's pass is scheduled and has not started.
  bool pending() const;

 private:
  void Loop();

  const Options options_;
  std::unique_ptr<UeventMonitor>
      monitor_;  // set and reset with the loop stopped
  std::vector<std::unique_ptr<common::DirWatcher>> file_watchers_;
  mutable Mutex mu_;
  std::condition_variable_any wake_;
  PassFn pass_ TOPOLOGY_GUARDED_BY(mu_);
  bool stopping_ TOPOLOGY_GUARDED_BY(mu_) = false;
  bool running_ TOPOLOGY_GUARDED_BY(mu_) = false;
  bool uevents_live_ TOPOLOGY_GUARDED_BY(mu_) = false;
  std::optional<Clock::TimePoint> uevent_due_ TOPOLOGY_GUARDED_BY(mu_);
  std::thread thread_;
};

}  // namespace topology::plugin

#endif  // TOPOLOGY_PLUGIN_RESCAN_LOOP_H_
