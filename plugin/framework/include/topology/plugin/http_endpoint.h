// /healthz, /readyz and /metrics of a plugin on a local address, served by
// Boost.Beast on one thread of its own. Bounded against a hostile peer: at
// most 64 connections; when all are taken, the remote address holding the
// most loses its oldest connection, so a probe from any other address is
// always read, and one from the attacker's own address is read as its
// newest; a request must arrive whole (headers at most 8 KiB, no body)
// within 2 s.
#ifndef TOPOLOGY_PLUGIN_HTTP_ENDPOINT_H_
#define TOPOLOGY_PLUGIN_HTTP_ENDPOINT_H_

#include <functional>
#include <memory>
#include <string>

#include "topology/status.h"

namespace topology::plugin {

class HttpEndpoint {
 public:
  struct Handlers {
    // /healthz (liveness): "" = 200 ok, else 503 with the text.
    std::function<std::string()> health_problem = {};
    // /readyz (readiness, e.g. registered with the kubelet); unset = as
    // /healthz.
    std::function<std::string()> readiness_problem = {};
    // /metrics: Prometheus text (see metrics_text.h).
    std::function<std::string()> metrics = {};
    std::string server_name = "topology-device-plugin";
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

}  // namespace topology::plugin

#endif  // TOPOLOGY_PLUGIN_HTTP_ENDPOINT_H_
