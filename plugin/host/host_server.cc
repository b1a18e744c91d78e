#include "host_server.h"

#include <utility>

#include <grpcpp/grpcpp.h>
#include <sys/types.h>

#include "topology/common/kubelet_names.h"
#include "topology/common/served_socket.h"

#include "host_services.h"

namespace topology::host {

namespace {

// Connections open at once on kubelet.sock and on the control socket.
constexpr size_t kMaxConnections = 256;

// Server limits for sockets that other local processes reach: a connection
// that never completes its HTTP/2 handshake, or stays idle, is closed, so
// idle connections cannot pile up until descriptors run out.
void ConfigureServer(grpc::ServerBuilder& builder) {
  builder.AddChannelArgument(GRPC_ARG_SERVER_HANDSHAKE_TIMEOUT_MS, 10'000);
  builder.AddChannelArgument(GRPC_ARG_MAX_CONNECTION_IDLE_MS, 300'000);
}

}  // namespace

HostServer::HostServer() = default;

HostServer::~HostServer() {
  StopAccepting();
  Shutdown(std::chrono::system_clock::now());
}

StatusOr<std::unique_ptr<HostServer>> HostServer::Start(
    const Options& options, RegistrationHandler* registration,
    AdmissionHandler* admission) {
  std::unique_ptr<HostServer> server(new HostServer());
  server->registration_ = std::make_unique<RegistrationService>(registration);
  // Plugins run as root, nobody else registers: 0600.
  auto kubelet = common::ServedSocket::Serve(
      {.path = options.plugin_dir / kubelet::kKubeletSocket,
       .services = {server->registration_.get()},
       .socket = {.mode = 0600, .max_connections = kMaxConnections},
       .max_receive_bytes = 16 << 20,
       .configure = ConfigureServer});
  if (!kubelet.ok()) return kubelet.status();
  server->kubelet_ = std::move(*kubelet);
  if (options.control_socket.empty()) return server;

  server->control_ = std::make_unique<ControlService>(admission);
  // Root only, or root and an opt-in group: admitting and releasing pods
  // is not for every local user. The group is set before the socket
  // appears.
  const bool group = options.control_group >= 0;
  auto control = common::ServedSocket::Serve(
      {.path = options.control_socket,
       .services = {server->control_.get()},
       .socket = {.mode = static_cast<mode_t>(group ? 0660 : 0600),
                  .group = group ? static_cast<gid_t>(options.control_group)
                                 : static_cast<gid_t>(-1),
                  .max_connections = kMaxConnections},
       .max_receive_bytes = 16 << 20,
       .configure = ConfigureServer});
  if (!control.ok()) {
    return FailedPreconditionError("the control socket: " +
                                   control.status().message());
  }
  server->control_served_ = std::move(*control);
  return server;
}

void HostServer::StopAccepting() {
  if (control_served_) control_served_->StopAccepting();
  if (kubelet_) kubelet_->StopAccepting();
}

void HostServer::Shutdown(std::chrono::system_clock::time_point deadline) {
  if (control_served_) control_served_->Shutdown(deadline);
  if (kubelet_) kubelet_->Shutdown(deadline);
}

HostServer::ConnectionCounters HostServer::ControlConnections() const {
  const common::UnixAcceptor* acceptor =
      control_served_ ? control_served_->acceptor() : nullptr;
  if (acceptor == nullptr) return {};
  return {.evicted = acceptor->evicted(),
          .cut = acceptor->cut(),
          .refused = acceptor->refused(),
          .starved = acceptor->starved()};
}

}  // namespace topology::host
