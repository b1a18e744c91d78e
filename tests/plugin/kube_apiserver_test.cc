// The DRA framework and topology-dra-driver against a real Kubernetes v1.37
// control plane (scripts/kube-cluster: etcd, kube-apiserver,
// kube-controller-manager, kube-scheduler, resource.k8s.io/v1 served
// natively), so that TLS, tokens, RBAC, validation, conflicts and field
// selectors are the API server's own. The cluster is started once per test
// run by a CTest fixture; TOPOLOGY_KUBE_CLUSTER_DIR names its directory.
// Under CI a cluster that could not be built fails the fixture; elsewhere
// every test skips, saying why.
#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
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

#include "build_paths.h"
#include "child_process.h"
#include "dropped_fields.h"
#include "host_views.h"
#include "nrt_object.h"
#include "publisher.h"
#include "run_command.h"
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
  const char* dir = std::getenv("TOPOLOGY_KUBE_CLUSTER_DIR");
  if (dir == nullptr) {
    *why = "TOPOLOGY_KUBE_CLUSTER_DIR is not set (run under ctest)";
    return {};
  }
  std::ifstream env(std::filesystem::path(dir) / "env");
  if (!env) {
    std::ifstream unavailable(std::filesystem::path(dir) / "unavailable");
    std::string reason((std::istreambuf_iterator<char>(unavailable)), {});
    *why = "no Kubernetes cluster: " +
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
  // A token of the ServiceAccount kube-system/`account`, bound to `bound`
  // (an object reference: its pod's node goes into the token) unless null.
  std::string TokenOf(const std::string& account, const json& bound) const {
    json request = {
        {"apiVersion", "authentication.k8s.io/v1"},
        {"kind", "TokenRequest"},
        {"spec",
         {{"audiences", {"https://kubernetes.default.svc.cluster.local"}},
          {"expirationSeconds", 3600}}}};
    if (!bound.is_null()) request["spec"]["boundObjectRef"] = bound;
    auto answer = admin_->Request(
        "POST",
        "/api/v1/namespaces/kube-system/serviceaccounts/" + account + "/token",
        request.dump());
    EXPECT_THAT(answer.status(), IsOk());
    if (!answer.ok()) return std::string();
    EXPECT_EQ(answer->status, 201) << answer->body;
    return json::parse(answer->body)["status"].value("token", "");
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
  EXPECT_EQ(json::parse(version->body)["gitVersion"], env_["KUBE_VERSION"]);
  EXPECT_THAT(env_["KUBE_VERSION"], ::testing::StartsWith("v1.37."));

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
  // scripts/kube-cluster created daemonset/dra's DeviceClasses and example
  // claim templates through the server's own validation.
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

// One edge of the ResourceSlice API: a slice the server must take or
// refuse. Both the server's own validation and ValidateResourceSlice (which
// the publisher runs before every write) are held to `accepted`.
struct SliceEdge {
  std::string name;
  bool accepted;
  std::function<void(json&)> change;  // applied to a valid one-device slice
};

json Attributes(int count, const std::string& prefix) {
  json out = json::object();
  for (int i = 0; i < count; ++i) {
    out[prefix + std::to_string(i)] = {{"int", i}};
  }
  return out;
}

json NamedDevices(int count) {
  json out = json::array();
  for (int i = 0; i < count; ++i)
    out.push_back({{"name", "d" + std::to_string(i)}});
  return out;
}

// A capacity `value` with the request policy `policy`.
json Policy(const std::string& value, json policy) {
  return {{"memory", {{"value", value}, {"requestPolicy", std::move(policy)}}}};
}

json Taints(int count) {
  json out = json::array();
  for (int i = 0; i < count; ++i) {
    out.push_back({{"key", "example.com/t" + std::to_string(i)},
                   {"effect", "NoSchedule"}});
  }
  return out;
}

std::vector<SliceEdge> SliceEdges() {
  auto device = [](json& slice) -> json& {
    return slice["spec"]["devices"][0];
  };
  return {
      {"a plain device", true, [](json&) {}},
      {"a device name that is no DNS label", false,
       [&](json& s) { device(s)["name"] = "Not_A_Label"; }},
      {"a device name of 63 characters", true,
       [&](json& s) { device(s)["name"] = std::string(63, 'd'); }},
      {"a device name of 64 characters", false,
       [&](json& s) { device(s)["name"] = std::string(64, 'd'); }},
      {"two devices of one name", false,
       [](json& s) {
         s["spec"]["devices"] = {{{"name", "x"}}, {{"name", "x"}}};
       }},
      {"a string value of 64 characters", true,
       [&](json& s) {
         device(s)["attributes"] = {
             {"model", {{"string", std::string(64, 'x')}}}};
       }},
      {"a string value of 65 characters", false,
       [&](json& s) {
         device(s)["attributes"] = {
             {"model", {{"string", std::string(65, 'x')}}}};
       }},
      {"a version that is semver", true,
       [&](json& s) {
         device(s)["attributes"] = {{"v", {{"version", "1.2.3-rc.1"}}}};
       }},
      {"a version that is no semver", false,
       [&](json& s) {
         device(s)["attributes"] = {{"v", {{"version", "1.2"}}}};
       }},
      {"two values in one attribute", false,
       [&](json& s) {
         device(s)["attributes"] = {{"a", {{"int", 1}, {"bool", true}}}};
       }},
      {"only a value field the API does not know", false,
       [&](json& s) {
         device(s)["attributes"] = {{"numa", {{"list", {{"int", {0, 1}}}}}}};
       }},
      {"an attribute in another domain", true,
       [&](json& s) {
         device(s)["attributes"] = {
             {"resource.kubernetes.io/pcieRoot", {{"string", "pci0000:00"}}}};
       }},
      {"an attribute domain of 64 characters", false,
       [&](json& s) {
         device(s)["attributes"] = {
             {std::string(60, 'a') + ".com/x", {{"int", 1}}}};
       }},
      {"an attribute name of 32 characters", true,
       [&](json& s) {
         device(s)["attributes"] = {{std::string(32, 'a'), {{"int", 1}}}};
       }},
      {"an attribute name of 33 characters", false,
       [&](json& s) {
         device(s)["attributes"] = {{std::string(33, 'a'), {{"int", 1}}}};
       }},
      {"an attribute name that is no C identifier", false,
       [&](json& s) {
         device(s)["attributes"] = {{"a-b", {{"int", 1}}}};
       }},
      // The 1.37 server checks names of one slash or none and takes these
      // unchecked (validateQualifiedName's TODO).
      {"an attribute name with two slashes", true,
       [&](json& s) {
         device(s)["attributes"] = {{"a.com/b/c", {{"int", 1}}}};
       }},
      {"32 attributes", true,
       [&](json& s) { device(s)["attributes"] = Attributes(32, "a"); }},
      {"33 attributes", false,
       [&](json& s) { device(s)["attributes"] = Attributes(33, "a"); }},
      {"31 attributes and 2 capacities", false,
       [&](json& s) {
         device(s)["attributes"] = Attributes(31, "a");
         device(s)["capacity"] = {{"memory", {{"value", "1Gi"}}},
                                  {"cores", {{"value", "4"}}}};
       }},
      {"a capacity that is no quantity", false,
       [&](json& s) {
         device(s)["capacity"] = {{"memory", {{"value", "lots"}}}};
       }},
      {"a list attribute", true,
       [&](json& s) {
         device(s)["attributes"] = {{"numa", {{"ints", {0, 1}}}}};
       }},
      {"an empty list attribute", false,
       [&](json& s) {
         device(s)["attributes"] = {{"numa", {{"ints", json::array()}}}};
       }},
      {"48 attribute values", true,
       [&](json& s) {
         device(s)["attributes"] = {{"a", {{"ints", std::vector<int>(40, 0)}}},
                                    {"b", {{"ints", std::vector<int>(8, 0)}}}};
       }},
      {"49 attribute values", false,
       [&](json& s) {
         device(s)["attributes"] = {{"a", {{"ints", std::vector<int>(40, 0)}}},
                                    {"b", {{"ints", std::vector<int>(9, 0)}}}};
       }},
      {"128 devices", true,
       [](json& s) { s["spec"]["devices"] = NamedDevices(128); }},
      {"129 devices", false,
       [](json& s) { s["spec"]["devices"] = NamedDevices(129); }},
      {"64 devices, one with a list attribute", true,
       [](json& s) {
         s["spec"]["devices"] = NamedDevices(64);
         s["spec"]["devices"][63]["attributes"] = {
             {"numa", {{"ints", {0, 1}}}}};
       }},
      {"65 devices, one with a list attribute", false,
       [](json& s) {
         s["spec"]["devices"] = NamedDevices(65);
         s["spec"]["devices"][64]["attributes"] = {
             {"numa", {{"ints", {0, 1}}}}};
       }},
      {"65 devices, one with a taint", false,
       [](json& s) {
         s["spec"]["devices"] = NamedDevices(65);
         s["spec"]["devices"][0]["taints"] = Taints(1);
       }},
      {"16 taints", true, [&](json& s) { device(s)["taints"] = Taints(16); }},
      {"17 taints", false, [&](json& s) { device(s)["taints"] = Taints(17); }},
      {"a taint with the effect None", true,
       [&](json& s) {
         device(s)["taints"] = {{{"key", "example.com/t"}, {"effect", "None"}}};
       }},
      {"a taint with an unknown effect", false,
       [&](json& s) {
         device(s)["taints"] = {
             {{"key", "example.com/t"}, {"effect", "Sometimes"}}};
       }},
      {"a taint without an effect", false,
       [&](json& s) {
         device(s)["taints"] = {{{"key", "example.com/t"}}};
       }},
      {"a taint key that is no qualified name", false,
       [&](json& s) {
         device(s)["taints"] = {{{"key", "-bad-"}, {"effect", "NoSchedule"}}};
       }},
      {"a taint value of 64 characters", false,
       [&](json& s) {
         device(s)["taints"] = {{{"key", "example.com/t"},
                                 {"value", std::string(64, 'v')},
                                 {"effect", "NoSchedule"}}};
       }},
      {"a driver name of 63 characters", true,
       [](json& s) { s["spec"]["driver"] = std::string(59, 'a') + ".dev"; }},
      {"a driver name of 64 characters", false,
       [](json& s) { s["spec"]["driver"] = std::string(60, 'a') + ".dev"; }},
      // Checked in lower case, as ValidateCSIDriverName does.
      {"a driver name with capitals", true,
       [](json& s) { s["spec"]["driver"] = "GPU.example.com"; }},
      {"a pool name in parts", true,
       [](json& s) { s["spec"]["pool"]["name"] = "rack-1/node-a"; }},
      {"a pool name with capitals", false,
       [](json& s) { s["spec"]["pool"]["name"] = "Node-A"; }},
      {"a negative generation", false,
       [](json& s) { s["spec"]["pool"]["generation"] = -1; }},
      {"a resourceSliceCount of zero", false,
       [](json& s) { s["spec"]["pool"]["resourceSliceCount"] = 0; }},
      {"a node name that is no DNS subdomain", false,
       [](json& s) { s["spec"]["nodeName"] = "Node_1"; }},
      {"a node name and allNodes", false,
       [](json& s) { s["spec"]["allNodes"] = true; }},
      {"no node at all", false, [](json& s) { s["spec"].erase("nodeName"); }},
      {"counter sets beside devices", false,
       [](json& s) {
         s["spec"]["sharedCounters"] = {
             {{"name", "pf-0"}, {"counters", {{"vfs", {{"value", "8"}}}}}}};
       }},
      {"counter sets alone", true,
       [](json& s) {
         s["spec"].erase("devices");
         s["spec"]["sharedCounters"] = {
             {{"name", "pf-0"}, {"counters", {{"vfs", {{"value", "8"}}}}}}};
       }},
      {"a counter set name that is no DNS label", false,
       [](json& s) {
         s["spec"].erase("devices");
         s["spec"]["sharedCounters"] = {
             {{"name", "PF_0"}, {"counters", {{"vfs", {{"value", "8"}}}}}}};
       }},
      {"two counter sets of one name", false,
       [](json& s) {
         s["spec"].erase("devices");
         const json set = {{"name", "pf-0"},
                           {"counters", {{"vfs", {{"value", "8"}}}}}};
         s["spec"]["sharedCounters"] = {set, set};
       }},
      {"a device consuming counters", true,
       [&](json& s) {
         device(s)["consumesCounters"] = {
             {{"counterSet", "pf-0"},
              {"counters", {{"vfs", {{"value", "1"}}}}}}};
       }},
      // Sharing by capacity (DRAConsumableCapacity, beta, on at 1.37).
      {"a request policy of valid values", true,
       [&](json& s) {
         device(s)["allowMultipleAllocations"] = true;
         device(s)["capacity"] =
             Policy("40Gi", {{"default", "10Gi"},
                             {"validValues", {"5Gi", "10Gi", "20Gi", "40Gi"}}});
       }},
      {"a request policy on a device not shared", false,
       [&](json& s) {
         device(s)["capacity"] =
             Policy("40Gi", {{"default", "10Gi"}, {"validValues", {"10Gi"}}});
       }},
      {"valid values not ascending", false,
       [&](json& s) {
         device(s)["allowMultipleAllocations"] = true;
         device(s)["capacity"] = Policy(
             "40Gi", {{"default", "10Gi"}, {"validValues", {"20Gi", "10Gi"}}});
       }},
      {"a default not among the valid values", false,
       [&](json& s) {
         device(s)["allowMultipleAllocations"] = true;
         device(s)["capacity"] = Policy(
             "40Gi", {{"default", "15Gi"}, {"validValues", {"10Gi", "20Gi"}}});
       }},
      {"valid values without a default", false,
       [&](json& s) {
         device(s)["allowMultipleAllocations"] = true;
         device(s)["capacity"] = Policy("40Gi", {{"validValues", {"10Gi"}}});
       }},
      {"a valid value above the capacity", false,
       [&](json& s) {
         device(s)["allowMultipleAllocations"] = true;
         device(s)["capacity"] = Policy(
             "40Gi", {{"default", "10Gi"}, {"validValues", {"10Gi", "80Gi"}}});
       }},
      {"11 valid values", false,
       [&](json& s) {
         device(s)["allowMultipleAllocations"] = true;
         json values = json::array();
         for (int i = 1; i <= 11; ++i) values.push_back(std::to_string(i));
         device(s)["capacity"] =
             Policy("100", {{"default", "1"}, {"validValues", values}});
       }},
      {"valid values and a range", false,
       [&](json& s) {
         device(s)["allowMultipleAllocations"] = true;
         device(s)["capacity"] =
             Policy("40Gi", {{"default", "10Gi"},
                             {"validValues", {"10Gi"}},
                             {"validRange", {{"min", "1Gi"}}}});
       }},
      {"a range with a step", true,
       [&](json& s) {
         device(s)["allowMultipleAllocations"] = true;
         device(s)["capacity"] = Policy(
             "100",
             {{"default", "10"},
              {"validRange", {{"min", "10"}, {"max", "90"}, {"step", "10"}}}});
       }},
      {"a default off the range's step", false,
       [&](json& s) {
         device(s)["allowMultipleAllocations"] = true;
         device(s)["capacity"] =
             Policy("100", {{"default", "15"},
                            {"validRange", {{"min", "10"}, {"step", "10"}}}});
       }},
      {"a range's max off its step", false,
       [&](json& s) {
         device(s)["allowMultipleAllocations"] = true;
         device(s)["capacity"] = Policy(
             "100",
             {{"default", "10"},
              {"validRange", {{"min", "10"}, {"max", "95"}, {"step", "10"}}}});
       }},
      {"a range's max above the capacity", false,
       [&](json& s) {
         device(s)["allowMultipleAllocations"] = true;
         device(s)["capacity"] =
             Policy("100", {{"default", "10"},
                            {"validRange", {{"min", "10"}, {"max", "200"}}}});
       }},
      {"a range's min above the capacity", false,
       [&](json& s) {
         device(s)["allowMultipleAllocations"] = true;
         device(s)["capacity"] = Policy(
             "100", {{"default", "200"}, {"validRange", {{"min", "200"}}}});
       }},
      {"a default below the range", false,
       [&](json& s) {
         device(s)["allowMultipleAllocations"] = true;
         device(s)["capacity"] =
             Policy("100", {{"default", "5"}, {"validRange", {{"min", "10"}}}});
       }},
      {"a step of zero", false,
       [&](json& s) {
         device(s)["allowMultipleAllocations"] = true;
         device(s)["capacity"] =
             Policy("100", {{"default", "10"},
                            {"validRange", {{"min", "10"}, {"step", "0"}}}});
       }},
      {"one step above the capacity", false,
       [&](json& s) {
         device(s)["allowMultipleAllocations"] = true;
         device(s)["capacity"] =
             Policy("100", {{"default", "10"},
                            {"validRange", {{"min", "10"}, {"step", "100"}}}});
       }},
      {"a range in millis", true,
       [&](json& s) {
         device(s)["allowMultipleAllocations"] = true;
         device(s)["capacity"] =
             Policy("1", {{"default", "250m"},
                          {"validRange", {{"min", "250m"}, {"step", "250m"}}}});
       }},
      // DRAFractionalCapacityRange is off on a 1.37 server: amounts are
      // stepped as whole numbers, rounded up (500u reads as 1).
      {"a range finer than a milli", true,
       [&](json& s) {
         device(s)["allowMultipleAllocations"] = true;
         device(s)["capacity"] = Policy(
             "1", {{"default", "0.0005"},
                   {"validRange", {{"min", "0.0005"}, {"step", "0.0005"}}}});
       }},
      {"a negative range", false,
       [&](json& s) {
         device(s)["allowMultipleAllocations"] = true;
         device(s)["capacity"] =
             Policy("100", {{"default", "-10"},
                            {"validRange", {{"min", "-10"}, {"step", "10"}}}});
       }},
      {"a range without a default", false,
       [&](json& s) {
         device(s)["allowMultipleAllocations"] = true;
         device(s)["capacity"] =
             Policy("100", {{"validRange", {{"min", "10"}}}});
       }},
      {"65 devices, one consuming counters", false,
       [](json& s) {
         s["spec"]["devices"] = NamedDevices(65);
         s["spec"]["devices"][0]["consumesCounters"] = {
             {{"counterSet", "pf-0"},
              {"counters", {{"vfs", {{"value", "1"}}}}}}};
       }},
  };
}

// Every edge, both ways: the 1.37 API server and ValidateResourceSlice take
// the same slices and refuse the same ones.
TEST_F(KubeApiServerTest, TheServerAndValidateResourceSliceAgreeOnEveryEdge) {
  int index = 0;
  for (const SliceEdge& edge : SliceEdges()) {
    json slice =
        Slice("edge-" + std::to_string(index++), "node-edges", kDriver, 1);
    edge.change(slice);
    auto answer = admin_->Request("POST", kSlices, slice.dump());
    ASSERT_THAT(answer.status(), IsOk()) << edge.name;
    // Refused: 422 by validation, 400 where the value cannot even be
    // decoded (a quantity that is none).
    if (edge.accepted) {
      EXPECT_EQ(answer->status, 201)
          << edge.name << ": the server answered " << answer->body;
    } else {
      EXPECT_THAT(answer->status, ::testing::AnyOf(400, 422))
          << edge.name << ": the server answered " << answer->body;
    }
    const Status ours = ValidateResourceSlice(slice.dump());
    if (edge.accepted) {
      EXPECT_THAT(ours, IsOk()) << edge.name;
    } else {
      EXPECT_THAT(ours, StatusIs(StatusCode::kInvalidArgument)) << edge.name;
    }
  }
  // What ValidateDevices lets through, the API server takes, the list
  // form and a taint included, published by the driver's own user.
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

  // A smaller inventory: the slices no longer needed deleted, no slice
  // left of the old one; one update makes the pool whole, so the
  // generation is kept (the Go controller's rule).
  ASSERT_THAT(publisher.Publish(node, Devices(100, "vf")), IsOk());
  const auto next = SlicesOf(node);
  ASSERT_THAT(next, SizeIs(1));
  EXPECT_EQ(next[0]["spec"]["pool"]["generation"].get<int64_t>(),
            slices[0]["spec"]["pool"]["generation"].get<int64_t>());
  EXPECT_EQ(next[0]["spec"]["pool"]["resourceSliceCount"], 1);

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

// daemonset/dra's ValidatingAdmissionPolicy on the real server: the
// driver's ServiceAccount, with a token bound to a pod on node-a (as the
// kubelet issues a pod's token), writes node-a's slices and is refused
// node-b's; a token bound to no node writes none.
// The real v1.37 server drops the fields of the gates it has off before it
// stores a slice (its strategy's dropDisabledFields): DisabledFeatures names
// exactly those gates from what was sent and what was stored, including the
// three alpha gates the Go helper's DroppedFieldsError cannot name, and
// none of the gates on (taints, consumable capacity, list attributes).
TEST_F(KubeApiServerTest, DroppedFieldsNameTheGatesOff) {
  // This cluster: v1.37 defaults plus DRAListTypeAttributes.
  for (const char* alpha :
       {"DRANodeAllocatableResources", "DRAPartitionableDevicesType",
        "DRAOptionalNodeOperations"}) {
    ASSERT_THAT(env_["KUBE_FEATURE_GATES"], Not(HasSubstr(alpha)));
  }
  ASSERT_THAT(env_["KUBE_FEATURE_GATES"],
              HasSubstr("DRAListTypeAttributes=true"));
  const json spec = {
      {"driver", kDriver},
      {"nodeName", "gates-node"},
      {"pool",
       {{"name", "gates-node"}, {"generation", 1}, {"resourceSliceCount", 1}}},
      {"partitionTypeAttribute", "example.com/profile"},
      {"skipNodeOperations", {"*"}},
      {"devices",
       {{{"name", "gpu-0"},
         {"attributes",
          {{"example.com/profile", {{"string", "full"}}},
           {"example.com/ports", {{"ints", {1, 2}}}}}},
         {"capacity", {{"example.com/memory", {{"value", "80Gi"}}}}},
         {"allowMultipleAllocations", true},
         {"taints",
          {{{"key", "example.com/maintenance"}, {"effect", "NoSchedule"}}}},
         {"nodeAllocatableResources",
          {{"cpu", {{"overhead", {{"perContainer", "1"}}}}}}}}}}};
  const json slice = {{"apiVersion", "resource.k8s.io/v1"},
                      {"kind", "ResourceSlice"},
                      {"metadata", {{"name", "gates-node-slice"}}},
                      {"spec", spec}};
  auto created = admin_->Request("POST", kSlices, slice.dump());
  ASSERT_THAT(created.status(), IsOk());
  ASSERT_EQ(created->status, 201) << created->body;
  const json stored = json::parse(created->body)["spec"];
  std::vector<std::string> gates;
  for (const DisabledFeature& gate : DisabledFeatures(spec, stored)) {
    gates.push_back(gate.gate);
  }
  EXPECT_THAT(gates, ::testing::ElementsAre("DRANodeAllocatableResources",
                                            "DRAPartitionableDevicesType",
                                            "DRAOptionalNodeOperations"));
  // The gates on kept their fields.
  const json& device = stored["devices"][0];
  EXPECT_TRUE(device.contains("taints"));
  EXPECT_TRUE(device.contains("allowMultipleAllocations"));
  EXPECT_TRUE(device["attributes"]["example.com/ports"].contains("ints"));
  auto removed =
      admin_->Request("DELETE", std::string(kSlices) + "/gates-node-slice");
  ASSERT_THAT(removed.status(), IsOk());
}

// A pool of partitions and a shareable device through the publisher, on
// the real server: the counter set in a slice of its own, the partitions
// consuming it, the shareable device with its request policy, all kept
// (their gates are on at 1.37); the partition type, whose alpha gate is
// off, is dropped once, said, and never sent again: the next publish of
// the same pool writes nothing.
TEST_F(KubeApiServerTest, APartitionedPoolAndASharedDeviceArePublishedAsKept) {
  Pool pool;
  pool.name = "partitions-node";
  pool.counter_sets = {{.name = "pf-0", .counters = {{"vfs", "2"}}}};
  pool.partition_type_attribute = std::string(kDriver) + "/partitionType";
  pool.devices.push_back(
      {.name = "pf-0",
       .attributes = {{"partitionType", {std::string("pf-2"), false}}},
       .consumes_counters = {
           {.counter_set = "pf-0", .counters = {{"vfs", "2"}}}}});
  for (const char* vf : {"vf-0", "vf-1"}) {
    pool.devices.push_back(
        {.name = vf,
         .attributes = {{"partitionType", {std::string("vf"), false}}},
         .consumes_counters = {
             {.counter_set = "pf-0", .counters = {{"vfs", "1"}}}}});
  }
  SliceDevice shared{.name = "gpu-0", .allow_multiple_allocations = true};
  shared.capacity["memory"] = {"80Gi"};
  shared.capacity["memory"].request_policy =
      CapacityRequestPolicy{.default_value = "10Gi",
                            .valid_range = CapacityRequestPolicy::Range{
                                .min = "10Gi", .step = "10Gi"}};
  pool.devices.push_back(shared);
  SlicePublisher publisher(driver_.get(), kDriver, "partitions-node", {});
  ASSERT_THAT(publisher.Publish(pool), IsOk());
  EXPECT_THAT(publisher.stats().disabled_features,
              ::testing::ElementsAre("DRAPartitionableDevicesType"));
  size_t sets = 0;
  size_t consumers = 0;
  for (const json& slice : SlicesOf("partitions-node", kDriver)) {
    const json& spec = slice["spec"];
    EXPECT_FALSE(spec.contains("partitionTypeAttribute"));
    EXPECT_EQ(spec["pool"]["resourceSliceCount"], 2);
    if (spec.contains("sharedCounters")) {
      EXPECT_FALSE(spec.contains("devices") && !spec["devices"].empty());
      sets += spec["sharedCounters"].size();
    }
    for (const json& device : spec.value("devices", json::array())) {
      consumers += device.contains("consumesCounters");
      if (device["name"] == "gpu-0") {
        EXPECT_EQ(device["allowMultipleAllocations"], true);
        EXPECT_EQ(
            device["capacity"]["memory"]["requestPolicy"]["validRange"]["step"],
            "10Gi");
      }
    }
  }
  EXPECT_EQ(sets, 1u);
  EXPECT_EQ(consumers, 3u);
  const auto before = publisher.stats();
  ASSERT_THAT(publisher.Publish(pool), IsOk());
  const auto after = publisher.stats();
  EXPECT_EQ(after.creates, before.creates);
  EXPECT_EQ(after.updates, before.updates);
  EXPECT_EQ(after.deletes, before.deletes);
  // A pool whose devices draw on a set it does not have is refused before
  // anything is sent.
  pool.counter_sets.clear();
  EXPECT_THAT(publisher.Publish(pool),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("pf-0")));
}

// The NodeResourceTopology our views render (topology-manager status
// --format nrt: zones with costs and resources, the policy, the scope and
// the pod fingerprint) is accepted by the CRD as the noderesourcetopology-
// api project publishes it (daemonset/nrt), installed in the real v1.37
// server; the server's schema is no formality: a zone without its type is
// refused.
TEST_F(KubeApiServerTest, TheNodeResourceTopologyIsValidUnderThePublishedCrd) {
  const std::string crd_file = topology::testing::SourceDir() +
                               "/daemonset/nrt/noderesourcetopology-crd.yaml";
  const auto converted = topology::testing::RunCommand(
      "python3 -c 'import json, sys, yaml; "
      "json.dump(yaml.safe_load(open(sys.argv[1])), "
      "sys.stdout)' '" +
      crd_file + "'");
  ASSERT_EQ(converted.exit_code, 0) << converted.out;
  const std::string crds =
      "/apis/apiextensions.k8s.io/v1/customresourcedefinitions";
  auto created = admin_->Request("POST", crds, converted.out);
  ASSERT_THAT(created.status(), IsOk());
  ASSERT_TRUE(created->status == 201 || created->status == 409)
      << created->body;
  ASSERT_TRUE(WaitFor(
      [&] {
        auto crd = admin_->Request(
            "GET", crds + "/noderesourcetopologies.topology.node.k8s.io");
        if (!crd.ok() || crd->status != 200) return false;
        const json doc = json::parse(crd->body, nullptr, false);
        for (const json& condition :
             doc["status"].value("conditions", json::array())) {
          if (condition.value("type", "") == "Established" &&
              condition.value("status", "") == "True") {
            return true;
          }
        }
        return false;
      },
      30s));

  topology::testing::TempDir machine;
  const Topology topology =
      topology::testing::DiscoverDualSocketGpuMachine(machine.path());
  host::HostSnapshot snapshot;
  snapshot.topology = &topology;
  snapshot.node_name = "nrt-node";
  snapshot.policy = "single-numa-node";
  snapshot.scope = "container";
  snapshot.shared_cpus = topology.AllCpus();
  host::PodResult pod;
  pod.ns = "default";
  pod.name = "pinned";
  pod.admitted = true;
  snapshot.pods.push_back(pod);
  json nrt = host::NodeResourceTopologyJson(snapshot);
  const std::string collection =
      "/apis/topology.node.k8s.io/v1alpha2/noderesourcetopologies";
  auto accepted = admin_->Request("POST", collection, nrt.dump());
  ASSERT_THAT(accepted.status(), IsOk());
  EXPECT_EQ(accepted->status, 201) << accepted->body;
  const json stored = json::parse(accepted->body, nullptr, false);
  EXPECT_EQ(stored["zones"].size(), 2u);
  EXPECT_EQ(stored["attributes"], nrt["attributes"]);
  nrt["metadata"]["name"] = "nrt-node-untyped";
  nrt["zones"][0].erase("type");
  auto refused = admin_->Request("POST", collection, nrt.dump());
  ASSERT_THAT(refused.status(), IsOk());
  EXPECT_EQ(refused->status, 422) << refused->body;
  EXPECT_THAT(refused->body, HasSubstr("type"));
  ASSERT_THAT(admin_->Request("DELETE", collection + "/nrt-node").status(),
              IsOk());
}

TEST_F(KubeApiServerTest, TheAdmissionPolicyKeepsEachDriverToItsNodesSlices) {
  const json node = {{"apiVersion", "v1"},
                     {"kind", "Node"},
                     {"metadata", {{"name", "node-a"}}}};
  auto made = admin_->Request("POST", "/api/v1/nodes", node.dump());
  ASSERT_THAT(made.status(), IsOk());
  ASSERT_EQ(made->status, 201) << made->body;
  // A pod of the driver on node-a; with no kubelet there it never runs,
  // but a token bound to it carries the node's name.
  const json pod = {
      {"apiVersion", "v1"},
      {"kind", "Pod"},
      {"metadata", {{"name", "driver-on-node-a"}}},
      {"spec",
       {{"nodeName", "node-a"},
        {"serviceAccountName", "topology-dra-driver"},
        {"automountServiceAccountToken", false},
        {"containers", {{{"name", "driver"}, {"image", "driver:none"}}}}}}};
  made = admin_->Request("POST", "/api/v1/namespaces/kube-system/pods",
                         pod.dump());
  ASSERT_THAT(made.status(), IsOk());
  ASSERT_EQ(made->status, 201) << made->body;
  const std::string pod_uid = json::parse(made->body)["metadata"]["uid"];
  const auto token_for = [&](const json& bound) {
    return TokenOf("topology-dra-driver", bound);
  };
  const std::string on_node = token_for({{"apiVersion", "v1"},
                                         {"kind", "Pod"},
                                         {"name", "driver-on-node-a"},
                                         {"uid", pod_uid}});
  const std::string unbound = token_for(nullptr);
  auto base = LoadKubeConfig(env_["KUBECONFIG"]);
  ASSERT_THAT(base.status(), IsOk());
  auto driver = KubeClient::Create(WithToken(*base, on_node));
  ASSERT_THAT(driver.status(), IsOk());
  auto nowhere = KubeClient::Create(WithToken(*base, unbound));
  ASSERT_THAT(nowhere.status(), IsOk());

  // The policy is in force once the server has loaded it: until then a
  // dry run of the write it must refuse goes through.
  const std::string dry_run = std::string(kSlices) + "?dryRun=All";
  const json theirs = Slice("policy-node-b", "node-b", kDriver, 1);
  ASSERT_TRUE(WaitFor(
      [&] {
        auto answer = (*driver)->Request("POST", dry_run, theirs.dump());
        return answer.ok() && answer->status == 403;
      },
      30s));
  auto refused = (*driver)->Request("POST", kSlices, theirs.dump());
  ASSERT_THAT(refused.status(), IsOk());
  EXPECT_EQ(refused->status, 403);
  EXPECT_THAT(refused->body,
              HasSubstr("the driver on node node-a may not write the slices "
                        "of node node-b"));
  const json ours = Slice("policy-node-a", "node-a", kDriver, 1);
  auto allowed = (*driver)->Request("POST", kSlices, ours.dump());
  ASSERT_THAT(allowed.status(), IsOk());
  EXPECT_EQ(allowed->status, 201) << allowed->body;
  auto unbound_write = (*nowhere)->Request(
      "POST", kSlices, Slice("policy-nowhere", "node-a", kDriver, 1).dump());
  ASSERT_THAT(unbound_write.status(), IsOk());
  EXPECT_EQ(unbound_write->status, 403);
  EXPECT_THAT(unbound_write->body, HasSubstr("bound to no node"));
  // Deleting: the old object's node decides.
  auto deleted =
      (*driver)->Request("DELETE", std::string(kSlices) + "/policy-node-a");
  ASSERT_THAT(deleted.status(), IsOk());
  EXPECT_EQ(deleted->status, 200) << deleted->body;
}

// daemonset/nrt's RBAC and admission policy, as the cluster's fixture
// created them from the files: the exporter's token, bound to a pod on
// node-b, writes node-b's NodeResourceTopology, the object the exporter
// renders; another node's is refused (403) by the policy, and so is every
// write of a token bound to no pod.
TEST_F(KubeApiServerTest, TheAdmissionPolicyKeepsEachExporterToItsNodesObject) {
  for (const std::string name : {"nrt-node-a", "nrt-node-b"}) {
    auto made = admin_->Request("POST", "/api/v1/nodes",
                                json({{"apiVersion", "v1"},
                                      {"kind", "Node"},
                                      {"metadata", {{"name", name}}}})
                                    .dump());
    ASSERT_THAT(made.status(), IsOk());
    ASSERT_TRUE(made->status == 201 || made->status == 409) << made->body;
  }
  const json pod = {
      {"apiVersion", "v1"},
      {"kind", "Pod"},
      {"metadata", {{"name", "exporter-on-nrt-node-b"}}},
      {"spec",
       {{"nodeName", "nrt-node-b"},
        {"serviceAccountName", "topology-nrt-exporter"},
        {"automountServiceAccountToken", false},
        {"containers", {{{"name", "exporter"}, {"image", "exporter:none"}}}}}}};
  auto made = admin_->Request("POST", "/api/v1/namespaces/kube-system/pods",
                              pod.dump());
  ASSERT_THAT(made.status(), IsOk());
  ASSERT_EQ(made->status, 201) << made->body;
  const std::string pod_uid = json::parse(made->body)["metadata"]["uid"];
  const auto token_for = [&](const json& bound) {
    return TokenOf("topology-nrt-exporter", bound);
  };
  auto base = LoadKubeConfig(env_["KUBECONFIG"]);
  ASSERT_THAT(base.status(), IsOk());
  auto exporter = KubeClient::Create(
      WithToken(*base, token_for({{"apiVersion", "v1"},
                                  {"kind", "Pod"},
                                  {"name", "exporter-on-nrt-node-b"},
                                  {"uid", pod_uid}})));
  ASSERT_THAT(exporter.status(), IsOk());
  auto nowhere = KubeClient::Create(WithToken(*base, token_for(nullptr)));
  ASSERT_THAT(nowhere.status(), IsOk());

  const auto object = [](const std::string& node) {
    nrt::NodeTopology topology{
        .node_name = node,
        .policy = "single-numa-node",
        .max_numa_nodes = 34,
        .fingerprint = "pfp0v0010000000000000000",
        .fingerprint_method = "all",
        .zones = {
            {.id = 0, .costs = {{0, 10}}, .resources = {{"cpu", 4, 4, 4}}}}};
    return nrt::Render(topology);
  };
  const std::string collection = nrt::kCollectionPath;
  ASSERT_TRUE(WaitFor(
      [&] {
        auto answer = (*exporter)->Request("POST", collection + "?dryRun=All",
                                           object("nrt-node-a").dump());
        return answer.ok() && answer->status == 403;
      },
      30s));
  auto refused =
      (*exporter)->Request("POST", collection, object("nrt-node-a").dump());
  ASSERT_THAT(refused.status(), IsOk());
  EXPECT_EQ(refused->status, 403);
  EXPECT_THAT(refused->body,
              HasSubstr("the exporter on node nrt-node-b may not write the "
                        "NodeResourceTopology of nrt-node-a"));
  // Its own node's, through the exporter's publisher: created, then
  // updated, then left alone when nothing changed.
  nrt::Publisher publisher(exporter->get());
  ASSERT_THAT(publisher.Publish(object("nrt-node-b")), IsOk());
  json changed = object("nrt-node-b");
  changed["zones"][0]["resources"][0]["available"] = "3";
  ASSERT_THAT(publisher.Publish(changed), IsOk());
  ASSERT_THAT(publisher.Publish(changed), IsOk());
  EXPECT_EQ(publisher.stats().creates, 1u);
  EXPECT_EQ(publisher.stats().updates, 1u);
  // Someone else's write in between: the update reads again and wins.
  json stored = json::parse(
      (*exporter)->Request("GET", collection + "/nrt-node-b")->body);
  stored["metadata"]["labels"] = {{"example.com/kept", "yes"}};
  auto other =
      admin_->Request("PUT", collection + "/nrt-node-b", stored.dump());
  ASSERT_THAT(other.status(), IsOk());
  ASSERT_EQ(other->status, 200) << other->body;
  changed["zones"][0]["resources"][0]["available"] = "2";
  ASSERT_THAT(publisher.Publish(changed), IsOk());
  json now = json::parse(
      (*exporter)->Request("GET", collection + "/nrt-node-b")->body);
  EXPECT_EQ(now["zones"][0]["resources"][0]["available"], "2");
  EXPECT_EQ(now["metadata"]["labels"]["example.com/kept"], "yes");
  EXPECT_EQ(now["attributes"][2]["name"], "topologyManagerMaxNUMANodes");

  auto unbound =
      (*nowhere)->Request("POST", collection, object("nrt-node-a").dump());
  ASSERT_THAT(unbound.status(), IsOk());
  EXPECT_EQ(unbound->status, 403);
  EXPECT_THAT(unbound->body, HasSubstr("bound to no node"));
  ASSERT_THAT(admin_->Request("DELETE", collection + "/nrt-node-b").status(),
              IsOk());
}

// The test kit's kubelet wipes as the kubelet does, with field selectors on
// spec.nodeName and spec.driver, which the 1.37 server answers itself
// (no list of other nodes' slices); another node's and another driver's
// slices stay.
TEST_F(KubeApiServerTest, TheKitsKubeletWipesWithFieldSelectors) {
  const std::string node = "node-wiped";
  for (const json& slice :
       {Slice("wipe-other-node", "node-kept", kDriver, 1),
        Slice("wipe-other-driver", node, "gpu.example.com", 1)}) {
    auto made = admin_->Request("POST", kSlices, slice.dump());
    ASSERT_THAT(made.status(), IsOk());
    ASSERT_EQ(made->status, 201) << made->body;
  }
  bool filter_here = false;
  auto selected = ListNodeSlices(*admin_, "node-kept", kDriver, &filter_here);
  ASSERT_THAT(selected.status(), IsOk());
  EXPECT_EQ(selected->status, 200) << selected->body;
  EXPECT_FALSE(filter_here);
  EXPECT_THAT(json::parse(selected->body)["items"], SizeIs(1));
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
        topology::testing::ProgramPath("topology-dra-driver"),
        std::vector<std::string>{
            "--config", (work_.path() / "config.yaml").string(), "--host-root",
            root_.path().string(), "--kubeconfig", kubeconfig, "--node-name",
            node, "--registry-dir", (sockets_.path() / "registry").string(),
            "--plugin-dir", (sockets_.path() / "plugin").string(), "--cdi-dir",
            (work_.path() / "cdi").string(),
            // Its own kubelet paths: the node's kubelet is never asked.
            "--kubelet-root", (sockets_.path() / "kubelet").string(),
            "--device-plugin-dir",
            (sockets_.path() / "kubelet" / "device-plugins").string(), "-v",
            "1"},
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
      topology::testing::ProgramPath("accel-dra-driver"),
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
