// The exporter's rounds beside a pod resources server here (the kubelet's
// API over its unix socket) and an API server double (fake_api_server.h)
// that can go away: what the kubelet's state changes is written, an
// update the server could not take is written once it is back (the newest
// object, nothing lost), and a restarted exporter finds the object right.
#include <atomic>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include <grpcpp/grpcpp.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "topology/testing/machines.h"

#include "exporter.h"
#include "fake_api_server.h"
#include "podresources/v1/api.grpc.pb.h"
#include "status_matchers.h"
#include "temp_dir.h"
#include "wait_for.h"

namespace topology::nrt {
namespace {

using nlohmann::json;
using ::topology::testing::IsOk;
using ::topology::testing::WaitFor;
using namespace std::chrono_literals;

// The kubelet's pod resources API: every CPU allocatable but CPU 0, the
// pods holding the CPUs `SetHeld` names.
class Kubelet final : public v1::PodResourcesLister::Service {
 public:
  explicit Kubelet(const std::filesystem::path& socket) {
    grpc::ServerBuilder builder;
    builder.AddListeningPort("unix:" + socket.string(),
                             grpc::InsecureServerCredentials());
    builder.RegisterService(this);
    server_ = builder.BuildAndStart();
  }
  ~Kubelet() override { server_->Shutdown(); }
  void SetHeld(std::vector<int> cpus) {
    std::lock_guard lock(mu_);
    held_ = std::move(cpus);
  }
  grpc::Status GetAllocatableResources(
      grpc::ServerContext*, const v1::AllocatableResourcesRequest*,
      v1::AllocatableResourcesResponse* answer) override {
    for (int cpu = 1; cpu < 64; ++cpu) answer->add_cpu_ids(cpu);
    return grpc::Status::OK;
  }
  grpc::Status List(grpc::ServerContext*, const v1::ListPodResourcesRequest*,
                    v1::ListPodResourcesResponse* answer) override {
    std::lock_guard lock(mu_);
    for (const int cpu : held_) {
      auto* pod = answer->add_pod_resources();
      pod->set_namespace_("default");
      pod->set_name("pinned-" + std::to_string(cpu));
      pod->add_containers()->add_cpu_ids(cpu);
    }
    return grpc::Status::OK;
  }

 private:
  std::mutex mu_;
  std::vector<int> held_;
  std::unique_ptr<grpc::Server> server_;
};

// The API server's side: one NodeResourceTopology kept as a real server
// keeps it (resourceVersion moved on at each write, an update on another
// version refused with 409), every answer 503 while `away`.
class ApiServer {
 public:
  explicit ApiServer(const std::filesystem::path& dir) {
    auto started = testing::FakeApiServer::Start(
        dir, [this](const testing::FakeApiServer::Request& request) {
          return Answer(request);
        });
    if (started.ok()) server_ = std::move(*started);
  }
  draplugin::KubeConfig Config() const {
    return {.server = server_->url(), .ca_pem = server_->ca_pem()};
  }
  std::atomic<bool> away{false};
  json Stored() const {
    std::lock_guard lock(mu_);
    return stored_;
  }
  int writes() const {
    std::lock_guard lock(mu_);
    return writes_;
  }
  // The count of zone `zone`'s cpu available in what is stored.
  std::string Available(int zone) const {
    const json stored = Stored();
    if (!stored.is_object()) return "";
    return stored["zones"][static_cast<size_t>(zone)]["resources"][0].value(
        "available", "");
  }

 private:
  testing::FakeApiServer::Answer Answer(
      const testing::FakeApiServer::Request& request) {
    if (away) return {.status = 503, .body = "{}"};
    std::lock_guard lock(mu_);
    const std::string object = std::string(kCollectionPath) + "/node-a";
    if (request.target.starts_with("/api/v1/nodes/node-a")) {
      return {.status = 200, .body = R"({"metadata":{"uid":"uid-a"}})"};
    }
    if (request.target.starts_with("/apis/resource.k8s.io/")) {
      return {.status = 200, .body = R"({"items":[]})"};
    }
    if (request.method == "GET" && request.target == object) {
      if (stored_.is_null()) return {.status = 404, .body = "{}"};
      return {.status = 200, .body = stored_.dump()};
    }
    if (request.method == "POST" && request.target == kCollectionPath) {
      if (!stored_.is_null()) return {.status = 409, .body = "{}"};
      return Store(json::parse(request.body), 201);
    }
    if (request.method == "PUT" && request.target == object) {
      const json sent = json::parse(request.body);
      if (stored_.is_null()) return {.status = 404, .body = "{}"};
      if (sent["metadata"].value("resourceVersion", "") !=
          stored_["metadata"].value("resourceVersion", "")) {
        return {.status = 409, .body = "{}"};
      }
      return Store(sent, 200);
    }
    return {.status = 404, .body = "{}"};
  }
  testing::FakeApiServer::Answer Store(json object, int status) {
    object["metadata"]["resourceVersion"] = std::to_string(++version_);
    stored_ = object;
    ++writes_;
    return {.status = status, .body = object.dump()};
  }

  mutable std::mutex mu_;
  json stored_;
  int version_ = 0;
  int writes_ = 0;
  std::unique_ptr<testing::FakeApiServer> server_;
};

class NrtExporterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    testing::WriteDualSocketGpuMachine(machine_.path());
    for (const char* dir :
         {"pod-resources", "pods", "device-plugins", "plugins_registry"}) {
      std::filesystem::create_directories(kubelet_root_.path() / dir);
    }
    kubelet_ = std::make_unique<Kubelet>(kubelet_root_.path() /
                                         "pod-resources" / "kubelet.sock");
    api_ = std::make_unique<ApiServer>(certificates_.path());
    auto client = draplugin::KubeClient::Create(
        api_->Config(), {.attempts = 1, .backoff = 10ms});
    ASSERT_THAT(client.status(), IsOk());
    client_ = std::move(*client);
  }
  std::unique_ptr<Exporter> Start() {
    ExporterOptions options{
        .node_name = "node-a",
        .host_root = machine_.path(),
        .kubelet_root = kubelet_root_.path(),
        .device_plugin_dir = kubelet_root_.path() / "device-plugins",
        .resync = std::chrono::hours(1),
        .min_interval = 10ms};
    auto exporter = Exporter::Create(options, client_.get());
    EXPECT_THAT(exporter.status(), IsOk());
    if (!exporter.ok()) return nullptr;
    EXPECT_THAT((*exporter)->Start(), IsOk());
    return std::move(*exporter);
  }
  // The kubelet writes a state file as its checkpoint manager does.
  void KubeletWritesState() const {
    const auto path = kubelet_root_.path() / "cpu_manager_state";
    std::ofstream(path.string() + ".tmp") << "{}";
    std::filesystem::rename(path.string() + ".tmp", path);
  }

  testing::TempDir machine_;
  testing::TempDir kubelet_root_;
  testing::TempDir certificates_;
  std::unique_ptr<Kubelet> kubelet_;
  std::unique_ptr<ApiServer> api_;
  std::unique_ptr<draplugin::KubeClient> client_;
};

TEST_F(NrtExporterTest, AnUpdateTheServerCouldNotTakeIsWrittenOnceItIsBack) {
  auto exporter = Start();
  ASSERT_NE(exporter, nullptr);
  // Node 0 of the machine: CPUs 0-15 (CPU 0 not allocatable).
  ASSERT_TRUE(WaitFor([&] { return api_->Available(0) == "15"; }, 30s))
      << api_->Stored().dump();
  EXPECT_EQ(api_->Stored()["metadata"]["ownerReferences"][0]["uid"], "uid-a");

  api_->away = true;
  kubelet_->SetHeld({1});
  KubeletWritesState();
  ASSERT_TRUE(
      WaitFor([&] { return exporter->stats().failed_rounds > 0; }, 30s));
  EXPECT_NE(exporter->ReadinessProblem(), "");
  // A second change while it is away: the newest object is what is owed.
  kubelet_->SetHeld({1, 2, 3});
  KubeletWritesState();
  const int writes = api_->writes();
  api_->away = false;
  EXPECT_TRUE(WaitFor([&] { return api_->Available(0) == "12"; }, 60s))
      << api_->Stored().dump();
  EXPECT_TRUE(
      WaitFor([&] { return exporter->ReadinessProblem().empty(); }, 30s));
  EXPECT_EQ(api_->writes(), writes + 1);

  exporter->Stop();

  // A restarted exporter finds the object right and writes nothing.
  const int before_restart = api_->writes();
  exporter = Start();
  ASSERT_NE(exporter, nullptr);
  ASSERT_TRUE(WaitFor([&] { return exporter->stats().rounds > 0; }, 30s));
  EXPECT_TRUE(exporter->ReadinessProblem().empty());
  EXPECT_EQ(api_->writes(), before_restart);
  EXPECT_EQ(exporter->stats().writes, 0u);
}

}  // namespace
}  // namespace topology::nrt
