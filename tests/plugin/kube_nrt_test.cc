// topology-nrt-exporter on the real node of the cluster fixture (a v1.37
// kubelet with the static CPU manager, the Static Memory Manager and
// single-numa-node, its API server with the NodeResourceTopology CRD as
// daemonset/nrt installs it). The machine has one NUMA node: every device
// is on it.
#include <chrono>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "build_paths.h"
#include "child_process.h"
#include "kube_node_fixture.h"
#include "run_command.h"
#include "status_matchers.h"
#include "temp_dir.h"
#include "wait_for.h"

namespace topology::draplugin {
namespace {

constexpr char kNrts[] =
    "/apis/topology.node.k8s.io/v1alpha2/noderesourcetopologies";

class KubeNrtTest : public KubeNodeTest {
 protected:
  void SetUp() override {
    KubeNodeTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    ASSERT_NO_FATAL_FAILURE(EnsureCrd());
    Delete(std::string(kNrts) + "/" + node_.at("KUBE_NODE"));
  }
  void EnsureCrd() {
    const auto converted = topology::testing::RunCommand(
        "python3 -c 'import json, sys, yaml; "
        "json.dump(yaml.safe_load(open(sys.argv[1])), sys.stdout)' '" +
        topology::testing::SourceDir() +
        "/daemonset/nrt/noderesourcetopology-crd.yaml'");
    ASSERT_EQ(converted.exit_code, 0) << converted.out;
    const std::string crds =
        "/apis/apiextensions.k8s.io/v1/customresourcedefinitions";
    Ensure(crds, json::parse(converted.out));
    ASSERT_TRUE(WaitFor(
        [&] {
          json crd = Get(crds + "/noderesourcetopologies.topology.node.k8s.io");
          for (const json& condition :
               crd["status"].value("conditions", json::array())) {
            if (condition.value("type", "") == "Established" &&
                condition.value("status", "") == "True") {
              return true;
            }
          }
          return false;
        },
        30s));
  }
  std::unique_ptr<::topology::testing::ChildProcess> StartExporter() {
    log_ = (work_.path() / "exporter.log").string();
    const std::string config = env_.contains("KUBELET_CONFIG")
                                   ? env_.at("KUBELET_CONFIG")
                                   : node_.at("KUBELET_CONFIG");
    return std::make_unique<::topology::testing::ChildProcess>(
        topology::testing::ProgramPath("topology-nrt-exporter"),
        std::vector<std::string>{"--node-name", node_.at("KUBE_NODE"),
                                 "--kubeconfig", env_.at("KUBECONFIG"),
                                 "--kubelet-root", node_.at("KUBELET_ROOT"),
                                 "--kubelet-config", config, "-v", "1"},
        log_, /*append=*/true);
  }
  json Nrt() const {
    return Get(std::string(kNrts) + "/" + node_.at("KUBE_NODE"));
  }
  // A resource of zone node-0 as "capacity/allocatable/available"; "" when
  // absent.
  std::string Counts(const std::string& name) const {
    json nrt = Nrt();
    if (!nrt.is_object() || !nrt["zones"].is_array()) return "";
    for (const json& zone : nrt["zones"]) {
      if (zone.value("name", "") != "node-0") continue;
      for (const json& r : zone.value("resources", json::array())) {
        if (r.value("name", "") == name) {
          return r.value("capacity", "") + "/" + r.value("allocatable", "") +
                 "/" + r.value("available", "");
        }
      }
    }
    return "";
  }
  uint64_t Available(const std::string& name) const {
    const std::string counts = Counts(name);
    return counts.empty() ? 0
                          : std::stoull(counts.substr(counts.rfind('/') + 1));
  }
  // Waits for `pod` to run, then for `changed` to hold of the object:
  // true when it held within a second of the pod's Running (the kubelet
  // admitted it before it ran).
  bool FollowsWithinASecond(const std::string& pod,
                            const std::function<bool()>& changed) const {
    if (!WaitFor([&] { return PodPhase(pod) == "Running"; }, 120s, 50ms)) {
      return false;
    }
    return WaitFor(changed, 1s, 20ms);
  }
  std::string attribute(const std::string& name) const {
    for (const json& a : Nrt().value("attributes", json::array())) {
      if (a.value("name", "") == name) return a.value("value", "");
    }
    return "";
  }

  std::string log_;
};

// Exclusive CPUs, pinned memory, a late device plugin's device and a DRA
// claim make `available` drop on node-0 within a second of the pod's start
// and come back when it goes; restarting the exporter or the kubelet
// writes nothing new.
TEST_F(KubeNrtTest, TheNodeResourceTopologyFollowsThePods) {
  auto exporter = StartExporter();
  ASSERT_TRUE(WaitFor([&] { return Counts("cpu") == "2/1/1"; }, 60s))
      << Counts("cpu") << ReadFile(log_);
  json nrt = Nrt();
  EXPECT_EQ(attribute("topologyManagerPolicy"), "single-numa-node");
  EXPECT_EQ(attribute("topologyManagerScope"), "container");
  EXPECT_EQ(attribute("topologyManagerMaxNUMANodes"), "8");
  EXPECT_EQ(attribute("nodeTopologyPodsFingerprintMethod"), "all");
  EXPECT_THAT(attribute("nodeTopologyPodsFingerprint"),
              ::testing::StartsWith("pfp0v001"));
  EXPECT_EQ(nrt["metadata"]["ownerReferences"][0]["kind"], "Node");
  EXPECT_EQ(nrt["zones"][0]["costs"][0]["value"], 10);
  const uint64_t memory = Available("memory");
  ASSERT_GT(memory, 0u) << nrt.dump();

  // A device plugin that registers after the exporter started is counted.
  const std::string plugin_log = (work_.path() / "plugin.log").string();
  auto plugin = std::make_unique<::topology::testing::ChildProcess>(
      topology::testing::ProgramPath("topology-device-plugin"),
      std::vector<std::string>{
          "--config", (work_.path() / "config.yaml").string(), "--cdi-dir", "",
          "--http-addr", "", "--dra-claims", "", "-v", "1"},
      plugin_log, /*append=*/true);
  ASSERT_TRUE(WaitFor([&] { return Counts(kResource) == "1/1/1"; }, 60s))
      << Counts(kResource) << ReadFile(plugin_log) << ReadFile(log_);

  // Exclusive CPU, pinned memory and the device.
  const json resources = {
      {"limits", {{"cpu", "1"}, {"memory", "64Mi"}, {kResource, "1"}}},
      {"requests", {{"cpu", "1"}, {"memory", "64Mi"}, {kResource, "1"}}}};
  ASSERT_EQ(Post(kPods, Pod("nrt-guaranteed", resources)), 201);
  const bool followed = FollowsWithinASecond("nrt-guaranteed", [&] {
    return Counts("cpu") == "2/1/0" && Counts(kResource) == "1/1/0" &&
           Available("memory") == memory - 64 * 1024 * 1024;
  });
  EXPECT_TRUE(followed) << Why("nrt-guaranteed") << Nrt().dump()
                        << ReadFile(log_);
  const std::string fingerprint = attribute("nodeTopologyPodsFingerprint");

  // The exporter restarts: the object it finds is right; nothing written.
  const std::string version = Nrt()["metadata"]["resourceVersion"];
  exporter->Signal(SIGTERM);
  EXPECT_EQ(exporter->Wait(5s), 0) << ReadFile(log_);
  exporter = StartExporter();
  ASSERT_TRUE(WaitFor(
      [&] {
        return ReadFile(log_).find("was up to date already") !=
               std::string::npos;
      },
      30s))
      << ReadFile(log_);
  EXPECT_EQ(Nrt()["metadata"]["resourceVersion"], version);

  // The kubelet restarts: its checkpoints give the pod what it had.
  ASSERT_EQ(
      std::system(("'" + Script() + "' restart-kubelet '" + dir_.string() + "'")
                      .c_str()),
      0);
  ASSERT_TRUE(WaitFor(
      [&] {
        return ReadFile(log_).find("after the kubelet's restart") !=
               std::string::npos;
      },
      60s))
      << ReadFile(log_);
  EXPECT_THAT(ReadFile(log_), HasSubstr("was up to date already after the "
                                        "kubelet's restart"));
  EXPECT_EQ(Nrt()["metadata"]["resourceVersion"], version);
  EXPECT_EQ(Counts("cpu"), "2/1/0");
  EXPECT_EQ(attribute("nodeTopologyPodsFingerprint"), fingerprint);

  Delete(std::string(kPods) + "/nrt-guaranteed");
  ASSERT_TRUE(WaitFor([&] { return Gone("nrt-guaranteed"); }, 60s));
  EXPECT_TRUE(WaitFor(
      [&] {
        return Counts("cpu") == "2/1/1" && Counts(kResource) == "1/1/1" &&
               Available("memory") == memory;
      },
      30s))
      << Nrt().dump();
  plugin->Signal(SIGTERM);
  EXPECT_EQ(plugin->Wait(5s), 0) << ReadFile(plugin_log);

  // A DRA claim: the class's device on node-0 (the machine's only node).
  EnsureDraClassAndTemplate();
  std::string driver_log;
  auto driver = StartDraDriver("nrt", "/", DraConfig(), {}, &driver_log);
  ASSERT_NE(driver, nullptr);
  ASSERT_TRUE(
      WaitFor([&] { return Counts("virtio.example.com") == "1/1/1"; }, 60s))
      << Nrt().dump() << ReadFile(log_);
  json pod = Pod("nrt-claimant", {{"claims", {{{"name", "nic"}}}}});
  pod["spec"]["resourceClaims"] = {
      {{"name", "nic"}, {"resourceClaimTemplateName", "virtio"}}};
  ASSERT_EQ(Post(kPods, pod), 201);
  EXPECT_TRUE(FollowsWithinASecond(
      "nrt-claimant", [&] { return Counts("virtio.example.com") == "1/1/0"; }))
      << Why("nrt-claimant") << Nrt().dump() << ReadFile(log_);
  Delete(std::string(kPods) + "/nrt-claimant");
  ASSERT_TRUE(WaitFor([&] { return Gone("nrt-claimant"); }, 60s));
  EXPECT_TRUE(
      WaitFor([&] { return Counts("virtio.example.com") == "1/1/1"; }, 30s))
      << Nrt().dump();
  StopDraDriver(*driver, driver_log);

  exporter->Signal(SIGTERM);
  EXPECT_EQ(exporter->Wait(5s), 0) << ReadFile(log_);
}

}  // namespace
}  // namespace topology::draplugin
