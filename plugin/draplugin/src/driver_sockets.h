// The DRA runner's two sockets, as the Go helper's kubeletplugin serves
// them: the DRA socket (the DRA and health services) and the registration
// socket in the kubelet's plugin registry (bound in place: its watcher stats
// every name that appears). Each is a ServedSocket; both directories are
// watched (inotify) and looked at every socket_check, and a socket that is
// gone is served again, the DRA socket first (registration names it); a
// socket another process put at the path is left alone and said once.
//
// Thread safety: Start, StopWatching, StopAccepting and Shutdown from one
// thread (the runner's Start and Stop); the watcher thread and the
// directory watchers' callbacks run beside them until StopWatching.
#ifndef TOPOLOGY_DRAPLUGIN_DRIVER_SOCKETS_H_
#define TOPOLOGY_DRAPLUGIN_DRIVER_SOCKETS_H_

#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "topology/clock.h"
#include "topology/common/dir_watcher.h"
#include "topology/common/served_socket.h"
#include "topology/status.h"
#include "topology/thread_annotations.h"

namespace grpc {
class Service;
}

namespace topology::draplugin {

class DriverSockets {
 public:
  struct Options {
    std::string driver_name;  // for the log
    std::filesystem::path dra_socket;
    std::filesystem::path registration_socket;
    std::chrono::milliseconds socket_check{1000};
    const Clock* clock = &Clock::Real();
  };
  // The services are not owned and must outlive the sockets.
  // `on_new_registration` runs before each new registration socket is
  // served (the kubelet's watcher calls GetInfo again for it).
  DriverSockets(Options options, std::vector<grpc::Service*> dra_services,
                grpc::Service* registration_service,
                std::function<void()> on_new_registration);
  ~DriverSockets();
  DriverSockets(const DriverSockets&) = delete;
  DriverSockets& operator=(const DriverSockets&) = delete;

  // Serves both sockets and starts watching them. FAILED_PRECONDITION
  // naming the socket when one cannot be served (another process serves
  // it: each instance needs its own pod UID).
  Status Start() TOPOLOGY_EXCLUDES(mu_, server_mu_);
  // No socket is served again from here on.
  void StopWatching() TOPOLOGY_EXCLUDES(mu_);
  // No new connection; each file goes while it is still this runner's.
  void StopAccepting() TOPOLOGY_EXCLUDES(server_mu_);
  // Calls in flight get until `deadline`, then are cancelled.
  void Shutdown(std::chrono::system_clock::time_point deadline)
      TOPOLOGY_EXCLUDES(server_mu_);

 private:
  Status ServeDra() TOPOLOGY_EXCLUDES(server_mu_);
  Status ServeRegistration() TOPOLOGY_EXCLUDES(server_mu_);
  // Serves `services` at `path` (bound in place for the kubelet's plugin
  // registry); refused where another process serves it.
  StatusOr<std::unique_ptr<common::ServedSocket>> ServeAt(
      const std::filesystem::path& path, std::vector<grpc::Service*> services,
      bool in_place) const;
  // Looks at the sockets every socket_check, and at once when a watched
  // directory says one of them was removed.
  void WatchSockets() TOPOLOGY_EXCLUDES(mu_);
  // Starts watching the directories of the two sockets (inotify); where no
  // watch can be had, the periodic look alone finds a removed socket.
  void WatchSocketDirectories() TOPOLOGY_EXCLUDES(mu_);

  const Options options_;
  const std::vector<grpc::Service*> dra_services_;
  grpc::Service* const registration_service_;
  const std::function<void()> on_new_registration_;

  Mutex mu_;
  std::condition_variable_any changed_;  // stopping_, look_now_
  // A watched directory said one of the sockets was removed.
  bool look_now_ TOPOLOGY_GUARDED_BY(mu_) = false;
  bool stopping_ TOPOLOGY_GUARDED_BY(mu_) = false;

  // The servers; the watcher thread replaces one whose socket is gone.
  Mutex server_mu_ TOPOLOGY_ACQUIRED_BEFORE(mu_);
  std::unique_ptr<common::ServedSocket> dra_served_
      TOPOLOGY_GUARDED_BY(server_mu_);
  std::unique_ptr<common::ServedSocket> registration_served_
      TOPOLOGY_GUARDED_BY(server_mu_);
  bool taken_warned_ TOPOLOGY_GUARDED_BY(server_mu_) = false;
  std::thread watcher_;
  std::vector<std::unique_ptr<common::DirWatcher>> directory_watchers_;
};

}  // namespace topology::draplugin

#endif  // TOPOLOGY_DRAPLUGIN_DRIVER_SOCKETS_H_
