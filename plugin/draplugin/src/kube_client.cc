#include "topology/draplugin/kube_client.h"

#include <algorithm>
#include <exception>
#include <memory>
#include <optional>
#include <thread>
#include <utility>

#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl/ssl_stream.hpp>
#include <nlohmann/json.hpp>

#include "topology/common/json_fields.h"
#include "topology/common/k8s_names.h"
#include "topology/common/quantity.h"
#include "topology/common/safe_file.h"

namespace topology::draplugin {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = boost::beast::http;
namespace ssl = boost::asio::ssl;
using tcp = boost::asio::ip::tcp;
using SteadyClock = std::chrono::steady_clock;  // socket deadlines: real time
using nlohmann::json;

// As many as a publisher has writes in flight.
constexpr size_t kMaxIdle = 8;
constexpr size_t kMaxHeaderBytes = 64 * 1024;
constexpr auto kMaxConnect = std::chrono::seconds(5);
// The deepest nesting read from an answer (a claim's opaque parameters
// included).
constexpr int kMaxAnswerDepth = 128;

// The server's own explanation, when the body is a metav1.Status.
std::string ServerMessage(const std::string& body) {
  const json doc = json_fields::ParseBounded(body, kMaxAnswerDepth);
  if (doc.is_object()) {
    const auto it = doc.find("message");
    if (it != doc.end() && it->is_string()) return it->get<std::string>();
  }
  return body.substr(0, 256);
}

bool IsIpAddress(const std::string& host) {
  boost::system::error_code error;
  asio::ip::make_address(host, error);
  return !error;
}

// host:port as a Host header or a CONNECT target (IPv6 in brackets).
std::string Authority(const std::string& host, uint16_t port) {
  const std::string name =
      host.find(':') != std::string::npos ? "[" + host + "]" : host;
  return name + ":" + std::to_string(port);
}

// How a request failed: the deadline, the body limit, or what the step
// met (asio's messages carry OpenSSL's reasons).
Status Failure(const std::string& what, std::string_view step,
               const beast::error_code& error, bool timed_out,
               const KubeClient::Options& options) {
  if (timed_out) {
    return DeadlineExceededError(what + ": no answer within " +
                                 std::to_string(options.timeout.count()) +
                                 " ms");
  }
  if (error == http::error::body_limit) {
    return ResourceExhaustedError(what + ": the answer is larger than " +
                                  std::to_string(options.max_body) + " bytes");
  }
  return UnavailableError(what + ": " + std::string(step) + ": " +
                          error.message());
}

}  // namespace

struct KubeClient::Transport {
  ServerAddress server;
  std::optional<ProxyAddress> proxy;
  ssl::context tls{ssl::context::tls_client};
};

// One connection: its own io_context (a request runs on the calling
// thread, bounded by its deadline; no thread of the client's own), the TLS
// stream over TCP, and the read buffer.
struct KubeClient::Connection {
  explicit Connection(ssl::context& tls) : stream(io, tls) {}

  // Runs the operation `start` begins until it completes or `deadline`
  // passes; then `cancel` runs (by default the socket is closed), the
  // operation ends aborted and `timed_out` is set.
  template <typename Start, typename Cancel>
  beast::error_code Run(SteadyClock::time_point deadline, bool& timed_out,
                        Start start, Cancel cancel) {
    beast::error_code result = asio::error::would_block;
    io.restart();
    start([&result](beast::error_code error, auto&&...) { result = error; });
    io.run_until(deadline);
    if (!io.stopped()) {
      timed_out = true;
      cancel();
      io.run();
    }
    return result;
  }
  template <typename Start>
  beast::error_code Run(SteadyClock::time_point deadline, bool& timed_out,
                        Start start) {
    return Run(deadline, timed_out, std::move(start), [this] {
      beast::error_code ignored;
      stream.next_layer().close(ignored);
    });
  }

  // TCP to the server (or to the proxy, then CONNECT through it), then
  // TLS with the server's name or address verified.
  Status Open(const Transport& t, SteadyClock::time_point deadline,
              bool& timed_out, const std::string& what, const Options& options);

  asio::io_context io{1};
  beast::ssl_stream<tcp::socket> stream;
  beast::flat_buffer buffer;
  // The client's generation the request using it started under: a close
  // Cancel() posted for an earlier request does nothing to a later one.
  uint64_t generation = 0;
};

KubeClient::KubeClient(KubeConfig config, Options options,
                       std::unique_ptr<Transport> transport)
    : config_(std::move(config)),
      options_(options),
      transport_(std::move(transport)) {}

KubeClient::~KubeClient() = default;

std::unique_ptr<KubeClient::Connection> KubeClient::TakeIdle() {
  MutexLock lock(mu_);
  if (idle_.empty()) return nullptr;
  std::unique_ptr<Connection> connection = std::move(idle_.back());
  idle_.pop_back();
  return connection;
}

void KubeClient::CloseIdle(size_t keep) {
  std::vector<std::unique_ptr<Connection>> closing;
  {
    MutexLock lock(mu_);
    while (idle_.size() > keep) {
      closing.push_back(std::move(idle_.back()));
      idle_.pop_back();
    }
  }
  // Closed outside the lock (a TLS shutdown may write).
}

void KubeClient::Cancel() {
  {
    MutexLock lock(mu_);
    const uint64_t cancelled = generation_++;
    // Each busy connection is closed on the thread running its request
    // (asio's post is thread-safe; the socket is not).
    for (Connection* connection : busy_) {
      asio::post(connection->io, [connection, cancelled] {
        if (connection->generation != cancelled) return;
        beast::error_code ignored;
        connection->stream.next_layer().close(ignored);
      });
    }
  }
  cancelled_.notify_all();
}

bool KubeClient::CancelledSince(uint64_t generation) {
  MutexLock lock(mu_);
  return generation_ != generation;
}

void KubeClient::GiveBack(std::unique_ptr<Connection> connection) {
  connection->buffer.shrink_to_fit();
  MutexLock lock(mu_);
  if (idle_.size() < kMaxIdle) idle_.push_back(std::move(connection));
}

StatusOr<std::unique_ptr<KubeClient>> KubeClient::Create(KubeConfig config,
                                                         Options options) {
  auto server = ParseServerUrl(config.server);
  if (!server.ok()) return server.status();
  if (options.attempts < 1 || options.timeout.count() <= 0) {
    return InvalidArgumentError("a client needs one attempt and a timeout");
  }
  auto token = BearerToken(config.token, "the token of " + config.source);
  if (!token.ok()) return token.status();
  config.token = std::move(*token);
  auto proxy = ProxyFromEnvironment(*server);
  if (!proxy.ok()) return proxy.status();
  auto transport = std::make_unique<Transport>();
  transport->server = std::move(*server);
  transport->proxy = std::move(*proxy);
  const std::string what =
      "the API server's credentials (" + config.source + ")";
  try {
    ssl::context& tls = transport->tls;
    SSL_CTX_set_min_proto_version(tls.native_handle(), TLS1_2_VERSION);
    // Idle connections give their TLS buffers back; a new connection
    // starts a new session (a resumed one is refused by servers that
    // verify client certificates without a session context).
    SSL_CTX_set_mode(tls.native_handle(), SSL_MODE_RELEASE_BUFFERS);
    SSL_CTX_set_session_cache_mode(tls.native_handle(), SSL_SESS_CACHE_OFF);
    tls.set_verify_mode(ssl::verify_peer);
    if (config.ca_pem.empty()) {
      tls.set_default_verify_paths();
    } else {
      tls.add_certificate_authority(asio::buffer(config.ca_pem));
    }
    if (!config.client_certificate_pem.empty()) {
      tls.use_certificate_chain(asio::buffer(config.client_certificate_pem));
      tls.use_private_key(asio::buffer(config.client_key_pem),
                          ssl::context::pem);
    }
  } catch (const boost::system::system_error& e) {
    return InvalidArgumentError(what + ": " + e.code().message());
  }
  return std::unique_ptr<KubeClient>(
      new KubeClient(std::move(config), options, std::move(transport)));
}

StatusOr<HttpResponse> KubeClient::Once(
    std::string_view method, std::string_view path, std::string_view body,
    std::string_view accept, uint64_t generation, const Options& options) {
  const Transport& t = *transport_;
  const std::string what =
      std::string(method) + " " + config_.server + std::string(path);
  const SteadyClock::time_point deadline = SteadyClock::now() + options.timeout;
  bool timed_out = false;

  http::request<http::string_body> request;
  const beast::string_view verb_text(method.data(), method.size());
  const http::verb verb = http::string_to_verb(verb_text);
  if (verb == http::verb::unknown) {
    request.method_string(verb_text);
  } else {
    request.method(verb);
  }
  request.target(t.server.path + std::string(path));
  request.version(11);
  request.set(http::field::host, Authority(t.server.host, t.server.port));
  request.set(http::field::user_agent, "libtopology-draplugin");
  request.set(http::field::accept,
              accept.empty()
                  ? beast::string_view("application/json")
                  : beast::string_view(accept.data(), accept.size()));
  std::string token = config_.token;
  if (!config_.token_file.empty()) {
    // Projected tokens rotate: read at every request.
    auto read = files::ReadMountedFile(config_.token_file, size_t{1} << 20);
    if (!read.ok()) {
      return UnavailableError("token " + config_.token_file.string() + ": " +
                              read.status().message());
    }
    auto checked =
        BearerToken(*read, "token file " + config_.token_file.string());
    if (!checked.ok()) return UnavailableError(checked.status().message());
    token = std::move(*checked);
  }
  if (!token.empty()) {
    request.set(http::field::authorization, "Bearer " + token);
  }
  if (!body.empty()) {
    request.set(http::field::content_type, "application/json");
    request.body() = std::string(body);
  }
  request.keep_alive(true);
  request.prepare_payload();

  std::unique_ptr<Connection> c = TakeIdle();
  bool reused = c != nullptr;
  // While a connection serves this request, Cancel() may close it.
  Connection* busy = nullptr;
  const auto release = [&] {
    if (busy == nullptr) return;
    MutexLock lock(mu_);
    busy_.erase(busy);
    busy = nullptr;
  };
  const auto hold = [&](Connection* connection) -> bool {
    MutexLock lock(mu_);
    if (generation_ != generation) return false;
    connection->generation = generation;
    busy_.insert(connection);
    busy = connection;
    return true;
  };
  struct Release {
    decltype(release)& run;
    ~Release() { run(); }
  } released{release};
  for (;;) {
    if (c == nullptr) c = std::make_unique<Connection>(transport_->tls);
    if (busy != c.get()) {
      release();
      if (!hold(c.get())) return CancelledError(what + ": cancelled");
    }
    if (!c->stream.next_layer().is_open()) {
      if (Status opened = c->Open(t, deadline, timed_out, what, options);
          !opened.ok()) {
        return opened;
      }
    }
    http::response_parser<http::string_body> parser;
    parser.body_limit(options.max_body);
    parser.header_limit(kMaxHeaderBytes);
    std::string_view step = "send";
    beast::error_code error = c->Run(deadline, timed_out, [&](auto done) {
      http::async_write(c->stream, request, std::move(done));
    });
    if (!error) {
      step = "answer";
      error = c->Run(deadline, timed_out, [&](auto done) {
        http::async_read(c->stream, c->buffer, parser, std::move(done));
      });
    }
    if (error && CancelledSince(generation)) {
      return CancelledError(what + ": cancelled");
    }
    if (error && reused && !timed_out && !parser.got_some()) {
      // The server closed the kept connection meanwhile: a new one.
      release();
      c.reset();
      reused = false;
      continue;
    }
    if (error) return Failure(what, step, error, timed_out, options);
    HttpResponse response;
    response.status = static_cast<long>(parser.get().result_int());
    const bool keep = parser.get().keep_alive();
    response.body = std::move(parser.get().body());
    release();
    if (keep) GiveBack(std::move(c));
    return response;
  }
}

Status KubeClient::Connection::Open(const Transport& t,
                                    SteadyClock::time_point deadline,
                                    bool& timed_out, const std::string& what,
                                    const Options& options) {
  const std::string& host = t.proxy ? t.proxy->host : t.server.host;
  const uint16_t port = t.proxy ? t.proxy->port : t.server.port;
  const std::string peer = (t.proxy ? "proxy " : "") + Authority(host, port);
  // Reaching the peer has its own, shorter bound: a dead address should
  // leave time for another attempt.
  const SteadyClock::time_point connect_by =
      std::min(deadline, SteadyClock::now() + kMaxConnect);
  beast::error_code error;
  boost::system::error_code not_an_address;
  const asio::ip::address address =
      asio::ip::make_address(host, not_an_address);
  if (!not_an_address) {
    // An address (the in-cluster service's, most kubeconfigs'): no name
    // to resolve, and no resolver thread for this connection.
    error = Run(connect_by, timed_out, [&](auto done) {
      stream.next_layer().async_connect(tcp::endpoint(address, port),
                                        std::move(done));
    });
  } else {
    tcp::resolver resolver(io);
    tcp::resolver::results_type endpoints;
    error = Run(
        connect_by, timed_out,
        [&](auto done) {
          resolver.async_resolve(
              host, std::to_string(port),
              [&endpoints, done = std::move(done)](
                  beast::error_code e, tcp::resolver::results_type r) mutable {
                endpoints = std::move(r);
                done(e);
              });
        },
        [&resolver] { resolver.cancel(); });
    if (!error) {
      error = Run(connect_by, timed_out, [&](auto done) {
        asio::async_connect(stream.next_layer(), endpoints, std::move(done));
      });
    }
  }
  if (!error) {
    // Requests go out whole at once (a header and a body in two writes
    // would wait on the server's delayed acknowledgement otherwise).
    stream.next_layer().set_option(tcp::no_delay(true), error);
  }
  if (timed_out && SteadyClock::now() < deadline) {
    timed_out = false;
    return UnavailableError(
        what + ": no connection to " + peer + " within " +
        std::to_string(
            std::chrono::duration_cast<std::chrono::milliseconds>(kMaxConnect)
                .count()) +
        " ms");
  }
  if (error)
    return Failure(what, "connect to " + peer, error, timed_out, options);

  if (t.proxy) {
    const std::string target = Authority(t.server.host, t.server.port);
    http::request<http::empty_body> connect{http::verb::connect, target, 11};
    connect.set(http::field::host, target);
    if (!t.proxy->authorization.empty()) {
      connect.set(http::field::proxy_authorization, t.proxy->authorization);
    }
    http::response_parser<http::empty_body> answer;
    answer.skip(true);  // a tunnel follows, no body
    beast::flat_buffer proxy_buffer;
    error = Run(deadline, timed_out, [&](auto done) {
      http::async_write(stream.next_layer(), connect, std::move(done));
    });
    if (!error) {
      error = Run(deadline, timed_out, [&](auto done) {
        http::async_read(stream.next_layer(), proxy_buffer, answer,
                         std::move(done));
      });
    }
    if (error)
      return Failure(what, "CONNECT through " + peer, error, timed_out,
                     options);
    if (answer.get().result_int() != 200 || proxy_buffer.size() != 0) {
      return UnavailableError(what + ": " + peer + " answered CONNECT " +
                              target + " with " +
                              std::to_string(answer.get().result_int()) + " " +
                              std::string(answer.get().reason()));
    }
  }

  SSL* tls = stream.native_handle();
  const std::string& name = t.server.host;
  if (IsIpAddress(name)) {
    X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(tls), name.c_str());
  } else {
    // SNI (SSL_set_tlsext_host_name, a macro with a C cast).
    SSL_ctrl(tls, SSL_CTRL_SET_TLSEXT_HOSTNAME, TLSEXT_NAMETYPE_host_name,
             const_cast<char*>(name.c_str()));
    SSL_set1_host(tls, name.c_str());
  }
  error = Run(deadline, timed_out, [&](auto done) {
    stream.async_handshake(ssl::stream_base::client, std::move(done));
  });
  if (error) {
    std::string step = "TLS handshake";
    if (const long verify = SSL_get_verify_result(tls); verify != X509_V_OK) {
      step += std::string(" (") + X509_verify_cert_error_string(verify) + ")";
    }
    return Failure(what, step, error, timed_out, options);
  }
  return OkStatus();
}

Status CheckRequestPath(std::string_view path) {
  const std::string_view route = path.substr(0, path.find('?'));
  const auto refuse = [&](std::string_view why) {
    return InvalidArgumentError("request path \"" +
                                std::string(route.substr(0, 256)) +
                                "\" refused: " + std::string(why));
  };
  if (!route.starts_with('/')) return refuse("not absolute");
  size_t start = 1;
  while (start <= route.size()) {
    const size_t end = std::min(route.find('/', start), route.size());
    const std::string_view segment = route.substr(start, end - start);
    if (segment.empty() && end != route.size()) {
      return refuse("an empty segment");
    }
    if (segment == "." || segment == "..") {
      return refuse("a \".\" or \"..\" segment");
    }
    for (const char c : segment) {
      const bool allowed = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                           (c >= '0' && c <= '9') || c == '-' || c == '.' ||
                           c == '_' || c == '~' || c == ':';
      if (!allowed) return refuse("a character outside a name");
    }
    start = end + 1;
  }
  return OkStatus();
}

StatusOr<HttpResponse> KubeClient::Request(std::string_view method,
                                           std::string_view path,
                                           std::string_view body,
                                           std::string_view accept) {
  return Request(method, path, body, accept, Limits{});
}

StatusOr<HttpResponse> KubeClient::Request(std::string_view method,
                                           std::string_view path,
                                           std::string_view body,
                                           std::string_view accept,
                                           const Limits& limits) {
  // Names that reach a path come from outside (the server's own answers
  // included): a path that could name another object is never sent.
  if (Status checked = CheckRequestPath(path); !checked.ok()) return checked;
  Options options = options_;
  if (limits.timeout.count() > 0) {
    options.timeout = std::min(options.timeout, limits.timeout);
  }
  if (limits.attempts > 0) {
    options.attempts = std::min(options.attempts, limits.attempts);
  }
  if (limits.max_body > 0) {
    options.max_body = std::min(options.max_body, limits.max_body);
  }
  auto backoff = options.backoff;
  uint64_t generation = 0;
  {
    MutexLock lock(mu_);
    generation = generation_;
  }
  StatusOr<HttpResponse> last = UnavailableError("not sent");
  for (int attempt = 0; attempt < options.attempts; ++attempt) {
    if (attempt > 0) {
      // The back-off, cut short by Cancel().
      const Clock& clock = *options.clock;
      const Clock::TimePoint until = clock.Now() + backoff;
      MutexLock lock(mu_);
      while (generation_ == generation && clock.Now() < until) {
        clock.WaitUntil(cancelled_, lock, until);
      }
      if (generation_ != generation) {
        return CancelledError(std::string(method) + " " + config_.server +
                              std::string(path) + ": cancelled");
      }
      backoff *= 2;
    }
    last = Once(method, path, body, accept, generation, options);
    if (!last.ok() && last.status().code() == StatusCode::kCancelled) {
      return last;
    }
    if (!last.ok()) {
      const StatusCode code = last.status().code();
      if (code == StatusCode::kUnavailable ||
          code == StatusCode::kDeadlineExceeded) {
        continue;
      }
      return last;
    }
    if (last->status == 429 || last->status >= 500) continue;
    return last;
  }
  return last;
}

Status StatusOf(const HttpResponse& response, std::string_view what,
                bool create) {
  const long code = response.status;
  if (code >= 200 && code < 300) return OkStatus();
  const std::string message = std::string(what) + ": HTTP " +
                              std::to_string(code) + ": " +
                              ServerMessage(response.body);
  switch (code) {
    case 404:
      return NotFoundError(message);
    case 409:
      return create ? Status(StatusCode::kAlreadyExists, message)
                    : Status(StatusCode::kAborted, message);
    case 400:
    case 422:
      return InvalidArgumentError(message);
    case 401:
    case 403:
      return Status(StatusCode::kPermissionDenied, message);
    default:
      break;
  }
  if (code == 429 || code >= 500) return UnavailableError(message);
  return Status(StatusCode::kUnknown, message);
}

StatusOr<Claim> ParseResourceClaim(std::string_view text, const ClaimRef& ref,
                                   const std::string& driver) {
  // Nesting is bounded while parsing: a hostile answer nested 100,000
  // deep would overflow the stack in any copy of it.
  const json doc = json_fields::ParseBounded(text, kMaxAnswerDepth);
  if (!doc.is_object()) {
    return InvalidArgumentError(
        "the ResourceClaim is not a JSON object (or is nested more than " +
        std::to_string(kMaxAnswerDepth) + " deep)");
  }
  try {
    const json& metadata = doc.at("metadata");
    const std::string uid = metadata.value("uid", std::string());
    if (uid != ref.uid) {
      return FailedPreconditionError("UID " + ref.uid +
                                     " differs from the object's (" + uid +
                                     "): the claim was replaced");
    }
    const auto status = doc.find("status");
    if (status == doc.end() || !status->is_object() ||
        !status->contains("allocation") ||
        !(*status)["allocation"].is_object()) {
      return FailedPreconditionError("the claim is not allocated");
    }
    const json& allocation = (*status)["allocation"];
    Claim claim;
    claim.ref = ref;
    if (const auto annotations = metadata.find("annotations");
        annotations != metadata.end() && annotations->is_object()) {
      const auto name =
          annotations->find("resource.kubernetes.io/pod-claim-name");
      if (name != annotations->end() && name->is_string()) {
        claim.pod_claim_name = name->get<std::string>();
      }
    }
    const json devices = allocation.value("devices", json::object());
    const json results = devices.value("results", json::array());
    // The API's bound: no allocation the server stored holds more.
    if (results.is_array() && results.size() > kAllocationResultsMaxSize) {
      return FailedPreconditionError("the allocation holds " +
                                     std::to_string(results.size()) +
                                     " results; the API allows at most " +
                                     std::to_string(kAllocationResultsMaxSize) +
                                     " (AllocationResultsMaxSize)");
    }
    for (const json& result : results) {
      if (!result.is_object() ||
          result.value("driver", std::string()) != driver) {
        continue;
      }
      const auto admin = result.find("adminAccess");
      AllocationResult out{
          result.value("request", std::string()), driver,
          result.value("pool", std::string()),
          result.value("device", std::string()),
          admin != result.end() && admin->is_boolean() && admin->get<bool>()};
      if (const auto share = result.find("shareID");
          share != result.end() && !share->is_null()) {
        if (!share->is_string() || !k8s::IsUid(share->get<std::string>())) {
          return FailedPreconditionError(
              "device " + out.device +
              ": shareID is not a UID (letters, digits and '-', at most 128)");
        }
        out.share_id = share->get<std::string>();
      }
      if (const auto consumed = result.find("consumedCapacity");
          consumed != result.end() && !consumed->is_null()) {
        if (!consumed->is_object()) {
          return FailedPreconditionError("device " + out.device +
                                         ": consumedCapacity is not a map");
        }
        for (const auto& [name, value] : consumed->items()) {
          if (!value.is_string() ||
              !k8s::Quantity::Parse(value.get<std::string>())) {
            return FailedPreconditionError(
                "device " + out.device + ": consumedCapacity[" +
                name.substr(0, 80) + "] is not a quantity");
          }
          out.consumed_capacity[name] = value.get<std::string>();
        }
      }
      claim.results.push_back(std::move(out));
    }
    if (claim.results.empty()) {
      return FailedPreconditionError("nothing of the claim is allocated by " +
                                     driver);
    }
    const json configs = devices.value("config", json::array());
    for (size_t i = 0; configs.is_array() && i < configs.size(); ++i) {
      const json& config = configs[i];
      if (!config.is_object()) continue;
      const json opaque = config.value("opaque", json::object());
      if (!opaque.is_object() ||
          opaque.value("driver", std::string()) != driver) {
        continue;
      }
      OpaqueConfig out;
      out.source = config.value("source", std::string());
      if (const auto requests = config.find("requests");
          requests != config.end() && !requests->is_null()) {
        out.requests = json_fields::AsStringList(
            *requests, "config[" + std::to_string(i) + "].requests");
      }
      out.parameters =
          opaque.value("parameters", json::object())
              .dump(-1, ' ', false, json::error_handler_t::replace);
      claim.configs.push_back(std::move(out));
    }
    return claim;
  } catch (const std::exception& e) {
    return InvalidArgumentError(std::string("not a ResourceClaim: ") +
                                e.what());
  }
}

void ApiClaimSource::Cancel() { client_->Cancel(); }

StatusOr<Claim> ApiClaimSource::Get(const ClaimRef& ref,
                                    const std::string& driver) {
  // Names go into the path: only what the API allows.
  if (!k8s::IsDns1123Label(ref.ns) || !k8s::IsDns1123Subdomain(ref.name)) {
    return InvalidArgumentError("\"" + ref.ns + "/" + ref.name +
                                "\" is not a namespace and claim name");
  }
  const std::string path = "/apis/resource.k8s.io/v1/namespaces/" + ref.ns +
                           "/resourceclaims/" + ref.name;
  // A claim is one object: an answer larger than the API server stores
  // one is refused before it is held in memory.
  auto response =
      client_->Request("GET", path, {}, {}, {.max_body = kMaxObjectBytes});
  if (!response.ok()) return response.status();
  if (Status status =
          StatusOf(*response, "GET resourceclaim " + ref.ns + "/" + ref.name);
      !status.ok()) {
    return status;
  }
  return ParseResourceClaim(response->body, ref, driver);
}

}  // namespace topology::draplugin
