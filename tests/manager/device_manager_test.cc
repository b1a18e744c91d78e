// DeviceManager with the TopologyManager: hints, admission and allocation
// with the kubelet device manager's rules, against a scripted plugin.
#include "topology/manager/device_manager.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "topology/manager/topology_manager.h"

#include "status_matchers.h"

namespace topology::manager {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

constexpr char kGpu[] = "example.com/gpu";

class ScriptedEndpoint : public DevicePluginEndpoint {
 public:
  bool preferred_available = true;
  std::vector<std::string> preferred_answer;
  Status allocate_status;
  std::vector<std::vector<std::string>> preferred_calls;  // available sets
  std::vector<std::vector<std::string>> allocate_calls;

  bool PreferredAllocationAvailable() const override {
    return preferred_available;
  }
  StatusOr<std::vector<std::string>> GetPreferredAllocation(
      const std::vector<std::string>& available,
      const std::vector<std::string>& /*must_include*/, int /*size*/) override {
    preferred_calls.push_back(available);
    return preferred_answer;
  }
  Status Allocate(const std::vector<std::string>& ids) override {
    allocate_calls.push_back(ids);
    return allocate_status;
  }
};

// Two NUMA nodes, four GPUs: g0,g1 on node 0 and g2,g3 on node 1.
std::vector<Device> FourGpus() {
  return {{"g0", {0}, true},
          {"g1", {0}, true},
          {"g2", {1}, true},
          {"g3", {1}, true}};
}

Pod GpuPod(const std::string& uid, int gpus) {
  Pod pod;
  pod.uid = uid;
  pod.name = uid;
  pod.containers = {Container{"c", {{kGpu, gpus}}, false}};
  return pod;
}

class DeviceManagerTest : public ::testing::Test {
 protected:
  void SetUp() override { Build(kPolicySingleNumaNode, kScopeContainer); }
  void Build(const std::string& policy, const std::string& scope) {
    ManagerConfig config;
    config.policy = policy;
    config.scope = scope;
    manager_ = *TopologyManager::Create(
        config, *NumaInfo::Create({0, 1}, std::nullopt));
    devices_ =
        std::make_unique<DeviceManager>(std::vector<int>{0, 1}, manager_.get());
    devices_->UpdateResource(kGpu, FourGpus(), &endpoint_);
    manager_->AddHintProvider(devices_.get());
  }
  std::unique_ptr<TopologyManager> manager_;
  std::unique_ptr<DeviceManager> devices_;
  ScriptedEndpoint endpoint_;
};

TEST_F(DeviceManagerTest, AlignedPodsUntilANodeRunsOut) {
  EXPECT_TRUE(manager_->Admit(GpuPod("a", 2)).admit);
  EXPECT_THAT(devices_->ContainerDevices("a", "c", kGpu),
              ElementsAre("g0", "g1"));
  EXPECT_TRUE(manager_->Admit(GpuPod("b", 1)).admit);
  EXPECT_THAT(devices_->ContainerDevices("b", "c", kGpu), ElementsAre("g2"));
  // One GPU left on node 1: a 2-GPU pod cannot be aligned.
  const AdmitResult rejected = manager_->Admit(GpuPod("c", 2));
  EXPECT_FALSE(rejected.admit);
  EXPECT_EQ(rejected.reason, "TopologyAffinityError");
  EXPECT_TRUE(devices_->ContainerDevices("c", "c", kGpu).empty());
  devices_->RemovePod("a");
  EXPECT_TRUE(manager_->Admit(GpuPod("c", 2)).admit);
}

TEST_F(DeviceManagerTest, PreferredAllocationOnlyWhenMoreAlignedThanNeeded) {
  endpoint_.preferred_answer = {"g1"};
  EXPECT_TRUE(manager_->Admit(GpuPod("a", 1)).admit);
  ASSERT_EQ(endpoint_.preferred_calls.size(), 1u);
  EXPECT_THAT(endpoint_.preferred_calls[0], ElementsAre("g0", "g1"));
  EXPECT_THAT(devices_->ContainerDevices("a", "c", kGpu), ElementsAre("g1"));
  EXPECT_THAT(endpoint_.allocate_calls.back(), ElementsAre("g1"));
  // Exactly as many aligned as needed: no GetPreferredAllocation call inside
  // the aligned set (the kubelet asks again for the remainder only).
  endpoint_.preferred_calls.clear();
  EXPECT_TRUE(manager_->Admit(GpuPod("b", 2)).admit);
  EXPECT_THAT(devices_->ContainerDevices("b", "c", kGpu),
              ElementsAre("g2", "g3"));
}

TEST_F(DeviceManagerTest, UnhealthyDevicesAreNotAvailable) {
  auto devices = FourGpus();
  devices[0].healthy = false;
  devices_->UpdateResource(kGpu, devices, &endpoint_);
  const ProviderHints hints =
      devices_->GetTopologyHints(GpuPod("a", 2), GpuPod("a", 2).containers[0]);
  // Node 0 has one healthy GPU; {0} stays out, {1} preferred.
  ASSERT_TRUE(hints.at(kGpu).has_value());
  EXPECT_EQ(hints.at(kGpu)->size(), 2u);
  EXPECT_EQ((*hints.at(kGpu))[0].affinity, NumaMask::FromBits(2));
  EXPECT_TRUE((*hints.at(kGpu))[0].preferred);
}

TEST_F(DeviceManagerTest, NoTopologyMeansNilHints) {
  devices_->UpdateResource(kGpu, {{"g0", {}, true}, {"g1", {}, true}}, nullptr);
  const Pod pod = GpuPod("a", 1);
  const ProviderHints hints =
      devices_->GetTopologyHints(pod, pod.containers[0]);
  ASSERT_EQ(hints.count(kGpu), 1u);
  EXPECT_FALSE(hints.at(kGpu).has_value());
}

TEST_F(DeviceManagerTest, NotEnoughDevicesIsAnEmptyList) {
  const Pod pod = GpuPod("a", 5);
  const ProviderHints hints =
      devices_->GetTopologyHints(pod, pod.containers[0]);
  ASSERT_TRUE(hints.at(kGpu).has_value());
  EXPECT_THAT(*hints.at(kGpu), IsEmpty());
}

TEST_F(DeviceManagerTest, UnknownResourcesAreIgnored) {
  const Pod pod = GpuPod("a", 1);
  Pod other = pod;
  other.containers[0].limits = {{"example.com/fpga", 1}};
  EXPECT_TRUE(devices_->GetTopologyHints(other, other.containers[0]).empty());
}

TEST_F(DeviceManagerTest, InitContainerDevicesAreReused) {
  Build(kPolicyBestEffort, kScopeContainer);
  Pod pod = GpuPod("a", 1);
  pod.init_containers = {Container{"init", {{kGpu, 2}}, false}};
  EXPECT_TRUE(manager_->Admit(pod).admit);
  const auto init = devices_->ContainerDevices("a", "init", kGpu);
  const auto app = devices_->ContainerDevices("a", "c", kGpu);
  ASSERT_EQ(init.size(), 2u);
  ASSERT_EQ(app.size(), 1u);
  EXPECT_TRUE(app[0] == init[0] || app[0] == init[1]);
  EXPECT_EQ(devices_->InUse(kGpu).size(), 2u);
}

TEST_F(DeviceManagerTest, PodScopeSumsContainers) {
  Build(kPolicySingleNumaNode, kScopePod);
  Pod pod = GpuPod("a", 1);
  pod.containers.push_back(Container{"d", {{kGpu, 1}}, false});
  EXPECT_EQ(DeviceManager::PodRequest(pod, kGpu), 2);
  EXPECT_TRUE(manager_->Admit(pod).admit);
  EXPECT_THAT(devices_->InUse(kGpu), ElementsAre("g0", "g1"));
}

TEST_F(DeviceManagerTest, PodRequestWithSidecars) {
  Pod pod;
  pod.init_containers = {Container{"side", {{kGpu, 1}}, true},
                         Container{"init", {{kGpu, 3}}, false}};
  pod.containers = {Container{"app", {{kGpu, 1}}, false}};
  // max(app 1 + sidecar 1, init 3 + sidecar 1) = 4
  EXPECT_EQ(DeviceManager::PodRequest(pod, kGpu), 4);
}

TEST_F(DeviceManagerTest, PluginAllocateFailureRejectsThePod) {
  endpoint_.allocate_status = UnavailableError("plugin gone");
  const AdmitResult result = manager_->Admit(GpuPod("a", 1));
  EXPECT_FALSE(result.admit);
  EXPECT_EQ(result.reason, "UnexpectedAdmissionError");
  EXPECT_TRUE(devices_->InUse(kGpu).empty());
}

TEST_F(DeviceManagerTest, RestartRegeneratesHintsFromAllocatedDevices) {
  EXPECT_TRUE(manager_->Admit(GpuPod("a", 2)).admit);
  const Pod same = GpuPod("a", 2);
  ProviderHints hints = devices_->GetTopologyHints(same, same.containers[0]);
  ASSERT_TRUE(hints.at(kGpu).has_value());
  EXPECT_EQ((*hints.at(kGpu))[0], (TopologyHint{NumaMask::FromBits(1), true}));
  const Pod changed = GpuPod("a", 3);
  hints = devices_->GetTopologyHints(changed, changed.containers[0]);
  ASSERT_TRUE(hints.at(kGpu).has_value());
  EXPECT_THAT(*hints.at(kGpu), IsEmpty());
}

TEST_F(DeviceManagerTest, RestoredDevicesAreInUse) {
  devices_->Restore("old", "c", kGpu, {"g0", "g1"});
  EXPECT_THAT(devices_->InUse(kGpu), ::testing::ElementsAre("g0", "g1"));
  ASSERT_EQ(devices_->Allocations().size(), 1u);
  EXPECT_EQ(devices_->Allocations()[0].pod_uid, "old");
  // Node 0 is full: a 2-GPU pod lands on node 1.
  ASSERT_TRUE(manager_->Admit(GpuPod("new", 2)).admit);
  EXPECT_THAT(devices_->ContainerDevices("new", "c", kGpu),
              ::testing::ElementsAre("g2", "g3"));
}

TEST_F(DeviceManagerTest, JointSelectorAnswersAreCheckedAndUsed) {
  devices_->UpdateResource("example.com/nic",
                           {{"n0", {0}, true}, {"n1", {0}, true}}, &endpoint_);
  Pod pod = GpuPod("p", 1);
  pod.containers[0].limits["example.com/nic"] = 1;
  int calls = 0;
  devices_->SetJointSelector(
      [&](const std::map<std::string, DeviceManager::JointPool>& pools)
          -> StatusOr<std::map<std::string, std::vector<std::string>>> {
        ++calls;
        EXPECT_EQ(pools.at(kGpu).count, 1);
        EXPECT_THAT(pools.at(kGpu).candidates,
                    ::testing::ElementsAre("g0", "g1"));
        return std::map<std::string, std::vector<std::string>>{
            {kGpu, {"g1"}}, {"example.com/nic", {"n1"}}};
      });
  ASSERT_TRUE(manager_->Admit(pod).admit);
  EXPECT_EQ(calls, 1);
  EXPECT_THAT(devices_->ContainerDevices("p", "c", kGpu),
              ::testing::ElementsAre("g1"));
  EXPECT_THAT(devices_->ContainerDevices("p", "c", "example.com/nic"),
              ::testing::ElementsAre("n1"));
  // An answer outside the candidates is ignored: the kubelet's path runs.
  devices_->SetJointSelector(
      [](const std::map<std::string, DeviceManager::JointPool>&)
          -> StatusOr<std::map<std::string, std::vector<std::string>>> {
        return std::map<std::string, std::vector<std::string>>{
            {kGpu, {"g9"}}, {"example.com/nic", {"n0"}}};
      });
  Pod second = GpuPod("q", 1);
  second.containers[0].limits["example.com/nic"] = 1;
  ASSERT_TRUE(manager_->Admit(second).admit);
  EXPECT_THAT(devices_->ContainerDevices("q", "c", kGpu),
              ::testing::ElementsAre("g0"));
}

}  // namespace
}  // namespace topology::manager
