#include "host_server.h"

#include <utility>

#include <grpcpp/grpcpp.h>
#include <sys/types.h>

#include "topology/plugin/unix_socket.h"

#include "host_services.h"
#include "kubelet_names.h"

namespace topology::host {

namespace {

// Connections open at once on kubelet.sock and on the control socket.
constexpr size_t kMaxConnections = 256;

// Server limits for sockets that other local processes reach: a connection
// that never completes its HTTP/2 handshake, or stays idle, is closed, so
// idle connections cannot pile up until descriptors run out. Every call is
// counted on its connection.
void ConfigureServer(grpc::ServerBuilder& builder,
                     std::shared_ptr<plugin::ConnectionCalls> calls) {
  plugin::ConfigureBoundedServer(builder, std::move(calls));
  builder.AddChannelArgument(GRPC_ARG_SERVER_HANDSHAKE_TIMEOUT_MS, 10'000);
  builder.AddChannelArgument(GRPC_ARG_MAX_CONNECTION_IDLE_MS, 300'000);
  builder.SetMaxReceiveMessageSize(16 << 20);
}

}  // namespace

HostServer::HostServer()
    : kubelet_calls_(std::make_shared<plugin::ConnectionCalls>()),
      control_calls_(std::make_shared<plugin::ConnectionCalls>()) {}

HostServer::~HostServer() {
  StopAccepting();
  Shutdown(std::chrono::system_clock::now());
}

StatusOr<std::unique_ptr<HostServer>> HostServer::Start(
    const Options& options, RegistrationHandler* registration,
    AdmissionHandler* admission) {
  std::unique_ptr<HostServer> server(new HostServer());
  server->registration_ = std::make_unique<RegistrationService>(registration);
  const std::filesystem::path kubelet_socket =
      options.plugin_dir / kubelet::kKubeletSocket;
  grpc::ServerBuilder builder;
  ConfigureServer(builder, server->kubelet_calls_);
  builder.RegisterService(server->registration_.get());
  server->kubelet_server_ = builder.BuildAndStart();
  if (!server->kubelet_server_) {
    return FailedPreconditionError("cannot serve " + kubelet_socket.string());
  }
  // Plugins run as root, nobody else registers: 0600.
  auto kubelet_acceptor =
      plugin::UnixAcceptor::Start(kubelet_socket, server->kubelet_server_.get(),
                                  {.mode = 0600,
                                   .max_connections = kMaxConnections,
                                   .calls = server->kubelet_calls_});
  if (!kubelet_acceptor.ok()) return kubelet_acceptor.status();
  server->kubelet_acceptor_ = std::move(*kubelet_acceptor);
  if (options.control_socket.empty()) return server;

  server->control_ = std::make_unique<ControlService>(admission);
  grpc::ServerBuilder control;
  ConfigureServer(control, server->control_calls_);
  control.RegisterService(server->control_.get());
  server->control_server_ = control.BuildAndStart();
  if (!server->control_server_) {
    return FailedPreconditionError("the control socket " +
                                   options.control_socket.string() +
                                   ": cannot build its server");
  }
  // Root only, or root and an opt-in group: admitting and releasing pods
  // is not for every local user. The group is set before the socket
  // appears.
  const bool group = options.control_group >= 0;
  auto control_acceptor = plugin::UnixAcceptor::Start(
      options.control_socket, server->control_server_.get(),
      {.mode = static_cast<mode_t>(group ? 0660 : 0600),
       .group = group ? static_cast<gid_t>(options.control_group)
                      : static_cast<gid_t>(-1),
       .max_connections = kMaxConnections,
       .calls = server->control_calls_});
  if (!control_acceptor.ok()) {
    return FailedPreconditionError("the control socket: " +
                                   control_acceptor.status().message());
  }
  server->control_acceptor_ = std::move(*control_acceptor);
  return server;
}

void HostServer::StopAccepting() {
  control_acceptor_.reset();
  kubelet_acceptor_.reset();
}

void HostServer::Shutdown(std::chrono::system_clock::time_point deadline) {
  if (control_server_) control_server_->Shutdown(deadline);
  if (kubelet_server_) kubelet_server_->Shutdown(deadline);
}

HostServer::ConnectionCounters HostServer::ControlConnections() const {
  if (!control_acceptor_) return {};
  return {.evicted = control_acceptor_->evicted(),
          .cut = control_acceptor_->cut(),
          .refused = control_acceptor_->refused(),
          .starved = control_acceptor_->starved()};
}

}  // namespace topology::host
