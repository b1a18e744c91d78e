// The fixture of the tests on the real node (scripts/kube-cluster
// start-node): the cluster's files, an admin client of its API server, and
// what the tests ask of the node (pods, their logs and events, the
// kubelet's state files). The fixture starts the node once per run;
// TOPOLOGY_KUBE_CLUSTER_DIR names its directory. Without a cluster (not
// built here, outside CI) every test skips, saying why.
#ifndef TOPOLOGY_TESTS_PLUGIN_KUBE_NODE_FIXTURE_H_
#define TOPOLOGY_TESTS_PLUGIN_KUBE_NODE_FIXTURE_H_

#include <chrono>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "topology/draplugin/kube_client.h"
#include "topology/draplugin/kube_config.h"

#include "build_paths.h"
#include "child_process.h"
#include "status_matchers.h"
#include "temp_dir.h"
#include "wait_for.h"

namespace topology::draplugin {

using nlohmann::json;

using ::testing::HasSubstr;
using ::topology::testing::IsOk;
using ::topology::testing::WaitFor;
using namespace std::chrono_literals;

constexpr char kResource[] = "example.com/virtio";
constexpr char kEnv[] = "PCIDEVICE_EXAMPLE_COM_VIRTIO";
constexpr char kDraResource[] = "example.com/virtio-dra";
constexpr char kDraEnv[] = "PCIDEVICE_EXAMPLE_COM_VIRTIO_DRA";
constexpr char kPods[] = "/api/v1/namespaces/default/pods";
constexpr char kDriver[] = "pci.libtopology.dev";

// JSON objects here are never const: operator[] of a const json on a key
// that is absent is undefined (the kubelet leaves "entries" out of its
// state files when no container holds anything); on a mutable one it is
// null.

// KEY=VALUE lines of `file`; empty when it is absent.
inline std::map<std::string, std::string> ReadEnv(
    const std::filesystem::path& file) {
  std::map<std::string, std::string> out;
  std::ifstream in(file);
  for (std::string line; std::getline(in, line);) {
    const auto equals = line.find('=');
    if (equals != std::string::npos) {
      out[line.substr(0, equals)] = line.substr(equals + 1);
    }
  }
  return out;
}

inline std::string ReadFile(const std::filesystem::path& file) {
  std::ifstream in(file);
  return std::string((std::istreambuf_iterator<char>(in)), {});
}

inline size_t Count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos;
       at = text.find(what, at + what.size())) {
    ++n;
  }
  return n;
}

class KubeNodeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* dir = std::getenv("TOPOLOGY_KUBE_CLUSTER_DIR");
    ASSERT_NE(dir, nullptr) << "TOPOLOGY_KUBE_CLUSTER_DIR is not set";
    dir_ = dir;
    if (std::filesystem::exists(dir_ / "unavailable")) {
      GTEST_SKIP() << "no Kubernetes cluster: "
                   << ReadFile(dir_ / "unavailable");
    }
    env_ = ReadEnv(dir_ / "env");
    node_ = ReadEnv(dir_ / "node-env");
    ASSERT_FALSE(node_.empty())
        << "the cluster has no node (see the log of kube_cluster_start)";
    auto config = LoadKubeConfig(env_["KUBECONFIG"]);
    ASSERT_THAT(config.status(), IsOk());
    auto client = KubeClient::Create(*config);
    ASSERT_THAT(client.status(), IsOk());
    admin_ = std::move(*client);
    std::ofstream(work_.path() / "config.yaml")
        << "resources:\n"
           "  - name: "
        << kResource
        << "\n"
           "    selectors: [{classes: [\"0200\"], drivers: [virtio-pci]}]\n";
  }

  json Get(const std::string& path) const {
    auto answer = admin_->Request("GET", path);
    if (!answer.ok() || answer->status != 200) return json();
    return json::parse(answer->body, nullptr, false);
  }
  long Post(const std::string& path, const json& body) const {
    auto answer = admin_->Request("POST", path, body.dump());
    EXPECT_THAT(answer.status(), IsOk());
    if (!answer.ok()) return 0;
    EXPECT_EQ(answer->status, 201) << path << ": " << answer->body;
    return answer->status;
  }
  void Delete(const std::string& path) const {
    auto answer = admin_->Request("DELETE", path);
    EXPECT_THAT(answer.status(), IsOk());
  }
  // The node's allocatable count of `resource`, "" when it has none.
  std::string Allocatable(const std::string& resource) const {
    json node = Get("/api/v1/nodes/" + node_.at("KUBE_NODE"));
    if (!node.is_object()) return "";
    return node["status"]["allocatable"].value(resource, "");
  }
  std::string PodPhase(const std::string& name) const {
    json pod = Get(std::string(kPods) + "/" + name);
    if (!pod.is_object()) return "";
    return pod["status"].value("phase", "");
  }
  // What the pod's container printed, through the API server and the
  // kubelet (pods/log).
  std::string Logs(const std::string& name) const {
    auto answer =
        admin_->Request("GET", std::string(kPods) + "/" + name + "/log");
    if (!answer.ok() || answer->status != 200) return "";
    return answer->body;
  }
  bool Gone(const std::string& name) const {
    auto answer = admin_->Request("GET", std::string(kPods) + "/" + name);
    return answer.ok() && answer->status == 404;
  }
  // The pod's events, one line each: what the scheduler and the kubelet
  // said (for failure messages).
  std::string Events(const std::string& name) const {
    json events = Get(
        "/api/v1/namespaces/default/events?fieldSelector=involvedObject.name%"
        "3D" +
        name);
    std::string out;
    if (!events.is_object()) return out;
    for (const json& event : events["items"]) {
      out +=
          event.value("reason", "") + ": " + event.value("message", "") + "\n";
    }
    return out;
  }
  // A pod of one busybox container that prints what it was given (its
  // CPUs, memory nodes, environment and /dev/net), then waits to be
  // deleted.
  json Pod(const std::string& name, const json& resources) const {
    return {
        {"apiVersion", "v1"},
        {"kind", "Pod"},
        {"metadata", {{"name", name}}},
        {"spec",
         {{"terminationGracePeriodSeconds", 1},
          {"automountServiceAccountToken", false},
          {"containers",
           {{{"name", "app"},
             {"image", node_.at("BUSYBOX_IMAGE")},
             {"imagePullPolicy", "Never"},
             {"command",
              {"sh", "-c",
               "grep -E '^(Cpus|Mems)_allowed_list' /proc/self/status; env; "
               "ls -ln /dev/net 2>&1; "
               "echo printed; exec sleep 3600"}},
             {"resources", resources}}}}}}};
  }
  // Whether the pod's container printed all it prints (it ends with
  // "printed"), within the two minutes a pod may take to be scheduled,
  // prepared and started here.
  bool Printed(const std::string& pod) const {
    return WaitFor(
        [&] { return Logs(pod).find("printed") != std::string::npos; }, 120s);
  }
  // Why a pod is not there yet: its phase and events.
  std::string Why(const std::string& pod) const {
    return PodPhase(pod) + "\n" + Events(pod);
  }
  // Creates `object` in the collection at `path`; one of that name already
  // there (another test of the run made it) is as good.
  void Ensure(const std::string& path, const json& object) const {
    auto answer = admin_->Request("POST", path, object.dump());
    ASSERT_THAT(answer.status(), IsOk());
    EXPECT_TRUE(answer->status == 201 || answer->status == 409)
        << path << ": " << answer->body;
  }
  // The DeviceClass of the DRA tests' resource (kDraResource, served by
  // kDriver), with its extendedResourceName and a configuration (the
  // variable VIRTIO_CONFIGURED_BY=device-class), and a claim template of
  // one device of it.
  void EnsureDraClassAndTemplate() const {
    Ensure("/apis/resource.k8s.io/v1/deviceclasses",
           {{"apiVersion", "resource.k8s.io/v1"},
            {"kind", "DeviceClass"},
            {"metadata", {{"name", "virtio.example.com"}}},
            {"spec",
             {{"extendedResourceName", kDraResource},
              // Configuration from the class (FromClass in the allocation):
              // what a pod written for the device plugin, which carries no
              // claim configuration, gets through DRA.
              {"config",
               {{{"opaque",
                  {{"driver", kDriver},
                   {"parameters",
                    {{"env", {{"VIRTIO_CONFIGURED_BY", "device-class"}}}}}}}}}},
              {"selectors",
               {{{"cel",
                  {{"expression", std::string("device.driver == \"") + kDriver +
                                      "\" && device.attributes[\"" + kDriver +
                                      "\"].resource == \"" + kDraResource +
                                      "\""}}}}}}}}});
    Ensure("/apis/resource.k8s.io/v1/namespaces/default/resourceclaimtemplates",
           {{"apiVersion", "resource.k8s.io/v1"},
            {"kind", "ResourceClaimTemplate"},
            {"metadata", {{"name", "virtio"}}},
            {"spec",
             {{"spec",
               {{"devices",
                 {{"requests",
                   {{{"name", "nic"},
                     {"exactly",
                      {{"deviceClassName", "virtio.example.com"}}}}}}}}}}}}});
  }
  // The driver's configuration: the machine's virtio network function as
  // kDraResource; with `device_node`, /dev/net/tun handed out with it (a
  // device node every such machine has), so that a container shows the
  // CDI edits' device node as well as their environment.
  static std::string DraConfig(bool device_node = false) {
    return std::string("resources:\n  - name: ") + kDraResource +
           "\n    selectors: [{classes: [\"0200\"], drivers: [virtio-pci]}]\n" +
           (device_node ? "    deviceNodes: [/dev/net/tun]\n" : "");
  }
  // The CDI specs the driver has written (one per prepared claim).
  size_t DriverCdiSpecs() const {
    size_t n = 0;
    for (const auto& entry :
         std::filesystem::directory_iterator(node_.at("CDI_DIR"))) {
      n += entry.path().filename().string().starts_with(kDriver);
    }
    return n;
  }
  // A DeviceClass `name` of the devices kDriver publishes as the
  // configuration's resource `resource`; one already there is as good.
  void EnsureResourceClass(const std::string& name,
                           const std::string& resource) const {
    Ensure("/apis/resource.k8s.io/v1/deviceclasses",
           {{"apiVersion", "resource.k8s.io/v1"},
            {"kind", "DeviceClass"},
            {"metadata", {{"name", name}}},
            {"spec",
             {{"selectors",
               {{{"cel",
                  {{"expression", std::string("device.driver == \"") + kDriver +
                                      "\" && device.attributes[\"" + kDriver +
                                      "\"].resource == \"" + resource +
                                      "\""}}}}}}}}});
  }
  // topology-dra-driver on this node, reading the generated machine at
  // `root` with the configuration `config` (YAML) and `flags` beyond the
  // node's own, logging to <work>/<tag>-driver.log (`*log`); nullptr, the
  // test failed, when the kubelet did not register it within a minute.
  std::unique_ptr<::topology::testing::ChildProcess> StartDraDriver(
      const std::string& tag, const std::filesystem::path& root,
      const std::string& config, const std::vector<std::string>& flags,
      std::string* log) const {
    const auto config_file = work_.path() / (tag + "-config.yaml");
    std::ofstream(config_file) << config;
    *log = (work_.path() / (tag + "-driver.log")).string();
    std::vector<std::string> args = {"--config",
                                     config_file.string(),
                                     "--host-root",
                                     root.string(),
                                     "--kubeconfig",
                                     env_.at("KUBECONFIG_DRIVER"),
                                     "--node-name",
                                     node_.at("KUBE_NODE"),
                                     "--kubelet-root",
                                     node_.at("KUBELET_ROOT"),
                                     "--cdi-dir",
                                     node_.at("CDI_DIR"),
                                     "-v",
                                     "1"};
    args.insert(args.end(), flags.begin(), flags.end());
    auto driver = std::make_unique<::topology::testing::ChildProcess>(
        topology::testing::ProgramPath("topology-dra-driver"), args, *log,
        /*append=*/true);
    const std::string& written = *log;
    const bool registered = WaitFor(
        [&] {
          return ReadFile(written).find("registered with the kubelet") !=
                 std::string::npos;
        },
        60s);
    EXPECT_TRUE(registered) << ReadFile(written);
    return registered ? std::move(driver) : nullptr;
  }
  // The driver stops on SIGTERM within 5 s, exit 0; then this node's slices
  // go, so that the next test publishes its own devices.
  void StopDraDriver(::topology::testing::ChildProcess& driver,
                     const std::string& log) const {
    driver.Signal(SIGTERM);
    EXPECT_EQ(driver.Wait(5s), 0) << ReadFile(log);
    Delete(
        "/apis/resource.k8s.io/v1/"
        "resourceslices?fieldSelector=spec.nodeName%3D" +
        node_.at("KUBE_NODE"));
  }
  // Why the scheduler holds `pod` back: the message of its PodScheduled
  // condition while False for Unschedulable; "" otherwise.
  std::string Unschedulable(const std::string& pod) const {
    json object = Get(std::string(kPods) + "/" + pod);
    if (!object.is_object()) return "";
    for (const json& condition :
         object["status"].value("conditions", json::array())) {
      if (condition.value("type", "") == "PodScheduled" &&
          condition.value("status", "") == "False" &&
          condition.value("reason", "") == "Unschedulable") {
        return condition.value("message", "");
      }
    }
    return "";
  }
  json KubeletState(const std::string& file) const {
    std::ifstream in(std::filesystem::path(node_.at("KUBELET_ROOT")) / file);
    return json::parse(in, nullptr, false);
  }
  std::string Script() const {
    return topology::testing::SourceDir() + "/scripts/kube-cluster";
  }

  std::filesystem::path dir_;
  std::map<std::string, std::string> env_;
  std::map<std::string, std::string> node_;
  std::unique_ptr<KubeClient> admin_;
  ::topology::testing::TempDir work_;
};

}  // namespace topology::draplugin

#endif  // TOPOLOGY_TESTS_PLUGIN_KUBE_NODE_FIXTURE_H_
