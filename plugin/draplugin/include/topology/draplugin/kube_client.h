// A small Kubernetes API client: HTTPS + JSON over libcurl, with the
// credentials of a KubeConfig, a deadline on every request and retries
// with back-off where the API server asks for them (connection errors,
// timeouts, 429, 5xx). And the one read a DRA driver needs at Prepare:
// ApiClaimSource, the ClaimSource on `GET resourceclaims`.
#ifndef TOPOLOGY_DRAPLUGIN_KUBE_CLIENT_H_
#define TOPOLOGY_DRAPLUGIN_KUBE_CLIENT_H_

#include <chrono>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "topology/draplugin/driver.h"
#include "topology/draplugin/kube_config.h"
#include "topology/status.h"
#include "topology/thread_annotations.h"

namespace topology::draplugin {

struct HttpResponse {
  long status = 0;  // HTTP status code
  std::string body = {};
};

class KubeClient {
 public:
  struct Options {
    std::chrono::milliseconds timeout = std::chrono::seconds(10);
    int attempts = 4;  // one request and at most three retries
    std::chrono::milliseconds backoff = std::chrono::milliseconds(200);
    size_t max_body = size_t{64} << 20;  // a larger answer is an error
  };

  static StatusOr<std::unique_ptr<KubeClient>> Create(KubeConfig config,
                                                      Options options);
  static StatusOr<std::unique_ptr<KubeClient>> Create(KubeConfig config) {
    return Create(std::move(config), Options());
  }
  ~KubeClient();
  KubeClient(const KubeClient&) = delete;
  KubeClient& operator=(const KubeClient&) = delete;

  // One request (`path` from the server's root, e.g. "/apis/..."); `body`
  // is sent as JSON when not empty. Retried, the back-off doubling, on a
  // connection error, a timeout, 429 and 5xx; the last answer otherwise.
  // UNAVAILABLE when no answer came; DEADLINE_EXCEEDED on a timeout.
  // `accept` replaces "application/json" as the Accept header (e.g. a
  // metadata-only list). Thread-safe.
  StatusOr<HttpResponse> Request(std::string_view method, std::string_view path,
                                 std::string_view body = {},
                                 std::string_view accept = {});

  const KubeConfig& config() const { return config_; }

 private:
  KubeClient(KubeConfig config, Options options);
  StatusOr<HttpResponse> Once(std::string_view method, std::string_view path,
                              std::string_view body, std::string_view accept);
  // Handles kept between requests keep their connection (and TLS session)
  // to the API server: an idle driver's resyncs cost no handshake.
  void* TakeHandle() TOPOLOGY_EXCLUDES(mu_);
  void GiveBack(void* handle) TOPOLOGY_EXCLUDES(mu_);

  const KubeConfig config_;
  const Options options_;
  Mutex mu_;
  std::vector<void*> idle_ TOPOLOGY_GUARDED_BY(mu_);  // CURL*
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

 private:
  KubeClient* const client_;
};

}  // namespace topology::draplugin

#endif  // TOPOLOGY_DRAPLUGIN_KUBE_CLIENT_H_
