// The shipped DaemonSets as pods of the real v1.37 node: the manifests of
// daemonset/dra and deploy/both-paths rendered as kustomize renders them,
// run from an image of the built binaries (no registry here), by the real
// DaemonSet controller, scheduler, kubelet and containerd. The pods reach
// the API server through the kubernetes Service with their service
// account's token (the driver's admission policy judges its writes).
//
// What changes for this node, and only that: the image; the kubelet's
// --root-dir and the CDI directory (an operator whose kubelet and runtime
// keep them elsewhere sets the same); the memory limit under a sanitizer;
// the ConfigMaps, for this machine's devices.
#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "build_paths.h"
#include "kube_node_fixture.h"
#include "run_command.h"

namespace topology::draplugin {
namespace {

using ::topology::testing::RunCommand;

constexpr char kImage[] = "localhost/libtopology/topology-device-plugin:test";
constexpr char kSystem[] = "/api/v1/namespaces/kube-system";
constexpr char kDaemonSets[] =
    "/apis/apps/v1/namespaces/kube-system/daemonsets";
constexpr char kDriverLabel[] = "app.kubernetes.io/name%3Dtopology-dra-driver";

// Every string of `node` with `from` (a path prefix) replaced by `to`,
// except where `keep` follows it.
void ReplacePrefix(json& node, const std::string& from, const std::string& to,
                   const std::string& keep = "") {
  if (node.is_string()) {
    std::string text = node.get<std::string>();
    for (size_t at = text.find(from); at != std::string::npos;
         at = text.find(from, at + 1)) {
      const std::string rest = text.substr(at + from.size());
      if (!keep.empty() && rest.starts_with(keep)) continue;
      if (!rest.empty() && rest[0] != '/' && rest[0] != '\0') continue;
      text.replace(at, from.size(), to);
      at += to.size() - 1;
    }
    node = text;
  } else if (node.is_structured()) {
    for (json& child : node) ReplacePrefix(child, from, to, keep);
  }
}

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

// The collection of a rendered object's kind.
std::string Collection(json& object) {
  const std::string kind = object.value("kind", "");
  const std::string ns = object["metadata"].value("namespace", "");
  if (kind == "ConfigMap") return "/api/v1/namespaces/" + ns + "/configmaps";
  if (kind == "ServiceAccount") {
    return "/api/v1/namespaces/" + ns + "/serviceaccounts";
  }
  if (kind == "DaemonSet")
    return "/apis/apps/v1/namespaces/" + ns + "/daemonsets";
  if (kind == "NetworkPolicy") {
    return "/apis/networking.k8s.io/v1/namespaces/" + ns + "/networkpolicies";
  }
  if (kind == "ClusterRole")
    return "/apis/rbac.authorization.k8s.io/v1/clusterroles";
  if (kind == "ClusterRoleBinding") {
    return "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings";
  }
  if (kind == "DeviceClass") return "/apis/resource.k8s.io/v1/deviceclasses";
  if (kind == "ValidatingAdmissionPolicy") {
    return "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicies";
  }
  if (kind == "ValidatingAdmissionPolicyBinding") {
    return "/apis/admissionregistration.k8s.io/v1/"
           "validatingadmissionpolicybindings";
  }
  return "";
}

class KubeDaemonSetTest : public KubeNodeTest {
 protected:
  void SetUp() override {
    KubeNodeTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    // The image: both binaries and the libraries they load, the device
    // plugin's entry point as in deploy/Dockerfile.
    const auto tar = work_.path() / "image.tar";
    auto made = RunCommand(
        std::string("python3 ") + topology::testing::SourceDir() +
        "/tests/kube-cluster/images/make_image.py --name " + kImage +
        " --out " + tar.string() +
        " --entrypoint /usr/bin/topology-device-plugin --with-libraries"
        " --file " +
        topology::testing::ProgramPath("topology-dra-driver") +
        "=/usr/bin/topology-dra-driver"
        " --file " +
        topology::testing::ProgramPath("topology-device-plugin") +
        "=/usr/bin/topology-device-plugin");
    ASSERT_EQ(made.exit_code, 0) << made.out;
    auto imported =
        RunCommand(node_["CTR"] + " --address " + node_["CONTAINERD_ADDRESS"] +
                   " -n k8s.io images import " + tar.string());
    ASSERT_EQ(imported.exit_code, 0) << imported.out;
  }
  void TearDown() override {
    // What the test made goes, and the slices its drivers left: the next
    // test starts from the node the fixture made.
    for (json& object : created_) {
      Delete(Collection(object) + "/" + object["metadata"].value("name", ""));
    }
    if (!created_.empty()) {
      for (json& object : created_) {
        if (object.value("kind", "") != "DaemonSet") continue;
        const std::string selector =
            "app.kubernetes.io%2Fname%3D" +
            object["spec"]["selector"]["matchLabels"].value(
                "app.kubernetes.io/name", "");
        EXPECT_TRUE(WaitFor([&] { return Pods(selector).empty(); }, 60s, 200ms))
            << SystemPods();
      }
      Delete(
          "/apis/resource.k8s.io/v1/resourceslices?fieldSelector=spec."
          "nodeName%3D" +
          node_["KUBE_NODE"]);
    }
  }

  // The objects kustomize makes of `kustomization` (a directory of the
  // repository), as this node needs them.
  std::vector<json> Render(const std::string& kustomization) {
    const auto out = work_.path() / "rendered.json";
    auto rendered = RunCommand(std::string(TOPOLOGY_SYSTEM_PYTHON3) + " " +
                               topology::testing::SourceDir() +
                               "/tests/deploy/validate_manifests.py --render " +
                               topology::testing::SourceDir() + "/" +
                               kustomization + " " + out.string());
    EXPECT_EQ(rendered.exit_code, 0) << rendered.out;
    std::ifstream in(out);
    json objects = json::parse(in, nullptr, false);
    std::vector<json> out_objects;
    if (!objects.is_array()) return out_objects;
    for (json& object : objects) {
      if (object.value("kind", "") == "DaemonSet") ForThisNode(object);
      out_objects.push_back(object);
    }
    return out_objects;
  }
  void ForThisNode(json& daemonset) {
    json& spec = daemonset["spec"]["template"]["spec"];
    // The device manager's directory is /var/lib/kubelet/device-plugins
    // whatever --root-dir says.
    ReplacePrefix(spec, "/var/lib/kubelet", node_["KUBELET_ROOT"],
                  "/device-plugins");
    ReplacePrefix(spec, "/var/run/cdi", node_["CDI_DIR"]);
    for (json& container : spec["containers"]) {
      container["image"] = kImage;
      container["imagePullPolicy"] = "Never";
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
      // The sanitizers' shadow memory and quarantine.
      container["resources"]["limits"]["memory"] = "1Gi";
#endif
    }
  }
  // Creates the objects; those the cluster's fixture made from the same
  // files (RBAC, the admission policy, the DeviceClasses) are there
  // already.
  void Create(std::vector<json>& objects) {
    for (json& object : objects) {
      const std::string path = Collection(object);
      ASSERT_FALSE(path.empty()) << object.dump();
      auto answer = admin_->Request("POST", path, object.dump());
      ASSERT_THAT(answer.status(), IsOk());
      const std::string kind = object.value("kind", "");
      if (kind == "ConfigMap" || kind == "DaemonSet" ||
          kind == "NetworkPolicy") {
        ASSERT_EQ(answer->status, 201) << path << ": " << answer->body;
        created_.push_back(object);
      } else {
        ASSERT_TRUE(answer->status == 201 || answer->status == 409)
            << path << ": " << answer->body;
      }
    }
  }
  static void SetConfig(std::vector<json>& objects, const std::string& name,
                        const std::string& config) {
    for (json& object : objects) {
      if (object.value("kind", "") == "ConfigMap" &&
          object["metadata"].value("name", "") == name) {
        object["data"]["config.yaml"] = config;
      }
    }
  }
  // The pods of kube-system whose labels `selector` selects (all when
  // empty).
  std::vector<json> Pods(const std::string& selector) const {
    json pods = Get(std::string(kSystem) + "/pods" +
                    (selector.empty() ? "" : "?labelSelector=" + selector));
    std::vector<json> out;
    if (!pods.is_object() || !pods["items"].is_array()) return out;
    for (json& pod : pods["items"]) out.push_back(pod);
    return out;
  }
  static bool Ready(json& pod) {
    if (!pod["metadata"]["deletionTimestamp"].is_null()) return false;
    json conditions = pod["status"]["conditions"];
    if (!conditions.is_array()) return false;
    for (json& condition : conditions) {
      if (condition.value("type", "") == "Ready") {
        return condition.value("status", "") == "True";
      }
    }
    return false;
  }
  // What the node's pods in kube-system say, for failure messages.
  std::string SystemPods() const {
    std::string out;
    for (json& pod : Pods("")) {
      out += pod["metadata"].value("name", "") + " " +
             pod["status"].value("phase", "") + " " +
             pod["status"]["containerStatuses"].dump() + "\n";
    }
    return out;
  }

  std::vector<json> created_;
};

// daemonset/dra as shipped: the driver's pod registers with the kubelet
// (its sockets named with its UID), publishes the node's devices with its
// own token through the admission policy, and a pod's claim is prepared
// through it. A rolling update (maxSurge 1, maxUnavailable 0, by the real
// DaemonSet controller) starts the new pod beside the old one and removes
// the old only once the new is ready: the kubelet always has a driver, the
// claim prepared by the old pod is unprepared by the new one, and a new
// claim is prepared by the new one.
TEST_F(KubeDaemonSetTest, TheDriverRollsWithoutLosingAClaim) {
  std::vector<json> objects = Render("daemonset/dra");
  SetConfig(objects, "topology-dra-driver-config", DraConfig());
  EnsureDraClassAndTemplate();
  ASSERT_NO_FATAL_FAILURE(Create(objects));
  std::string first_uid;
  ASSERT_TRUE(WaitFor(
      [&] {
        auto pods = Pods(kDriverLabel);
        if (pods.size() != 1 || !Ready(pods[0])) return false;
        first_uid = pods[0]["metadata"].value("uid", "");
        return true;
      },
      120s, 200ms))
      << SystemPods();
  const std::filesystem::path registry =
      std::filesystem::path(node_["KUBELET_ROOT"]) / "plugins_registry";
  const auto registered = [&] {
    std::set<std::string> sockets;
    for (const auto& entry : std::filesystem::directory_iterator(registry)) {
      if (entry.path().filename().string().starts_with(kDriver)) {
        sockets.insert(entry.path().filename().string());
      }
    }
    return sockets;
  };
  EXPECT_THAT(registered(), ::testing::ElementsAre(std::string(kDriver) + "-" +
                                                   first_uid + "-reg.sock"));

  json pod = Pod("before-roll", {{"claims", {{{"name", "nic"}}}}});
  pod["spec"]["resourceClaims"] = {
      {{"name", "nic"}, {"resourceClaimTemplateName", "virtio"}}};
  ASSERT_EQ(Post(kPods, pod), 201);
  ASSERT_TRUE(Printed("before-roll")) << Why("before-roll") << SystemPods();
  EXPECT_THAT(Logs("before-roll"), HasSubstr(std::string(kDraEnv) + "=0000:"));
  EXPECT_EQ(DriverCdiSpecs(), 1u);

  // The rollout, as `kubectl rollout restart` starts one: a changed
  // template.
  json daemonset = Get(std::string(kDaemonSets) + "/topology-dra-driver");
  ASSERT_TRUE(daemonset.is_object());
  daemonset["spec"]["template"]["metadata"]["annotations"]
           ["example.com/restarted"] = "1";
  auto put =
      admin_->Request("PUT", std::string(kDaemonSets) + "/topology-dra-driver",
                      daemonset.dump());
  ASSERT_THAT(put.status(), IsOk());
  ASSERT_EQ(put->status, 200) << put->body;

  // Watched until one pod of the new template is left: never none ready,
  // two at once on the way.
  size_t most_pods = 0;
  size_t fewest_ready = 1;
  std::string second_uid;
  // Each change of the driver's pods and their readiness, for a failure's
  // message.
  std::string timeline;
  const bool rolled = WaitFor(
      [&] {
        auto pods = Pods(kDriverLabel);
        size_t ready = 0;
        std::string now;
        for (json& p : pods) {
          ready += Ready(p);
          now += p["metadata"].value("name", "") + (Ready(p) ? "+" : "-") +
                 (p["metadata"]["deletionTimestamp"].is_null() ? " "
                                                               : "(deleted) ");
        }
        if (!timeline.ends_with(now + "\n")) timeline += now + "\n";
        most_pods = std::max(most_pods, pods.size());
        fewest_ready = std::min(fewest_ready, ready);
        if (pods.size() != 1 || ready != 1) return false;
        second_uid = pods[0]["metadata"].value("uid", "");
        return second_uid != first_uid;
      },
      180s, 100ms);
  ASSERT_TRUE(rolled) << SystemPods() << timeline;
  EXPECT_EQ(most_pods, 2u) << timeline;
  EXPECT_EQ(fewest_ready, 1u) << timeline << SystemPods();
  EXPECT_TRUE(WaitFor(
      [&] {
        return registered() ==
               std::set<std::string>{std::string(kDriver) + "-" + second_uid +
                                     "-reg.sock"};
      },
      30s, 100ms))
      << ::testing::PrintToString(registered());

  // The kubelet's plugin watcher stats every name that appears in the
  // registry: none of the driver's was gone before it looked (a socket
  // staged under a hidden name and renamed was).
  for (const std::string& line : Lines(ReadFile(dir_ / "kubelet.log"))) {
    if (line.find("Error when handling create event") != std::string::npos) {
      EXPECT_THAT(line, ::testing::Not(HasSubstr(kDriver)));
    }
  }

  // The claim the old pod prepared is still the container's, and the new
  // pod unprepares it.
  EXPECT_EQ(PodPhase("before-roll"), "Running");
  Delete(std::string(kPods) + "/before-roll");
  ASSERT_TRUE(WaitFor([&] { return Gone("before-roll"); }, 60s, 100ms));
  EXPECT_TRUE(WaitFor([&] { return DriverCdiSpecs() == 0; }, 30s, 100ms))
      << Events("before-roll");

  pod = Pod("after-roll", {{"claims", {{{"name", "nic"}}}}});
  pod["spec"]["resourceClaims"] = {
      {{"name", "nic"}, {"resourceClaimTemplateName", "virtio"}}};
  ASSERT_EQ(Post(kPods, pod), 201);
  ASSERT_TRUE(Printed("after-roll")) << Why("after-roll") << SystemPods();
  Delete(std::string(kPods) + "/after-roll");
  ASSERT_TRUE(WaitFor([&] { return Gone("after-roll"); }, 60s, 100ms));
  EXPECT_TRUE(WaitFor([&] { return DriverCdiSpecs() == 0; }, 30s, 100ms))
      << Events("after-roll");
}

// deploy/both-paths on the real node: the device plugin's pod hands out
// the machine's network function as an extended resource, the driver's pod
// publishes its random-number function (virtio 1044) in its slices, each
// given the other's configuration so that no device is offered twice. The
// node's allocatable and the kubelet's device checkpoint name only the
// device plugin's device, the slices only the driver's, and a pod written
// for the device plugin (`limits: <resource>: 1`) runs on each path: on
// the DRA path through the DeviceClass topology-dra-driver
// --print-device-classes makes of the same ConfigMap (its
// extendedResourceName).
TEST_F(KubeDaemonSetTest, BothPathsOfferEachDeviceOnce) {
  constexpr char kNic[] = "example.com/nic";
  constexpr char kRng[] = "example.com/rng";
  std::vector<json> objects = Render("deploy/both-paths");
  SetConfig(objects, "topology-device-plugin-config",
            std::string("resources:\n  - name: ") + kNic +
                "\n    selectors: [{vendors: [\"1af4\"], classes: "
                "[\"0200\"]}]\n");
  const std::string dra_config =
      std::string("resources:\n  - name: ") + kRng +
      "\n    selectors: [{vendors: [\"1af4\"], devices: [\"1044\"]}]\n";
  SetConfig(objects, "topology-dra-driver-config", dra_config);
  ASSERT_NO_FATAL_FAILURE(Create(objects));
  // The DeviceClasses of the driver's ConfigMap, as an operator makes them.
  std::ofstream(work_.path() / "dra.yaml") << dra_config;
  auto classes = RunCommand(
      topology::testing::ProgramPath("topology-dra-driver") +
      " --print-device-classes " + "--config " +
      (work_.path() / "dra.yaml").string() + " | " + TOPOLOGY_SYSTEM_PYTHON3 +
      " -c 'import json, sys, yaml; "
      "print(json.dumps([d for d in yaml.safe_load_all(sys.stdin) if d]))'");
  ASSERT_EQ(classes.exit_code, 0) << classes.out;
  json generated = json::parse(classes.out, nullptr, false);
  ASSERT_TRUE(generated.is_array() && generated.size() == 1) << classes.out;
  EXPECT_EQ(generated[0]["spec"].value("extendedResourceName", ""), kRng);
  ASSERT_EQ(Post("/apis/resource.k8s.io/v1/deviceclasses", generated[0]), 201);
  created_.push_back(generated[0]);

  ASSERT_TRUE(WaitFor(
      [&] {
        size_t ready = 0;
        for (const char* name :
             {"topology-device-plugin", "topology-dra-driver"}) {
          auto pods = Pods(std::string("app.kubernetes.io%2Fname%3D") + name);
          ready += pods.size() == 1 && Ready(pods[0]);
        }
        return ready == 2;
      },
      120s, 200ms))
      << SystemPods();
  ASSERT_TRUE(WaitFor([&] { return Allocatable(kNic) == "1"; }, 60s, 200ms))
      << SystemPods();
  // The device plugin's devices, as the kubelet's device manager holds them.
  json checkpoint = json::parse(
      ReadFile("/var/lib/kubelet/device-plugins/kubelet_internal_checkpoint"),
      nullptr, false);
  ASSERT_TRUE(checkpoint.is_object());
  json plugin_devices = checkpoint["Data"]["RegisteredDevices"][kNic];
  ASSERT_TRUE(plugin_devices.is_array()) << checkpoint.dump();
  ASSERT_EQ(plugin_devices.size(), 1u) << checkpoint.dump();
  EXPECT_FALSE(checkpoint["Data"]["RegisteredDevices"].contains(kRng));
  // The driver's, as its slices publish them ("pci-0000-00-05-0" names
  // 0000:00:05.0).
  std::vector<std::string> published;
  ASSERT_TRUE(WaitFor(
      [&] {
        json slices =
            Get("/apis/resource.k8s.io/v1/resourceslices?fieldSelector=spec."
                "nodeName%3D" +
                node_["KUBE_NODE"]);
        published.clear();
        if (!slices.is_object()) return false;
        for (json& slice : slices["items"]) {
          for (json& device : slice["spec"]["devices"]) {
            std::string address = device.value("name", "").substr(4);
            if (address.size() != 12) continue;
            address[4] = ':';
            address[7] = ':';
            address[10] = '.';
            published.push_back(address);
          }
        }
        return !published.empty();
      },
      60s, 200ms))
      << SystemPods();
  EXPECT_EQ(published.size(), 1u);
  for (const std::string& address : published) {
    EXPECT_NE(address, plugin_devices[0].get<std::string>())
        << "offered on both paths";
  }

  // The same pod spec on each path.
  ASSERT_EQ(Post(kPods, Pod("on-the-plugin", {{"limits", {{kNic, "1"}}}})),
            201);
  ASSERT_EQ(Post(kPods, Pod("on-the-driver", {{"limits", {{kRng, "1"}}}})),
            201);
  ASSERT_TRUE(Printed("on-the-plugin")) << Why("on-the-plugin");
  ASSERT_TRUE(Printed("on-the-driver")) << Why("on-the-driver");
  EXPECT_THAT(Logs("on-the-plugin"),
              HasSubstr("PCIDEVICE_EXAMPLE_COM_NIC=" +
                        plugin_devices[0].get<std::string>()));
  ASSERT_FALSE(published.empty());
  EXPECT_THAT(Logs("on-the-driver"),
              HasSubstr("PCIDEVICE_EXAMPLE_COM_RNG=" + published[0]));
  for (const char* name : {"on-the-plugin", "on-the-driver"}) {
    Delete(std::string(kPods) + "/" + name);
  }
  EXPECT_TRUE(
      WaitFor([&] { return Gone("on-the-plugin") && Gone("on-the-driver"); },
              60s, 200ms));
}

}  // namespace
}  // namespace topology::draplugin
