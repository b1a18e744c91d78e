// A unix socket listener of our own in front of a gRPC server: gRPC 1.51's
// listener stops accepting for good once accept() fails with EMFILE, and it
// has no limit on connections. This one retries after running out of
// descriptors, hands each accepted connection to the server
// (grpc::AddInsecureChannelFromFd) and keeps at most `max_connections`
// open: a new connection beyond that closes the oldest idle one (no call in
// flight, as the services report through ConnectionCalls), or is refused
// when none is idle. A flood of idle connections can neither exhaust
// descriptors nor lock clients out, and no call is ever cut by it.
//
// Thread safety: Start and the destructor from one thread; the accept loop
// runs on a thread of its own.
#ifndef TOPOLOGY_HOST_UNIX_ACCEPTOR_H_
#define TOPOLOGY_HOST_UNIX_ACCEPTOR_H_

#include <atomic>
#include <deque>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>

#include <sys/types.h>

#include "topology/status.h"
#include "topology/thread_annotations.h"

namespace grpc {
class Server;
}

namespace topology::host {

// Calls in flight per connection handed to gRPC, which names such a
// connection "fd:<descriptor>" as the peer of its calls. Every service
// method on an acceptor's server holds a Call for its duration.
class ConnectionCalls {
 public:
  class Call {
   public:
    Call(ConnectionCalls* calls, const std::string& peer);
    ~Call();
    Call(const Call&) = delete;
    Call& operator=(const Call&) = delete;

   private:
    ConnectionCalls* calls_;
    int fd_ = -1;
  };
  // Whether the connection handed over as `fd` has a call in flight.
  bool Busy(int fd) const;

 private:
  mutable Mutex mu_;
  std::map<int, int> in_flight_ TOPOLOGY_GUARDED_BY(mu_);  // by descriptor
};

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
      size_t max_connections, std::shared_ptr<const ConnectionCalls> calls);
  // Stops accepting and removes the socket file (connections handed over
  // stay the server's).
  ~UnixAcceptor();
  UnixAcceptor(const UnixAcceptor&) = delete;
  UnixAcceptor& operator=(const UnixAcceptor&) = delete;

  // Idle connections closed to stay under the cap, new ones refused
  // because every connection had a call in flight, and accept() failures
  // for want of descriptors, since the start.
  uint64_t evicted() const { return evicted_.load(); }
  uint64_t refused() const { return refused_.load(); }
  uint64_t starved() const { return starved_.load(); }

 private:
  UnixAcceptor(std::filesystem::path path, grpc::Server* server, int listen_fd,
               int wake_fd, size_t max_connections,
               std::shared_ptr<const ConnectionCalls> calls);
  // Makes room for one more connection by closing the oldest idle one;
  // false when every connection has a call in flight.
  bool MakeRoom();
  void Loop();
  // Forgets connections that have ended (closes their duplicates).
  void Prune();

  const std::filesystem::path path_;
  grpc::Server* const server_;
  const int listen_fd_;
  const int wake_fd_;
  const size_t max_connections_;
  std::atomic<bool> stopping_{false};
  const std::shared_ptr<const ConnectionCalls> calls_;
  std::atomic<uint64_t> evicted_{0};
  std::atomic<uint64_t> refused_{0};
  std::atomic<uint64_t> starved_{0};
  // Each connection handed over, oldest first: a duplicate of it, which
  // sees the connection end (POLLHUP/POLLRDHUP after either side shuts it
  // down) and can close it (shutdown) without racing gRPC for the
  // descriptor number, and the descriptor gRPC got (its peer name).
  struct Handed {
    int copy = -1;
    int given = -1;
  };
  std::deque<Handed> handed_;
  std::thread thread_;
};

}  // namespace topology::host

#endif  // TOPOLOGY_HOST_UNIX_ACCEPTOR_H_
