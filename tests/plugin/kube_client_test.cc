// The Kubernetes API client of the DRA framework: kubeconfig and in-cluster
// credentials, requests over real TLS to an in-process server (tokens,
// client certificates, a wrong CA or name, kept connections, a proxy,
// retries, timeouts, limits), the
// ResourceClaim reader and the ClaimSource on the API.
#include "topology/draplugin/kube_client.h"

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <future>
#include <mutex>
#include <string>
#include <thread>

#include <stdlib.h>

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "topology/draplugin/kube_config.h"
#include "topology/testing/fake_clock.h"

#include "fake_api_server.h"
#include "status_matchers.h"
#include "temp_dir.h"
#include "wait_for.h"

namespace topology::draplugin {
namespace {

using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::SizeIs;
using ::topology::testing::FakeApiServer;
using ::topology::testing::IsOk;
using ::topology::testing::StatusIs;
using namespace std::chrono_literals;
namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = boost::beast::http;
using tcp = boost::asio::ip::tcp;

constexpr char kDriver[] = "pci.libtopology.dev";

void Write(const std::filesystem::path& path, const std::string& text) {
  std::filesystem::create_directories(path.parent_path());
  std::ofstream(path) << text;
}

// --- kubeconfig
// ---------------------------------------------------------------

constexpr char kTokenConfig[] = R"(apiVersion: v1
kind: Config
current-context: node
clusters:
- name: local
  cluster:
    server: https://127.0.0.1:16443/
    certificate-authority-data: LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCg==
contexts:
- name: node
  context: {cluster: local, user: driver}
users:
- name: driver
  user: {token: abc123}
)";

TEST(KubeConfigTest, TokenUserWithCaData) {
  auto config = ParseKubeConfig(kTokenConfig, "/etc", "kubeconfig test");
  ASSERT_THAT(config.status(), IsOk());
  EXPECT_EQ(config->server, "https://127.0.0.1:16443");
  EXPECT_EQ(config->ca_pem, "-----BEGIN CERTIFICATE-----\n");
  EXPECT_EQ(config->token, "abc123");
  EXPECT_EQ(config->source, "kubeconfig test, context node");
}

TEST(KubeConfigTest, FilesAreReadBesideTheKubeconfig) {
  ::topology::testing::TempDir dir;
  Write(dir.path() / "pki" / "ca.crt", "CA");
  Write(dir.path() / "pki" / "client.crt", "CERT");
  Write(dir.path() / "pki" / "client.key", "KEY");
  Write(dir.path() / "token", "tok\n");
  Write(dir.path() / "kubeconfig", R"(current-context: c
clusters: [{name: k, cluster: {server: "https://api:6443", certificate-authority: pki/ca.crt}}]
contexts: [{name: c, context: {cluster: k, user: u}}]
users: [{name: u, user: {client-certificate: pki/client.crt, client-key: pki/client.key, tokenFile: token}}]
)");
  auto config = LoadKubeConfig(dir.path() / "kubeconfig");
  ASSERT_THAT(config.status(), IsOk());
  EXPECT_EQ(config->ca_pem, "CA");
  EXPECT_EQ(config->client_certificate_pem, "CERT");
  EXPECT_EQ(config->client_key_pem, "KEY");
  EXPECT_EQ(config->token_file, dir.path() / "token");
}

TEST(KubeConfigTest, WhatCannotBeUsedIsNamed) {
  const auto error = [](const std::string& yaml) {
    return ParseKubeConfig(yaml, "/", "kubeconfig k").status();
  };
  EXPECT_THAT(
      error("{"),
      StatusIs(StatusCode::kInvalidArgument,
               HasSubstr("kubeconfig k:1:1: end of map flow not found")));
  EXPECT_THAT(
      error("clusters: []\n"),
      StatusIs(StatusCode::kInvalidArgument, HasSubstr("no current-context")));
  std::string http = kTokenConfig;
  http.replace(http.find("https://"), 8, "http://");
  EXPECT_THAT(error(http), StatusIs(StatusCode::kInvalidArgument,
                                    HasSubstr("is not an https:// URL")));
  std::string exec = kTokenConfig;
  exec.replace(exec.find("{token: abc123}"), 15, "{exec: {command: x}}");
  EXPECT_THAT(error(exec), StatusIs(StatusCode::kInvalidArgument,
                                    HasSubstr("exec and auth-provider")));
  std::string insecure = kTokenConfig;
  insecure.replace(insecure.find("    certificate-authority-data"), 0,
                   "    insecure-skip-tls-verify: true\n");
  EXPECT_THAT(error(insecure), StatusIs(StatusCode::kInvalidArgument,
                                        HasSubstr("insecure-skip-tls-verify")));
  std::string bad64 = kTokenConfig;
  bad64.replace(bad64.find("LS0t"), 4, "L$0t");
  EXPECT_THAT(error(bad64),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("not base64")));
  std::string no_cluster = kTokenConfig;
  no_cluster.replace(no_cluster.find("cluster: local"), 14, "cluster: other");
  EXPECT_THAT(error(no_cluster),
              StatusIs(StatusCode::kInvalidArgument,
                       HasSubstr("cluster \"other\" of context \"node\"")));
  std::string half = kTokenConfig;
  half.replace(half.find("{token: abc123}"), 15,
               "{client-certificate-data: QQ==}");
  EXPECT_THAT(error(half), StatusIs(StatusCode::kInvalidArgument,
                                    HasSubstr("needs its key")));
}

TEST(KubeConfigTest, InClusterCredentials) {
  ::topology::testing::TempDir root;
  const auto dir = root.path() / "var/run/secrets/kubernetes.io/serviceaccount";
  Write(dir / "token", "t");
  Write(dir / "ca.crt", "CA");
  unsetenv("KUBERNETES_SERVICE_HOST");
  EXPECT_THAT(InClusterConfig(root.path()).status(),
              StatusIs(StatusCode::kFailedPrecondition,
                       HasSubstr("KUBERNETES_SERVICE_HOST")));
  setenv("KUBERNETES_SERVICE_HOST", "fd00::1", 1);
  setenv("KUBERNETES_SERVICE_PORT", "443", 1);
  auto config = InClusterConfig(root.path());
  unsetenv("KUBERNETES_SERVICE_HOST");
  unsetenv("KUBERNETES_SERVICE_PORT");
  ASSERT_THAT(config.status(), IsOk());
  EXPECT_EQ(config->server, "https://[fd00::1]:443");
  EXPECT_EQ(config->ca_pem, "CA");
  EXPECT_EQ(config->token_file, dir / "token");
}

// The service-account token and CA as the kubelet mounts them: links into
// a "..data" directory that it swaps atomically when the token rotates.
TEST(KubeConfigTest, InClusterCredentialsMountedAsLinksAreReadThroughThem) {
  ::topology::testing::TempDir root;
  const auto dir = root.path() / "var/run/secrets/kubernetes.io/serviceaccount";
  const auto first = dir / "..2026_11_27_22_00_00.000000001";
  Write(first / "token", "t1");
  Write(first / "ca.crt", "CA");
  std::filesystem::create_directory_symlink(first.filename(), dir / "..data");
  std::filesystem::create_symlink("..data/token", dir / "token");
  std::filesystem::create_symlink("..data/ca.crt", dir / "ca.crt");
  setenv("KUBERNETES_SERVICE_HOST", "10.0.0.1", 1);
  setenv("KUBERNETES_SERVICE_PORT", "443", 1);
  auto config = InClusterConfig(root.path());
  unsetenv("KUBERNETES_SERVICE_HOST");
  unsetenv("KUBERNETES_SERVICE_PORT");
  ASSERT_THAT(config.status(), IsOk());
  EXPECT_EQ(config->ca_pem, "CA");
  // A kubeconfig in a ConfigMap, its token file in a projected volume.
  const auto mount = root.path() / "kubeconfig";
  const auto data = mount / "..2026_11_27_22_00_00.000000002";
  Write(data / "config", std::string(kTokenConfig));
  std::filesystem::create_directory_symlink(data.filename(), mount / "..data");
  std::filesystem::create_symlink("..data/config", mount / "config");
  auto loaded = LoadKubeConfig(mount / "config");
  EXPECT_THAT(loaded.status(), IsOk());
}

TEST(KubeConfigTest, ATokenIsTrimmedAndOneThatCannotBeAHeaderIsRefused) {
  const auto trimmed = BearerToken(" \t tok en\r\n\n", "t");
  ASSERT_THAT(trimmed.status(), IsOk());
  EXPECT_EQ(*trimmed, "tok en");
  const auto blank = BearerToken("\n\r ", "t");
  ASSERT_THAT(blank.status(), IsOk());
  EXPECT_EQ(*blank, "");
  for (const std::string& token :
       {std::string("a\r\nX-Injected: 1"), std::string("a\nb"),
        std::string("a\0b", 3), std::string("a\x7f")}) {
    EXPECT_THAT(BearerToken(token, "where"),
                StatusIs(StatusCode::kInvalidArgument,
                         AllOf(HasSubstr("where: the token has a control "
                                         "character"),
                               HasSubstr("at byte 1"))))
        << token;
  }
  // Inline, from a token file, in-cluster: each names where it came from.
  std::string inline_token = kTokenConfig;
  inline_token.replace(inline_token.find("{token: abc123}"), 15,
                       "{token: \"abc\\r\\nX-Injected: 1\"}");
  EXPECT_THAT(ParseKubeConfig(inline_token, "/", "kubeconfig k").status(),
              StatusIs(StatusCode::kInvalidArgument,
                       HasSubstr("kubeconfig k: user \"driver\": the token has "
                                 "a control character (0x0d) at byte 3")));
  ::topology::testing::TempDir dir;
  Write(dir.path() / "token", "tok\nX-Injected: 1\n");
  std::string file_token = kTokenConfig;
  file_token.replace(file_token.find("{token: abc123}"), 15,
                     "{tokenFile: token}");
  EXPECT_THAT(
      ParseKubeConfig(file_token, dir.path(), "kubeconfig k").status(),
      StatusIs(StatusCode::kInvalidArgument,
               HasSubstr("tokenFile " + (dir.path() / "token").string() +
                         ": the token has a control character")));
  const auto sa = dir.path() / "var/run/secrets/kubernetes.io/serviceaccount";
  Write(sa / "token", "t\x01");
  Write(sa / "ca.crt", "CA");
  setenv("KUBERNETES_SERVICE_HOST", "10.0.0.1", 1);
  setenv("KUBERNETES_SERVICE_PORT", "443", 1);
  const Status in_cluster = InClusterConfig(dir.path()).status();
  unsetenv("KUBERNETES_SERVICE_HOST");
  unsetenv("KUBERNETES_SERVICE_PORT");
  EXPECT_THAT(in_cluster, StatusIs(StatusCode::kFailedPrecondition,
                                   HasSubstr("in-cluster token")));
}

// --- requests over TLS
// ----------------------------------------------------------

class KubeClientTest : public ::testing::Test {
 protected:
  void Serve(FakeApiServer::Handler handler, bool require_cert = false) {
    auto server = FakeApiServer::Start(dir_.path() / "pki", std::move(handler),
                                       require_cert);
    ASSERT_THAT(server.status(), IsOk());
    server_ = std::move(*server);
  }
  KubeConfig Config() const {
    KubeConfig config;
    config.server = server_->url();
    config.ca_pem = server_->ca_pem();
    config.token = "secret-token";
    return config;
  }
  std::unique_ptr<KubeClient> Client(KubeConfig config,
                                     KubeClient::Options options = {}) {
    options.backoff = 10ms;
    auto client = KubeClient::Create(std::move(config), options);
    EXPECT_THAT(client.status(), IsOk());
    return client.ok() ? std::move(*client) : nullptr;
  }

  ::topology::testing::TempDir dir_;
  std::unique_ptr<FakeApiServer> server_;
};

// Cancel() ends a request waiting for a server that does not answer at
// once, and one waiting to retry; a request after it is sent as usual.
TEST_F(KubeClientTest, CancelEndsTheRequestsUnderWayAndNotTheNextOnes) {
  std::atomic<bool> hang{true};
  Serve([&hang](const FakeApiServer::Request& request) {
    FakeApiServer::Answer answer{200, "{}"};
    if (hang.load() && request.target == "/slow") answer.delay = 30s;
    if (request.target == "/busy") answer.status = 503;
    return answer;
  });
  KubeClient::Options options;
  options.timeout = 60s;
  auto client = Client(Config(), options);
  auto slow = std::async(std::launch::async,
                         [&] { return client->Request("GET", "/slow"); });
  ASSERT_TRUE(
      testing::WaitFor([&] { return !server_->requests().empty(); }, 10s));
  const auto start = std::chrono::steady_clock::now();
  client->Cancel();
  EXPECT_THAT(slow.get().status(), StatusIs(StatusCode::kCancelled));
  EXPECT_LT(std::chrono::steady_clock::now() - start, 5s);

  // Waiting to retry after a 503, on a clock that does not move.
  testing::FakeClock clock;
  KubeClient::Options retrying;
  retrying.clock = &clock;
  auto patient = KubeClient::Create(Config(), retrying);
  ASSERT_THAT(patient.status(), IsOk());
  auto busy = std::async(std::launch::async,
                         [&] { return (*patient)->Request("GET", "/busy"); });
  ASSERT_TRUE(testing::WaitFor([&] { return clock.waiters() > 0; }, 10s));
  (*patient)->Cancel();
  EXPECT_THAT(busy.get().status(), StatusIs(StatusCode::kCancelled));

  hang = false;
  auto after = client->Request("GET", "/slow");
  ASSERT_THAT(after.status(), IsOk());
  EXPECT_EQ(after->status, 200);
}

// The back-off waits on the client's clock: a retry comes when the clock
// has moved on by the back-off, not before.
TEST_F(KubeClientTest, TheBackOffWaitsOnTheClientsClock) {
  std::atomic<int> calls{0};
  Serve([&calls](const FakeApiServer::Request&) {
    return FakeApiServer::Answer{++calls == 1 ? 503 : 200, "{}"};
  });
  testing::FakeClock clock;
  KubeClient::Options options;
  options.clock = &clock;
  options.backoff = 1h;
  auto client = KubeClient::Create(Config(), options);
  ASSERT_THAT(client.status(), IsOk());
  auto answer = std::async(std::launch::async,
                           [&] { return (*client)->Request("GET", "/x"); });
  ASSERT_TRUE(testing::WaitFor([&] { return clock.waiters() > 0; }, 10s));
  EXPECT_EQ(calls.load(), 1);
  clock.Advance(59min);
  EXPECT_EQ(answer.wait_for(0s), std::future_status::timeout);
  EXPECT_EQ(calls.load(), 1);
  clock.Advance(1min);
  ASSERT_THAT(answer.get().status(), IsOk());
  EXPECT_EQ(calls.load(), 2);
}

// A name from outside that would make a path naming another object (a
// slice name the server chose, "../nodes/x") is never sent.
TEST_F(KubeClientTest, PathsThatCouldNameAnotherObjectAreNeverSent) {
  std::atomic<int> calls{0};
  Serve([&calls](const FakeApiServer::Request&) {
    ++calls;
    return FakeApiServer::Answer{200, "{}"};
  });
  auto client = Client(Config());
  for (const char* path :
       {"/apis/resource.k8s.io/v1/resourceslices/../../../api/v1/nodes/n",
        "/apis/resource.k8s.io/v1/resourceslices/./x",
        "/apis/resource.k8s.io/v1/resourceslices//x",
        "/apis/resource.k8s.io/v1/resourceslices/a b",
        "/apis/resource.k8s.io/v1/resourceslices/a%2F..",
        "/apis/resource.k8s.io/v1/resourceslices/a\r\nHost: x",
        "apis/relative"}) {
    EXPECT_THAT(
        client->Request("PUT", path, "{}").status(),
        StatusIs(StatusCode::kInvalidArgument, HasSubstr("request path")))
        << path;
  }
  EXPECT_EQ(calls.load(), 0);
  for (const char* path :
       {"/apis/resource.k8s.io/v1/resourceslices/node-a-gpu.example.com-x7k2p",
        "/apis/resource.k8s.io/v1/"
        "resourceslices?fieldSelector=spec.nodeName%3Dnode-a&limit=500",
        "/api/v1/nodes/node-a"}) {
    EXPECT_THAT(CheckRequestPath(path), IsOk()) << path;
  }
}

TEST_F(KubeClientTest, SendsTheTokenAndReadsTheAnswer) {
  Serve([](const FakeApiServer::Request& request) {
    return FakeApiServer::Answer{200, "{\"kind\":\"" + request.method + "\"}"};
  });
  auto client = Client(Config());
  auto answer = client->Request("POST", "/apis/x", "{}");
  ASSERT_THAT(answer.status(), IsOk());
  EXPECT_EQ(answer->status, 200);
  EXPECT_EQ(answer->body, "{\"kind\":\"POST\"}");
  ASSERT_THAT(server_->requests(), SizeIs(1));
  EXPECT_EQ(server_->requests()[0].authorization, "Bearer secret-token");
  EXPECT_EQ(server_->requests()[0].target, "/apis/x");
  EXPECT_EQ(server_->requests()[0].body, "{}");
}

TEST_F(KubeClientTest, AClientCertificateIsPresented) {
  Serve([](const FakeApiServer::Request&) { return FakeApiServer::Answer{}; },
        /*require_cert=*/true);
  KubeConfig config = Config();
  config.token.clear();
  EXPECT_THAT(Client(config)->Request("GET", "/api").status(),
              StatusIs(StatusCode::kUnavailable));
  config.client_certificate_pem = server_->client_certificate_pem();
  config.client_key_pem = server_->client_key_pem();
  ASSERT_THAT(Client(config)->Request("GET", "/api").status(), IsOk());
  EXPECT_TRUE(server_->requests().back().client_certificate);
}

TEST_F(KubeClientTest, AServerTheCaDidNotSignIsRefused) {
  Serve([](const FakeApiServer::Request&) { return FakeApiServer::Answer{}; });
  KubeConfig config = Config();
  config.ca_pem = server_->other_ca_pem();
  KubeClient::Options options;
  options.attempts = 1;
  EXPECT_THAT(Client(config, options)->Request("GET", "/api").status(),
              StatusIs(StatusCode::kUnavailable));
  EXPECT_THAT(server_->requests(), SizeIs(0));
}

TEST_F(KubeClientTest, ServerErrorsAreRetriedWithBackoffOthersAreNot) {
  std::atomic<int> calls{0};
  Serve([&](const FakeApiServer::Request& request) {
    if (request.target == "/flaky" && ++calls < 3) {
      return FakeApiServer::Answer{503, "{}"};
    }
    if (request.target == "/missing") {
      return FakeApiServer::Answer{
          404,
          R"({"kind":"Status","message":"resourceclaims \"x\" not found"})"};
    }
    return FakeApiServer::Answer{200, "{}"};
  });
  auto client = Client(Config());
  auto flaky = client->Request("GET", "/flaky");
  ASSERT_THAT(flaky.status(), IsOk());
  EXPECT_EQ(flaky->status, 200);
  EXPECT_EQ(calls.load(), 3);
  auto missing = client->Request("GET", "/missing");
  ASSERT_THAT(missing.status(), IsOk());
  EXPECT_THAT(StatusOf(*missing, "GET x"),
              StatusIs(StatusCode::kNotFound,
                       HasSubstr("resourceclaims \"x\" not found")));
  EXPECT_EQ(server_->requests().size(), 4u);
  EXPECT_THAT(StatusOf({409, "{}"}, "POST", /*create=*/true),
              StatusIs(StatusCode::kAlreadyExists));
  EXPECT_THAT(StatusOf({409, "{}"}, "PUT"), StatusIs(StatusCode::kAborted));
  EXPECT_THAT(StatusOf({422, "not json"}, "PUT"),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("not json")));
}

TEST_F(KubeClientTest, AHungServerCostsTheDeadlinePerAttempt) {
  Serve([](const FakeApiServer::Request&) {
    return FakeApiServer::Answer{200, "{}", 2s};
  });
  KubeClient::Options options;
  options.timeout = 200ms;
  options.attempts = 2;
  const auto start = std::chrono::steady_clock::now();
  EXPECT_THAT(Client(Config(), options)->Request("GET", "/slow").status(),
              StatusIs(StatusCode::kDeadlineExceeded,
                       HasSubstr("no answer within 200 ms")));
  EXPECT_LT(std::chrono::steady_clock::now() - start, 1500ms);
}

TEST_F(KubeClientTest, AnAnswerBeyondTheLimitIsRefused) {
  Serve([](const FakeApiServer::Request&) {
    return FakeApiServer::Answer{200, std::string(100000, 'x')};
  });
  KubeClient::Options options;
  options.max_body = 1000;
  EXPECT_THAT(Client(Config(), options)->Request("GET", "/big").status(),
              StatusIs(StatusCode::kResourceExhausted,
                       HasSubstr("larger than 1000 bytes")));
}

TEST_F(KubeClientTest, ATokenFileIsReadAtEveryRequest) {
  Serve([](const FakeApiServer::Request&) { return FakeApiServer::Answer{}; });
  KubeConfig config = Config();
  config.token.clear();
  config.token_file = dir_.path() / "token";
  Write(config.token_file, "first\n");
  auto client = Client(config);
  ASSERT_THAT(client->Request("GET", "/a").status(), IsOk());
  Write(config.token_file, "second");
  ASSERT_THAT(client->Request("GET", "/b").status(), IsOk());
  // Rotated into one that would add a header: that request fails, naming
  // the file, and nothing reaches the server.
  Write(config.token_file, "bad\r\nX-Injected: 1\n");
  EXPECT_THAT(client->Request("GET", "/c").status(),
              StatusIs(StatusCode::kUnavailable,
                       AllOf(HasSubstr(config.token_file.string()),
                             HasSubstr("control character"))));
  ASSERT_EQ(server_->requests().size(), 2u);
  EXPECT_EQ(server_->requests()[0].authorization, "Bearer first");
  EXPECT_EQ(server_->requests()[1].authorization, "Bearer second");
}

TEST_F(KubeClientTest, AnInlineTokenThatWouldInjectAHeaderIsRefused) {
  Serve([](const FakeApiServer::Request&) { return FakeApiServer::Answer{}; });
  KubeConfig config = Config();
  config.token = "abc\r\nX-Injected: 1";
  EXPECT_THAT(
      KubeClient::Create(config, {}).status(),
      StatusIs(StatusCode::kInvalidArgument, HasSubstr("control character")));
}

TEST_F(KubeClientTest, ConnectionsAreKeptBetweenRequests) {
  Serve([](const FakeApiServer::Request&) { return FakeApiServer::Answer{}; });
  auto client = Client(Config());
  for (int i = 0; i < 3; ++i) {
    ASSERT_THAT(client->Request("GET", "/api").status(), IsOk());
  }
  ASSERT_THAT(server_->requests(), SizeIs(3));
  for (const auto& request : server_->requests()) {
    EXPECT_EQ(request.connection, 1);
  }
}

TEST_F(KubeClientTest, AKeptConnectionTheServerClosedIsReplacedAtOnce) {
  Serve([](const FakeApiServer::Request&) {
    FakeApiServer::Answer answer;
    answer.drop_after = true;
    return answer;
  });
  KubeClient::Options options;
  options.attempts = 1;  // the replacement is not a retry
  auto client = Client(Config(), options);
  ASSERT_THAT(client->Request("GET", "/a").status(), IsOk());
  ASSERT_TRUE(testing::WaitFor([&] { return server_->closes() == 1; }));
  ASSERT_THAT(client->Request("POST", "/b", "{}").status(), IsOk());
  ASSERT_THAT(server_->requests(), SizeIs(2));
  EXPECT_EQ(server_->requests()[1].connection, 2);
  EXPECT_EQ(server_->requests()[1].body, "{}");
}

TEST_F(KubeClientTest, TheServersNameIsVerified) {
  Serve([](const FakeApiServer::Request&) { return FakeApiServer::Answer{}; });
  KubeConfig config = Config();
  // The certificate names 127.0.0.1 and api.test, not localhost.
  config.server.replace(config.server.find("127.0.0.1"), 9, "localhost");
  KubeClient::Options options;
  options.attempts = 1;
  EXPECT_THAT(Client(config, options)->Request("GET", "/api").status(),
              StatusIs(StatusCode::kUnavailable,
                       HasSubstr("TLS handshake (hostname mismatch)")));
  EXPECT_THAT(server_->requests(), SizeIs(0));
}

TEST_F(KubeClientTest, ThePathOfTheServerUrlPrefixesRequests) {
  Serve([](const FakeApiServer::Request&) { return FakeApiServer::Answer{}; });
  KubeConfig config = Config();
  config.server += "/k8s/clusters/c-1";
  ASSERT_THAT(Client(config)->Request("GET", "/api/v1").status(), IsOk());
  EXPECT_EQ(server_->requests().back().target, "/k8s/clusters/c-1/api/v1");
}

// An HTTP proxy that tunnels one connection with CONNECT to 127.0.0.1,
// whatever host it is asked for, and records what it was asked.
class ConnectProxy {
 public:
  ConnectProxy() {
    acceptor_.open(tcp::v4());
    acceptor_.bind(tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0));
    acceptor_.listen();
    port_ = acceptor_.local_endpoint().port();
    thread_ = std::thread([this] { Tunnel(); });
  }
  ~ConnectProxy() {
    boost::system::error_code ignored;
    tcp::socket wake(io_);
    wake.connect(acceptor_.local_endpoint(), ignored);
    thread_.join();
  }
  std::string url() const {
    return "http://user:pw@127.0.0.1:" + std::to_string(port_);
  }
  std::string target() {
    std::lock_guard<std::mutex> lock(mu_);
    return target_;
  }
  std::string authorization() {
    std::lock_guard<std::mutex> lock(mu_);
    return authorization_;
  }

 private:
  void Tunnel() {
    tcp::socket client(io_);
    boost::system::error_code error;
    acceptor_.accept(client, error);
    beast::flat_buffer buffer;
    http::request_parser<http::empty_body> parser;
    http::read(client, buffer, parser, error);
    if (error) return;
    const std::string target(parser.get().target());
    {
      std::lock_guard<std::mutex> lock(mu_);
      target_ = target;
      authorization_ =
          std::string(parser.get()[http::field::proxy_authorization]);
    }
    tcp::socket server(io_);
    const auto port = static_cast<unsigned short>(
        std::stoi(target.substr(target.rfind(':') + 1)));
    server.connect(tcp::endpoint(asio::ip::make_address("127.0.0.1"), port),
                   error);
    if (error) return;
    asio::write(client,
                asio::buffer(std::string_view(
                    "HTTP/1.1 200 Connection established\r\n\r\n")),
                error);
    const auto relay = [](tcp::socket& from, tcp::socket& to) {
      char chunk[4096];
      boost::system::error_code e;
      for (;;) {
        const size_t n = from.read_some(asio::buffer(chunk), e);
        if (e || asio::write(to, asio::buffer(chunk, n), e) != n || e) break;
      }
      to.shutdown(tcp::socket::shutdown_send, e);
    };
    std::thread back([&] { relay(server, client); });
    relay(client, server);
    back.join();
  }

  asio::io_context io_;
  tcp::acceptor acceptor_{io_};
  unsigned short port_ = 0;
  std::thread thread_;
  std::mutex mu_;
  std::string target_;
  std::string authorization_;
};

TEST_F(KubeClientTest, AnHttpProxyFromTheEnvironmentTunnelsTheRequests) {
  Serve([](const FakeApiServer::Request&) { return FakeApiServer::Answer{}; });
  ConnectProxy proxy;
  KubeConfig config = Config();
  // A name only the proxy resolves (to the server); the certificate has it.
  const std::string port = config.server.substr(config.server.rfind(':') + 1);
  config.server = "https://api.test:" + port;
  setenv("HTTPS_PROXY", proxy.url().c_str(), 1);
  auto client = Client(config);
  unsetenv("HTTPS_PROXY");
  ASSERT_THAT(client->Request("GET", "/api").status(), IsOk());
  ASSERT_THAT(client->Request("GET", "/apis").status(), IsOk());
  EXPECT_EQ(proxy.target(), "api.test:" + port);
  EXPECT_EQ(proxy.authorization(), "Basic dXNlcjpwdw==");  // user:pw
  ASSERT_THAT(server_->requests(), SizeIs(2));
  EXPECT_EQ(server_->requests()[1].connection, 1);
}

TEST(ServerUrlTest, HostPortAndPath) {
  auto a = ParseServerUrl("https://api.example.com");
  ASSERT_THAT(a.status(), IsOk());
  EXPECT_EQ(a->host, "api.example.com");
  EXPECT_EQ(a->port, 443);
  EXPECT_EQ(a->path, "");
  auto b = ParseServerUrl("HTTPS://[fd00::1]:6443/prefix/");
  ASSERT_THAT(b.status(), IsOk());
  EXPECT_EQ(b->host, "fd00::1");
  EXPECT_EQ(b->port, 6443);
  EXPECT_EQ(b->path, "/prefix");
  for (const char* bad :
       {"http://a", "https://", "https://:443", "https://a:0",
        "https://a:99999", "https://a:", "https://u:p@a", "https://a?x=1",
        "https://fd00::1", "https://[fd00::1", "https://a b", "https://a:44x",
        "https://a/p q", "https://a/p\r\nX-Injected: 1", "https://a/\x7f"}) {
    EXPECT_THAT(ParseServerUrl(bad),
                StatusIs(StatusCode::kInvalidArgument,
                         HasSubstr("is not an https:// URL")))
        << bad;
  }
}

TEST(ProxyTest, ChosenAsClientGoChoosesIt) {
  // Server host (port 6443), NO_PROXY, through the proxy.
  const struct {
    const char* host;
    const char* no_proxy;
    bool proxied;
  } cases[] = {
      {"api.example.com", "", true},
      {"127.0.0.1", "", false},  // loopback: never
      {"::1", "", false},
      {"localhost", "", false},
      {"api.example.com", "*", false},
      {"api.example.com", "other, example.com", false},
      {"example.com", "example.com", false},
      {"api.example.com", ".example.com", false},
      {"example.com", ".example.com", true},  // subdomains only
      {"API.Example.com", "*.example.com", false},
      {"badexample.com", "example.com", true},
      {"10.1.2.3", "10.0.0.0/8", false},
      {"11.1.2.3", "10.0.0.0/8", true},
      {"fd00::5", "fd00::/16", false},
      {"10.96.0.1", "10.96.0.1", false},
      {"api.example.com", "api.example.com:6443", false},
      {"api.example.com", "api.example.com:443", true},
  };
  for (const auto& c : cases) {
    auto proxy = ProxyFor({c.host, 6443, ""}, "proxy.corp:3128", c.no_proxy);
    ASSERT_THAT(proxy.status(), IsOk()) << c.host << " " << c.no_proxy;
    EXPECT_EQ(proxy->has_value(), c.proxied) << c.host << " " << c.no_proxy;
  }

  ServerAddress server{"api.example.com", 443, ""};
  auto plain = ProxyFor(server, "proxy.corp", "");
  ASSERT_THAT(plain.status(), IsOk());
  ASSERT_TRUE(plain->has_value());
  EXPECT_EQ((*plain)->host, "proxy.corp");
  EXPECT_EQ((*plain)->port, 80);
  EXPECT_EQ((*plain)->authorization, "");
  auto with_user = ProxyFor(server, "http://a:b@[fd00::9]:8080/", "");
  ASSERT_THAT(with_user.status(), IsOk());
  EXPECT_EQ((*with_user)->host, "fd00::9");
  EXPECT_EQ((*with_user)->port, 8080);
  EXPECT_EQ((*with_user)->authorization, "Basic YTpi");
  EXPECT_THAT(ProxyFor(server, "socks5://proxy:1080", ""),
              StatusIs(StatusCode::kInvalidArgument,
                       HasSubstr("only http:// proxies")));
  EXPECT_THAT(ProxyFor(server, "http://:1080", ""),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("no host")));
}

TEST(Base64Test, EncodesWhatDecodes) {
  for (const std::string text : {"", "a", "ab", "abc", "abcd", "user:pw"}) {
    auto back = DecodeBase64(EncodeBase64(text));
    ASSERT_THAT(back.status(), IsOk());
    EXPECT_EQ(*back, text);
  }
  EXPECT_EQ(EncodeBase64("user:pw"), "dXNlcjpwdw==");
}

// --- ResourceClaims
// -----------------------------------------------------------

constexpr char kClaim[] = R"({
  "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
  "metadata": {"name": "pair", "namespace": "ml", "uid": "u-1"},
  "status": {"allocation": {"devices": {
    "results": [
      {"request": "gpu", "driver": "pci.libtopology.dev", "pool": "node-a", "device": "gpu-0"},
      {"request": "nic", "driver": "pci.libtopology.dev", "pool": "node-a", "device": "nic-1", "adminAccess": true},
      {"request": "other", "driver": "gpu.example.com", "pool": "p", "device": "d"}],
    "config": [
      {"source": "FromClass", "opaque": {"driver": "pci.libtopology.dev", "parameters": {"mode": "exclusive"}}},
      {"source": "FromClaim", "requests": ["gpu"], "opaque": {"driver": "pci.libtopology.dev", "parameters": {"mode": "shared"}}},
      {"source": "FromClass", "opaque": {"driver": "gpu.example.com", "parameters": {}}}]}}}
})";

TEST(ResourceClaimTest, TheDriversResultsAndConfigs) {
  auto claim = ParseResourceClaim(kClaim, {"ml", "u-1", "pair"}, kDriver);
  ASSERT_THAT(claim.status(), IsOk());
  ASSERT_THAT(claim->results, SizeIs(2));
  // adminAccess (KEP-5018) as the result says; absent is false.
  EXPECT_EQ(claim->results[0],
            (AllocationResult{"gpu", kDriver, "node-a", "gpu-0", false}));
  EXPECT_EQ(claim->results[1],
            (AllocationResult{"nic", kDriver, "node-a", "nic-1", true}));
  ASSERT_THAT(claim->configs, SizeIs(2));
  EXPECT_EQ(claim->configs[0],
            (OpaqueConfig{"FromClass", {}, R"({"mode":"exclusive"})"}));
  EXPECT_EQ(claim->configs[1],
            (OpaqueConfig{"FromClaim", {"gpu"}, R"({"mode":"shared"})"}));
}

// Shares of a device shared by capacity (KEP-5075): each result's shareID
// and consumedCapacity; a shareID that is no UID or an amount that is no
// quantity refuses the claim, naming the device.
TEST(ResourceClaimTest, SharesCarryTheirIdAndWhatTheyConsume) {
  constexpr char kShared[] = R"({
    "metadata": {"name": "s", "namespace": "ml", "uid": "u-2"},
    "status": {"allocation": {"devices": {"results": [
      {"request": "a", "driver": "pci.libtopology.dev", "pool": "node-a",
       "device": "nic-0", "shareID": "8f7e2c1a-0b9d-4c3e-a5f6-1d2e3f4a5b6c",
       "consumedCapacity": {"bandwidth": "10Gi"}},
      {"request": "b", "driver": "pci.libtopology.dev", "pool": "node-a",
       "device": "nic-0", "shareID": "0c1d2e3f-4a5b-6c7d-8e9f-0a1b2c3d4e5f",
       "consumedCapacity": {"bandwidth": "20Gi"}}]}}}
  })";
  auto claim = ParseResourceClaim(kShared, {"ml", "u-2", "s"}, kDriver);
  ASSERT_THAT(claim.status(), IsOk());
  ASSERT_THAT(claim->results, SizeIs(2));
  EXPECT_EQ(claim->results[0].share_id, "8f7e2c1a-0b9d-4c3e-a5f6-1d2e3f4a5b6c");
  EXPECT_EQ(claim->results[0].consumed_capacity.at("bandwidth"), "10Gi");
  EXPECT_EQ(claim->results[1].consumed_capacity.at("bandwidth"), "20Gi");
  std::string bad(kShared);
  bad.replace(bad.find("8f7e2c1a"), 8, "../../..");
  EXPECT_THAT(ParseResourceClaim(bad, {"ml", "u-2", "s"}, kDriver).status(),
              StatusIs(StatusCode::kFailedPrecondition,
                       HasSubstr("device nic-0: shareID is not a UID")));
  bad = kShared;
  bad.replace(bad.find("\"20Gi\""), 6, "\"lots\"");
  EXPECT_THAT(ParseResourceClaim(bad, {"ml", "u-2", "s"}, kDriver).status(),
              StatusIs(StatusCode::kFailedPrecondition,
                       HasSubstr("consumedCapacity[bandwidth] is not a "
                                 "quantity")));
}

// The API's bound on a claim's results (AllocationResultsMaxSize, 32): a
// claim read with more is refused, as no server would have stored it.
TEST(ResourceClaimTest, AtMostThirtyTwoResults) {
  const auto with = [](size_t n) {
    nlohmann::json results = nlohmann::json::array();
    for (size_t i = 0; i < n; ++i) {
      results.push_back({{"request", "r"},
                         {"driver", kDriver},
                         {"pool", "node-a"},
                         {"device", "d-" + std::to_string(i)}});
    }
    return nlohmann::json{
        {"metadata", {{"name", "c"}, {"namespace", "ml"}, {"uid", "u"}}},
        {"status", {{"allocation", {{"devices", {{"results", results}}}}}}}}
        .dump();
  };
  auto full = ParseResourceClaim(with(32), {"ml", "u", "c"}, kDriver);
  ASSERT_THAT(full.status(), IsOk());
  EXPECT_THAT(full->results, SizeIs(32));
  EXPECT_THAT(ParseResourceClaim(with(33), {"ml", "u", "c"}, kDriver).status(),
              StatusIs(StatusCode::kFailedPrecondition,
                       HasSubstr("at most 32 (AllocationResultsMaxSize)")));
}

// Each device's configurations, as the Go drivers pick them
// (dra-example-driver's GetOpaqueDeviceConfigs): the ones naming no
// request, its request, or its top-level request, classes' first.
TEST(ResourceClaimTest, ConfigurationsApplyToTheRequestsTheyName) {
  Claim claim;
  claim.configs = {{"FromClass", {}, "all"},
                   {"FromClaim", {"gpu"}, "gpu"},
                   {"FromClaim", {"gpu/big"}, "big"},
                   {"FromClaim", {"nic"}, "nic"}};
  const auto parameters = [&](std::string_view request) {
    std::vector<std::string> out;
    for (const OpaqueConfig* config : ConfigsFor(claim, request)) {
      out.push_back(config->parameters);
    }
    return out;
  };
  EXPECT_THAT(parameters("gpu"), ElementsAre("all", "gpu"));
  EXPECT_THAT(parameters("gpu/big"), ElementsAre("all", "gpu", "big"));
  EXPECT_THAT(parameters("gpu/small"), ElementsAre("all", "gpu"));
  EXPECT_THAT(parameters("nic"), ElementsAre("all", "nic"));
  EXPECT_THAT(parameters("other"), ElementsAre("all"));
}

TEST(ResourceClaimTest, RequestsThatAreNotStringsAreRefused) {
  EXPECT_THAT(
      ParseResourceClaim(
          R"({"metadata":{"uid":"u-1"},"status":{"allocation":{"devices":{)"
          R"("results":[{"request":"gpu","driver":"pci.libtopology.dev",)"
          R"("pool":"p","device":"d"}],"config":[{"requests":[7],)"
          R"("opaque":{"driver":"pci.libtopology.dev","parameters":{}}}]}}}})",
          {"ml", "u-1", "pair"}, kDriver),
      StatusIs(StatusCode::kInvalidArgument, HasSubstr("config[0].requests")));
}

TEST(ResourceClaimTest, WhatCannotBePreparedIsSaid) {
  EXPECT_THAT(ParseResourceClaim(kClaim, {"ml", "u-2", "pair"}, kDriver),
              StatusIs(StatusCode::kFailedPrecondition,
                       HasSubstr("UID u-2 differs from the object's (u-1)")));
  EXPECT_THAT(
      ParseResourceClaim(kClaim, {"ml", "u-1", "pair"}, "nic.example.com"),
      StatusIs(StatusCode::kFailedPrecondition,
               HasSubstr("nothing of the claim is allocated by "
                         "nic.example.com")));
  EXPECT_THAT(
      ParseResourceClaim(R"({"metadata":{"uid":"u-1"},"status":{}})",
                         {"ml", "u-1", "pair"}, kDriver),
      StatusIs(StatusCode::kFailedPrecondition, HasSubstr("not allocated")));
  EXPECT_THAT(ParseResourceClaim("[]", {"ml", "u-1", "pair"}, kDriver),
              StatusIs(StatusCode::kInvalidArgument));
  EXPECT_THAT(ParseResourceClaim(R"({"metadata":{"uid":7}})",
                                 {"ml", "u-1", "pair"}, kDriver),
              StatusIs(StatusCode::kInvalidArgument));
  // A hostile API server's claim nested 100,000 deep (in the opaque
  // parameters a driver copies): an error, never a stack overflow.
  const std::string deep =
      R"({"metadata":{"uid":"u-1"},"status":{"allocation":{"devices":{)"
      R"("results":[{"request":"r","driver":")" +
      std::string(kDriver) +
      R"(","pool":"p","device":"d"}],"config":[{"opaque":{"driver":")" +
      std::string(kDriver) + R"(","parameters":)" + std::string(100000, '[') +
      std::string(100000, ']') + "}}]}}}}";
  EXPECT_THAT(ParseResourceClaim(deep, {"ml", "u-1", "pair"}, kDriver),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("nested")));
}

TEST_F(KubeClientTest, ClaimsComeFromTheApi) {
  Serve([](const FakeApiServer::Request& request) {
    if (request.target ==
        "/apis/resource.k8s.io/v1/namespaces/ml/resourceclaims/pair") {
      return FakeApiServer::Answer{200, kClaim};
    }
    return FakeApiServer::Answer{
        404, R"({"kind":"Status","message":"resourceclaims not found"})"};
  });
  auto client = Client(Config());
  ApiClaimSource source(client.get());
  auto claim = source.Get({"ml", "u-1", "pair"}, kDriver);
  ASSERT_THAT(claim.status(), IsOk());
  EXPECT_THAT(claim->results, SizeIs(2));
  EXPECT_THAT(source.Get({"ml", "u-9", "gone"}, kDriver).status(),
              StatusIs(StatusCode::kNotFound));
  // Names that are not names never reach a path.
  EXPECT_THAT(source.Get({"ml", "u-1", "../../secrets"}, kDriver).status(),
              StatusIs(StatusCode::kInvalidArgument));
  EXPECT_EQ(server_->requests().size(), 2u);
}

}  // namespace
}  // namespace topology::draplugin
