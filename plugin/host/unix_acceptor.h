// A unix socket listener of our own in front of a gRPC server: gRPC 1.51's
// listener stops accepting for good once accept() fails with EMFILE, and it
// has no limit on connections. This one retries after running out of
// descriptors, hands each accepted connection to the server
// (grpc::AddInsecureChannelFromFd) and keeps at most `max_connections`
// open: a new connection beyond that closes the oldest one, so a flood of
// idle connections can neither exhaust descriptors nor lock clients out.
//
// Thread safety: Start and the destructor from one thread; the accept loop
// runs on a thread of its own.
#ifndef TOPOLOGY_HOST_UNIX_ACCEPTOR_H_
#define TOPOLOGY_HOST_UNIX_ACCEPTOR_H_

#include <atomic>
#include <deque>
#include <filesystem>
#include <memory>
#include <thread>

#include <sys/types.h>

#include "topology/status.h"

namespace grpc {
class Server;
}

namespace topology::host {

class UnixAcceptor {
 public:
  // Binds `path` (a stale socket there is removed; anything else is an
  // error), sets its mode to `mode` and starts accepting for `server`,
  // which must be started and outlive this object. At most
  // `max_connections` connections are open at once; more are closed at
  // once (the oldest is closed). FAILED_PRECONDITION when the socket
  // cannot be served.
  static StatusOr<std::unique_ptr<UnixAcceptor>> Start(
      const std::filesystem::path& path, grpc::Server* server, mode_t mode,
      size_t max_connections);
  // Stops accepting and removes the socket file (connections handed over
  // stay the server's).
  ~UnixAcceptor();
  UnixAcceptor(const UnixAcceptor&) = delete;
  UnixAcceptor& operator=(const UnixAcceptor&) = delete;

  // Connections closed to stay under the cap, and accept() failures for
  // want of descriptors, since the start.
  uint64_t evicted() const { return evicted_.load(); }
  uint64_t starved() const { return starved_.load(); }

 private:
  UnixAcceptor(std::filesystem::path path, grpc::Server* server, int listen_fd,
               int wake_fd, size_t max_connections);
  void Loop();
  // Forgets connections that have ended (closes their duplicates).
  void Prune();

  const std::filesystem::path path_;
  grpc::Server* const server_;
  const int listen_fd_;
  const int wake_fd_;
  const size_t max_connections_;
  std::atomic<bool> stopping_{false};
  std::atomic<uint64_t> evicted_{0};
  std::atomic<uint64_t> starved_{0};
  // A duplicate of each connection handed over, oldest first: it sees the
  // connection end (POLLHUP/POLLRDHUP after either side shuts it down) and
  // can close it (shutdown) without racing gRPC for the descriptor number.
  std::deque<int> handed_;
  std::thread thread_;
};

}  // namespace topology::host

#endif  // TOPOLOGY_HOST_UNIX_ACCEPTOR_H_
