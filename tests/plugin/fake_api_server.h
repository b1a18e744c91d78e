// An in-process HTTPS server for the Kubernetes API client's tests: real
// TLS (a CA, a server certificate for 127.0.0.1 and a client certificate,
// made with the openssl command), HTTP/1.1 with kept connections, answers
// from a handler, every request recorded with the connection it came on. For
// the paths a real API server makes hard to reach: timeouts, 5xx, malformed
// bodies, a wrong certificate.
#ifndef TOPOLOGY_TESTS_PLUGIN_FAKE_API_SERVER_H_
#define TOPOLOGY_TESTS_PLUGIN_FAKE_API_SERVER_H_

#include <atomic>
#include <chrono>
#include <filesystem>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "topology/status.h"

namespace topology::testing {

class FakeApiServer {
 public:
  struct Request {
    std::string method;
    std::string target;
    std::string body;
    std::string authorization;
    bool client_certificate = false;  // the client presented one
    int connection = 0;  // connections are numbered from 1 as accepted
  };
  struct Answer {
    int status = 200;
    std::string body;
    // Held this long before answering (a slow or hung server).
    std::chrono::milliseconds delay{0};
    // After this answer the connection is closed without a word (as by a
    // server whose idle timeout ran out): the answer keeps it alive.
    bool drop_after = false;
  };
  using Handler = std::function<Answer(const Request&)>;

  // Certificates in `dir`; serves on 127.0.0.1 on a free port. With
  // `require_client_certificate`, a client without one is refused at the
  // handshake.
  static StatusOr<std::unique_ptr<FakeApiServer>> Start(
      const std::filesystem::path& dir, Handler handler,
      bool require_client_certificate = false);
  ~FakeApiServer();

  std::string url() const;
  std::string ca_pem() const;
  std::string client_certificate_pem() const;
  std::string client_key_pem() const;
  // A CA that signed nothing here (a client trusting it must refuse us).
  std::string other_ca_pem() const;
  std::vector<Request> requests() const;
  // Connections the server has closed (its close_notify sent).
  int closes() const;

 private:
  class Impl;
  explicit FakeApiServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace topology::testing

#endif  // TOPOLOGY_TESTS_PLUGIN_FAKE_API_SERVER_H_
