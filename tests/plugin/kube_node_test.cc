// The device plugin and the DRA driver on a real Kubernetes v1.37 node
// (scripts/kube-cluster start-node: containerd 2 with CDI, runc, and the
// kubelet with the static CPU manager, Topology Manager single-numa-node
// and the Static Memory Manager), scheduled by the real kube-scheduler.
// The devices are this machine's own PCI functions: the virtio network
// function(s) it has. The fixture starts the node once per run;
// TOPOLOGY_KUBE_CLUSTER_DIR names its directory. Without a cluster (not
// built here, outside CI) every test skips, saying why.
#include <chrono>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include <grpcpp/grpcpp.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "topology/dra_attributes.h"
#include "topology/draplugin/claim_checkpoint.h"
#include "topology/draplugin/device_metadata.h"
#include "topology/draplugin/kube_client.h"
#include "topology/draplugin/kube_config.h"
#include "topology/testing/machines.h"

#include "build_paths.h"
#include "child_process.h"
#include "kube_node_fixture.h"
#include "podresources/v1/api.grpc.pb.h"
#include "run_command.h"
#include "status_matchers.h"
#include "temp_dir.h"
#include "wait_for.h"

namespace topology::draplugin {
namespace {

// The DaemonSet's plugin binary on the real kubelet: it registers, the
// node advertises the device, and a Guaranteed pod gets the device, the
// one CPU the static CPU manager can give exclusively and memory the
// Static Memory Manager pinned to node 0. A restart of the plugin and one
// of the kubelet keep all three. The kubelet's pod resources API (List,
// Get, GetAllocatableResources) reports them, and topology-manager, given
// the kubelet's configuration file on this node, predicts them.
TEST_F(KubeNodeTest, TheDevicePluginOnTheRealKubelet) {
  const std::string log = (work_.path() / "plugin.log").string();
  auto start = [&] {
    return std::make_unique<::topology::testing::ChildProcess>(
        topology::testing::ProgramPath("topology-device-plugin"),
        std::vector<std::string>{
            "--config", (work_.path() / "config.yaml").string(), "--cdi-dir",
            "", "--http-addr", "", "--dra-claims", "", "-v", "1"},
        log, /*append=*/true);
  };
  auto plugin = start();
  ASSERT_TRUE(WaitFor([&] { return Allocatable(kResource) == "1"; }, 60s))
      << ReadFile(log);

  const json resources = {
      {"limits", {{"cpu", "1"}, {"memory", "64Mi"}, {kResource, "1"}}},
      {"requests", {{"cpu", "1"}, {"memory", "64Mi"}, {kResource, "1"}}}};
  ASSERT_EQ(Post(kPods, Pod("guaranteed", resources)), 201);
  ASSERT_TRUE(Printed("guaranteed")) << Why("guaranteed");
  const std::string printed = Logs("guaranteed");
  EXPECT_THAT(printed, HasSubstr("Cpus_allowed_list:\t1\n"));
  EXPECT_THAT(printed, HasSubstr("Mems_allowed_list:\t0\n"));
  EXPECT_THAT(printed, HasSubstr(std::string(kEnv) + "=0000:"));

  json pod = Get(std::string(kPods) + "/guaranteed");
  const std::string uid = pod["metadata"]["uid"];
  EXPECT_EQ(pod["status"]["qosClass"], "Guaranteed");
  const auto check_state = [&](const std::string& when) {
    json cpus = KubeletState("cpu_manager_state");
    ASSERT_TRUE(cpus.is_object()) << when;
    EXPECT_EQ(cpus["policyName"], "static") << when;
    EXPECT_EQ(cpus["entries"][uid]["app"], "1") << when << ": " << cpus;
    json memory = KubeletState("memory_manager_state");
    ASSERT_TRUE(memory.is_object()) << when;
    EXPECT_EQ(memory["policyName"], "Static") << when;
    json& blocks = memory["entries"][uid]["app"];
    ASSERT_TRUE(blocks.is_array()) << when << ": " << memory;
    bool pinned = false;
    for (const json& block : blocks) {
      pinned = pinned || (block["type"] == "memory" &&
                          block["numaAffinity"] == json::array({0}) &&
                          block["size"] == 64 * 1024 * 1024);
    }
    EXPECT_TRUE(pinned) << when << ": " << memory;
  };
  check_state("after admission");

  // The kubelet's pod resources API reports what it gave, as a monitoring
  // agent or a NodeResourceTopology exporter reads it.
  auto lister = v1::PodResourcesLister::NewStub(grpc::CreateChannel(
      "unix:" + (std::filesystem::path(node_.at("KUBELET_ROOT")) /
                 "pod-resources" / "kubelet.sock")
                    .string(),
      grpc::InsecureChannelCredentials()));
  const auto ask = [](auto call) {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + 10s);
    return call(&context);
  };
  const auto check_container = [&](const v1::ContainerResources& container) {
    EXPECT_EQ(container.name(), "app");
    ASSERT_EQ(container.devices_size(), 1) << container.DebugString();
    EXPECT_EQ(container.devices(0).resource_name(), kResource);
    ASSERT_EQ(container.devices(0).device_ids_size(), 1);
    EXPECT_THAT(container.devices(0).device_ids(0),
                ::testing::StartsWith("0000:"));
    EXPECT_THAT(container.cpu_ids(), ::testing::ElementsAre(1));
    bool pinned = false;
    for (const auto& block : container.memory()) {
      pinned = pinned || (block.memory_type() == "memory" &&
                          block.size() == 64u * 1024 * 1024 &&
                          block.topology().nodes_size() == 1 &&
                          block.topology().nodes(0).id() == 0);
    }
    EXPECT_TRUE(pinned) << container.DebugString();
  };
  v1::ListPodResourcesResponse listed;
  ASSERT_TRUE(ask([&](grpc::ClientContext* context) {
                return lister->List(context, {}, &listed);
              }).ok());
  bool found = false;
  for (const auto& pod_resources : listed.pod_resources()) {
    if (pod_resources.name() != "guaranteed") continue;
    found = true;
    EXPECT_EQ(pod_resources.namespace_(), "default");
    ASSERT_EQ(pod_resources.containers_size(), 1);
    check_container(pod_resources.containers(0));
  }
  EXPECT_TRUE(found) << listed.DebugString();
  // The device the kubelet gave the pod, as its pod resources API says.
  const auto listed_device_id = [](const v1::ListPodResourcesResponse& all) {
    for (const auto& pod_resources : all.pod_resources()) {
      if (pod_resources.name() == "guaranteed" &&
          pod_resources.containers_size() == 1 &&
          pod_resources.containers(0).devices_size() == 1 &&
          pod_resources.containers(0).devices(0).device_ids_size() == 1) {
        return pod_resources.containers(0).devices(0).device_ids(0);
      }
    }
    return std::string();
  };
  v1::GetPodResourcesRequest which;
  which.set_pod_name("guaranteed");
  which.set_pod_namespace("default");
  v1::GetPodResourcesResponse got;
  ASSERT_TRUE(ask([&](grpc::ClientContext* context) {
                return lister->Get(context, which, &got);
              }).ok());
  ASSERT_EQ(got.pod_resources().containers_size(), 1);
  check_container(got.pod_resources().containers(0));
  v1::AllocatableResourcesResponse allocatable;
  ASSERT_TRUE(ask([&](grpc::ClientContext* context) {
                return lister->GetAllocatableResources(context, {},
                                                       &allocatable);
              }).ok());
  // CPU 0 is reserved: CPU 1 alone can be given exclusively.
  EXPECT_THAT(allocatable.cpu_ids(), ::testing::ElementsAre(1));
  bool device_allocatable = false;
  for (const auto& devices : allocatable.devices()) {
    device_allocatable =
        device_allocatable || (devices.resource_name() == kResource &&
                               devices.device_ids_size() == 1);
  }
  EXPECT_TRUE(device_allocatable) << allocatable.DebugString();
  bool memory_allocatable = false;
  for (const auto& block : allocatable.memory()) {
    memory_allocatable = memory_allocatable ||
                         (block.memory_type() == "memory" && block.size() > 0 &&
                          block.topology().nodes_size() == 1 &&
                          block.topology().nodes(0).id() == 0);
  }
  EXPECT_TRUE(memory_allocatable) << allocatable.DebugString();

  // topology-manager, given the same node (the kubelet's configuration
  // file, this machine, the same plugin), predicts what the kubelet did:
  // the same CPU, memory on the same node, the same device.
  ::topology::testing::TempDir host;
  const std::string host_dir = host.path().string() + "/";
  const std::string serve_log = (work_.path() / "serve.log").string();
  ::topology::testing::ChildProcess serve(
      topology::testing::ProgramPath("topology-manager"),
      {"serve", "--config", node_.at("KUBELET_CONFIG"), "--plugin-dir",
       host_dir, "--control-socket", (host.path() / "control.sock").string()},
      serve_log);
  ASSERT_TRUE(WaitFor(
      [&] { return std::filesystem::exists(host.path() / "kubelet.sock"); },
      30s))
      << ReadFile(serve_log);
  ::topology::testing::ChildProcess twin(
      topology::testing::ProgramPath("topology-device-plugin"),
      {"--config", (work_.path() / "config.yaml").string(), "--plugin-dir",
       host_dir, "--cdi-dir", "", "--http-addr", "", "--dra-claims", ""},
      (work_.path() / "twin.log").string());
  ASSERT_TRUE(WaitFor(
      [&] {
        return ReadFile(serve_log).find(
                   "registered " + std::string(kResource)) != std::string::npos;
      },
      30s))
      << ReadFile(serve_log);
  std::ofstream(work_.path() / "pod.yaml")
      << json({{"apiVersion", "v1"},
               {"kind", "Pod"},
               {"metadata",
                {{"name", "guaranteed"},
                 {"namespace", "default"},
                 {"uid", uid}}},
               {"spec",
                {{"containers",
                  {{{"name", "app"},
                    {"image", "busybox"},
                    {"resources", resources}}}}}}})
             .dump();
  const auto predicted = ::topology::testing::RunCommand(
      topology::testing::ProgramPath("topology-manager") +
      " admit --format json " + "--control-socket " +
      (host.path() / "control.sock").string() + " " +
      (work_.path() / "pod.yaml").string() + " 2>&1");
  ASSERT_EQ(predicted.exit_code, 0) << predicted.out;
  json prediction = json::parse(predicted.out, nullptr, false);
  ASSERT_TRUE(prediction.is_object()) << predicted.out;
  EXPECT_EQ(prediction["admitted"], true) << predicted.out;
  json& app = prediction["containers"][0];
  EXPECT_EQ(app["cpus"],
            KubeletState("cpu_manager_state")["entries"][uid]["app"])
      << predicted.out;
  EXPECT_EQ(app["devices"][kResource][0], listed_device_id(listed))
      << predicted.out;
  bool same_memory = false;
  for (const json& block : app["memory"]) {
    same_memory = same_memory || (block["type"] == "memory" &&
                                  block["numa_nodes"] == json::array({0}) &&
                                  block["size"] == 64 * 1024 * 1024);
  }
  EXPECT_TRUE(same_memory) << predicted.out;
  twin.Signal(SIGTERM);
  EXPECT_EQ(twin.Wait(5s), 0);
  serve.Signal(SIGTERM);
  EXPECT_EQ(serve.Wait(5s), 0) << ReadFile(serve_log);

  // The plugin restarts: it registers again, the pod keeps its device.
  plugin->Signal(SIGTERM);
  EXPECT_EQ(plugin->Wait(5s), 0) << ReadFile(log);
  plugin = start();
  ASSERT_TRUE(WaitFor(
      [&] {
        return Count(ReadFile(log), "registered endpoint") == 2 &&
               Allocatable(kResource) == "1";
      },
      60s))
      << ReadFile(log);
  EXPECT_EQ(PodPhase("guaranteed"), "Running");
  check_state("after the plugin's restart");

  // The kubelet restarts: its checkpoints give the pod the same CPU,
  // memory and device.
  ASSERT_EQ(
      std::system(("'" + Script() + "' restart-kubelet '" + dir_.string() + "'")
                      .c_str()),
      0);
  ASSERT_TRUE(WaitFor([&] { return Allocatable(kResource) == "1"; }, 60s));
  EXPECT_EQ(PodPhase("guaranteed"), "Running");
  check_state("after the kubelet's restart");

  // Deleted, the pod gives all three back.
  Delete(std::string(kPods) + "/guaranteed");
  ASSERT_TRUE(WaitFor([&] { return Gone("guaranteed"); }, 60s));
  ASSERT_TRUE(WaitFor(
      [&] {
        json cpus = KubeletState("cpu_manager_state");
        return cpus.is_object() && !cpus["entries"].contains(uid);
      },
      30s));
  plugin->Signal(SIGTERM);
  EXPECT_EQ(plugin->Wait(5s), 0);
}

// topology-dra-driver on the real kubelet and scheduler: registered through
// the kubelet's plugin watcher, its slices allocated by kube-scheduler for a
// pod with a ResourceClaimTemplate, prepared by the kubelet through the
// driver's socket, the CDI edits (environment and device node) seen inside
// the container; deleting the
// pod unprepares. Then a claim with a prioritized list (firstAvailable)
// whose first choice no device matches gets the second.
TEST_F(KubeNodeTest, TheDraDriverOnTheRealKubeletAndScheduler) {
  // A resource name of its own: the device plugin's test leaves its
  // resource in the node's capacity for a while, and a resource a device
  // plugin serves is not served through DRA.
  std::ofstream(work_.path() / "dra-config.yaml")
      << DraConfig(/*device_node=*/true);
  EnsureDraClassAndTemplate();
  const std::string log = (work_.path() / "driver.log").string();
  ::topology::testing::ChildProcess driver(
      topology::testing::ProgramPath("topology-dra-driver"),
      {"--config", (work_.path() / "dra-config.yaml").string(), "--kubeconfig",
       env_["KUBECONFIG_DRIVER"], "--node-name", node_["KUBE_NODE"],
       "--kubelet-root", node_["KUBELET_ROOT"], "--cdi-dir", node_["CDI_DIR"],
       "-v", "1"},
      log, /*append=*/true);
  const auto published = [&] {
    json slices = Get(
        "/apis/resource.k8s.io/v1/resourceslices?fieldSelector=spec.nodeName%"
        "3D" +
        node_["KUBE_NODE"]);
    return slices.is_object() && !slices["items"].empty();
  };
  ASSERT_TRUE(WaitFor(published, 60s)) << ReadFile(log);
  ASSERT_TRUE(WaitFor(
      [&] {
        return ReadFile(log).find("registered with the kubelet") !=
               std::string::npos;
      },
      60s))
      << ReadFile(log);

  json pod = Pod("with-claim", {{"claims", {{{"name", "nic"}}}}});
  pod["spec"]["resourceClaims"] = {
      {{"name", "nic"}, {"resourceClaimTemplateName", "virtio"}}};
  ASSERT_EQ(Post(kPods, pod), 201);
  ASSERT_TRUE(Printed("with-claim")) << Why("with-claim") << ReadFile(log);
  EXPECT_THAT(Logs("with-claim"), HasSubstr(std::string(kDraEnv) + "=0000:"));
  // The claim's device node, /dev/net/tun (character device 10, 200).
  EXPECT_THAT(Logs("with-claim"),
              ::testing::ContainsRegex("c[-rw]+ .* 10, +200 .*tun"));
  EXPECT_EQ(DriverCdiSpecs(), 1u);

  // Admin access (KEP-5018): a monitoring pod's claim, in a namespace
  // labelled for it, is allocated the device the workload's claim holds
  // and runs beside it; the driver prepares it (the device may be in use)
  // and marks it, and the workload keeps running.
  const std::string monitoring = "/api/v1/namespaces/monitoring";
  Ensure("/api/v1/namespaces",
         {{"apiVersion", "v1"},
          {"kind", "Namespace"},
          {"metadata",
           {{"name", "monitoring"},
            {"labels", {{"resource.kubernetes.io/admin-access", "true"}}}}}});
  ASSERT_TRUE(WaitFor(
      [&] { return Get(monitoring + "/serviceaccounts/default").is_object(); },
      60s));
  json watch = {{"apiVersion", "resource.k8s.io/v1"},
                {"kind", "ResourceClaim"},
                {"metadata", {{"name", "watch"}}},
                {"spec",
                 {{"devices",
                   {{"requests",
                     {{{"name", "nic"},
                       {"exactly",
                        {{"deviceClassName", "virtio.example.com"},
                         {"adminAccess", true}}}}}}}}}}};
  ASSERT_EQ(Post("/apis/resource.k8s.io/v1/namespaces/monitoring/"
                 "resourceclaims",
                 watch),
            201);
  json monitor = Pod("monitor", {{"claims", {{{"name", "nic"}}}}});
  monitor["spec"]["resourceClaims"] = {
      {{"name", "nic"}, {"resourceClaimName", "watch"}}};
  ASSERT_EQ(Post(monitoring + "/pods", monitor), 201);
  const auto monitor_log = [&] {
    auto answer = admin_->Request("GET", monitoring + "/pods/monitor/log");
    return answer.ok() && answer->status == 200 ? answer->body : std::string();
  };
  ASSERT_TRUE(WaitFor(
      [&] { return monitor_log().find("printed") != std::string::npos; }, 120s))
      << Get(monitoring + "/pods/monitor").dump() << ReadFile(log);
  EXPECT_THAT(monitor_log(), HasSubstr(std::string(kDraEnv) + "=0000:"));
  json workload = Get(std::string(kPods) + "/with-claim");
  const std::string workload_claim =
      workload["status"]["resourceClaimStatuses"][0].value("resourceClaimName",
                                                           "");
  json held =
      Get("/apis/resource.k8s.io/v1/namespaces/default/"
          "resourceclaims/" +
          workload_claim);
  json watched = Get(
      "/apis/resource.k8s.io/v1/namespaces/monitoring/resourceclaims/watch");
  const json& held_result =
      held["status"]["allocation"]["devices"]["results"][0];
  const json& watched_result =
      watched["status"]["allocation"]["devices"]["results"][0];
  EXPECT_EQ(watched_result.value("device", ""),
            held_result.value("device", ""));
  EXPECT_EQ(watched_result.value("adminAccess", false), true);
  EXPECT_EQ(PodPhase("with-claim"), "Running");
  EXPECT_EQ(DriverCdiSpecs(), 2u);
  // The driver's checkpoint marks the monitoring claim's device, so that
  // nothing counts it as held (the device plugin keeps offering it).
  const json prepared =
      json::parse(ReadFile((std::filesystem::path(node_["KUBELET_ROOT"]) /
                            "plugins" / kDriver / "prepared-claims.json")
                               .string()),
                  nullptr, false);
  ASSERT_TRUE(prepared.is_object()) << ReadFile(log);
  int marked = 0;
  for (const json& claim : prepared.value("claims", json::array())) {
    for (const json& device : claim.value("devices", json::array())) {
      if (device.value("adminAccess", false)) {
        ++marked;
        EXPECT_EQ(claim.value("name", ""), "watch");
      }
    }
  }
  EXPECT_EQ(marked, 1) << prepared.dump();
  Delete(monitoring + "/pods/monitor");
  ASSERT_TRUE(WaitFor(
      [&] {
        auto answer = admin_->Request("GET", monitoring + "/pods/monitor");
        return answer.ok() && answer->status == 404;
      },
      60s));
  Delete(
      "/apis/resource.k8s.io/v1/namespaces/monitoring/resourceclaims/"
      "watch");
  EXPECT_TRUE(WaitFor([&] { return DriverCdiSpecs() == 1; }, 30s))
      << ReadFile(log);

  Delete(std::string(kPods) + "/with-claim");
  ASSERT_TRUE(WaitFor([&] { return Gone("with-claim"); }, 60s));
  EXPECT_TRUE(WaitFor([&] { return DriverCdiSpecs() == 0; }, 30s))
      << ReadFile(log);

  // A prioritized list: no GPU here, so the second choice.
  json claim = {
      {"apiVersion", "resource.k8s.io/v1"},
      {"kind", "ResourceClaim"},
      {"metadata", {{"name", "gpu-or-virtio"}}},
      {"spec",
       {{"devices",
         {{"requests",
           {{{"name", "accel"},
             {"firstAvailable",
              {{{"name", "gpu"}, {"deviceClassName", "gpu.example.com"}},
               {{"name", "virtio"},
                {"deviceClassName", "virtio.example.com"}}}}}}}}}}}};
  ASSERT_EQ(
      Post("/apis/resource.k8s.io/v1/namespaces/default/resourceclaims", claim),
      201);
  pod = Pod("with-choice", {{"claims", {{{"name", "accel"}}}}});
  pod["spec"]["resourceClaims"] = {
      {{"name", "accel"}, {"resourceClaimName", "gpu-or-virtio"}}};
  ASSERT_EQ(Post(kPods, pod), 201);
  ASSERT_TRUE(Printed("with-choice")) << Why("with-choice") << ReadFile(log);
  EXPECT_THAT(Logs("with-choice"), HasSubstr(std::string(kDraEnv) + "=0000:"));
  json allocated =
      Get("/apis/resource.k8s.io/v1/namespaces/default/resourceclaims/"
          "gpu-or-virtio");
  EXPECT_EQ(
      allocated["status"]["allocation"]["devices"]["results"][0]["request"],
      "accel/virtio");
  Delete(std::string(kPods) + "/with-choice");
  ASSERT_TRUE(WaitFor([&] { return Gone("with-choice"); }, 60s));
  EXPECT_TRUE(WaitFor([&] { return DriverCdiSpecs() == 0; }, 30s));

  // A pod written for the device plugin, unchanged: the class's
  // extendedResourceName has the scheduler make its claim, and the
  // kubelet prepares it through the driver.
  ASSERT_EQ(Post(kPods, Pod("extended", {{"limits", {{kDraResource, "1"}}}})),
            201);
  ASSERT_TRUE(Printed("extended")) << Why("extended") << ReadFile(log);
  EXPECT_THAT(Logs("extended"), HasSubstr(std::string(kDraEnv) + "=0000:"));
  // The class's configuration (FromClass) reached the container, though
  // the pod names no claim and carries no configuration.
  EXPECT_THAT(Logs("extended"), HasSubstr("VIRTIO_CONFIGURED_BY=device-class"));
  Delete(std::string(kPods) + "/extended");
  ASSERT_TRUE(WaitFor([&] { return Gone("extended"); }, 60s));
  EXPECT_TRUE(WaitFor([&] { return DriverCdiSpecs() == 0; }, 30s));
  driver.Signal(SIGTERM);
  EXPECT_EQ(driver.Wait(5s), 0) << ReadFile(log);
}

// Device health from the driver to the pod's status through the real
// kubelet (ResourceHealthStatus, beta and on at 1.37): the kubelet opens
// the driver's health stream when it registers, and a device a running
// pod holds turns Unhealthy in the container's allocatedResourcesStatus,
// the driver's reason its message. A device cannot be made to fail here:
// the driver reads a generated machine ("vm": two ConnectX functions,
// each with an AER counter) whose counter the test raises, as a fatal PCIe
// error raises it; the CDI edits are environment only, so the container
// runs on this machine.
TEST_F(KubeNodeTest, DeviceHealthReachesThePodStatus) {
  const auto root = work_.path() / "machine";
  ASSERT_TRUE(::topology::testing::WriteMachine("vm", root));
  for (const auto& entry :
       std::filesystem::directory_iterator(root / "sys/bus/pci/devices")) {
    std::ofstream(entry.path() / "aer_dev_fatal") << "TOTAL_ERR_FATAL 0\n";
  }
  constexpr char kHealthResource[] = "example.com/connectx";
  EnsureResourceClass("connectx.example.com", kHealthResource);
  std::string log;
  const auto driver = StartDraDriver(
      "health", root,
      std::string("resources:\n  - name: ") + kHealthResource +
          "\n    selectors: [{vendors: [\"15b3\"]}]\n",
      {"--health-interval", "100ms", "--recovery-period", "1h"}, &log);
  ASSERT_NE(driver, nullptr);
  json claim = {
      {"apiVersion", "resource.k8s.io/v1"},
      {"kind", "ResourceClaim"},
      {"metadata", {{"name", "connectx"}}},
      {"spec",
       {{"devices",
         {{"requests",
           {{{"name", "nic"},
             {"exactly", {{"deviceClassName", "connectx.example.com"}}}}}}}}}}};
  ASSERT_EQ(
      Post("/apis/resource.k8s.io/v1/namespaces/default/resourceclaims", claim),
      201);
  json pod = Pod("watched", {{"claims", {{{"name", "nic"}}}}});
  pod["spec"]["resourceClaims"] = {
      {{"name", "nic"}, {"resourceClaimName", "connectx"}}};
  ASSERT_EQ(Post(kPods, pod), 201);
  ASSERT_TRUE(Printed("watched")) << Why("watched") << ReadFile(log);

  // The health the kubelet reports for the claim's one device; "" while
  // it reports none.
  const auto reported = [&](std::string* message) -> std::string {
    json status = Get(std::string(kPods) + "/watched")["status"];
    if (!status.is_object() || !status["containerStatuses"].is_array() ||
        status["containerStatuses"].empty()) {
      return "";
    }
    json statuses = status["containerStatuses"][0]["allocatedResourcesStatus"];
    if (!statuses.is_array()) return "";
    for (json& entry : statuses) {
      if (entry.value("name", "") != "claim:nic") continue;
      json resources = entry["resources"];
      if (!resources.is_array() || resources.size() != 1) return "";
      if (message != nullptr) *message = resources[0].value("message", "");
      return resources[0].value("health", "");
    }
    return "";
  };
  EXPECT_TRUE(WaitFor([&] { return reported(nullptr) == "Healthy"; }, 60s))
      << Get(std::string(kPods) + "/watched")["status"].dump();

  // The fault, on the device the scheduler allocated.
  json allocated = Get(
      "/apis/resource.k8s.io/v1/namespaces/default/resourceclaims/connectx");
  const std::string device =
      allocated["status"]["allocation"]["devices"]["results"][0].value("device",
                                                                       "");
  ASSERT_TRUE(device.starts_with("pci-")) << allocated.dump();
  std::string address = device.substr(4);  // pci-0000-3b-00-0
  address[4] = ':';
  address[7] = ':';
  address[10] = '.';
  std::ofstream(root / "sys/bus/pci/devices" / address / "aer_dev_fatal")
      << "TOTAL_ERR_FATAL 3\n";
  std::string message;
  EXPECT_TRUE(WaitFor([&] { return reported(&message) == "Unhealthy"; }, 60s))
      << Get(std::string(kPods) + "/watched")["status"].dump() << ReadFile(log);
  EXPECT_THAT(message, HasSubstr("AER"));

  Delete(std::string(kPods) + "/watched");
  ASSERT_TRUE(WaitFor([&] { return Gone("watched"); }, 60s));
  Delete("/apis/resource.k8s.io/v1/namespaces/default/resourceclaims/connectx");
  StopDraDriver(*driver, log);
}

// SR-IOV functions as partitions on the real scheduler (KEP-4815, beta):
// the driver publishes a PF and its two VFs as consumers of one counter
// set, in a slice of its own, and kube-scheduler never allocates the PF
// while a VF is allocated, nor a VF while the PF is: the second pod stays
// Pending with the scheduler's reason and runs once the first is gone. The
// machine is generated ("sriov-1x2"); its VFs are left without a driver so
// that the CDI edits are environment only and the containers run here.
TEST_F(KubeNodeTest, SriovPartitionsAreNeverAllocatedTogether) {
  const auto root = work_.path() / "sriov-machine";
  ASSERT_TRUE(::topology::testing::WriteMachine("sriov-1x2", root));
  for (const auto& entry :
       std::filesystem::directory_iterator(root / "sys/bus/pci/devices")) {
    std::error_code error;
    if (std::filesystem::exists(entry.path() / "physfn")) {
      std::filesystem::remove(entry.path() / "driver", error);
    }
  }
  constexpr char kSriovResource[] = "example.com/sriov-nic";
  constexpr char kClass[] = "sriov-nic.example.com";
  EnsureResourceClass(kClass, kSriovResource);
  std::string log;
  const auto driver =
      StartDraDriver("sriov", root,
                     std::string("resources:\n  - name: ") + kSriovResource +
                         "\n    selectors: [{vendors: [\"15b3\"]}]\n",
                     {}, &log);
  ASSERT_NE(driver, nullptr);
  // The pool as the API server keeps it: the three functions, each
  // consuming the PF's counter set, which is in a slice of its own.
  const std::string slices =
      "/apis/resource.k8s.io/v1/resourceslices?fieldSelector=spec.nodeName%3D" +
      node_["KUBE_NODE"] + "%2Cspec.driver%3D" + kDriver;
  size_t consumers = 0;
  size_t sets = 0;
  ASSERT_TRUE(WaitFor(
      [&] {
        consumers = sets = 0;
        json list = Get(slices);
        if (!list.is_object()) return false;
        for (const json& slice : list["items"]) {
          sets += slice["spec"].value("sharedCounters", json::array()).size();
          for (const json& device :
               slice["spec"].value("devices", json::array())) {
            consumers += device.contains("consumesCounters");
          }
        }
        return consumers == 3 && sets == 1;
      },
      60s))
      << consumers << " consumer(s), " << sets << " set(s): " << Get(slices);

  const auto claim_for = [&](const std::string& name, const std::string& cel) {
    return json{
        {"apiVersion", "resource.k8s.io/v1"},
        {"kind", "ResourceClaim"},
        {"metadata", {{"name", name}}},
        {"spec",
         {{"devices",
           {{"requests",
             {{{"name", "nic"},
               {"exactly",
                {{"deviceClassName", kClass},
                 {"selectors", {{{"cel", {{"expression", cel}}}}}}}}}}}}}}}};
  };
  const std::string type =
      std::string("device.attributes[\"") + kDriver + "\"].partitionType";
  const std::string claims =
      "/apis/resource.k8s.io/v1/namespaces/default/"
      "resourceclaims";
  ASSERT_EQ(Post(claims, claim_for("a-vf", type + " == \"vf\"")), 201);
  ASSERT_EQ(Post(claims, claim_for("the-pf", type + ".startsWith(\"pf-\")")),
            201);
  const auto pod_with = [&](const std::string& name, const std::string& claim) {
    json pod = Pod(name, {{"claims", {{{"name", "nic"}}}}});
    pod["spec"]["resourceClaims"] = {
        {{"name", "nic"}, {"resourceClaimName", claim}}};
    return pod;
  };

  ASSERT_EQ(Post(kPods, pod_with("vf-user", "a-vf")), 201);
  ASSERT_TRUE(Printed("vf-user")) << Why("vf-user") << ReadFile(log);
  ASSERT_EQ(Post(kPods, pod_with("pf-user", "the-pf")), 201);
  std::string reason;
  EXPECT_TRUE(WaitFor(
      [&] { return !(reason = Unschedulable("pf-user")).empty(); }, 60s))
      << Why("pf-user");
  EXPECT_THAT(reason, HasSubstr("cannot allocate all claims"));
  EXPECT_FALSE(Get(claims + "/the-pf")["status"].contains("allocation"));

  // The VF's pod goes: the PF is allocated and its pod runs.
  Delete(std::string(kPods) + "/vf-user");
  ASSERT_TRUE(WaitFor([&] { return Gone("vf-user"); }, 60s));
  EXPECT_TRUE(Printed("pf-user")) << Why("pf-user") << ReadFile(log);
  const json pf_claim = Get(claims + "/the-pf");
  const std::string pf_device =
      pf_claim["status"]["allocation"]["devices"]["results"][0].value("device",
                                                                      "");
  EXPECT_EQ(pf_device, ::topology::dra::PciDeviceName(*PciAddress::Parse(
                           ::topology::testing::SriovLayout(1, 2)[0].address)));
  // And now no VF: the same claim of a VF waits for the PF.
  ASSERT_EQ(Post(kPods, pod_with("vf-again", "a-vf")), 201);
  EXPECT_TRUE(WaitFor(
      [&] { return !(reason = Unschedulable("vf-again")).empty(); }, 60s))
      << Why("vf-again");
  EXPECT_THAT(reason, HasSubstr("cannot allocate all claims"));

  for (const char* pod : {"vf-again", "pf-user"}) {
    Delete(std::string(kPods) + "/" + pod);
  }
  for (const char* pod : {"vf-again", "pf-user"}) {
    EXPECT_TRUE(WaitFor([&] { return Gone(pod); }, 60s)) << pod;
  }
  Delete(claims + "/a-vf");
  Delete(claims + "/the-pf");
  StopDraDriver(*driver, log);
}

// A device shared by capacity on the real scheduler and kubelet
// (KEP-5075, beta): the driver publishes one ConnectX function of a
// generated machine as shareable, 100 of "bandwidth" with a range in steps
// of 10; two pods asking 40 each are allocated shares of it and run, each
// told in its environment what its share may use; a third asking 40 does
// not fit and stays Unschedulable in the scheduler's words, and runs once
// one of the first two is gone.
TEST_F(KubeNodeTest, TwoPodsShareADeviceByCapacityAndAThirdWaits) {
  const auto root = work_.path() / "shared-machine";
  ASSERT_TRUE(::topology::testing::WriteMachine("vm", root));
  constexpr char kSharedResource[] = "example.com/shared-nic";
  constexpr char kClass[] = "shared-nic.example.com";
  EnsureResourceClass(kClass, kSharedResource);
  std::string log;
  const auto driver = StartDraDriver(
      "shared", root,
      std::string("resources:\n  - name: ") + kSharedResource +
          "\n    selectors: [{pciAddresses: [\"0000:00:04.0\"]}]\n"
          "    shareable:\n"
          "      capacity:\n"
          "        bandwidth: {value: \"100\", default: \"10\",\n"
          "                    validRange: {min: \"10\", step: \"10\"}}\n",
      {}, &log);
  ASSERT_NE(driver, nullptr);
  const std::string claims =
      "/apis/resource.k8s.io/v1/namespaces/default/resourceclaims";
  const auto share_pod = [&](const std::string& name) {
    const json claim = {
        {"apiVersion", "resource.k8s.io/v1"},
        {"kind", "ResourceClaim"},
        {"metadata", {{"name", name}}},
        {"spec",
         {{"devices",
           {{"requests",
             {{{"name", "nic"},
               {"exactly",
                {{"deviceClassName", kClass},
                 {"capacity", {{"requests", {{"bandwidth", "40"}}}}}}}}}}}}}}};
    EXPECT_EQ(Post(claims, claim), 201);
    json pod = Pod(name, {{"claims", {{{"name", "nic"}}}}});
    pod["spec"]["resourceClaims"] = {
        {{"name", "nic"}, {"resourceClaimName", name}}};
    EXPECT_EQ(Post(kPods, pod), 201);
  };
  const std::string env =
      std::string("PCIDEVICE_EXAMPLE_COM_SHARED_NIC_BANDWIDTH=40");
  std::set<std::string> shares;
  for (const char* name : {"share-1", "share-2"}) {
    share_pod(name);
    ASSERT_TRUE(Printed(name)) << Why(name) << ReadFile(log);
    EXPECT_THAT(Logs(name), HasSubstr(env)) << Logs(name);
    const json result = Get(
        claims + "/" + name)["status"]["allocation"]["devices"]["results"][0];
    EXPECT_EQ(result.value("device", ""), "pci-0000-00-04-0");
    // Keyed as the device's capacity is (the allocator matches names
    // exactly).
    EXPECT_EQ(result["consumedCapacity"].value("bandwidth", ""), "40");
    shares.insert(result.value("shareID", ""));
  }
  EXPECT_THAT(shares, ::testing::SizeIs(2));
  EXPECT_FALSE(shares.contains(""));
  // Each share under its own CDI name, in the driver's checkpoint by share.
  const std::string checkpoint =
      ReadFile((std::filesystem::path(node_["KUBELET_ROOT"]) / "plugins" /
                kDriver / kClaimCheckpointFile)
                   .string());
  for (const std::string& id : shares) {
    EXPECT_THAT(checkpoint, HasSubstr(id));
  }

  share_pod("share-3");
  std::string reason;
  EXPECT_TRUE(WaitFor(
      [&] { return !(reason = Unschedulable("share-3")).empty(); }, 60s))
      << Why("share-3");
  EXPECT_THAT(reason, HasSubstr("cannot allocate all claims"));
  Delete(std::string(kPods) + "/share-1");
  ASSERT_TRUE(WaitFor([&] { return Gone("share-1"); }, 60s));
  EXPECT_TRUE(Printed("share-3")) << Why("share-3") << ReadFile(log);

  for (const char* pod : {"share-2", "share-3"}) {
    Delete(std::string(kPods) + "/" + pod);
  }
  for (const char* pod : {"share-2", "share-3"}) {
    EXPECT_TRUE(WaitFor([&] { return Gone(pod); }, 60s)) << pod;
  }
  for (const char* claim : {"share-1", "share-2", "share-3"}) {
    Delete(claims + "/" + claim);
  }
  StopDraDriver(*driver, log);
}

// Device metadata (KEP-5304, beta at 1.37) on the real kubelet and
// containerd: topology-dra-driver with --device-metadata gives the
// container of a prepared claim a file at the path upstream defines,
// describing its device with the attributes the slice publishes, in both
// metadata API versions, mounted read-only through the driver's CDI spec.
TEST_F(KubeNodeTest, TheContainerReadsItsDevicesMetadata) {
  const auto root = work_.path() / "metadata-machine";
  ASSERT_TRUE(::topology::testing::WriteMachine("vm", root));
  constexpr char kMetaResource[] = "example.com/meta-nic";
  constexpr char kClass[] = "meta-nic.example.com";
  EnsureResourceClass(kClass, kMetaResource);
  std::string log;
  const auto driver = StartDraDriver(
      "metadata", root,
      std::string("resources:\n  - name: ") + kMetaResource +
          "\n    selectors: [{pciAddresses: [\"0000:00:04.0\"]}]\n",
      {"--device-metadata"}, &log);
  ASSERT_NE(driver, nullptr);
  const std::string claims =
      "/apis/resource.k8s.io/v1/namespaces/default/resourceclaims";
  ASSERT_EQ(
      Post(claims, {{"apiVersion", "resource.k8s.io/v1"},
                    {"kind", "ResourceClaim"},
                    {"metadata", {{"name", "meta"}}},
                    {"spec",
                     {{"devices",
                       {{"requests",
                         {{{"name", "nic"},
                           {"exactly", {{"deviceClassName", kClass}}}}}}}}}}}),
      201);
  json pod = Pod("metadata", {{"claims", {{{"name", "nic"}}}}});
  pod["spec"]["resourceClaims"] = {
      {{"name", "nic"}, {"resourceClaimName", "meta"}}};
  const std::string file = std::string(
                               "/var/run/kubernetes.io/dra-device-attributes/"
                               "resourceclaims/meta/nic/") +
                           kDriver + "-metadata.json";
  pod["spec"]["containers"][0]["command"] = {
      "sh", "-c", "cat " + file + "; echo printed; exec sleep 3600"};
  ASSERT_EQ(Post(kPods, pod), 201);
  ASSERT_TRUE(Printed("metadata")) << Why("metadata") << ReadFile(log);
  const std::string read = Logs("metadata");
  EXPECT_THAT(
      read, HasSubstr("\"apiVersion\": \"metadata.resource.k8s.io/v1alpha1\""));
  EXPECT_THAT(
      read, HasSubstr("\"apiVersion\": \"metadata.resource.k8s.io/v1beta1\""));
  EXPECT_THAT(read, HasSubstr("\"name\": \"pci-0000-00-04-0\""));
  EXPECT_THAT(read, HasSubstr("\"resource.kubernetes.io/pciBusID\""));
  EXPECT_THAT(read, HasSubstr("\"string\": \"0000:00:04.0\""));

  Delete(std::string(kPods) + "/metadata");
  ASSERT_TRUE(WaitFor([&] { return Gone("metadata"); }, 60s));
  Delete(claims + "/meta");
  // Unprepared: the file and its spec are gone.
  EXPECT_TRUE(WaitFor(
      [&] {
        return !std::filesystem::exists(
            std::filesystem::path(node_["KUBELET_ROOT"]) / "plugins" / kDriver /
            kMetadataSubDir / "default_meta");
      },
      60s));
  StopDraDriver(*driver, log);
}

}  // namespace
}  // namespace topology::draplugin
