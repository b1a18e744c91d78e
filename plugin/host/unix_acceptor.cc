#include "unix_acceptor.h"

#include <cerrno>
#include <chrono>
#include <cstring>
#include <vector>

#include <fcntl.h>
#include <glog/logging.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/server_posix.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

namespace topology::host {

ConnectionCalls::Call::Call(ConnectionCalls* calls, const std::string& peer)
    : calls_(calls) {
  // "fd:17": a connection an acceptor handed over; other peers (a server
  // gRPC listens for itself) are not counted.
  constexpr std::string_view kPrefix = "fd:";
  if (calls_ == nullptr || !peer.starts_with(kPrefix)) return;
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

bool ConnectionCalls::Busy(int fd) const {
  MutexLock lock(mu_);
  return in_flight_.contains(fd);
}

StatusOr<std::unique_ptr<UnixAcceptor>> UnixAcceptor::Start(
    const std::filesystem::path& path, grpc::Server* server, mode_t mode,
    size_t max_connections, std::shared_ptr<const ConnectionCalls> calls) {
  sockaddr_un address{};
  if (path.string().size() >= sizeof(address.sun_path)) {
    return FailedPreconditionError("socket path " + path.string() +
                                   " is too long");
  }
  struct stat existing {};
  if (lstat(path.c_str(), &existing) == 0) {
    if (!S_ISSOCK(existing.st_mode)) {
      return FailedPreconditionError("cannot serve " + path.string() +
                                     ": something other than a socket is "
                                     "there");
    }
    unlink(path.c_str());
  }
  const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) {
    return FailedPreconditionError("cannot create a socket for " +
                                   path.string() + ": " + std::strerror(errno));
  }
  address.sun_family = AF_UNIX;
  std::memcpy(address.sun_path, path.c_str(), path.string().size() + 1);
  if (bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0 ||
      chmod(path.c_str(), mode) != 0 || listen(fd, SOMAXCONN) != 0) {
    const std::string reason = std::strerror(errno);
    close(fd);
    return FailedPreconditionError("cannot serve " + path.string() + ": " +
                                   reason);
  }
  const int wake = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (wake < 0) {
    close(fd);
    unlink(path.c_str());
    return FailedPreconditionError("cannot create an eventfd: " +
                                   std::string(std::strerror(errno)));
  }
  std::unique_ptr<UnixAcceptor> acceptor(new UnixAcceptor(
      path, server, fd, wake, max_connections, std::move(calls)));
  acceptor->thread_ = std::thread([raw = acceptor.get()] { raw->Loop(); });
  return acceptor;
}

UnixAcceptor::UnixAcceptor(std::filesystem::path path, grpc::Server* server,
                           int listen_fd, int wake_fd, size_t max_connections,
                           std::shared_ptr<const ConnectionCalls> calls)
    : path_(std::move(path)),
      server_(server),
      listen_fd_(listen_fd),
      wake_fd_(wake_fd),
      max_connections_(max_connections),
      calls_(std::move(calls)) {}

UnixAcceptor::~UnixAcceptor() {
  stopping_.store(true);
  const uint64_t one = 1;
  (void)!write(wake_fd_, &one, sizeof(one));
  if (thread_.joinable()) thread_.join();
  close(listen_fd_);
  close(wake_fd_);
  for (const Handed& handed : handed_) close(handed.copy);
  struct stat info {};
  if (lstat(path_.c_str(), &info) == 0 && S_ISSOCK(info.st_mode)) {
    unlink(path_.c_str());
  }
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

bool UnixAcceptor::MakeRoom() {
  for (auto it = handed_.begin(); it != handed_.end(); ++it) {
    if (calls_ != nullptr && calls_->Busy(it->given)) continue;
    // The oldest idle connection goes: gRPC sees it end and cleans up.
    shutdown(it->copy, SHUT_RDWR);
    close(it->copy);
    handed_.erase(it);
    evicted_.fetch_add(1);
    return true;
  }
  return false;
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
    bool room = true;
    while (room && handed_.size() >= max_connections_) room = MakeRoom();
    if (!room) {
      // Every connection has a call in flight: none is cut for this one.
      close(fd);
      refused_.fetch_add(1);
      warn(std::to_string(max_connections_) +
           " connections, each with a call in flight; a new one is refused");
      continue;
    }
    if (handed_.size() + 1 >= max_connections_) {
      warn("at the limit of " + std::to_string(max_connections_) +
           " connections; the oldest idle ones are closed for new ones");
    }
    const int copy = fcntl(fd, F_DUPFD_CLOEXEC, 0);
    if (copy >= 0) handed_.push_back({copy, fd});
    grpc::AddInsecureChannelFromFd(server_, fd);
  }
}

}  // namespace topology::host
