#include "topology/draplugin/kube_client.h"

#include <algorithm>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <utility>

#include <curl/curl.h>

#include <nlohmann/json.hpp>

#include "deviceplugin/v1beta1/kubelet_api.h"
#include "safe_file.h"

namespace topology::draplugin {
namespace {

using nlohmann::json;

struct Body {
  std::string text;
  size_t limit = 0;
  bool too_large = false;
};

size_t Collect(char* data, size_t size, size_t count, void* user) {
  auto* body = static_cast<Body*>(user);
  const size_t bytes = size * count;
  if (body->text.size() + bytes > body->limit) {
    body->too_large = true;
    return 0;  // ends the transfer (CURLE_WRITE_ERROR)
  }
  body->text.append(data, bytes);
  return bytes;
}

struct SlistDeleter {
  void operator()(curl_slist* list) const { curl_slist_free_all(list); }
};

void GlobalInit() {
  static std::once_flag once;
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

// The server's own explanation, when the body is a metav1.Status.
std::string ServerMessage(const std::string& body) {
  const json doc = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (doc.is_object()) {
    const auto it = doc.find("message");
    if (it != doc.end() && it->is_string()) return it->get<std::string>();
  }
  return body.substr(0, 256);
}

}  // namespace

KubeClient::KubeClient(KubeConfig config, Options options)
    : config_(std::move(config)), options_(options) {}

KubeClient::~KubeClient() {
  MutexLock lock(mu_);
  for (void* handle : idle_) curl_easy_cleanup(static_cast<CURL*>(handle));
}

void* KubeClient::TakeHandle() {
  {
    MutexLock lock(mu_);
    if (!idle_.empty()) {
      void* handle = idle_.back();
      idle_.pop_back();
      return handle;
    }
  }
  return curl_easy_init();
}

void KubeClient::GiveBack(void* handle) {
  constexpr size_t kMaxIdle = 4;
  auto* curl = static_cast<CURL*>(handle);
  curl_easy_reset(curl);  // options gone; connection and TLS session kept
  {
    MutexLock lock(mu_);
    if (idle_.size() < kMaxIdle) {
      idle_.push_back(curl);
      return;
    }
  }
  curl_easy_cleanup(curl);
}

StatusOr<std::unique_ptr<KubeClient>> KubeClient::Create(KubeConfig config,
                                                         Options options) {
  if (!config.server.starts_with("https://")) {
    return InvalidArgumentError("the API server " + config.server +
                                " is not an https:// URL");
  }
  if (options.attempts < 1 || options.timeout.count() <= 0) {
    return InvalidArgumentError("a client needs one attempt and a timeout");
  }
  GlobalInit();
  return std::unique_ptr<KubeClient>(
      new KubeClient(std::move(config), options));
}

StatusOr<HttpResponse> KubeClient::Once(std::string_view method,
                                        std::string_view path,
                                        std::string_view body,
                                        std::string_view accept) {
  CURL* c = static_cast<CURL*>(TakeHandle());
  if (c == nullptr) return InternalError("cannot make an HTTP client");
  // Back to the pool however this returns.
  const std::unique_ptr<CURL, std::function<void(CURL*)>> curl(
      c, [this](CURL* handle) { GiveBack(handle); });
  const std::string url = config_.server + std::string(path);
  const std::string verb(method);
  char error[CURL_ERROR_SIZE] = {};
  Body answer;
  answer.limit = options_.max_body;
  curl_easy_setopt(c, CURLOPT_URL, url.c_str());
  curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "https");
  curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 0L);
  curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(c, CURLOPT_ERRORBUFFER, error);
  curl_easy_setopt(c, CURLOPT_TIMEOUT_MS,
                   static_cast<long>(options_.timeout.count()));
  curl_easy_setopt(
      c, CURLOPT_CONNECTTIMEOUT_MS,
      static_cast<long>(std::min<int64_t>(options_.timeout.count(), 5000)));
  curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, verb.c_str());
  // A kept connection is reused; a new one starts a new TLS session (a
  // resumed one is refused by servers that verify client certificates
  // without a session context, and gains little here).
  curl_easy_setopt(c, CURLOPT_SSL_SESSIONID_CACHE, 0L);
  if (!body.empty()) {
    curl_easy_setopt(c, CURLOPT_POSTFIELDS, body.data());
    curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE,
                     static_cast<curl_off_t>(body.size()));
  }
  curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, &Collect);
  curl_easy_setopt(c, CURLOPT_WRITEDATA, &answer);
  std::unique_ptr<curl_slist, SlistDeleter> headers;
  const auto add = [&](const std::string& header) {
    headers.reset(curl_slist_append(headers.release(), header.c_str()));
  };
  add("Accept: " +
      (accept.empty() ? std::string("application/json") : std::string(accept)));
  if (!body.empty()) add("Content-Type: application/json");
  std::string token = config_.token;
  if (!config_.token_file.empty()) {
    // Projected tokens rotate: read at every request.
    auto read = files::ReadRegularFile(config_.token_file, size_t{1} << 20);
    if (!read.ok()) {
      return UnavailableError("token " + config_.token_file.string() + ": " +
                              read.status().message());
    }
    token = std::move(*read);
    while (!token.empty() && (token.back() == '\n' || token.back() == '\r')) {
      token.pop_back();
    }
  }
  if (!token.empty()) add("Authorization: Bearer " + token);
  curl_easy_setopt(c, CURLOPT_HTTPHEADER, headers.get());
  if (!config_.ca_pem.empty()) {
    curl_blob ca{const_cast<char*>(config_.ca_pem.data()),
                 config_.ca_pem.size(), CURL_BLOB_COPY};
    curl_easy_setopt(c, CURLOPT_CAINFO_BLOB, &ca);
  }
  if (!config_.client_certificate_pem.empty()) {
    curl_blob cert{const_cast<char*>(config_.client_certificate_pem.data()),
                   config_.client_certificate_pem.size(), CURL_BLOB_COPY};
    curl_blob key{const_cast<char*>(config_.client_key_pem.data()),
                  config_.client_key_pem.size(), CURL_BLOB_COPY};
    curl_easy_setopt(c, CURLOPT_SSLCERT_BLOB, &cert);
    curl_easy_setopt(c, CURLOPT_SSLCERTTYPE, "PEM");
    curl_easy_setopt(c, CURLOPT_SSLKEY_BLOB, &key);
    curl_easy_setopt(c, CURLOPT_SSLKEYTYPE, "PEM");
  }
  const CURLcode code = curl_easy_perform(c);
  const std::string what = verb + " " + url;
  if (answer.too_large) {
    return ResourceExhaustedError(what + ": the answer is larger than " +
                                  std::to_string(options_.max_body) + " bytes");
  }
  if (code == CURLE_OPERATION_TIMEDOUT) {
    return DeadlineExceededError(what + ": no answer within " +
                                 std::to_string(options_.timeout.count()) +
                                 " ms");
  }
  if (code != CURLE_OK) {
    return UnavailableError(
        what + ": " +
        (error[0] != '\0' ? std::string(error) : curl_easy_strerror(code)));
  }
  HttpResponse response;
  curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &response.status);
  response.body = std::move(answer.text);
  return response;
}

StatusOr<HttpResponse> KubeClient::Request(std::string_view method,
                                           std::string_view path,
                                           std::string_view body,
                                           std::string_view accept) {
  auto backoff = options_.backoff;
  StatusOr<HttpResponse> last = UnavailableError("not sent");
  for (int attempt = 0; attempt < options_.attempts; ++attempt) {
    if (attempt > 0) {
      std::this_thread::sleep_for(backoff);
      backoff *= 2;
    }
    last = Once(method, path, body, accept);
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
  const json doc = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!doc.is_object()) {
    return InvalidArgumentError("the ResourceClaim is not a JSON object");
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
    const json devices = allocation.value("devices", json::object());
    for (const json& result : devices.value("results", json::array())) {
      if (!result.is_object() ||
          result.value("driver", std::string()) != driver) {
        continue;
      }
      claim.results.push_back({result.value("request", std::string()), driver,
                               result.value("pool", std::string()),
                               result.value("device", std::string())});
    }
    if (claim.results.empty()) {
      return FailedPreconditionError("nothing of the claim is allocated by " +
                                     driver);
    }
    for (const json& config : devices.value("config", json::array())) {
      if (!config.is_object()) continue;
      const json opaque = config.value("opaque", json::object());
      if (!opaque.is_object() ||
          opaque.value("driver", std::string()) != driver) {
        continue;
      }
      claim.configs.push_back(
          opaque.value("parameters", json::object())
              .dump(-1, ' ', false, json::error_handler_t::replace));
    }
    return claim;
  } catch (const std::exception& e) {
    return InvalidArgumentError(std::string("not a ResourceClaim: ") +
                                e.what());
  }
}

StatusOr<Claim> ApiClaimSource::Get(const ClaimRef& ref,
                                    const std::string& driver) {
  // Names go into the path: only what the API allows.
  if (!kubelet::IsDnsSubdomain(ref.ns) || !kubelet::IsDnsSubdomain(ref.name)) {
    return InvalidArgumentError("\"" + ref.ns + "/" + ref.name +
                                "\" is not a namespace and claim name");
  }
  const std::string path = "/apis/resource.k8s.io/v1/namespaces/" + ref.ns +
                           "/resourceclaims/" + ref.name;
  auto response = client_->Request("GET", path);
  if (!response.ok()) return response.status();
  if (Status status =
          StatusOf(*response, "GET resourceclaim " + ref.ns + "/" + ref.name);
      !status.ok()) {
    return status;
  }
  return ParseResourceClaim(response->body, ref, driver);
}

}  // namespace topology::draplugin
