// A hostile HTTP peer on loopback for the plugin's /healthz port: connections
// from a chosen source address (127.0.0.0/8 is all loopback) that send a
// request line and then nothing (a slow-loris), re-opened as soon as the
// server closes them, and a probe client that, like the kubelet's, sends
// one GET at once from its own address.
#ifndef TOPOLOGY_TESTS_PLUGIN_HTTP_ATTACK_H_
#define TOPOLOGY_TESTS_PLUGIN_HTTP_ATTACK_H_

#include <atomic>
#include <chrono>
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

namespace topology::testing {

// Keeps `connections` half-sent requests open to 127.0.0.1:`port` from
// `source` (an IPv4 loopback address), re-opening each one the server
// closes, until destroyed. reopened() counts the connections the server
// closed.
class SlowLoris {
 public:
  SlowLoris(int port, std::string source, int connections);
  ~SlowLoris();
  SlowLoris(const SlowLoris&) = delete;
  SlowLoris& operator=(const SlowLoris&) = delete;

  uint64_t reopened() const { return reopened_.load(); }
  // Connections open now (the client's view).
  int open() const { return open_.load(); }

 private:
  void Run();

  const int port_;
  const std::string source_;
  const int connections_;
  std::atomic<bool> stop_{false};
  std::atomic<uint64_t> reopened_{0};
  std::atomic<int> open_{0};
  std::thread thread_;
};

// One GET of `target` on 127.0.0.1:`port` from `source`, answered within
// `timeout`: the status code, or -1 when the connection was refused, closed
// or timed out.
int ProbeFrom(const std::string& source, int port, const std::string& target,
              std::chrono::milliseconds timeout);

// Connects from `source` and sends `bytes`, then waits up to `timeout` for
// the server to close: how long it took, or `timeout` when it did not.
std::chrono::milliseconds TimeUntilClosed(const std::string& source, int port,
                                          const std::string& bytes,
                                          std::chrono::milliseconds timeout);

}  // namespace topology::testing

#endif  // TOPOLOGY_TESTS_PLUGIN_HTTP_ATTACK_H_
