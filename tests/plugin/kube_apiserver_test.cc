// The DRA framework and topology-dra-driver against a real kube-apiserver
// (scripts/kube-apiserver: v1.20.2 serving resource.k8s.io/v1 as custom
// resources with schemas transcribed from k8s.io/api), so that TLS, tokens,
// RBAC, schema validation, conflicts and refused field selectors are the
// API server's own. The server is started once per test run by a CTest
// fixture; TOPOLOGY_KUBE_APISERVER_DIR names its directory. Without a server
// (it could not be built here) every test skips, saying why.
#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "topology/draplugin/claim_cdi.h"
#include "topology/draplugin/kube_client.h"
#include "topology/draplugin/kube_config.h"
#include "topology/draplugin/resource_slices.h"
#include "topology/draplugin/slice_validation.h"
#include "topology/plugin/http_endpoint.h"
#include "topology/testing/fake_dra_kubelet.h"

#include "child_process.h"
#include "status_matchers.h"
#include "synthetic_machines.h"
#include "temp_dir.h"
#include "wait_for.h"

namespace topology::draplugin {
namespace {

using nlohmann::json;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Not;
using ::testing::SizeIs;
using ::topology::testing::FakeDraKubelet;
using ::topology::testing::IsOk;
using ::topology::testing::StatusIs;
using namespace std::chrono_literals;

constexpr char kDriver[] = "pci.libtopology.dev";
constexpr char kSlices[] = "/apis/resource.k8s.io/v1/resourceslices";

// KEY=VALUE lines of the server's env file; empty when there is no server.
std::map<std::string, std::string> ServerEnv(std::string* why) {
  const char* dir = std::getenv("TOPOLOGY_KUBE_APISERVER_DIR");
  if (dir == nullptr) {
    *why = "TOPOLOGY_KUBE_APISERVER_DIR is not set (run under ctest)";
    return {};
  }
  std::ifstream env(std::filesystem::path(dir) / "env");
  if (!env) {
    std::ifstream skipped(std::filesystem::path(dir) / "skipped");
    std::string reason((std::istreambuf_iterator<char>(skipped)), {});
    *why = "no kube-apiserver: " +
           (reason.empty() ? std::string("it did not start") : reason);
    return {};
  }
  std::map<std::string, std::string> out;
  for (std::string line; std::getline(env, line);) {
    const auto equals = line.find('=');
    if (equals != std::string::npos) {
      out[line.substr(0, equals)] = line.substr(equals + 1);
    }
  }
  return out;
}

using ::topology::testing::WaitFor;

std::vector<SliceDevice> Devices(int count, const std::string& prefix) {
  std::vector<SliceDevice> devices;
  for (int i = 0; i < count; ++i) {
    SliceDevice device;
    device.name = prefix + "-" + std::to_string(i);
    device.attributes["resource.kubernetes.io/pciBusID"] = {
        "0000:3b:" + std::to_string(10 + i % 80) + ".0", false};
    device.attributes["resource.kubernetes.io/numaNode"] = {int64_t{i % 2},
                                                            false};
    device.attributes["resource"] = {std::string("example.com/vf"), false};
    device.attributes["driverVersion"] = {std::string("1.2.3"), true};
    devices.push_back(std::move(device));
  }
  return devices;
}

class KubeApiServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why;
    env_ = ServerEnv(&why);
    if (env_.empty()) GTEST_SKIP() << why;
    admin_ = Client(env_["KUBECONFIG"]);
    driver_ = Client(env_["KUBECONFIG_DRIVER"]);
  }
  static std::unique_ptr<KubeClient> Client(const std::string& kubeconfig) {
    auto config = LoadKubeConfig(kubeconfig);
    EXPECT_THAT(config.status(), IsOk());
    if (!config.ok()) return nullptr;
    auto client = KubeClient::Create(*config);
    EXPECT_THAT(client.status(), IsOk());
    return client.ok() ? std::move(*client) : nullptr;
  }
  static KubeConfig WithToken(const KubeConfig& base, std::string token) {
    KubeConfig config = base;
    config.token = std::move(token);
    return config;
  }
  // This node's and driver's slices as the API server has them.
  std::vector<json> SlicesOf(const std::string& node,
                             const std::string& driver = kDriver) const {
    std::vector<json> out;
    auto listed = admin_->Request("GET", kSlices);
    EXPECT_THAT(listed.status(), IsOk());
    if (!listed.ok() || listed->status != 200) return out;
    const json list = json::parse(listed->body);
    for (const json& item : list["items"]) {
      if (item["spec"].value("nodeName", "") == node &&
          item["spec"].value("driver", "") == driver) {
        out.push_back(item);
      }
    }
    return out;
  }
  size_t DevicesOf(const std::string& node,
                   const std::string& driver = kDriver) const {
    size_t n = 0;
    for (const json& slice : SlicesOf(node, driver)) {
      n += slice["spec"].value("devices", json::array()).size();
    }
    return n;
  }
  json Slice(const std::string& name, const std::string& node,
             const std::string& driver, int64_t generation) const {
    return {{"apiVersion", "resource.k8s.io/v1"},
            {"kind", "ResourceSlice"},
            {"metadata", {{"name", name}}},
            {"spec",
             {{"driver", driver},
              {"nodeName", node},
              {"pool",
               {{"name", node},
                {"generation", generation},
                {"resourceSliceCount", 1}}},
              {"devices", json::array({{{"name", "leftover"}}})}}}};
  }

  std::map<std::string, std::string> env_;
  std::unique_ptr<KubeClient> admin_;
  std::unique_ptr<KubeClient> driver_;
};

TEST_F(KubeApiServerTest, TokensCertificatesAndTheCaAreTheServersOwn) {
  auto version = admin_->Request("GET", "/version");
  ASSERT_THAT(version.status(), IsOk());
  EXPECT_EQ(version->status, 200);
  EXPECT_EQ(json::parse(version->body)["gitVersion"], "v1.20.2");

  auto base = LoadKubeConfig(env_["KUBECONFIG"]);
  ASSERT_THAT(base.status(), IsOk());
  // A user without grants: the API server's 403, named by StatusOf.
  auto viewer = KubeClient::Create(WithToken(*base, env_["KUBE_VIEWER_TOKEN"]));
  ASSERT_THAT(viewer.status(), IsOk());
  auto refused = (*viewer)->Request("GET", kSlices);
  ASSERT_THAT(refused.status(), IsOk());
  EXPECT_EQ(refused->status, 403);
  EXPECT_THAT(StatusOf(*refused, "list resourceslices"),
              StatusIs(StatusCode::kPermissionDenied,
                       HasSubstr("list resourceslices")));
  // A wrong token: 401.
  auto stranger = KubeClient::Create(WithToken(*base, "not-a-token"));
  ASSERT_THAT(stranger.status(), IsOk());
  auto unknown = (*stranger)->Request("GET", kSlices);
  ASSERT_THAT(unknown.status(), IsOk());
  EXPECT_EQ(unknown->status, 401);

  // The client certificate user (CN=admin, O=system:masters).
  KubeConfig by_certificate = *base;
  by_certificate.token.clear();
  std::ifstream cert(env_["KUBE_CLIENT_CERT"]);
  std::ifstream key(env_["KUBE_CLIENT_KEY"]);
  by_certificate.client_certificate_pem.assign(
      std::istreambuf_iterator<char>(cert), {});
  by_certificate.client_key_pem.assign(std::istreambuf_iterator<char>(key), {});
  auto certified = KubeClient::Create(by_certificate);
  ASSERT_THAT(certified.status(), IsOk());
  auto listed = (*certified)->Request("GET", kSlices);
  ASSERT_THAT(listed.status(), IsOk());
  EXPECT_EQ(listed->status, 200);

  // A CA that did not sign the server's certificate: no answer at all.
  ::topology::testing::TempDir other;
  ASSERT_EQ(std::system(("openssl req -x509 -newkey rsa:2048 -nodes -days 1 "
                         "-subj /CN=other -keyout " +
                         (other.path() / "k").string() + " -out " +
                         (other.path() / "c").string() + " 2>/dev/null")
                            .c_str()),
            0);
  KubeConfig wrong_ca = *base;
  std::ifstream ca(other.path() / "c");
  wrong_ca.ca_pem.assign(std::istreambuf_iterator<char>(ca), {});
  KubeClient::Options quick;
  quick.attempts = 1;
  auto distrusting = KubeClient::Create(wrong_ca, quick);
  ASSERT_THAT(distrusting.status(), IsOk());
  EXPECT_FALSE((*distrusting)->Request("GET", kSlices).ok());
}

TEST_F(KubeApiServerTest, TheDriversRoleIsEnoughAndNoMore) {
  // The deployment's ClusterRole, bound to the driver's user: slices yes,
  // claims and nodes only read (one by one), nothing else.
  auto slices = driver_->Request("GET", kSlices);
  ASSERT_THAT(slices.status(), IsOk());
  EXPECT_EQ(slices->status, 200);
  auto claim = driver_->Request(
      "GET", "/apis/resource.k8s.io/v1/namespaces/default/resourceclaims/none");
  ASSERT_THAT(claim.status(), IsOk());
  EXPECT_EQ(claim->status, 404);  // allowed, just absent
  auto write = driver_->Request(
      "POST", "/apis/resource.k8s.io/v1/namespaces/default/resourceclaims",
      R"({"apiVersion":"resource.k8s.io/v1","kind":"ResourceClaim",)"
      R"("metadata":{"name":"x"},"spec":{}})");
  ASSERT_THAT(write.status(), IsOk());
  EXPECT_EQ(write->status, 403);
  auto nodes = driver_->Request("GET", "/api/v1/nodes");
  ASSERT_THAT(nodes.status(), IsOk());
  EXPECT_EQ(nodes->status, 403);  // no list
  auto node = driver_->Request("GET", "/api/v1/nodes/none");
  ASSERT_THAT(node.status(), IsOk());
  EXPECT_EQ(node->status, 404);  // allowed, just absent
}

TEST_F(KubeApiServerTest, TheDeploymentsClassesAndExampleTemplatesAreServed) {
  // scripts/kube-apiserver created daemonset/dra's DeviceClasses
  // and example claim templates; nothing of them was pruned as unknown.
  for (const std::string resource : {"gpu", "nic"}) {
    auto got =
        admin_->Request("GET", "/apis/resource.k8s.io/v1/deviceclasses/" +
                                   resource + ".example.com");
    ASSERT_THAT(got.status(), IsOk());
    ASSERT_EQ(got->status, 200) << got->body;
    const json found = json::parse(got->body);
    EXPECT_THAT(
        found["spec"]["selectors"][0]["cel"]["expression"].get<std::string>(),
        HasSubstr("\"example.com/" + resource + "\""));
  }
  for (const auto& [name, attribute] :
       std::vector<std::pair<std::string, std::string>>{
           {"gpu-nic-same-root", "resource.kubernetes.io/pcieRoot"},
           {"gpu-nic-same-switch", "pci.libtopology.dev/pcieSwitch"}}) {
    auto got = admin_->Request(
        "GET",
        "/apis/resource.k8s.io/v1/namespaces/default/resourceclaimtemplates/" +
            name);
    ASSERT_THAT(got.status(), IsOk());
    ASSERT_EQ(got->status, 200) << got->body;
    const json devices = json::parse(got->body)["spec"]["spec"]["devices"];
    EXPECT_EQ(devices["constraints"][0]["matchAttribute"], attribute);
    EXPECT_THAT(devices["requests"], SizeIs(2));
  }
}

TEST_F(KubeApiServerTest, TheSchemaRefusesWhatTheApiRefuses) {
  // The transcribed schema is real validation: a device name that is not a
  // DNS label and an over-long string value are 422s naming the field.
  json bad = Slice("bad-slice", "node-bad", kDriver, 1);
  bad["spec"]["devices"] = {{{"name", "Not_A_Label"}}};
  auto refused = admin_->Request("POST", kSlices, bad.dump());
  ASSERT_THAT(refused.status(), IsOk());
  EXPECT_EQ(refused->status, 422);
  EXPECT_THAT(refused->body, HasSubstr("spec.devices.name"));
  bad["spec"]["devices"] = {
      {{"name", "ok"},
       {"attributes", {{"model", {{"string", std::string(65, 'x')}}}}}}};
  refused = admin_->Request("POST", kSlices, bad.dump());
  ASSERT_THAT(refused.status(), IsOk());
  EXPECT_EQ(refused->status, 422);
  // What the real API server refuses, the tests' server refuses too, and
  // so does ValidateResourceSlice (which the publisher runs before every
  // write): an attribute value under a field the API does not know (the
  // old list spelling: pruned, then no value), a driver name of 64
  // characters, 129 devices, 33 attributes on one device.
  std::vector<std::pair<std::string, json>> refusals;
  json unknown = Slice("bad-unknown", "node-bad", kDriver, 1);
  unknown["spec"]["devices"] = {
      {{"name", "ok"},
       {"attributes", {{"numa", {{"list", {{"int", {0, 1}}}}}}}}}};
  refusals.emplace_back("unknown value field", unknown);
  json long_driver =
      Slice("bad-driver", "node-bad", std::string(60, 'a') + ".dev", 1);
  refusals.emplace_back("64-character driver", long_driver);
  json many = Slice("bad-many", "node-bad", kDriver, 1);
  many["spec"]["devices"] = json::array();
  for (int i = 0; i < 129; ++i) {
    many["spec"]["devices"].push_back({{"name", "d" + std::to_string(i)}});
  }
  refusals.emplace_back("129 devices", many);
  json wide = Slice("bad-wide", "node-bad", kDriver, 1);
  json attributes = json::object();
  for (int i = 0; i < 33; ++i) {
    attributes["a" + std::to_string(i)] = {{"int", i}};
  }
  wide["spec"]["devices"] = {{{"name", "ok"}, {"attributes", attributes}}};
  refusals.emplace_back("33 attributes", wide);
  for (const auto& [what, slice] : refusals) {
    auto answer = admin_->Request("POST", kSlices, slice.dump());
    ASSERT_THAT(answer.status(), IsOk()) << what;
    EXPECT_EQ(answer->status, 422) << what << ": " << answer->body;
    EXPECT_THAT(ValidateResourceSlice(slice.dump()),
                StatusIs(StatusCode::kInvalidArgument))
        << what;
  }
  // Rules a CRD schema cannot say, kept by ValidateResourceSlice before
  // anything is sent: 65 devices when one has a list attribute, 49
  // attribute values on one device.
  json listed = Slice("bad-listed", "node-bad", kDriver, 1);
  listed["spec"]["devices"] = json::array();
  for (int i = 0; i < 65; ++i) {
    listed["spec"]["devices"].push_back({{"name", "d" + std::to_string(i)}});
  }
  listed["spec"]["devices"][64]["attributes"] = {{"numa", {{"ints", {0, 1}}}}};
  EXPECT_THAT(ValidateResourceSlice(listed.dump()),
              StatusIs(StatusCode::kInvalidArgument,
                       HasSubstr("must have at most 64 items")));
  json values = Slice("bad-values", "node-bad", kDriver, 1);
  values["spec"]["devices"] = {{{"name", "ok"},
                                {"attributes",
                                 {{"a", {{"ints", std::vector<int>(40, 0)}}},
                                  {"b", {{"ints", std::vector<int>(9, 0)}}}}}}};
  EXPECT_THAT(
      ValidateResourceSlice(values.dump()),
      StatusIs(StatusCode::kInvalidArgument, HasSubstr("must not exceed 48")));
  // What ValidateDevices lets through, the API server takes, the list
  // form and a taint included.
  auto devices = Devices(3, "ok");
  devices[0].attributes["resource.kubernetes.io/numaNode"] = {
      std::vector<int64_t>{0, 1}, false};
  devices[1].taints.push_back(
      {std::string(kDriver) + "/unhealthy", "aer-fatal", "NoSchedule"});
  ASSERT_THAT(ValidateDevices(kDriver, devices), IsOk());
  SlicePublisher publisher(driver_.get(), kDriver, "node-valid", {});
  EXPECT_THAT(publisher.Publish("node-valid", devices), IsOk());
  EXPECT_EQ(DevicesOf("node-valid"), 3u);
}

TEST_F(KubeApiServerTest, PublishesInSlicesKeepsOthersAndSendsNothingTwice) {
  const std::string node = "node-publish";
  // Leftovers of this node and driver (another pool, an older generation)
  // go; another node's and another driver's slice stay.
  json stale = Slice("stale-pool", node, kDriver, 0);
  stale["spec"]["pool"]["name"] = "gone-pool";
  for (const json& slice :
       {stale, Slice("other-node", "node-elsewhere", kDriver, 1),
        Slice("other-driver", node, "gpu.example.com", 1)}) {
    auto made = admin_->Request("POST", kSlices, slice.dump());
    ASSERT_THAT(made.status(), IsOk());
    ASSERT_EQ(made->status, 201) << made->body;
  }
  SlicePublisher::Options options;
  options.resync = 200ms;
  SlicePublisher publisher(driver_.get(), kDriver, node, options);
  ASSERT_THAT(publisher.Publish(node, Devices(300, "vf")), IsOk());
  const auto slices = SlicesOf(node);
  ASSERT_THAT(slices, SizeIs(3));  // 128 + 128 + 44
  for (const json& slice : slices) {
    EXPECT_EQ(slice["spec"]["pool"]["name"], node);
    EXPECT_EQ(slice["spec"]["pool"]["resourceSliceCount"], 3);
    EXPECT_LE(slice["spec"]["devices"].size(), kMaxDevicesPerSlice);
  }
  EXPECT_EQ(DevicesOf(node), 300u);
  EXPECT_THAT(SlicesOf("node-elsewhere"), SizeIs(1));
  EXPECT_THAT(SlicesOf(node, "gpu.example.com"), SizeIs(1));

  // Unchanged: nothing is sent but the list.
  const auto before = publisher.stats();
  ASSERT_THAT(publisher.Publish(node, Devices(300, "vf")), IsOk());
  const auto after = publisher.stats();
  EXPECT_EQ(after.creates, before.creates);
  EXPECT_EQ(after.updates, before.updates);
  EXPECT_EQ(after.deletes, before.deletes);

  // A changed inventory is the pool's next generation, no slice left of
  // the old one.
  ASSERT_THAT(publisher.Publish(node, Devices(100, "vf")), IsOk());
  const auto next = SlicesOf(node);
  ASSERT_THAT(next, SizeIs(1));
  EXPECT_GT(next[0]["spec"]["pool"]["generation"].get<int64_t>(),
            slices[0]["spec"]["pool"]["generation"].get<int64_t>());

  // Idle, the resync reads names and resource versions only (the server's
  // metadata-only list) and finds them as they were: no full list, no write.
  publisher.Start();
  ASSERT_TRUE(WaitFor([&] { return publisher.stats().checks >= 3; }, 10s));
  const auto idle = publisher.stats();
  ASSERT_TRUE(WaitFor(
      [&] { return publisher.stats().checks >= idle.checks + 3; }, 10s));
  EXPECT_EQ(publisher.stats().syncs, idle.syncs);
  EXPECT_EQ(publisher.stats().creates + publisher.stats().updates,
            idle.creates + idle.updates);

  // The kubelet deletes its node's slices at its start: the resync
  // publishes them again within seconds.
  for (const json& slice : next) {
    auto deleted = admin_->Request(
        "DELETE", std::string(kSlices) + "/" +
                      slice["metadata"]["name"].get<std::string>());
    ASSERT_THAT(deleted.status(), IsOk());
    ASSERT_EQ(deleted->status, 200);
  }
  EXPECT_TRUE(WaitFor([&] { return DevicesOf(node) == 100; }, 10s));
  publisher.Stop();
  EXPECT_THAT(SlicesOf("node-elsewhere"), SizeIs(1));
  EXPECT_THAT(SlicesOf(node, "gpu.example.com"), SizeIs(1));
}

// The test kit's kubelet wipes against this project's own API server,
// which has no field selector on spec.nodeName (it answers 400): listed
// whole and filtered, as the publisher lists; another node's and another
// driver's slices stay.
TEST_F(KubeApiServerTest, TheKitsKubeletWipesWithoutFieldSelectors) {
  const std::string node = "node-wiped";
  for (const json& slice :
       {Slice("wipe-other-node", "node-kept", kDriver, 1),
        Slice("wipe-other-driver", node, "gpu.example.com", 1)}) {
    auto made = admin_->Request("POST", kSlices, slice.dump());
    ASSERT_THAT(made.status(), IsOk());
    ASSERT_EQ(made->status, 201) << made->body;
  }
  SlicePublisher publisher(driver_.get(), kDriver, node, {});
  ASSERT_THAT(publisher.Publish(node, Devices(200, "vf")), IsOk());
  ASSERT_THAT(SlicesOf(node), SizeIs(2));
  auto wiped = FakeDraKubelet::WipeSlices(*admin_, node, kDriver);
  ASSERT_THAT(wiped.status(), IsOk());
  EXPECT_EQ(*wiped, 2u);
  EXPECT_THAT(SlicesOf(node), IsEmpty());
  EXPECT_THAT(SlicesOf(node, "gpu.example.com"), SizeIs(1));
  // The kubelet's start: every slice of the node, whatever the driver.
  wiped = FakeDraKubelet::WipeSlices(*admin_, node);
  ASSERT_THAT(wiped.status(), IsOk());
  EXPECT_EQ(*wiped, 1u);
  EXPECT_THAT(SlicesOf(node, "gpu.example.com"), IsEmpty());
  EXPECT_THAT(SlicesOf("node-kept"), SizeIs(1));
}

TEST_F(KubeApiServerTest,
       ASliceWrittenByAnotherIsUpdatedFromItsCurrentVersion) {
  const std::string node = "node-conflict";
  SlicePublisher publisher(driver_.get(), kDriver, node, {});
  ASSERT_THAT(publisher.Publish(node, Devices(10, "vf")), IsOk());
  auto slices = SlicesOf(node);
  ASSERT_THAT(slices, SizeIs(1));
  // Someone else writes the slice: the publisher's resourceVersion is stale
  // and its update gets the API server's 409.
  json touched = slices[0];
  touched["metadata"]["labels"] = {{"touched", "yes"}};
  auto put = admin_->Request("PUT",
                             std::string(kSlices) + "/" +
                                 touched["metadata"]["name"].get<std::string>(),
                             touched.dump());
  ASSERT_THAT(put.status(), IsOk());
  ASSERT_EQ(put->status, 200) << put->body;
  ASSERT_THAT(publisher.Publish(node, Devices(12, "vf")), IsOk());
  EXPECT_EQ(DevicesOf(node), 12u);
}

// topology-dra-driver as a process against the real API server, with the
// deployment's RBAC: fixture machine -> published slices -> a claim made and
// allocated by hand through the status subresource -> Prepare gives CDI ids
// whose spec exists -> SIGTERM -> restart -> Unprepare removes them.
class DriverAgainstApiServerTest : public KubeApiServerTest {
 protected:
  void SetUp() override {
    KubeApiServerTest::SetUp();
    if (IsSkipped()) return;
    ASSERT_TRUE(testing::WriteMachine("dual-socket-accel", root_.path()));
    std::ofstream(work_.path() / "config.yaml")
        << "resources:\n"
           "  - name: example.com/vf\n"
           "    selectors: [{drivers: [vfio-pci]}]\n";
  }
  std::unique_ptr<::topology::testing::ChildProcess> Start(
      std::string kubeconfig = "", std::string node = kNode) {
    if (kubeconfig.empty()) kubeconfig = env_["KUBECONFIG_DRIVER"];
    return std::make_unique<::topology::testing::ChildProcess>(
        TOPOLOGY_DRA_DRIVER_BINARY,
        std::vector<std::string>{
            "--config", (work_.path() / "config.yaml").string(), "--host-root",
            root_.path().string(), "--kubeconfig", kubeconfig, "--node-name",
            node, "--registry-dir", (sockets_.path() / "registry").string(),
            "--plugin-dir", (sockets_.path() / "plugin").string(), "--cdi-dir",
            (work_.path() / "cdi").string(), "-v", "1"},
        (work_.path() / "driver.log").string(), /*append=*/true);
  }
  std::string Log() const {
    std::ifstream in(work_.path() / "driver.log");
    return std::string((std::istreambuf_iterator<char>(in)), {});
  }
  static constexpr char kNode[] = "node-driver";
  ::topology::testing::TempDir root_;
  ::topology::testing::TempDir work_;
  ::topology::testing::TempDir sockets_;
};

// Kubernetes mounts a Secret, a ConfigMap or a projected service-account
// token as symbolic links into a "..data" directory it swaps atomically
// (kubeconfig -> ..data/kubeconfig, ..data -> ..2026_11_27_...). The driver
// reads its kubeconfig, token file and CA through those links and starts.
TEST_F(DriverAgainstApiServerTest,
       StartsFromCredentialsMountedAsKubernetesMountsThem) {
  namespace fs = std::filesystem;
  const fs::path mount = work_.path() / "credentials";
  const fs::path data = mount / "..2026_11_27_22_00_00.000000001";
  fs::create_directories(data);
  std::ofstream(data / "kubeconfig")
      << "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n"
      << "    server: " << env_["KUBE_URL"] << "\n"
      << "    certificate-authority: ca.crt\n"
      << "users:\n- name: u\n  user:\n    tokenFile: token\n"
      << "contexts:\n- name: x\n  context: {cluster: c, user: u}\n"
      << "current-context: x\n";
  std::ofstream(data / "token") << env_["KUBE_DRIVER_TOKEN"] << "\n";
  fs::copy_file(env_["KUBE_CA"], data / "ca.crt");
  fs::create_directory_symlink(data.filename(), mount / "..data");
  for (const char* name : {"kubeconfig", "token", "ca.crt"}) {
    fs::create_symlink(fs::path("..data") / name, mount / name);
  }
  // A node of its own: tests run side by side on one API server.
  const std::string node = "node-mounted";
  auto driver = Start((mount / "kubeconfig").string(), node);
  ASSERT_TRUE(WaitFor([&] { return DevicesOf(node) == 8; }, 15s)) << Log();
  EXPECT_THAT(Log(), Not(HasSubstr("symbolic link")));
  driver->Signal(SIGTERM);
  EXPECT_EQ(driver->Wait(5s), 0);
}

TEST_F(DriverAgainstApiServerTest, PublishesPreparesAndUnpreparesAfterRestart) {
  auto driver = Start();
  ASSERT_TRUE(WaitFor([&] { return DevicesOf(kNode) == 8; }, 15s)) << Log();
  const json slice = SlicesOf(kNode).front();
  const json& device = slice["spec"]["devices"][0];
  EXPECT_TRUE(device["attributes"].contains("resource.kubernetes.io/pcieRoot"));
  EXPECT_EQ(device["attributes"]["resource"]["string"], "example.com/vf");

  FakeDraKubelet kubelet(sockets_.path() / "registry");
  ASSERT_TRUE(WaitFor([&] { return kubelet.Register(kDriver).ok(); }, 10s))
      << Log();

  // A claim made as a user would, then allocated as the scheduler would:
  // through the status subresource.
  const std::string claims =
      "/apis/resource.k8s.io/v1/namespaces/default/resourceclaims";
  const json claim = {{"apiVersion", "resource.k8s.io/v1"},
                      {"kind", "ResourceClaim"},
                      {"metadata", {{"name", "vf-pair"}}},
                      {"spec",
                       {{"devices",
                         {{"requests",
                           {{{"name", "vfs"},
                             {"exactly",
                              {{"deviceClassName", "example.com-vf"},
                               {"allocationMode", "ExactCount"},
                               {"count", 2}}}}}}}}}}};
  auto made = admin_->Request("POST", claims, claim.dump());
  ASSERT_THAT(made.status(), IsOk());
  ASSERT_EQ(made->status, 201) << made->body;
  json stored = json::parse(made->body);
  const std::string uid = stored["metadata"]["uid"];
  const std::string first = slice["spec"]["devices"][0]["name"];
  const std::string second = slice["spec"]["devices"][1]["name"];
  stored["status"] = {{"allocation",
                       {{"devices",
                         {{"results",
                           {{{"request", "vfs"},
                             {"driver", kDriver},
                             {"pool", kNode},
                             {"device", first}},
                            {{"request", "vfs"},
                             {"driver", kDriver},
                             {"pool", kNode},
                             {"device", second}}}}}}}}};
  auto allocated =
      admin_->Request("PUT", claims + "/vf-pair/status", stored.dump());
  ASSERT_THAT(allocated.status(), IsOk());
  ASSERT_EQ(allocated->status, 200) << allocated->body;

  // A stale UID is refused for that claim alone.
  auto prepared = kubelet.Prepare(
      {{"default", uid, "vf-pair"}, {"default", "not-the-uid", "vf-pair"}});
  ASSERT_THAT(prepared.status(), IsOk());
  EXPECT_THAT(prepared->at("not-the-uid").error, HasSubstr("UID"));
  const auto& answer = prepared->at(uid);
  ASSERT_EQ(answer.error, "") << Log();
  ASSERT_THAT(answer.devices, SizeIs(2));
  EXPECT_EQ(answer.devices[0].request_names, std::vector<std::string>{"vfs"});
  const auto spec = work_.path() / "cdi" / ClaimCdiFileName(kDriver, uid);
  ASSERT_TRUE(std::filesystem::exists(spec));
  std::ifstream in(spec);
  const json cdi = json::parse(in);
  for (const auto& d : answer.devices) {
    ASSERT_THAT(d.cdi_device_ids, SizeIs(1));
    const std::string& id = d.cdi_device_ids[0];
    EXPECT_EQ(id.substr(0, id.find('=')), cdi["kind"].get<std::string>());
    bool defined = false;
    for (const json& entry : cdi["devices"]) {
      defined = defined || entry["name"] == id.substr(id.find('=') + 1);
    }
    EXPECT_TRUE(defined) << id;
  }

  driver->Signal(SIGTERM);
  EXPECT_EQ(driver->Wait(5s), 0) << Log();
  driver = Start();
  ASSERT_TRUE(WaitFor([&] { return kubelet.Register(kDriver).ok(); }, 10s))
      << Log();
  auto undone = kubelet.Unprepare({{"default", uid, "vf-pair"}});
  ASSERT_THAT(undone.status(), IsOk());
  EXPECT_EQ(undone->at(uid), "");
  EXPECT_FALSE(std::filesystem::exists(spec));
  driver->Signal(SIGTERM);
  EXPECT_EQ(driver->Wait(5s), 0);
  auto removed = admin_->Request("DELETE", claims + "/vf-pair");
  ASSERT_THAT(removed.status(), IsOk());
}

// examples/accel-dra-driver, the program docs/dra-driver-guide.md walks
// through, does what the guide says against the real API server: the
// node's eight accelerators published with the standard attributes, and a
// claim of two prepared into one CDI spec whose variable lists both.
TEST_F(DriverAgainstApiServerTest, TheGuidesExamplePublishesAndPrepares) {
  constexpr char kExample[] = "accel.example.com";
  constexpr char kExampleNode[] = "node-example";
  ::topology::testing::ChildProcess driver(
      ACCEL_DRA_DRIVER_BINARY,
      {"--driver-name", kExample, "--class", "1200", "--node-name",
       kExampleNode, "--kubeconfig", env_["KUBECONFIG_DRIVER"], "--host-root",
       root_.path().string(), "--registry-dir",
       (sockets_.path() / "registry").string(), "--plugin-dir",
       (sockets_.path() / "example").string(), "--cdi-dir",
       (work_.path() / "cdi").string()},
      (work_.path() / "example.log").string(), /*append=*/true);
  const auto log = [&] {
    std::ifstream in(work_.path() / "example.log");
    return std::string((std::istreambuf_iterator<char>(in)), {});
  };
  ASSERT_TRUE(
      WaitFor([&] { return DevicesOf(kExampleNode, kExample) == 8; }, 15s))
      << log();
  const json slice = SlicesOf(kExampleNode, kExample).front();
  std::vector<std::string> names;
  for (const json& device : slice["spec"]["devices"]) {
    EXPECT_TRUE(
        device["attributes"].contains("resource.kubernetes.io/pcieRoot"));
    EXPECT_TRUE(
        device["attributes"].contains("resource.kubernetes.io/pciBusID"));
    names.push_back(device["name"]);
  }
  FakeDraKubelet kubelet(sockets_.path() / "registry");
  ASSERT_TRUE(WaitFor([&] { return kubelet.Register(kExample).ok(); }, 10s))
      << log();

  const std::string claims =
      "/apis/resource.k8s.io/v1/namespaces/default/resourceclaims";
  json claim = {{"apiVersion", "resource.k8s.io/v1"},
                {"kind", "ResourceClaim"},
                {"metadata", {{"name", "accel-pair"}}},
                {"spec",
                 {{"devices",
                   {{"requests",
                     {{{"name", "accel"},
                       {"exactly", {{"deviceClassName", "accel"}}}}}}}}}}};
  auto made = admin_->Request("POST", claims, claim.dump());
  ASSERT_THAT(made.status(), IsOk());
  ASSERT_EQ(made->status, 201) << made->body;
  claim = json::parse(made->body);
  const std::string uid = claim["metadata"]["uid"];
  claim["status"] = {{"allocation",
                      {{"devices",
                        {{"results",
                          {{{"request", "accel"},
                            {"driver", kExample},
                            {"pool", kExampleNode},
                            {"device", names[0]}},
                           {{"request", "accel"},
                            {"driver", kExample},
                            {"pool", kExampleNode},
                            {"device", names[1]}}}}}}}}};
  auto allocated =
      admin_->Request("PUT", claims + "/accel-pair/status", claim.dump());
  ASSERT_THAT(allocated.status(), IsOk());
  ASSERT_EQ(allocated->status, 200) << allocated->body;

  auto prepared = kubelet.Prepare({{"default", uid, "accel-pair"}});
  ASSERT_THAT(prepared.status(), IsOk());
  ASSERT_EQ(prepared->at(uid).error, "") << log();
  ASSERT_THAT(prepared->at(uid).devices, SizeIs(2));
  std::ifstream in(work_.path() / "cdi" / ClaimCdiFileName(kExample, uid));
  const json spec = json::parse(in);
  EXPECT_EQ(spec["kind"], "accel.example.com/accel");
  const std::string both = slice["spec"]["devices"][0]["attributes"]
                                ["resource.kubernetes.io/pciBusID"]["string"]
                                    .get<std::string>() +
                           "," +
                           slice["spec"]["devices"][1]["attributes"]
                                ["resource.kubernetes.io/pciBusID"]["string"]
                                    .get<std::string>();
  for (const json& device : spec["devices"]) {
    EXPECT_THAT(device["containerEdits"]["env"].dump(),
                HasSubstr("ACCEL_VISIBLE_DEVICES=" + both));
  }
  auto undone = kubelet.Unprepare({{"default", uid, "accel-pair"}});
  ASSERT_THAT(undone.status(), IsOk());
  EXPECT_EQ(undone->at(uid), "");
  driver.Signal(SIGTERM);
  EXPECT_EQ(driver.Wait(5s), 0) << log();
  auto removed = admin_->Request("DELETE", claims + "/accel-pair");
  ASSERT_THAT(removed.status(), IsOk());
}

}  // namespace
}  // namespace topology::draplugin
