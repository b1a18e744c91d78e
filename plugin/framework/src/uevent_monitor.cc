#include "topology/plugin/uevent_monitor.h"

#include <array>
#include <cerrno>
#include <cstring>

#include <glog/logging.h>
#include <libudev.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

namespace topology::plugin {

StatusOr<std::unique_ptr<UeventMonitor>> UeventMonitor::Start(
    Callback callback) {
  udev* context = udev_new();
  if (context == nullptr) return UnavailableError("udev_new failed");
  udev_monitor* monitor = udev_monitor_new_from_netlink(context, "kernel");
  if (monitor == nullptr) {
    udev_unref(context);
    return UnavailableError(
        "cannot open the kernel uevent netlink socket; relying on rescans");
  }
  if (udev_monitor_filter_add_match_subsystem_devtype(monitor, "pci", nullptr) <
          0 ||
      udev_monitor_enable_receiving(monitor) < 0) {
    udev_monitor_unref(monitor);
    udev_unref(context);
    return UnavailableError(
        "cannot receive kernel uevents; relying on rescans");
  }
  const int stop_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (stop_fd < 0) {
    udev_monitor_unref(monitor);
    udev_unref(context);
    return InternalError(std::string("eventfd: ") + std::strerror(errno));
  }
  return std::unique_ptr<UeventMonitor>(
      new UeventMonitor(context, monitor, stop_fd, std::move(callback)));
}

UeventMonitor::UeventMonitor(udev* context, udev_monitor* monitor, int stop_fd,
                             Callback callback)
    : udev_(context),
      monitor_(monitor),
      stop_fd_(stop_fd),
      callback_(std::move(callback)) {
  thread_ = std::thread([this] { Loop(); });
}

UeventMonitor::~UeventMonitor() {
  const uint64_t one = 1;
  if (write(stop_fd_, &one, sizeof(one)) < 0) PLOG(ERROR) << "uevent stop";
  thread_.join();
  close(stop_fd_);
  udev_monitor_unref(monitor_);
  udev_unref(udev_);
}

void UeventMonitor::Loop() {
  const int fd = udev_monitor_get_fd(monitor_);
  while (true) {
    std::array<pollfd, 2> fds = {pollfd{fd, POLLIN, 0},
                                 pollfd{stop_fd_, POLLIN, 0}};
    if (poll(fds.data(), fds.size(), -1) < 0) {
      if (errno == EINTR) continue;
      PLOG(ERROR) << "poll on the uevent socket";
      return;
    }
    if ((fds[1].revents & POLLIN) != 0) return;
    if ((fds[0].revents & POLLIN) == 0) continue;
    udev_device* device = udev_monitor_receive_device(monitor_);
    if (device == nullptr) continue;
    const char* action = udev_device_get_action(device);
    const char* devpath = udev_device_get_devpath(device);
    callback_(action != nullptr ? action : "",
              devpath != nullptr ? devpath : "");
    udev_device_unref(device);
  }
}

}  // namespace topology::plugin
