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

StatusOr<std::unique_ptr<UnixAcceptor>> UnixAcceptor::Start(
    const std::filesystem::path& path, grpc::Server* server, mode_t mode,
    size_t max_connections) {
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
  std::unique_ptr<UnixAcceptor> acceptor(
      new UnixAcceptor(path, server, fd, wake, max_connections));
  acceptor->thread_ = std::thread([raw = acceptor.get()] { raw->Loop(); });
  return acceptor;
}

UnixAcceptor::UnixAcceptor(std::filesystem::path path, grpc::Server* server,
                           int listen_fd, int wake_fd, size_t max_connections)
    : path_(std::move(path)),
      server_(server),
      listen_fd_(listen_fd),
      wake_fd_(wake_fd),
      max_connections_(max_connections) {}

UnixAcceptor::~UnixAcceptor() {
  stopping_.store(true);
  const uint64_t one = 1;
  (void)!write(wake_fd_, &one, sizeof(one));
  if (thread_.joinable()) thread_.join();
  close(listen_fd_);
  close(wake_fd_);
  for (int fd : handed_) close(fd);
  struct stat info {};
  if (lstat(path_.c_str(), &info) == 0 && S_ISSOCK(info.st_mode)) {
    unlink(path_.c_str());
  }
}

void UnixAcceptor::Prune() {
  if (handed_.empty()) return;
  std::vector<pollfd> fds;
  fds.reserve(handed_.size());
  for (int fd : handed_) fds.push_back({fd, POLLRDHUP, 0});
  if (poll(fds.data(), fds.size(), 0) < 0) return;
  std::deque<int> open;
  for (const pollfd& entry : fds) {
    if ((entry.revents & (POLLHUP | POLLRDHUP | POLLERR | POLLNVAL)) != 0) {
      close(entry.fd);
    } else {
      open.push_back(entry.fd);
    }
  }
  handed_ = std::move(open);
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
    while (handed_.size() >= max_connections_) {
      // The oldest connection goes: gRPC sees it end and cleans up.
      shutdown(handed_.front(), SHUT_RDWR);
      close(handed_.front());
      handed_.pop_front();
      evicted_.fetch_add(1);
      warn("more than " + std::to_string(max_connections_) +
           " connections; closing the oldest");
    }
    const int copy = fcntl(fd, F_DUPFD_CLOEXEC, 0);
    if (copy >= 0) handed_.push_back(copy);
    grpc::AddInsecureChannelFromFd(server_, fd);
  }
}

}  // namespace topology::host
