#include "http_attack.h"

#include <cerrno>
#include <cstring>

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

namespace topology::testing {
namespace {

using SteadyClock = std::chrono::steady_clock;

// A blocking TCP connection from `source` to 127.0.0.1:`port`, or -1.
int ConnectFrom(const std::string& source, int port) {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  sockaddr_in from{};
  from.sin_family = AF_INET;
  inet_pton(AF_INET, source.c_str(), &from.sin_addr);
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_port = htons(static_cast<uint16_t>(port));
  to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (bind(fd, reinterpret_cast<sockaddr*>(&from), sizeof(from)) != 0 ||
      connect(fd, reinterpret_cast<sockaddr*>(&to), sizeof(to)) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

bool SendAll(int fd, const std::string& bytes) {
  size_t sent = 0;
  while (sent < bytes.size()) {
    const ssize_t n =
        send(fd, bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    sent += static_cast<size_t>(n);
  }
  return true;
}

// Whether the peer closed `fd` (EOF or an error), without blocking.
bool Closed(int fd) {
  pollfd p{fd, POLLIN, 0};
  if (poll(&p, 1, 0) <= 0) return false;
  char buffer[256];
  const ssize_t n = recv(fd, buffer, sizeof(buffer), MSG_DONTWAIT);
  return n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK);
}

constexpr const char* kHalfRequest = "GET /healthz HTTP/1.1\r\nHost: x\r\n";

}  // namespace

SlowLoris::SlowLoris(int port, std::string source, int connections)
    : port_(port),
      source_(std::move(source)),
      connections_(connections),
      thread_([this] { Run(); }) {}

SlowLoris::~SlowLoris() {
  stop_ = true;
  thread_.join();
}

void SlowLoris::Run() {
  std::vector<int> fds(static_cast<size_t>(connections_), -1);
  while (!stop_) {
    int live = 0;
    for (int& fd : fds) {
      if (fd >= 0 && Closed(fd)) {
        close(fd);
        fd = -1;
        ++reopened_;
      }
      if (fd < 0) {
        fd = ConnectFrom(source_, port_);
        if (fd >= 0 && !SendAll(fd, kHalfRequest)) {
          close(fd);
          fd = -1;
        }
      }
      if (fd >= 0) ++live;
    }
    open_ = live;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  for (int fd : fds) {
    if (fd >= 0) close(fd);
  }
}

int ProbeFrom(const std::string& source, int port, const std::string& target,
              std::chrono::milliseconds timeout) {
  const int fd = ConnectFrom(source, port);
  if (fd < 0) return -1;
  const auto deadline = SteadyClock::now() + timeout;
  std::string reply;
  if (SendAll(fd, "GET " + target + " HTTP/1.1\r\nHost: probe\r\n\r\n")) {
    char buffer[1024];
    while (true) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - SteadyClock::now());
      pollfd p{fd, POLLIN, 0};
      if (left.count() <= 0 || poll(&p, 1, static_cast<int>(left.count())) <= 0)
        break;
      const ssize_t n = recv(fd, buffer, sizeof(buffer), 0);
      if (n <= 0) break;
      reply.append(buffer, static_cast<size_t>(n));
    }
  }
  close(fd);
  // "HTTP/1.1 200 OK": the code after the first space.
  if (!reply.starts_with("HTTP/1.") || reply.size() < 12) return -1;
  return std::atoi(reply.c_str() + 9);
}

std::chrono::milliseconds TimeUntilClosed(const std::string& source, int port,
                                          const std::string& bytes,
                                          std::chrono::milliseconds timeout) {
  const auto start = SteadyClock::now();
  const int fd = ConnectFrom(source, port);
  if (fd < 0) return std::chrono::milliseconds(0);
  (void)SendAll(fd, bytes);
  const auto deadline = start + timeout;
  // Woken by the server's close (or by data, which is read and dropped).
  while (!Closed(fd)) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - SteadyClock::now());
    if (left.count() <= 0) break;
    pollfd p{fd, POLLIN | POLLRDHUP, 0};
    (void)poll(&p, 1, static_cast<int>(left.count()));
  }
  close(fd);
  return std::min(timeout,
                  std::chrono::duration_cast<std::chrono::milliseconds>(
                      SteadyClock::now() - start));
}

}  // namespace topology::testing
