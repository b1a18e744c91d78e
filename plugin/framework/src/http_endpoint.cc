#include "topology/plugin/http_endpoint.h"

#include <charconv>
#include <chrono>
#include <thread>

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

namespace topology::plugin {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

namespace {

// One request and its answer; the connection closes afterwards.
class HttpExchange : public std::enable_shared_from_this<HttpExchange> {
 public:
  HttpExchange(tcp::socket socket, const HttpEndpoint::Handlers& handlers,
               int* live)
      : stream_(std::move(socket)), handlers_(handlers), live_(live) {
    ++*live_;
  }
  ~HttpExchange() { --*live_; }
  HttpExchange(const HttpExchange&) = delete;
  HttpExchange& operator=(const HttpExchange&) = delete;

  void Run() {
    stream_.expires_after(std::chrono::seconds(5));
    http::async_read(
        stream_, buffer_, request_,
        [self = shared_from_this()](beast::error_code error, size_t) {
          if (!error) self->Answer();
        });
  }

 private:
  void Answer() {
    response_.version(request_.version());
    response_.keep_alive(false);
    response_.set(http::field::server, handlers_.server_name);
    if (request_.method() != http::verb::get &&
        request_.method() != http::verb::head) {
      response_.result(http::status::method_not_allowed);
      response_.body() = "only GET\n";
    } else if (request_.target() == "/healthz" ||
               request_.target() == "/readyz") {
      const auto& check =
          request_.target() == "/readyz" && handlers_.readiness_problem
              ? handlers_.readiness_problem
              : handlers_.health_problem;
      const std::string problem = check ? check() : std::string();
      response_.result(problem.empty() ? http::status::ok
                                       : http::status::service_unavailable);
      response_.body() = problem.empty() ? "ok\n" : problem + "\n";
      response_.set(http::field::content_type, "text/plain");
    } else if (request_.target() == "/metrics") {
      response_.result(http::status::ok);
      response_.body() =
          handlers_.metrics ? handlers_.metrics() : std::string();
      response_.set(http::field::content_type, "text/plain; version=0.0.4");
    } else {
      response_.result(http::status::not_found);
      response_.body() = "not found: /healthz, /readyz, /metrics\n";
    }
    response_.prepare_payload();
    stream_.expires_after(std::chrono::seconds(5));
    http::async_write(stream_, response_,
                      [self = shared_from_this()](beast::error_code, size_t) {
                        beast::error_code ignored;
                        self->stream_.socket().shutdown(
                            tcp::socket::shutdown_send, ignored);
                      });
  }

  beast::tcp_stream stream_;
  beast::flat_buffer buffer_;
  http::request<http::string_body> request_;
  http::response<http::string_body> response_;
  const HttpEndpoint::Handlers& handlers_;  // the endpoint's, outlives this
  int* live_;  // connections open now (one io thread: no lock)
};

// At most this many connections at once: a local user holding many
// connections can neither exhaust the plugin's descriptors (which its
// rescans need) nor its memory. Each lives at most 10 s.
constexpr int kMaxConnections = 64;

}  // namespace

class HttpEndpoint::Impl {
 public:
  explicit Impl(Handlers handlers) : handlers_(std::move(handlers)) {}

  Status Listen(const tcp::endpoint& endpoint) {
    beast::error_code error;
    acceptor_.open(endpoint.protocol(), error);
    if (!error && endpoint.address().is_v6() &&
        endpoint.address().is_unspecified()) {
      // "::" serves IPv4 too (mapped addresses), whatever bindv6only says.
      acceptor_.set_option(asio::ip::v6_only(false), error);
    }
    if (!error)
      acceptor_.set_option(asio::socket_base::reuse_address(true), error);
    if (!error) acceptor_.bind(endpoint, error);
    if (!error)
      acceptor_.listen(asio::socket_base::max_listen_connections, error);
    if (error) return UnavailableError(error.message());
    Accept();
    thread_ = std::thread([this] { context_.run(); });
    return OkStatus();
  }

  void Stop() {
    context_.stop();
    if (thread_.joinable()) thread_.join();
  }

  int port() const { return acceptor_.local_endpoint().port(); }

 private:
  void Accept() {
    acceptor_.async_accept(context_, [this](beast::error_code error,
                                            tcp::socket socket) {
      if (!error) {
        if (live_ >= kMaxConnections) {
          // Over the limit: closed at once, nothing read.
          beast::error_code ignored;
          socket.close(ignored);
        } else {
          std::make_shared<HttpExchange>(std::move(socket), handlers_, &live_)
              ->Run();
        }
      }
      if (!acceptor_.is_open()) return;
      if (error && error != asio::error::operation_aborted) {
        // No descriptor to be had (EMFILE): try again shortly instead
        // of spinning; connections closing free some.
        retry_.expires_after(std::chrono::milliseconds(100));
        retry_.async_wait([this](beast::error_code) {
          if (acceptor_.is_open()) Accept();
        });
        return;
      }
      Accept();
    });
  }

  Handlers handlers_;
  // Before context_: pending exchanges, destroyed with it, count down here.
  int live_ = 0;
  asio::io_context context_{1};
  tcp::acceptor acceptor_{context_};
  asio::steady_timer retry_{context_};
  std::thread thread_;
};

HttpEndpoint::HttpEndpoint(std::unique_ptr<Impl> impl)
    : impl_(std::move(impl)) {}

HttpEndpoint::~HttpEndpoint() { impl_->Stop(); }

int HttpEndpoint::port() const { return impl_->port(); }

StatusOr<std::unique_ptr<HttpEndpoint>> HttpEndpoint::Start(
    const std::string& address, Handlers handlers) {
  const auto invalid = InvalidArgumentError(
      "--http-addr \"" + address +
      "\": expected host:port with a numeric host, such as 127.0.0.1:8081, "
      "or :port for every address");
  const size_t colon = address.rfind(':');
  if (colon == std::string::npos) return invalid;
  int port = -1;
  const char* begin = address.data() + colon + 1;
  const char* end = address.data() + address.size();
  auto [ptr, parse_error] = std::from_chars(begin, end, port);
  if (parse_error != std::errc() || ptr != end || begin == end || port < 0 ||
      port > 65535) {
    return invalid;
  }
  std::string host = address.substr(0, colon);
  if (host.size() > 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  // ":8081" (Go's convention, as in the kubelet's flags): every address,
  // IPv6 and IPv4 where the node has IPv6, IPv4 alone where it has not.
  const bool any = host.empty();
  beast::error_code error;
  const asio::ip::address ip =
      any ? asio::ip::address(asio::ip::address_v6::any())
          : asio::ip::make_address(host, error);
  if (error) return invalid;
  auto impl = std::make_unique<Impl>(handlers);
  Status listening =
      impl->Listen(tcp::endpoint(ip, static_cast<uint16_t>(port)));
  if (!listening.ok() && any) {
    impl = std::make_unique<Impl>(std::move(handlers));
    listening = impl->Listen(tcp::endpoint(asio::ip::address_v4::any(),
                                           static_cast<uint16_t>(port)));
  }
  if (!listening.ok()) {
    return UnavailableError("cannot listen on " + address + ": " +
                            listening.message());
  }
  return std::unique_ptr<HttpEndpoint>(new HttpEndpoint(std::move(impl)));
}

StatusOr<std::pair<int, std::string>> HttpGet(int port,
                                              const std::string& target) {
  try {
    asio::io_context context;
    beast::tcp_stream stream(context);
    stream.expires_after(std::chrono::seconds(5));
    stream.connect(tcp::endpoint(asio::ip::make_address("127.0.0.1"),
                                 static_cast<uint16_t>(port)));
    http::request<http::empty_body> request(http::verb::get, target, 11);
    request.set(http::field::host, "127.0.0.1");
    http::write(stream, request);
    beast::flat_buffer buffer;
    http::response<http::string_body> response;
    http::read(stream, buffer, response);
    return std::make_pair(static_cast<int>(response.result_int()),
                          response.body());
  } catch (const std::exception& e) {
    return UnavailableError(std::string("GET ") + target + ": " + e.what());
  }
}

}  // namespace topology::plugin
