#include "http_endpoint.h"

#include <charconv>
#include <chrono>

#include <httplib.h>

namespace topology::device_plugin {

StatusOr<std::unique_ptr<HttpEndpoint>> HttpEndpoint::Start(
    const std::string& address, Handlers handlers) {
  const size_t colon = address.rfind(':');
  int port = -1;
  if (colon != std::string::npos) {
    const char* begin = address.data() + colon + 1;
    const char* end = address.data() + address.size();
    auto [ptr, error] = std::from_chars(begin, end, port);
    if (error != std::errc() || ptr != end || begin == end) port = -1;
  }
  if (colon == std::string::npos || colon == 0 || port < 0 || port > 65535) {
    return InvalidArgumentError("--http-addr \"" + address +
                                "\": expected host:port such as "
                                "127.0.0.1:8081");
  }
  std::string host = address.substr(0, colon);
  if (host.size() > 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  std::unique_ptr<HttpEndpoint> endpoint(new HttpEndpoint());
  endpoint->server_ = std::make_unique<httplib::Server>();
  auto& server = *endpoint->server_;
  server.Get("/healthz", [health = handlers.health_problem](
                             const httplib::Request&, httplib::Response& res) {
    const std::string problem = health();
    res.status = problem.empty() ? 200 : 503;
    res.set_content(problem.empty() ? "ok\n" : problem + "\n", "text/plain");
  });
  server.Get("/metrics", [metrics = handlers.metrics](const httplib::Request&,
                                                      httplib::Response& res) {
    res.set_content(metrics(), "text/plain; version=0.0.4");
  });
  if (port == 0) {
    endpoint->port_ = server.bind_to_any_port(host);
  } else if (server.bind_to_port(host, port)) {
    endpoint->port_ = port;
  } else {
    endpoint->port_ = -1;
  }
  if (endpoint->port_ <= 0) {
    return UnavailableError("cannot listen on " + address);
  }
  endpoint->thread_ = std::thread([&server] { server.listen_after_bind(); });
  // stop() before the loop runs would be lost; wait for it to start.
  while (!server.is_running()) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return endpoint;
}

HttpEndpoint::~HttpEndpoint() {
  if (server_) server_->stop();
  if (thread_.joinable()) thread_.join();
}

}  // namespace topology::device_plugin
