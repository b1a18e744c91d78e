#include "topology/plugin/uevent_monitor.h"

#include <array>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>

#include <glog/logging.h>
#include <libudev.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

namespace topology::plugin {

bool InInitialUserNamespace(const std::filesystem::path& uid_map) {
  std::ifstream in(uid_map);
  if (!in) return true;  // no /proc: nothing says otherwise
  std::string first;
  std::string second;
  std::string count;
  std::string extra;
  in >> first >> second >> count;
  return first == "0" && second == "0" && count == "4294967295" &&
         !(in >> extra);
}

StatusOr<std::unique_ptr<UeventMonitor>> UeventMonitor::Start(
    Callback callback, const std::vector<std::string>& subsystems) {
  // The kernel sends device uevents only into network namespaces owned by
  // the initial user namespace: elsewhere the socket opens and stays
  // silent, which must not pass for "nothing changes".
  if (!InInitialUserNamespace("/proc/self/uid_map")) {
    return UnavailableError(
        "in a user namespace of its own the kernel sends no device uevents; "
        "relying on rescans");
  }
  udev* context = udev_new();
  if (context == nullptr) return UnavailableError("udev_new failed");
  udev_monitor* monitor = udev_monitor_new_from_netlink(context, "kernel");
  if (monitor == nullptr) {
    udev_unref(context);
    return UnavailableError(
        "cannot open the kernel uevent netlink socket; relying on rescans");
  }
  bool filtered = true;
  for (const std::string& subsystem : subsystems) {
    filtered = filtered && udev_monitor_filter_add_match_subsystem_devtype(
                               monitor, subsystem.c_str(), nullptr) >= 0;
  }
  if (!filtered || udev_monitor_enable_receiving(monitor) < 0) {
    udev_monitor_unref(monitor);
    udev_unref(context);
    return UnavailableError(
        "cannot receive kernel uevents; relying on rescans");
  }
  // A burst (enabling 255 VFs) must not overflow the socket; the kernel
  // caps this at net.core.rmem_max without CAP_NET_ADMIN, and an overflow
  // is reported anyway.
  constexpr int kReceiveBuffer = 4 << 20;
  if (udev_monitor_set_receive_buffer_size(monitor, kReceiveBuffer) < 0) {
    VLOG(1) << "uevent socket keeps its default receive buffer";
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
      PLOG(ERROR) << "poll on the uevent socket; no more uevents";
      callback_("closed", "");
      return;
    }
    if ((fds[1].revents & POLLIN) != 0) return;
    const auto revents = fds[0].revents;
    if ((revents & POLLNVAL) != 0) {
      LOG(ERROR) << "the uevent socket is gone; no more uevents";
      callback_("closed", "");
      return;
    }
    if ((revents & (POLLIN | POLLERR | POLLHUP)) == 0) continue;
    // An overflow shows as POLLERR; receiving reports and clears it.
    errno = 0;
    udev_device* device = udev_monitor_receive_device(monitor_);
    if (device == nullptr) {
      const int error = errno;
      if (error == ENOBUFS) {
        LOG(WARNING) << "kernel uevents were lost (socket buffer full)";
        callback_("overflow", "");
      } else if ((revents & POLLIN) == 0 && error != EAGAIN && error != EINTR) {
        LOG(ERROR) << "the uevent socket failed (" << std::strerror(error)
                   << "); no more uevents";
        callback_("closed", "");
        return;
      }
      continue;
    }
    const char* action = udev_device_get_action(device);
    const char* devpath = udev_device_get_devpath(device);
    callback_(action != nullptr ? action : "",
              devpath != nullptr ? devpath : "");
    udev_device_unref(device);
  }
}

}  // namespace topology::plugin
