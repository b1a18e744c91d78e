// Kernel uevents for PCI devices from the netlink socket through libudev
// ("kernel" source: no udevd needed), delivered on a thread of its own.
#ifndef TOPOLOGY_PLUGIN_UEVENT_MONITOR_H_
#define TOPOLOGY_PLUGIN_UEVENT_MONITOR_H_

#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "topology/status.h"

struct udev;
struct udev_monitor;

namespace topology::plugin {

class UeventMonitor {
 public:
  // action ("add", "remove", "bind", "unbind", "change"...) and devpath.
  using Callback = std::function<void(const std::string& action,
                                      const std::string& devpath)>;

  // Fails (UNAVAILABLE) when the netlink socket cannot be opened, e.g.
  // without CAP_NET_ADMIN in a network namespace; callers then rely on
  // periodic rescans.
  static StatusOr<std::unique_ptr<UeventMonitor>> Start(Callback callback);
  ~UeventMonitor();
  UeventMonitor(const UeventMonitor&) = delete;
  UeventMonitor& operator=(const UeventMonitor&) = delete;

 private:
  UeventMonitor(udev* context, udev_monitor* monitor, int stop_fd,
                Callback callback);
  void Loop();

  udev* udev_;
  udev_monitor* monitor_;
  int stop_fd_;
  Callback callback_;
  std::thread thread_;
};

}  // namespace topology::plugin

#endif  // TOPOLOGY_PLUGIN_UEVENT_MONITOR_H_
