// One gRPC server served at one unix socket, the recipe every daemon of the
// project shares (the device plugin framework's sockets, the DRA framework's
// registration and DRA sockets, the host's kubelet.sock and control socket):
// a bounded server (ConnectionCalls' interceptor, streams per connection
// capped) built with the caller's services, served through UnixAcceptor
// (the socket appears once it accepts, mode and group set first), and the
// socket's identity kept, so that a removal or a replacement by another
// process is told apart from this server's own socket (Look). Replacing a
// socket that went is the caller's: it serves a new ServedSocket.
//
// Thread safety: Serve, StopAccepting, Shutdown and the destructor from one
// thread at a time; Look and MayHaveGone from any.
#ifndef TOPOLOGY_COMMON_SERVED_SOCKET_H_
#define TOPOLOGY_COMMON_SERVED_SOCKET_H_

#include <chrono>
#include <filesystem>
#include <functional>
#include <memory>
#include <vector>

#include "topology/common/dir_watcher.h"
#include "topology/common/unix_socket.h"
#include "topology/status.h"

namespace grpc {
class Server;
class ServerBuilder;
class Service;
}  // namespace grpc

namespace topology::common {

struct ServedSocketOptions {
  std::filesystem::path path;
  // Not owned; must outlive the socket.
  std::vector<grpc::Service*> services;
  // mode, group, max_connections, in_place (`calls` is the socket's own).
  UnixSocketOptions socket;
  // Largest message received; 0: gRPC's default (4 MiB).
  int max_receive_bytes = 0;
  // More of the builder, before the server starts (completion queues,
  // pollers).
  std::function<void(grpc::ServerBuilder&)> configure = nullptr;
};

class ServedSocket {
 public:
  // FAILED_PRECONDITION naming the path when the server cannot be built or
  // the socket served; nothing is left serving then.
  static StatusOr<std::unique_ptr<ServedSocket>> Serve(
      ServedSocketOptions options);
  // Stops accepting and shuts the server down now.
  ~ServedSocket();
  ServedSocket(const ServedSocket&) = delete;
  ServedSocket& operator=(const ServedSocket&) = delete;

  const std::filesystem::path& path() const { return path_; }
  grpc::Server* server() const { return server_.get(); }
  // Null once StopAccepting ran.
  const UnixAcceptor* acceptor() const { return acceptor_.get(); }
  const SocketIdentity& identity() const { return identity_; }

  // What is at the path now: this server's socket; nothing listening
  // (removed, or a dead file); or another process's socket.
  enum class Look { kOurs, kGone, kTaken };
  Look LookAtPath() const;
  // Whether `event` (from a DirWatcher of the socket's directory) may mean
  // the socket left: a removal of its name or a listing, while the path no
  // longer holds this server's socket. A creation never does.
  bool MayHaveGone(const DirEvent& event) const;

  // No new connection; the file goes while it is still this socket's.
  void StopAccepting();
  // Calls in flight get until `deadline`, then are cancelled; then waits
  // for the server's threads.
  void Shutdown(std::chrono::system_clock::time_point deadline);

 private:
  ServedSocket() = default;

  std::filesystem::path path_;
  SocketIdentity identity_{};
  std::shared_ptr<ConnectionCalls> calls_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<UnixAcceptor> acceptor_;
  bool shut_down_ = false;
};

}  // namespace topology::common

#endif  // TOPOLOGY_COMMON_SERVED_SOCKET_H_
