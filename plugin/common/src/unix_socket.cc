#include "topology/common/unix_socket.h"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <map>
#include <string_view>
#include <utility>

#include <fcntl.h>
#include <glog/logging.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/server_posix.h>
#include <grpcpp/support/server_interceptor.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

namespace topology::common {

namespace {

// Fills `address` with `path`; false when it does not fit.
bool ToAddress(const std::filesystem::path& path, sockaddr_un* address) {
  const std::string& text = path.native();
  if (text.size() >= sizeof(address->sun_path)) return false;
  *address = sockaddr_un{};
  address->sun_family = AF_UNIX;
  std::memcpy(address->sun_path, text.c_str(), text.size() + 1);
  return true;
}

// Holds a ConnectionCalls::Call for the duration of one call, from the
// first hook on (the call's peer is known by then, not when the
// interceptor is made).
class CallCounter : public grpc::experimental::Interceptor {
 public:
  CallCounter(ConnectionCalls* calls, grpc::experimental::ServerRpcInfo* info)
      : calls_(calls), info_(info) {}
  void Intercept(
      grpc::experimental::InterceptorBatchMethods* methods) override {
    if (!call_) {
      const grpc::ServerContextBase* context = info_->server_context();
      call_.emplace(calls_, context != nullptr ? context->peer() : "");
    }
    methods->Proceed();
  }

 private:
  ConnectionCalls* const calls_;
  grpc::experimental::ServerRpcInfo* const info_;
  std::optional<ConnectionCalls::Call> call_;
};

class CallCounterFactory
    : public grpc::experimental::ServerInterceptorFactoryInterface {
 public:
  explicit CallCounterFactory(std::shared_ptr<ConnectionCalls> calls)
      : calls_(std::move(calls)) {}
  grpc::experimental::Interceptor* CreateServerInterceptor(
      grpc::experimental::ServerRpcInfo* info) override {
    return new CallCounter(calls_.get(), info);
  }

 private:
  std::shared_ptr<ConnectionCalls> calls_;
};

}  // namespace

std::optional<SocketIdentity> SocketAt(const std::filesystem::path& path) {
  mode_t mode = 0;
  std::optional<SocketIdentity> identity = files::IdentityAt(path, &mode);
  if (!identity || !S_ISSOCK(mode)) return std::nullopt;
  return identity;
}

bool Listening(const std::filesystem::path& path) {
  sockaddr_un address{};
  if (!ToAddress(path, &address)) return false;
  const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  const bool live = connect(fd, reinterpret_cast<const sockaddr*>(&address),
                            sizeof(address)) == 0;
  close(fd);
  return live;
}

ConnectionCalls::Call::Call(ConnectionCalls* calls, const std::string& peer)
    : calls_(calls) {
  // "fd:17": a connection an acceptor handed over.
  constexpr std::string_view kPrefix = "fd:";
  if (calls_ == nullptr || !peer.starts_with(kPrefix) ||
      peer.size() == kPrefix.size()) {
    return;
  }
  int fd = 0;
  for (size_t i = kPrefix.size(); i < peer.size(); ++i) {
    if (peer[i] < '0' || peer[i] > '9' || fd > 100000000) return;
    fd = fd * 10 + (peer[i] - '0');
  }
  fd_ = fd;
  MutexLock lock(calls_->mu_);
  ++calls_->in_flight_[fd_];
}

ConnectionCalls::Call::~Call() {
  if (fd_ < 0) return;
  MutexLock lock(calls_->mu_);
  auto it = calls_->in_flight_.find(fd_);
  if (it != calls_->in_flight_.end() && --it->second <= 0) {
    calls_->in_flight_.erase(it);
  }
}

std::vector<
    std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>>
ConnectionCalls::Interceptors(std::shared_ptr<ConnectionCalls> calls) {
  std::vector<
      std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>>
      creators;
  creators.push_back(std::make_unique<CallCounterFactory>(std::move(calls)));
  return creators;
}

bool ConnectionCalls::Busy(int fd) const {
  MutexLock lock(mu_);
  return in_flight_.contains(fd);
}

StatusOr<std::unique_ptr<UnixAcceptor>> UnixAcceptor::Start(
    const std::filesystem::path& path, grpc::Server* server,
    const UnixSocketOptions& options) {
  const auto refuse = [&](const std::string& reason) {
    return FailedPreconditionError("cannot serve " + path.string() + ": " +
                                   reason);
  };
  sockaddr_un final_address{};
  if (!ToAddress(path, &final_address)) {
    return refuse("the path is longer than a unix socket's " +
                  std::to_string(sizeof(final_address.sun_path) - 1) +
                  " bytes");
  }
  struct stat existing {};
  if (lstat(path.c_str(), &existing) == 0) {
    if (!S_ISSOCK(existing.st_mode)) {
      return refuse("something other than a socket is there");
    }
    if (Listening(path)) return refuse("another process serves it");
  }
  // Bound under a hidden sibling name and renamed once it listens; a path
  // so long that the sibling's name does not fit, or one asked for in
  // place, is bound in place.
  const std::filesystem::path hidden =
      path.parent_path() / ("." + path.filename().string() + ".tmp");
  sockaddr_un address{};
  const bool staged = !options.in_place && ToAddress(hidden, &address);
  const std::filesystem::path& bound = staged ? hidden : path;
  if (!staged) address = final_address;
  if (lstat(bound.c_str(), &existing) == 0) {
    // A crash's leftover, or (bound in place) the stale socket.
    if (!S_ISSOCK(existing.st_mode)) {
      return refuse(bound.string() + " is there and is not a socket");
    }
    unlink(bound.c_str());
  }
  const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) return refuse(std::string("socket: ") + std::strerror(errno));
  const auto fail = [&](const char* step) {
    const std::string reason = std::string(step) + ": " + std::strerror(errno);
    close(fd);
    struct stat ours {};
    if (lstat(bound.c_str(), &ours) == 0 && S_ISSOCK(ours.st_mode)) {
      unlink(bound.c_str());
    }
    return refuse(reason);
  };
  // The mode of the unbound socket is the one bind gives the file (less
  // the umask): never wider than asked, even bound in place.
  if (fchmod(fd, options.mode) != 0) {
    const std::string reason = std::strerror(errno);
    close(fd);
    return refuse("fchmod: " + reason);
  }
  if (bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0) {
    const std::string reason = std::strerror(errno);
    close(fd);
    return refuse("bind " + bound.string() + ": " + reason);
  }
  if (chmod(bound.c_str(), options.mode) != 0) return fail("chmod");
  if (options.group != static_cast<gid_t>(-1) &&
      lchown(bound.c_str(), static_cast<uid_t>(-1), options.group) != 0) {
    return fail(("chown to group " + std::to_string(options.group)).c_str());
  }
  if (listen(fd, SOMAXCONN) != 0) return fail("listen");
  const std::optional<SocketIdentity> identity = SocketAt(bound);
  if (!identity) return fail("stat");
  if (staged && rename(hidden.c_str(), path.c_str()) != 0) {
    return fail("rename");
  }
  const int wake = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (wake < 0) {
    const std::string reason = std::strerror(errno);
    close(fd);
    if (SocketAt(path) == identity) unlink(path.c_str());
    return refuse("eventfd: " + reason);
  }
  std::unique_ptr<UnixAcceptor> acceptor(
      new UnixAcceptor(path, *identity, server, fd, wake, options));
  acceptor->thread_ = std::thread([raw = acceptor.get()] { raw->Loop(); });
  return acceptor;
}

UnixAcceptor::UnixAcceptor(std::filesystem::path path, SocketIdentity identity,
                           grpc::Server* server, int listen_fd, int wake_fd,
                           const UnixSocketOptions& options)
    : path_(std::move(path)),
      identity_(identity),
      server_(server),
      listen_fd_(listen_fd),
      wake_fd_(wake_fd),
      max_connections_(std::max<size_t>(1, options.max_connections)),
      calls_(options.calls) {}

UnixAcceptor::~UnixAcceptor() {
  stopping_.store(true);
  const uint64_t one = 1;
  (void)!write(wake_fd_, &one, sizeof(one));
  if (thread_.joinable()) thread_.join();
  close(listen_fd_);
  close(wake_fd_);
  for (const Handed& handed : handed_) close(handed.copy);
  // Another process's socket at the path (ours was replaced) stays.
  if (SocketAt(path_) == identity_) unlink(path_.c_str());
}
void UnixAcceptor::Prune() {
  if (handed_.empty()) return;
  std::vector<pollfd> fds;
  fds.reserve(handed_.size());
  for (const Handed& handed : handed_) {
    fds.push_back({handed.copy, POLLRDHUP, 0});
  }
  if (poll(fds.data(), fds.size(), 0) < 0) return;
  std::deque<Handed> open;
  for (size_t i = 0; i < fds.size(); ++i) {
    if ((fds[i].revents & (POLLHUP | POLLRDHUP | POLLERR | POLLNVAL)) != 0) {
      close(fds[i].fd);
    } else {
      open.push_back(handed_[i]);
    }
  }
  handed_ = std::move(open);
}

void ConfigureBoundedServer(grpc::ServerBuilder& builder,
                            std::shared_ptr<ConnectionCalls> calls) {
  builder.experimental().SetInterceptorCreators(
      ConnectionCalls::Interceptors(std::move(calls)));
  builder.AddChannelArgument(GRPC_ARG_MAX_CONCURRENT_STREAMS,
                             kMaxStreamsPerConnection);
}

bool UnixAcceptor::MakeRoom() {
  if (handed_.empty()) return false;
  std::map<pid_t, size_t> per_peer;
  for (const Handed& handed : handed_) ++per_peer[handed.peer];
  // Idle before busy; of the peer holding the most connections; its newest
  // (handed_ is oldest first, so the walk goes backwards and keeps the
  // first of the largest).
  const auto pick = [&](bool idle) {
    auto chosen = handed_.end();
    for (auto it = handed_.end(); it != handed_.begin();) {
      --it;
      const bool busy = calls_ != nullptr && calls_->Busy(it->given);
      if (busy == idle) continue;
      if (chosen == handed_.end() ||
          per_peer[it->peer] > per_peer[chosen->peer]) {
        chosen = it;
      }
    }
    return chosen;
  };
  auto victim = pick(/*idle=*/true);
  const bool idle = victim != handed_.end();
  if (!idle) victim = pick(/*idle=*/false);
  // gRPC sees it end and cleans up (a call on it ends UNAVAILABLE).
  shutdown(victim->copy, SHUT_RDWR);
  close(victim->copy);
  handed_.erase(victim);
  (idle ? evicted_ : cut_).fetch_add(1);
  return true;
}

void UnixAcceptor::Loop() {
  auto last_warning = std::chrono::steady_clock::time_point();
  const auto warn = [&](const std::string& message) {
    const auto now = std::chrono::steady_clock::now();
    if (now - last_warning > std::chrono::seconds(10)) {
      LOG(WARNING) << path_.string() << ": " << message;
      last_warning = now;
    }
  };
  while (!stopping_.load()) {
    pollfd fds[2] = {{listen_fd_, POLLIN, 0}, {wake_fd_, POLLIN, 0}};
    if (poll(fds, 2, 1000) < 0 && errno != EINTR) {
      warn(std::string("poll: ") + std::strerror(errno));
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      continue;
    }
    if (stopping_.load()) break;
    if ((fds[0].revents & POLLIN) == 0) {
      Prune();
      continue;
    }
    const int fd =
        accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd < 0) {
      if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS ||
          errno == ENOMEM) {
        // Out of descriptors: the connection waits in the backlog; try
        // again once some have been closed.
        starved_.fetch_add(1);
        warn(std::string("accept: ") + std::strerror(errno) + "; retrying");
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
      }
      continue;
    }
    Prune();
    const uint64_t cut_before = cut_.load();
    while (handed_.size() >= max_connections_ && MakeRoom()) {
    }
    if (cut_.load() != cut_before) {
      warn(std::to_string(max_connections_) +
           " connections, each with a call in flight: the newest of the "
           "peer holding the most was closed for a new one");
    } else if (handed_.size() + 1 >= max_connections_) {
      warn("at the limit of " + std::to_string(max_connections_) +
           " connections; idle ones of the peer holding the most are closed "
           "for new ones");
    }
    ucred peer{};
    socklen_t length = sizeof(peer);
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &peer, &length) != 0) {
      peer.pid = 0;
    }
    const int copy = fcntl(fd, F_DUPFD_CLOEXEC, 0);
    if (copy >= 0) handed_.push_back({copy, fd, peer.pid});
    grpc::AddInsecureChannelFromFd(server_, fd);
  }
}

}  // namespace topology::common
