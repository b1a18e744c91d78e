// A small Kubernetes API client: HTTP/1.1 + JSON over TLS (Boost.Beast on
// OpenSSL), with the credentials of a KubeConfig, kept connections, an
// HTTP proxy from the environment as client-go takes it, a deadline on
// every request and retries with back-off where the API server asks for
// them (connection errors, timeouts, 429, 5xx). And the one read a DRA
// driver needs at Prepare: ApiClaimSource, the ClaimSource on
// `GET resourceclaims`.
#ifndef TOPOLOGY_DRAPLUGIN_KUBE_CLIENT_H_
#define TOPOLOGY_DRAPLUGIN_KUBE_CLIENT_H_

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "topology/clock.h"
#include "topology/draplugin/driver.h"
#include "topology/draplugin/kube_config.h"
#include "topology/status.h"
#include "topology/thread_annotations.h"

namespace topology::draplugin {

struct HttpResponse {
  long status = 0;  // HTTP status code
  std::string body = {};
};

// A request path as the client sends it: absolute, every segment of the
// route (before '?') a name's characters ([A-Za-z0-9-._~:]), none empty
// but a last one, none "." or "..". INVALID_ARGUMENT naming the path
// otherwise: a name from outside (a claim's, a slice's the server chose)
// can never make a path that names another object.
Status CheckRequestPath(std::string_view path);

// The largest answer that holds one object (etcd stores at most 1.5 MiB
// of one; a Node with its images list is far below).
inline constexpr size_t kMaxObjectBytes = size_t{4} << 20;

class KubeClient {
 public:
  struct Options {
    std::chrono::milliseconds timeout = std::chrono::seconds(10);
    int attempts = 4;  // one request and at most three retries
    std::chrono::milliseconds backoff = std::chrono::milliseconds(200);
    size_t max_body = size_t{64} << 20;  // a larger answer is an error
    // The back-off waits between attempts; not owned. Tests give a
    // FakeClock. (A request's own deadline is the socket's, real time.)
    const Clock* clock = &Clock::Real();
  };

  static StatusOr<std::unique_ptr<KubeClient>> Create(KubeConfig config,
                                                      Options options);
  static StatusOr<std::unique_ptr<KubeClient>> Create(KubeConfig config) {
    return Create(std::move(config), Options());
  }
  ~KubeClient();
  KubeClient(const KubeClient&) = delete;
  KubeClient& operator=(const KubeClient&) = delete;

  // One request (`path` from the API's root, e.g. "/apis/..."); `body`
  // is sent as JSON when not empty. Retried, the back-off doubling, on a
  // connection error, a timeout, 429 and 5xx; the last answer otherwise.
  // UNAVAILABLE when no answer came; DEADLINE_EXCEEDED on a timeout (the
  // deadline covers the connection, TLS handshake, request and answer).
  // A kept connection the server has closed meanwhile is replaced at once
  // (not an attempt).
  // `accept` replaces "application/json" as the Accept header (e.g. a
  // metadata-only list). A path CheckRequestPath refuses is never sent
  // (INVALID_ARGUMENT). Thread-safe.
  StatusOr<HttpResponse> Request(std::string_view method, std::string_view path,
                                 std::string_view body = {},
                                 std::string_view accept = {});
  // The client's Options narrowed for one request; zero keeps the
  // client's. An answer no larger than an object of its kind can be (a
  // Node, a claim), and a lookup that must not hold up what follows it.
  struct Limits {
    std::chrono::milliseconds timeout{0};
    int attempts = 0;
    size_t max_body = 0;
  };
  StatusOr<HttpResponse> Request(std::string_view method, std::string_view path,
                                 std::string_view body, std::string_view accept,
                                 const Limits& limits);

  // Closes kept connections beyond `keep` (after a burst of requests in
  // parallel, an idle driver keeps one). Thread-safe.
  void CloseIdle(size_t keep) TOPOLOGY_EXCLUDES(mu_);

  // Ends the requests under way at once, with CANCELLED: one waiting for
  // an answer (its connection is closed), one waiting to retry. Requests
  // made after it are sent as usual. For a daemon's stop, so that it keeps
  // its deadline whatever the API server does. Thread-safe.
  void Cancel() TOPOLOGY_EXCLUDES(mu_);

  const KubeConfig& config() const { return config_; }

 private:
  struct Transport;   // the server, the proxy and the TLS context
  struct Connection;  // one TLS connection to the server
  KubeClient(KubeConfig config, Options options,
             std::unique_ptr<Transport> transport);
  StatusOr<HttpResponse> Once(std::string_view method, std::string_view path,
                              std::string_view body, std::string_view accept,
                              uint64_t generation, const Options& options);
  // Connections kept between requests (at most a few): an idle driver's
  // resyncs cost no handshake.
  std::unique_ptr<Connection> TakeIdle() TOPOLOGY_EXCLUDES(mu_);
  void GiveBack(std::unique_ptr<Connection> connection) TOPOLOGY_EXCLUDES(mu_);

  // The requests since `generation` was read have been cancelled.
  bool CancelledSince(uint64_t generation) TOPOLOGY_EXCLUDES(mu_);

  const KubeConfig config_;
  const Options options_;
  const std::unique_ptr<Transport> transport_;
  Mutex mu_;
  std::vector<std::unique_ptr<Connection>> idle_ TOPOLOGY_GUARDED_BY(mu_);
  // Cancel() moves it on; a request remembers the one it started under.
  uint64_t generation_ TOPOLOGY_GUARDED_BY(mu_) = 0;
  // Connections a request is using, for Cancel() to close.
  std::set<Connection*> busy_ TOPOLOGY_GUARDED_BY(mu_);
  // Back-off waits end early on Cancel().
  std::condition_variable_any cancelled_;
};

// What an answer means: OK for 2xx; NOT_FOUND (404), ALREADY_EXISTS (409
// on a create) or ABORTED (409: a conflict, read again), INVALID_ARGUMENT
// (400, 422), PERMISSION_DENIED (401, 403), UNAVAILABLE (429, 5xx),
// UNKNOWN otherwise; the message names `what` and gives the server's
// Status message when the body is one.
Status StatusOf(const HttpResponse& response, std::string_view what,
                bool create = false);

// A resource.k8s.io/v1 ResourceClaim (JSON) as a Claim of `driver`:
// FAILED_PRECONDITION when its UID is not `ref`'s, it is not allocated, or
// nothing of it is allocated by `driver`; INVALID_ARGUMENT when it is not
// a ResourceClaim. Never throws.
StatusOr<Claim> ParseResourceClaim(std::string_view json, const ClaimRef& ref,
                                   const std::string& driver);

// Claims from the API server:
// GET /apis/resource.k8s.io/v1/namespaces/{ns}/resourceclaims/{name}.
class ApiClaimSource : public ClaimSource {
 public:
  // `client` is not owned and must outlive the source.
  explicit ApiClaimSource(KubeClient* client) : client_(client) {}
  StatusOr<Claim> Get(const ClaimRef& ref, const std::string& driver) override;
  // Cancels the client's requests under way (KubeClient::Cancel: the
  // client's other users' too).
  void Cancel() override;

 private:
  KubeClient* const client_;
};

}  // namespace topology::draplugin

#endif  // TOPOLOGY_DRAPLUGIN_KUBE_CLIENT_H_
