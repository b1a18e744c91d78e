// Kernel uevents from the netlink socket through libudev ("kernel" source:
// no udevd needed), delivered on a thread of its own. Two actions are the
// monitor's own, with an empty devpath: "overflow" when the kernel dropped
// events (the socket's buffer filled: whatever they said must be found out
// by looking), and "closed" when the socket failed and no more events will
// come.
#ifndef TOPOLOGY_PLUGIN_UEVENT_MONITOR_H_
#define TOPOLOGY_PLUGIN_UEVENT_MONITOR_H_

#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "topology/status.h"

struct udev;
struct udev_monitor;

namespace topology::plugin {

// Whether `uid_map` (/proc/self/uid_map) is the initial user namespace's
// identity map; true when it cannot be read.
bool InInitialUserNamespace(const std::filesystem::path& uid_map);

class UeventMonitor {
 public:
  // action ("add", "remove", "bind", "unbind", "change", "move",
  // "overflow", "closed") and devpath.
  using Callback = std::function<void(const std::string& action,
                                      const std::string& devpath)>;

  // Events of the given subsystems. Fails (UNAVAILABLE) when the netlink
  // socket cannot be opened, and in a user namespace other than the
  // initial one (a pod with hostUsers: false), where the kernel sends no
  // device uevents; callers then rely on periodic rescans.
  static StatusOr<std::unique_ptr<UeventMonitor>> Start(
      Callback callback, const std::vector<std::string>& subsystems = {"pci"});
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
