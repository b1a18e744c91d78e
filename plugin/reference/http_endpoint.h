// /healthz and /metrics on a local address, served by Boost.Beast on one
// thread of its own.
#ifndef TOPOLOGY_DEVICE_PLUGIN_HTTP_ENDPOINT_H_
#define TOPOLOGY_DEVICE_PLUGIN_HTTP_ENDPOINT_H_

#include <functional>
#include <memory>
#include <string>

#include "topology/status.h"

namespace topology::device_plugin {

class HttpEndpoint {
 public:
  struct Handlers {
    std::function<std::string()> health_problem;  // "" = healthy
    std::function<std::string()> metrics;
  };

  // `address` is "host:port" with a numeric host ("127.0.0.1", "[::1]");
  // port 0 picks a free one. INVALID_ARGUMENT on a malformed address,
  // UNAVAILABLE when it cannot be bound.
  static StatusOr<std::unique_ptr<HttpEndpoint>> Start(
      const std::string& address, Handlers handlers);
  ~HttpEndpoint();

  int port() const;

 private:
  class Impl;
  explicit HttpEndpoint(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// A blocking GET of http://127.0.0.1:<port><target>: status code and body,
// or UNAVAILABLE. For probes and tests.
StatusOr<std::pair<int, std::string>> HttpGet(int port,
                                              const std::string& target);

}  // namespace topology::device_plugin

#endif  // TOPOLOGY_DEVICE_PLUGIN_HTTP_ENDPOINT_H_
