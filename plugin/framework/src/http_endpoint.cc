#include "topology/plugin/http_endpoint.h"

#include <charconv>
#include <chrono>
#include <list>
#include <map>
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

// How many connections are open at once, and how long a request may take
// to arrive. The kubelet's probes come from the node's address, a scrape
// from the scraper's pod. When every place is taken, the peer (remote
// address) holding the most loses its oldest connection: a peer holding or
// trickling connections (a slow-loris, a flood) only ever evicts its own,
// and a probe from any other address always gets in. A probe from the
// attacker's own address (a host-network pod shares the node's) gets in
// too: it is the newest of that peer, and is answered long before the
// table's other places turn over. A request line and headers that take
// longer than kRequestDeadline are cut: the kubelet's probe sends its
// request at once. Answers are computed on this one thread from memory, in
// microseconds, so a probe never waits behind a scrape; no handler blocks.
constexpr int kMaxConnections = 64;
constexpr auto kRequestDeadline = std::chrono::seconds(2);
constexpr auto kWriteDeadline = std::chrono::seconds(5);
constexpr uint32_t kMaxHeaderBytes = 8 * 1024;

class HttpExchange;

// The live connections, oldest first, and how many each peer holds. Used on
// the endpoint's one thread only (no lock).
class ConnectionTable {
 public:
  using Entry = std::pair<asio::ip::address, HttpExchange*>;
  using Iterator = std::list<Entry>::iterator;

  Iterator Add(const asio::ip::address& peer, HttpExchange* exchange) {
    ++per_peer_[peer];
    return live_.insert(live_.end(), Entry(peer, exchange));
  }
  void Remove(Iterator it) {
    auto count = per_peer_.find(it->first);
    if (--count->second == 0) per_peer_.erase(count);
    live_.erase(it);
  }
  int size() const { return static_cast<int>(live_.size()); }
  // The oldest connection of the peer holding the most; nullptr when empty.
  HttpExchange* OldestOfHeaviestPeer() const {
    asio::ip::address heaviest;
    int most = 0;
    for (const auto& [address, count] : per_peer_) {
      if (count > most) {
        most = count;
        heaviest = address;
      }
    }
    for (const Entry& entry : live_) {
      if (entry.first == heaviest) return entry.second;
    }
    return nullptr;
  }

 private:
  std::list<Entry> live_;
  std::map<asio::ip::address, int> per_peer_;
};

// One request and its answer; the connection closes afterwards.
class HttpExchange : public std::enable_shared_from_this<HttpExchange> {
 public:
  HttpExchange(tcp::socket socket, const asio::ip::address& peer,
               const HttpEndpoint::Handlers& handlers, ConnectionTable* table)
      : stream_(std::move(socket)),
        handlers_(handlers),
        table_(table),
        entry_(table->Add(peer, this)) {}
  ~HttpExchange() { Forget(); }
  HttpExchange(const HttpExchange&) = delete;
  HttpExchange& operator=(const HttpExchange&) = delete;

  void Run() {
    parser_.header_limit(kMaxHeaderBytes);
    parser_.body_limit(0);
    stream_.expires_after(kRequestDeadline);
    http::async_read(
        stream_, buffer_, parser_,
        [self = shared_from_this()](beast::error_code error, size_t) {
          if (!error) self->Answer(self->parser_.get());
        });
  }

  // Closes the connection now to make room for another: its pending
  // operation ends with an error, and it leaves the table at once.
  void Evict() {
    Forget();
    beast::error_code ignored;
    stream_.socket().close(ignored);
  }

 private:
  void Forget() {
    if (table_ == nullptr) return;
    table_->Remove(entry_);
    table_ = nullptr;
  }

  void Answer(const http::request<http::empty_body>& request) {
    response_.version(request.version());
    response_.keep_alive(false);
    response_.set(http::field::server, handlers_.server_name);
    if (request.method() != http::verb::get &&
        request.method() != http::verb::head) {
      response_.result(http::status::method_not_allowed);
      response_.body() = "only GET\n";
    } else if (request.target() == "/healthz" ||
               request.target() == "/readyz") {
      const auto& check =
          request.target() == "/readyz" && handlers_.readiness_problem
              ? handlers_.readiness_problem
              : handlers_.health_problem;
      const std::string problem = check ? check() : std::string();
      response_.result(problem.empty() ? http::status::ok
                                       : http::status::service_unavailable);
      response_.body() = problem.empty() ? "ok\n" : problem + "\n";
      response_.set(http::field::content_type, "text/plain");
    } else if (request.target() == "/metrics") {
      response_.result(http::status::ok);
      response_.body() =
          handlers_.metrics ? handlers_.metrics() : std::string();
      response_.set(http::field::content_type, "text/plain; version=0.0.4");
    } else {
      response_.result(http::status::not_found);
      response_.body() = "not found: /healthz, /readyz, /metrics\n";
    }
    response_.prepare_payload();
    stream_.expires_after(kWriteDeadline);
    http::async_write(stream_, response_,
                      [self = shared_from_this()](beast::error_code, size_t) {
                        beast::error_code ignored;
                        self->stream_.socket().shutdown(
                            tcp::socket::shutdown_send, ignored);
                      });
  }

  beast::tcp_stream stream_;
  beast::flat_buffer buffer_;
  http::request_parser<http::empty_body> parser_;
  http::response<http::string_body> response_;
  const HttpEndpoint::Handlers& handlers_;  // the endpoint's, outlives this
  ConnectionTable* table_;                  // nullptr once forgotten
  ConnectionTable::Iterator entry_;
};

// An IPv4 peer seen through an IPv6 socket ("::ffff:10.0.0.1") is the same
// peer as over IPv4.
asio::ip::address PeerOf(const tcp::socket& socket) {
  beast::error_code error;
  const tcp::endpoint remote = socket.remote_endpoint(error);
  if (error) return {};
  asio::ip::address address = remote.address();
  if (address.is_v6() && address.to_v6().is_v4_mapped()) {
    return asio::ip::make_address_v4(asio::ip::v4_mapped, address.to_v6());
  }
  return address;
}

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
  void Admit(tcp::socket socket) {
    const asio::ip::address peer = PeerOf(socket);
    if (table_.size() >= kMaxConnections) {
      if (HttpExchange* evicted = table_.OldestOfHeaviestPeer()) {
        evicted->Evict();
      }
    }
    std::make_shared<HttpExchange>(std::move(socket), peer, handlers_, &table_)
        ->Run();
  }

  void Accept() {
    acceptor_.async_accept(
        context_, [this](beast::error_code error, tcp::socket socket) {
          if (!error) Admit(std::move(socket));
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
  // Before context_: pending exchanges, destroyed with it, leave it.
  ConnectionTable table_;
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
