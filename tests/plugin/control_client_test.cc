// The control socket's light client (control_client.h): its messages are
// libprotobuf's bytes, and it makes real calls to a real gRPC server over a
// unix socket, including the ways a server or a socket can fail it.
#include "control_client.h"

#include <atomic>
#include <chrono>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>

#include <grpcpp/grpcpp.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "topologymanager/v1alpha1/control.grpc.pb.h"
#include "wait_for.h"

namespace topology::host {
namespace {

namespace tm = topologymanager::v1alpha1;
using nlohmann::json;
using ::testing::HasSubstr;
using namespace std::chrono_literals;

std::string Serialized(const google::protobuf::MessageLite& message) {
  std::string bytes;
  EXPECT_TRUE(message.SerializeToString(&bytes));
  return bytes;
}

TEST(ControlEncodingTest, RequestsAreLibprotobufsBytes) {
  const std::string not_utf8 = "kind: Pod\n# caf\xe9\n";
  tm::AdmitRequest admit;
  auto* first = admit.add_manifests();
  first->set_source("a.yaml");
  first->set_yaml(not_utf8);
  admit.add_manifests();  // an empty file is still an element
  admit.add_manifests()->set_yaml(std::string(300, 'x'));  // 2-byte length
  admit.set_explain(true);
  EXPECT_EQ(
      EncodeAdmitRequest(
          {{"a.yaml", not_utf8}, {"", ""}, {"", std::string(300, 'x')}}, true),
      Serialized(admit));
  admit.set_explain(false);
  EXPECT_EQ(
      EncodeAdmitRequest(
          {{"a.yaml", not_utf8}, {"", ""}, {"", std::string(300, 'x')}}, false),
      Serialized(admit));
  EXPECT_EQ(EncodeAdmitRequest({}, false), "");

  tm::ReleaseRequest release;
  release.set_pod("default/web-0");
  EXPECT_EQ(EncodeReleaseRequest("default/web-0"), Serialized(release));
  EXPECT_EQ(EncodeReleaseRequest(""), Serialized(tm::ReleaseRequest()));
  tm::StatusRequest status;
  status.set_format("nrt");
  EXPECT_EQ(EncodeStatusRequest("nrt"), Serialized(status));
}

TEST(ControlEncodingTest, ReplyReadAsLibprotobufReadsIt) {
  tm::JsonReply reply;
  reply.set_json(std::string(70'000, 'j') + "\xc3\xa9");  // 3-byte length
  // Unknown fields of every wire type proto3 sends, before and after; a
  // `json` of another wire type is an unknown field too.
  const std::string unknown =
      std::string("\x10\x96\x01", 3) + std::string("\x19") +
      std::string(8, '\x01') + std::string(1, '\x25') + std::string(4, '\x02') +
      std::string("\x2a\x03", 2) + "abc" + std::string("\x08\x07");
  for (const std::string& bytes :
       {Serialized(reply), unknown + Serialized(reply),
        Serialized(reply) + unknown,
        std::string("\x0a\x01"
                    "a\x0a\x01"
                    "b"),
        std::string()}) {
    tm::JsonReply oracle;
    ASSERT_TRUE(oracle.ParseFromString(bytes));
    const auto decoded = DecodeJsonReply(bytes);
    ASSERT_TRUE(decoded.ok()) << decoded.status().ToString();
    EXPECT_EQ(*decoded, oracle.json());
  }
}

TEST(ControlEncodingTest, MalformedRepliesAreDataLossNamingTheByte) {
  struct Case {
    std::string bytes;
    std::string says;
  };
  const Case cases[] = {
      {std::string("\x0a\x05"
                   "ab"),
       "byte 0: length beyond the message"},
      {std::string("\x10\x01\x0a\x05"
                   "ab"),
       "byte 2: length beyond the message"},
      {std::string(11, '\xff'), "byte 0: truncated or overlong field tag"},
      {std::string("\x10\xff"), "byte 0: truncated varint"},
      {std::string("\x19\x01\x02"), "byte 0: truncated fixed-size field"},
      {std::string("\x0e"), "byte 0: wire type 6 of field 1"},
      {std::string("\x0b"), "byte 0: wire type 3 of field 1"},
      {std::string("\x02\x00", 2), "byte 0: field number 0"},
      {std::string("\x0a\x01\xff"), "json is not valid UTF-8"},
  };
  for (const Case& c : cases) {
    tm::JsonReply oracle;
    EXPECT_FALSE(oracle.ParseFromString(c.bytes)) << c.says;
    const auto decoded = DecodeJsonReply(c.bytes);
    ASSERT_FALSE(decoded.ok()) << c.says;
    EXPECT_EQ(decoded.status().code(), StatusCode::kDataLoss);
    EXPECT_THAT(decoded.status().message(), HasSubstr(c.says));
  }
}

// A real gRPC server of the Control service: Admit answers with what it
// received (and how long the client gave it), or fails as the first
// manifest's source asks; Status("big") answers 5 MiB.
class EchoControl final : public tm::Control::Service {
 public:
  grpc::Status Admit(grpc::ServerContext* context,
                     const tm::AdmitRequest* request,
                     tm::JsonReply* reply) override {
    const std::string first =
        request->manifests_size() > 0 ? request->manifests(0).source() : "";
    if (first == "sleep") {
      while (!context->IsCancelled()) std::this_thread::sleep_for(5ms);
      cancelled_.store(true);
      return grpc::Status(grpc::StatusCode::CANCELLED, "gone");
    }
    if (first == "refuse") {
      return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                          "pod \"caf\xc3\xa9\": 100% wrong\nsecond line");
    }
    json out = {{"explain", request->explain()},
                {"sources", json::array()},
                {"sizes", json::array()},
                {"deadline_ms",
                 std::chrono::duration_cast<std::chrono::milliseconds>(
                     context->deadline() - std::chrono::system_clock::now())
                     .count()}};
    for (const auto& m : request->manifests()) {
      out["sources"].push_back(m.source());
      out["sizes"].push_back(m.yaml().size());
      out["tail"] =
          m.yaml().empty() ? 0 : static_cast<unsigned char>(m.yaml().back());
    }
    reply->set_json(out.dump());
    return grpc::Status::OK;
  }
  grpc::Status Release(grpc::ServerContext* /*context*/,
                       const tm::ReleaseRequest* request,
                       tm::JsonReply* reply) override {
    if (request->pod() == "absent") {
      return grpc::Status(grpc::StatusCode::NOT_FOUND, "no pod absent");
    }
    reply->set_json(json({{"released", request->pod()}}).dump());
    return grpc::Status::OK;
  }
  grpc::Status Status(grpc::ServerContext* /*context*/,
                      const tm::StatusRequest* request,
                      tm::JsonReply* reply) override {
    if (request->format() == "big") {
      reply->set_json(json(std::string(5u << 20, 'z')).dump());
    } else {
      reply->set_json(json({{"format", request->format()}}).dump());
    }
    return grpc::Status::OK;
  }
  bool cancelled() const { return cancelled_.load(); }

 private:
  std::atomic<bool> cancelled_{false};
};

class ControlClientTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char dir[] = "/tmp/control-client-XXXXXX";
    ASSERT_NE(mkdtemp(dir), nullptr);
    dir_ = dir;
    socket_ = dir_ + "/control.sock";
  }
  void TearDown() override {
    if (server_) server_->Shutdown(std::chrono::system_clock::now() + 1s);
    std::filesystem::remove_all(dir_);
  }
  void StartGrpc() {
    grpc::ServerBuilder builder;
    builder.AddListeningPort("unix:" + socket_,
                             grpc::InsecureServerCredentials());
    builder.SetMaxReceiveMessageSize(64 << 20);
    builder.RegisterService(&service_);
    server_ = builder.BuildAndStart();
    ASSERT_NE(server_, nullptr);
  }
  // A plain unix socket at socket_, listening; accepted connections go to
  // `serve` on a thread.
  int Listen() {
    const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_un address{};
    address.sun_family = AF_UNIX;
    socket_.copy(address.sun_path, sizeof(address.sun_path) - 1);
    EXPECT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)),
              0);
    EXPECT_EQ(listen(fd, 4), 0);
    return fd;
  }

  std::string dir_;
  std::string socket_;
  EchoControl service_;
  std::unique_ptr<grpc::Server> server_;
};

TEST_F(ControlClientTest, AdmitCarriesEveryManifestWholeAndTheDeadline) {
  StartGrpc();
  // 3 MiB: more than HTTP/2's initial windows and many frames.
  const std::string big(3u << 20, 'y');
  const auto reply =
      CallControl(socket_, "Admit",
                  EncodeAdmitRequest({{"a.yaml", "kind: Pod\n"},
                                      {"latin1.yaml", "# caf\xe9\n"},
                                      {"big.yaml", big + "!"}},
                                     true),
                  20s);
  ASSERT_TRUE(reply.ok()) << reply.status().ToString();
  const json doc = json::parse(*reply);
  EXPECT_EQ(doc["explain"], true);
  EXPECT_EQ(doc["sources"], json({"a.yaml", "latin1.yaml", "big.yaml"}));
  EXPECT_EQ(doc["sizes"], json({10, 7, (3u << 20) + 1}));
  EXPECT_EQ(doc["tail"], '!');
  // grpc-timeout reached the server: the deadline it saw is this call's.
  EXPECT_GT(doc["deadline_ms"].get<int64_t>(), 10'000);
  EXPECT_LE(doc["deadline_ms"].get<int64_t>(), 20'000);
}

TEST_F(ControlClientTest, ServerStatusAndMessageComeBackAsSent) {
  StartGrpc();
  auto reply = CallControl(socket_, "Admit",
                           EncodeAdmitRequest({{"refuse", ""}}, false), 10s);
  ASSERT_FALSE(reply.ok());
  EXPECT_EQ(reply.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(reply.status().message(),
            "pod \"caf\xc3\xa9\": 100% wrong\nsecond line");
  reply = CallControl(socket_, "Release", EncodeReleaseRequest("absent"), 10s);
  EXPECT_EQ(reply.status().code(), StatusCode::kNotFound);
  EXPECT_EQ(reply.status().message(), "no pod absent");
  reply = CallControl(socket_, "Release", EncodeReleaseRequest("web"), 10s);
  ASSERT_TRUE(reply.ok()) << reply.status().ToString();
  EXPECT_EQ(json::parse(*reply)["released"], "web");
  // A method the server does not have.
  reply = CallControl(socket_, "Drain", "", 10s);
  EXPECT_EQ(reply.status().code(), StatusCode::kUnimplemented);
}

TEST_F(ControlClientTest, BigReplyArrivesWhole) {
  StartGrpc();
  const auto reply =
      CallControl(socket_, "Status", EncodeStatusRequest("big"), 20s);
  ASSERT_TRUE(reply.ok()) << reply.status().ToString();
  EXPECT_EQ(json::parse(*reply).get<std::string>(), std::string(5u << 20, 'z'));
}

TEST_F(ControlClientTest, DeadlineEndsTheCallAndTheServerSeesItCancelled) {
  StartGrpc();
  const auto start = std::chrono::steady_clock::now();
  const auto reply = CallControl(
      socket_, "Admit", EncodeAdmitRequest({{"sleep", ""}}, false), 300ms);
  const auto took = std::chrono::steady_clock::now() - start;
  EXPECT_EQ(reply.status().code(), StatusCode::kDeadlineExceeded);
  // The server may end the call itself when the grpc-timeout it was sent
  // runs out; gRPC dates that from a cached clock reading, up to a few
  // milliseconds old, so the answer can come just before 300 ms.
  EXPECT_GE(took, 290ms);
  EXPECT_LT(took, 3s);
  EXPECT_TRUE(testing::WaitFor([&] { return service_.cancelled(); }, 3s));
}

TEST_F(ControlClientTest, NoServerIsUnavailableNamingTheSocket) {
  const auto reply =
      CallControl(socket_, "Status", EncodeStatusRequest("json"), 1s);
  EXPECT_EQ(reply.status().code(), StatusCode::kUnavailable);
  EXPECT_THAT(reply.status().message(), HasSubstr(socket_));
  EXPECT_THAT(reply.status().message(), HasSubstr("No such file"));
  const auto long_path = CallControl(std::string(200, 'a'), "Status", "", 1s);
  EXPECT_EQ(long_path.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(long_path.status().message(), HasSubstr("longer than 107"));
}

TEST_F(ControlClientTest, ServerThatNeverAnswersEndsAtTheDeadline) {
  const int listener = Listen();  // connections wait in the backlog
  const auto start = std::chrono::steady_clock::now();
  const auto reply =
      CallControl(socket_, "Status", EncodeStatusRequest("json"), 200ms);
  EXPECT_EQ(reply.status().code(), StatusCode::kDeadlineExceeded);
  EXPECT_LT(std::chrono::steady_clock::now() - start, 2s);
  close(listener);
}

TEST_F(ControlClientTest, ServerThatHangsUpOrSpeaksAnotherProtocol) {
  const int listener = Listen();
  std::thread server([listener] {
    // First connection: closed at once. Second: an HTTP/1.1 answer.
    int fd = accept(listener, nullptr, nullptr);
    close(fd);
    fd = accept(listener, nullptr, nullptr);
    const char answer[] = "HTTP/1.1 400 Bad Request\r\n\r\n";
    EXPECT_GT(send(fd, answer, sizeof(answer) - 1, MSG_NOSIGNAL), 0);
    shutdown(fd, SHUT_WR);
    char sink[4096];
    while (recv(fd, sink, sizeof(sink), 0) > 0) {
    }
    close(fd);
  });
  auto reply = CallControl(socket_, "Status", EncodeStatusRequest(""), 5s);
  EXPECT_EQ(reply.status().code(), StatusCode::kUnavailable)
      << reply.status().ToString();
  reply = CallControl(socket_, "Status", EncodeStatusRequest(""), 5s);
  EXPECT_EQ(reply.status().code(), StatusCode::kInternal)
      << reply.status().ToString();
  EXPECT_THAT(reply.status().message(), HasSubstr("breaks HTTP/2"));
  server.join();
  close(listener);
}

}  // namespace
}  // namespace topology::host
