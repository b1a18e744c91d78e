// One way to serve gRPC on a unix socket, for every daemon of the project
// (the device plugin framework, the DRA framework, the host's serve):
//
//  - The socket appears only once it accepts connections, with its mode and
//    group already set: it is bound under a hidden sibling name
//    (".<name>.tmp"), given its mode and group, listened on, and renamed
//    over the path. A client that sees the file never gets "connection
//    refused" from a socket still being set up, and never sees it with the
//    wrong owner.
//  - Except in a directory a watcher reads as files appear (the kubelet's
//    plugin registry: its watcher stats each new name, the hidden one
//    included, and logs an error when it is already gone): bound in place
//    there (UnixSocketOptions::in_place), its mode given before bind, as
//    the Go helper's is; that watcher's client dials until the socket
//    listens.
//  - A stale socket at the path (a killed process's) is replaced; anything
//    else there is an error, never removed.
//  - Our own accept loop (gRPC 1.51's listener stops accepting for good once
//    accept() fails with EMFILE, and has no limit on connections): it
//    retries after running out of descriptors, hands each connection to the
//    gRPC server (grpc::AddInsecureChannelFromFd) and keeps at most
//    `max_connections` open. A new connection is never refused: beyond the
//    bound one open connection is closed for it, an idle one (no call in
//    flight, as ConnectionCalls' interceptor reports) before one with a
//    call, of the peer process holding the most connections (SO_PEERCRED),
//    its newest first. A flood of connections, idle or each holding an
//    unread stream, costs its sender its own newest ones: the kubelet's
//    long-held connection and its new one are served all the same, and
//    descriptors and memory stay bounded.
//  - The socket's identity (device, inode) is kept: the file is removed at
//    the end only while it is still ours, and a caller can tell when it was
//    removed or replaced (SocketAt) and serve again.
#ifndef TOPOLOGY_COMMON_UNIX_SOCKET_H_
#define TOPOLOGY_COMMON_UNIX_SOCKET_H_

#include <atomic>
#include <deque>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <sys/types.h>

#include "topology/common/safe_file.h"
#include "topology/status.h"
#include "topology/thread_annotations.h"

namespace grpc {
class Server;
class ServerBuilder;
namespace experimental {
class ServerInterceptorFactoryInterface;
}
}  // namespace grpc

namespace topology::common {

// Which socket file a path names: device, inode and birth time
// (files::FileIdentity).
using SocketIdentity = files::FileIdentity;

// The socket at `path` (not following a link), or nothing when there is
// none (no file, or something else).
std::optional<SocketIdentity> SocketAt(const std::filesystem::path& path);
inline bool IsSocket(const std::filesystem::path& path) {
  return SocketAt(path).has_value();
}
// Someone accepts connections on the unix socket at `path` (a live server,
// not a stale file a killed process left).
bool Listening(const std::filesystem::path& path);

// Calls in flight per connection an acceptor handed to gRPC, which names
// such a connection "fd:<descriptor>" as the peer of its calls. The
// interceptor of Interceptors() counts every call of a server built with
// it; other peers (a port gRPC listens on itself) are not counted.
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
  // For grpc::ServerBuilder::experimental().SetInterceptorCreators(): one
  // Call held by each call for its duration.
  static std::vector<
      std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>>
  Interceptors(std::shared_ptr<ConnectionCalls> calls);
  // Whether the connection handed over as `fd` has a call in flight.
  bool Busy(int fd) const;

 private:
  mutable Mutex mu_;
  std::map<int, int> in_flight_ TOPOLOGY_GUARDED_BY(mu_);  // by descriptor
};

// Streams one connection may hold open at once (HTTP/2's
// SETTINGS_MAX_CONCURRENT_STREAMS): a client opening more waits for one to
// end, so one connection can tie up at most this many of the server's
// threads and buffers (the kubelet holds two or three).
inline constexpr int kMaxStreamsPerConnection = 32;

// What every server an acceptor serves sets: `calls`' interceptor (the
// acceptor tells idle connections from busy ones by it) and the bound of
// streams per connection.
void ConfigureBoundedServer(grpc::ServerBuilder& builder,
                            std::shared_ptr<ConnectionCalls> calls);

struct UnixSocketOptions {
  // The socket's mode, whatever the umask.
  mode_t mode = 0600;
  // Its group, when set (-1: the process's).
  gid_t group = static_cast<gid_t>(-1);
  // Connections open at once; more close the oldest idle one.
  size_t max_connections = 256;
  // Calls in flight per connection (the server's interceptor); without it
  // every connection counts as idle.
  std::shared_ptr<const ConnectionCalls> calls = nullptr;
  // Bound at the path itself, not under a hidden name renamed over it: for
  // a directory whose watcher stats every name that appears.
  bool in_place = false;
};

// Thread safety: Start and the destructor from one thread; the accept loop
// runs on a thread of its own; the counters from any thread.
class UnixAcceptor {
 public:
  // Serves `server` (started with no listening port, outliving this
  // object) on `path` as the header comment says. FAILED_PRECONDITION,
  // naming the path and the reason, when the socket cannot be served.
  static StatusOr<std::unique_ptr<UnixAcceptor>> Start(
      const std::filesystem::path& path, grpc::Server* server,
      const UnixSocketOptions& options);
  // Stops accepting and removes the socket file if it is still this one
  // (connections handed over stay the server's).
  ~UnixAcceptor();
  UnixAcceptor(const UnixAcceptor&) = delete;
  UnixAcceptor& operator=(const UnixAcceptor&) = delete;

  const std::filesystem::path& path() const { return path_; }
  const SocketIdentity& identity() const { return identity_; }
  // Idle connections closed to stay under the cap, connections with a call
  // in flight closed for a newcomer (every open one had a call), new ones
  // refused (none since connections are closed for newcomers: kept for
  // the counters' readers), and accept() failures for want of descriptors,
  // since the start.
  uint64_t evicted() const { return evicted_.load(); }
  uint64_t cut() const { return cut_.load(); }
  uint64_t refused() const { return refused_.load(); }
  uint64_t starved() const { return starved_.load(); }

 private:
  UnixAcceptor(std::filesystem::path path, SocketIdentity identity,
               grpc::Server* server, int listen_fd, int wake_fd,
               const UnixSocketOptions& options);
  // Makes room for one more connection by closing one (the header
  // comment says which); false only when there is none to close.
  bool MakeRoom();
  void Loop();
  // Forgets connections that have ended (closes their duplicates).
  void Prune();

  const std::filesystem::path path_;
  const SocketIdentity identity_;
  grpc::Server* const server_;
  const int listen_fd_;
  const int wake_fd_;
  const size_t max_connections_;
  std::atomic<bool> stopping_{false};
  const std::shared_ptr<const ConnectionCalls> calls_;
  std::atomic<uint64_t> evicted_{0};
  std::atomic<uint64_t> cut_{0};
  std::atomic<uint64_t> refused_{0};
  std::atomic<uint64_t> starved_{0};
  // Each connection handed over, oldest first: a duplicate of it, which
  // sees the connection end (POLLHUP/POLLRDHUP after either side shuts it
  // down) and can close it (shutdown) without racing gRPC for the
  // descriptor number, and the descriptor gRPC got (its peer name).
  struct Handed {
    int copy = -1;
    int given = -1;
    pid_t peer = 0;  // the connecting process (SO_PEERCRED); 0: unknown
  };
  std::deque<Handed> handed_;
  std::thread thread_;
};

}  // namespace topology::common

#endif  // TOPOLOGY_COMMON_UNIX_SOCKET_H_
