#include "fake_api_server.h"

#include <chrono>
#include <fstream>
#include <iterator>
#include <set>
#include <utility>

#include <openssl/ssl.h>
#include <sys/socket.h>

#include <boost/asio.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>

#include "run_command.h"

namespace topology::testing {
namespace {

namespace asio = boost::asio;
namespace ssl = boost::asio::ssl;
namespace beast = boost::beast;
namespace http = boost::beast::http;
using tcp = boost::asio::ip::tcp;

std::string Read(const std::filesystem::path& path) {
  std::ifstream in(path);
  return std::string((std::istreambuf_iterator<char>(in)), {});
}

}  // namespace

class FakeApiServer::Impl {
 public:
  Impl(std::filesystem::path dir, Handler handler, bool require)
      : dir_(std::move(dir)), handler_(std::move(handler)), require_(require) {}

  ~Impl() {
    stopping_ = true;
    // Wakes the blocking accept.
    boost::system::error_code ignored;
    tcp::socket wake(io_);
    wake.connect(tcp::endpoint(asio::ip::make_address("127.0.0.1"), port_),
                 ignored);
    if (acceptor_thread_.joinable()) acceptor_thread_.join();
    {
      // Kept connections end: their workers stop waiting for requests.
      std::lock_guard<std::mutex> lock(mu_);
      for (int fd : open_) ::shutdown(fd, SHUT_RDWR);
    }
    for (std::thread& worker : workers_) worker.join();
  }

  Status Init() {
    std::filesystem::create_directories(dir_);
    const std::string ec =
        "-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes";
    const std::string d = "'" + dir_.string() + "'";
    const CommandResult made = RunCommand(
        "set -e; cd " + d + "; " + "openssl req -x509 " + ec +
        " -keyout ca.key -out ca.crt -days 2 -subj /CN=fake-api-ca; " +
        "openssl req " + ec +
        " -keyout server.key -out server.csr -subj /CN=127.0.0.1; " +
        "printf 'subjectAltName=IP:127.0.0.1,DNS:api.test\\n' > server.ext; " +
        "openssl x509 -req -in server.csr -CA ca.crt -CAkey ca.key "
        "-CAcreateserial -out server.crt -days 2 -extfile server.ext; " +
        "openssl req " + ec +
        " -keyout client.key -out client.csr -subj /CN=system:node:test; " +
        "openssl x509 -req -in client.csr -CA ca.crt -CAkey ca.key "
        "-CAcreateserial -out client.crt -days 2; " +
        "openssl req -x509 " + ec +
        " -keyout other.key -out other.crt -days 2 -subj /CN=other-ca");
    if (made.exit_code != 0) {
      return FailedPreconditionError("openssl: " + made.out);
    }
    try {
      context_.use_certificate_chain_file((dir_ / "server.crt").string());
      context_.use_private_key_file((dir_ / "server.key").string(),
                                    ssl::context::pem);
      context_.load_verify_file((dir_ / "ca.crt").string());
      context_.set_verify_mode(require_ ? ssl::verify_peer |
                                              ssl::verify_fail_if_no_peer_cert
                                        : ssl::verify_peer);
      acceptor_.open(tcp::v4());
      acceptor_.bind(tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0));
      acceptor_.listen();
      port_ = acceptor_.local_endpoint().port();
    } catch (const std::exception& e) {
      return FailedPreconditionError(std::string("TLS server: ") + e.what());
    }
    acceptor_thread_ = std::thread([this] { Accept(); });
    return OkStatus();
  }

  std::string url() const {
    return "https://127.0.0.1:" + std::to_string(port_);
  }
  std::string ca() const { return Read(dir_ / "ca.crt"); }
  std::string client_certificate() const { return Read(dir_ / "client.crt"); }
  std::string client_key() const { return Read(dir_ / "client.key"); }
  std::string other_ca() const { return Read(dir_ / "other.crt"); }
  std::vector<Request> requests() const {
    std::lock_guard<std::mutex> lock(mu_);
    return requests_;
  }
  int closes() const { return closes_.load(); }

 private:
  void Accept() {
    while (!stopping_) {
      tcp::socket socket(io_);
      boost::system::error_code error;
      acceptor_.accept(socket, error);
      if (stopping_) break;
      if (error) continue;
      const int number = ++connections_;
      {
        std::lock_guard<std::mutex> lock(mu_);
        open_.insert(socket.native_handle());
      }
      workers_.emplace_back([this, number, s = std::move(socket)]() mutable {
        const int fd = s.native_handle();
        Serve(std::move(s), number);
        std::lock_guard<std::mutex> lock(mu_);
        open_.erase(fd);
      });
    }
  }

  void Serve(tcp::socket socket, int number) {
    beast::ssl_stream<tcp::socket> stream(std::move(socket), context_);
    beast::error_code error;
    stream.handshake(ssl::stream_base::server, error);
    if (error) return;
    beast::flat_buffer buffer;
    for (;;) {
      http::request<http::string_body> request;
      http::read(stream, buffer, request, error);
      if (error) break;
      Request seen;
      seen.method = std::string(request.method_string());
      seen.target = std::string(request.target());
      seen.body = request.body();
      seen.authorization = std::string(request[http::field::authorization]);
      X509* peer = SSL_get1_peer_certificate(stream.native_handle());
      seen.client_certificate = peer != nullptr;
      X509_free(peer);
      seen.connection = number;
      {
        std::lock_guard<std::mutex> lock(mu_);
        requests_.push_back(seen);
      }
      const Answer answer = handler_(seen);
      const auto until = std::chrono::steady_clock::now() + answer.delay;
      while (std::chrono::steady_clock::now() < until && !stopping_) {
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
      }
      http::response<http::string_body> response{
          static_cast<http::status>(answer.status), 11};
      response.set(http::field::content_type, "application/json");
      response.body() = answer.body;
      response.keep_alive(request.keep_alive());
      response.prepare_payload();
      http::write(stream, response, error);
      if (error || answer.drop_after || !request.keep_alive() || stopping_) {
        break;
      }
    }
    // The close is announced (close_notify sent) before it is counted, so a
    // test that saw the count finds it at the client; then the client's
    // close_notify is awaited.
    (void)SSL_shutdown(stream.native_handle());
    ++closes_;
    stream.shutdown(error);
  }

  const std::filesystem::path dir_;
  const Handler handler_;
  const bool require_;
  asio::io_context io_;
  ssl::context context_{ssl::context::tls_server};
  tcp::acceptor acceptor_{io_};
  unsigned short port_ = 0;
  std::atomic<bool> stopping_{false};
  std::atomic<int> connections_{0};
  std::atomic<int> closes_{0};
  std::thread acceptor_thread_;
  std::vector<std::thread> workers_;  // the acceptor's until it returns
  mutable std::mutex mu_;
  std::vector<Request> requests_;
  std::set<int> open_;  // sockets of connections being served
};

StatusOr<std::unique_ptr<FakeApiServer>> FakeApiServer::Start(
    const std::filesystem::path& dir, Handler handler,
    bool require_client_certificate) {
  auto impl = std::make_unique<Impl>(dir, std::move(handler),
                                     require_client_certificate);
  if (Status started = impl->Init(); !started.ok()) return started;
  return std::unique_ptr<FakeApiServer>(new FakeApiServer(std::move(impl)));
}

FakeApiServer::FakeApiServer(std::unique_ptr<Impl> impl)
    : impl_(std::move(impl)) {}
FakeApiServer::~FakeApiServer() = default;
std::string FakeApiServer::url() const { return impl_->url(); }
std::string FakeApiServer::ca_pem() const { return impl_->ca(); }
std::string FakeApiServer::client_certificate_pem() const {
  return impl_->client_certificate();
}
std::string FakeApiServer::client_key_pem() const {
  return impl_->client_key();
}
std::string FakeApiServer::other_ca_pem() const { return impl_->other_ca(); }
std::vector<FakeApiServer::Request> FakeApiServer::requests() const {
  return impl_->requests();
}
int FakeApiServer::closes() const { return impl_->closes(); }

}  // namespace topology::testing
