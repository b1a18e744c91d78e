// /healthz and /metrics on a local address, served by cpp-httplib.
#ifndef TOPOLOGY_DEVICE_PLUGIN_HTTP_ENDPOINT_H_
#define TOPOLOGY_DEVICE_PLUGIN_HTTP_ENDPOINT_H_

#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "topology/status.h"

namespace httplib {
class Server;
}

namespace topology::device_plugin {

class HttpEndpoint {
 public:
  struct Handlers {
    std::function<std::string()> health_problem;  // "" = healthy
    std::function<std::string()> metrics;
  };

  // `address` is "host:port" (port 0 picks a free one). INVALID_ARGUMENT on
  // a malformed address, UNAVAILABLE when it cannot be bound.
  static StatusOr<std::unique_ptr<HttpEndpoint>> Start(
      const std::string& address, Handlers handlers);
  ~HttpEndpoint();

  int port() const { return port_; }

 private:
  HttpEndpoint() = default;
  std::unique_ptr<httplib::Server> server_;
  std::thread thread_;
  int port_ = 0;
};

}  // namespace topology::device_plugin

#endif  // TOPOLOGY_DEVICE_PLUGIN_HTTP_ENDPOINT_H_
