// The host's sockets, apart from admission: kubelet.sock (Registration, for
// the device plugins) and the control socket (Admit, Release, Status), each
// a gRPC server served by the shared ServedSocket (topology/common/
// served_socket.h: the socket appears once it accepts, connections capped,
// calls in flight never cut). HostManager keeps admission and owns one.
//
// Thread safety: Start, StopAccepting and Shutdown from one thread (the
// manager's Start and Stop); ControlConnections from any.
#ifndef TOPOLOGY_HOST_HOST_SERVER_H_
#define TOPOLOGY_HOST_HOST_SERVER_H_

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <memory>

#include "topology/status.h"

namespace grpc {
class Server;
}

namespace topology::common {
class ServedSocket;
}  // namespace topology::common

namespace topology::host {

class AdmissionHandler;
class ControlService;
class RegistrationHandler;
class RegistrationService;

class HostServer {
 public:
  struct Options {
    // kubelet.sock goes here (mode 0600: plugins run as root).
    std::filesystem::path plugin_dir;
    // Empty: no control socket.
    std::filesystem::path control_socket;
    // Group allowed to use the control socket (mode 0660); -1: root only.
    int control_group = -1;
  };
  struct ConnectionCounters {
    uint64_t evicted = 0;
    uint64_t cut = 0;
    uint64_t refused = 0;
    uint64_t starved = 0;
  };

  // Serves kubelet.sock for `registration` and the control socket for
  // `admission` (neither owned; both outlive the server).
  // FAILED_PRECONDITION naming the socket when one cannot be served
  // (nothing is left serving then).
  static StatusOr<std::unique_ptr<HostServer>> Start(
      const Options& options, RegistrationHandler* registration,
      AdmissionHandler* admission);
  ~HostServer();
  HostServer(const HostServer&) = delete;
  HostServer& operator=(const HostServer&) = delete;

  // No new connection; both socket files go (while they are still ours).
  void StopAccepting();
  // Calls in flight get until `deadline`, then are cancelled.
  void Shutdown(std::chrono::system_clock::time_point deadline);
  // The control socket's connections since the start (the acceptor's
  // counters); zero without a control socket.
  ConnectionCounters ControlConnections() const;

 private:
  HostServer();

  std::unique_ptr<RegistrationService> registration_;
  std::unique_ptr<ControlService> control_;
  // kubelet.sock and the control socket (served_socket.h).
  std::unique_ptr<common::ServedSocket> kubelet_;
  std::unique_ptr<common::ServedSocket> control_served_;
};

}  // namespace topology::host

#endif  // TOPOLOGY_HOST_HOST_SERVER_H_
