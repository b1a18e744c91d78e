// DeviceManager with the TopologyManager: hints, admission and allocation
// with the kubelet device manager's rules, against a scripted plugin.
#include "topology/manager/device_manager.h"

#include <functional>
#include <memory>

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
  // Runs inside each plugin call (the manager's lock must not be held).
  std::function<void()> during_call;

  bool PreferredAllocationAvailable() const override {
    return preferred_available;
  }
  StatusOr<std::vector<std::string>> GetPreferredAllocation(
      const std::vector<std::string>& available,
      const std::vector<std::string>& /*must_include*/, int /*size*/) override {
    preferred_calls.push_back(available);
    if (during_call) during_call();
    return preferred_answer;
  }
  StatusOr<std::string> Allocate(const std::vector<std::string>& ids) override {
    allocate_calls.push_back(ids);
    if (during_call) during_call();
    if (!allocate_status.ok()) return allocate_status;
    std::string answer = "response";
    for (const std::string& id : ids) answer += " " + id;
    return answer;
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
    devices_->UpdateResource(kGpu, FourGpus(), shared_endpoint_);
    manager_->AddHintProvider(devices_.get());
  }
  std::unique_ptr<TopologyManager> manager_;
  std::unique_ptr<DeviceManager> devices_;
  std::shared_ptr<ScriptedEndpoint> shared_endpoint_ =
      std::make_shared<ScriptedEndpoint>();
  ScriptedEndpoint& endpoint_ = *shared_endpoint_;
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
  devices_->UpdateResource(kGpu, devices, shared_endpoint_);
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

// Kubelet v1.37 (topology_hints.go, generateDeviceTopologyHints): hints
// combine only the NUMA nodes that host a device of the resource, and the
// fewest of them that hold the request are preferred; nodes the machine
// does not have are left out.
TEST_F(DeviceManagerTest, HintsCombineOnlyTheNodesHostingDevices) {
  devices_ = std::make_unique<DeviceManager>(std::vector<int>{0, 1, 2, 3},
                                             manager_.get());
  devices_->UpdateResource(kGpu,
                           {{"g0", {1}, true},
                            {"g1", {3}, true},
                            {"g2", {}, true},
                            {"g3", {7}, true}},
                           nullptr);
  const Pod pod = GpuPod("a", 2);
  const ProviderHints hints =
      devices_->GetTopologyHints(pod, pod.containers[0]);
  ASSERT_TRUE(hints.at(kGpu).has_value());
  std::vector<std::pair<std::vector<int>, bool>> got;
  for (const TopologyHint& hint : *hints.at(kGpu)) {
    got.push_back({hint.affinity->Ids(), hint.preferred});
  }
  // Over every node, {0,1,3}, {1,2,3} and {0,1,2,3} would be hints too.
  EXPECT_THAT(got,
              ::testing::ElementsAre(std::pair(std::vector<int>{1, 3}, true)));
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

// The plugin's answer lives with the allocation: asked by pod, container
// and resource; gone with the pod; never kept for devices released while
// the call ran.
TEST_F(DeviceManagerTest, TheAllocateResponseIsKeptWithTheAllocation) {
  ASSERT_TRUE(manager_->Admit(GpuPod("a", 2)).admit);
  EXPECT_EQ(devices_->AllocateResponse("a", "c", kGpu), "response g0 g1");
  EXPECT_EQ(devices_->AllocateResponse("a", "other", kGpu), "");
  devices_->RemovePod("a");
  EXPECT_EQ(devices_->AllocateResponse("a", "c", kGpu), "");
  // Released while the plugin answered: neither devices nor answer stay.
  endpoint_.during_call = [&] { devices_->RemovePod("b"); };
  manager_->Admit(GpuPod("b", 1));
  EXPECT_TRUE(devices_->ContainerDevices("b", "c", kGpu).empty());
  EXPECT_EQ(devices_->AllocateResponse("b", "c", kGpu), "");
  endpoint_.during_call = nullptr;
  // A restored allocation has no answer (its plugin was not called).
  devices_->Restore("old", "c", kGpu, {"g3"});
  EXPECT_EQ(devices_->AllocateResponse("old", "c", kGpu), "");
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

// What is free is kept per device beside the list: it must follow every
// change of the list, of the allocations and of a failed Allocate.
TEST_F(DeviceManagerTest, FreeDevicesFollowListsReleasesAndFailures) {
  // Restored before its device is listed: g9 counts as held once it is.
  devices_->Restore("old", "c", kGpu, {"g0", "g9"});
  devices_->UpdateResource(kGpu,
                           {{"g9", {0}, true},
                            {"g0", {0}, true},
                            {"g2", {1}, true},
                            {"g3", {1}, true},
                            {"g9", {0}, true}},  // a duplicate
                           shared_endpoint_);
  // Node 0 holds g0 and g9, both taken: a 2-GPU pod lands on node 1.
  ASSERT_TRUE(manager_->Admit(GpuPod("new", 2)).admit);
  EXPECT_THAT(devices_->ContainerDevices("new", "c", kGpu),
              ElementsAre("g2", "g3"));
  EXPECT_FALSE(manager_->Admit(GpuPod("full", 1)).admit);
  // Released, and listed again: node 0's two GPUs are free.
  devices_->RemovePod("old");
  devices_->UpdateResource(kGpu, FourGpus(), shared_endpoint_);
  endpoint_.allocate_status = UnavailableError("plugin gone");
  EXPECT_FALSE(manager_->Admit(GpuPod("failed", 2)).admit);
  endpoint_.allocate_status = OkStatus();
  ASSERT_TRUE(manager_->Admit(GpuPod("again", 2)).admit);
  EXPECT_THAT(devices_->ContainerDevices("again", "c", kGpu),
              ElementsAre("g0", "g1"));
  devices_->RemovePod("new");
  ASSERT_TRUE(manager_->Admit(GpuPod("last", 2)).admit);
  EXPECT_THAT(devices_->ContainerDevices("last", "c", kGpu),
              ElementsAre("g2", "g3"));
}

TEST_F(DeviceManagerTest, JointSelectorAnswersAreCheckedAndUsed) {
  devices_->UpdateResource("example.com/nic",
                           {{"n0", {0}, true}, {"n1", {0}, true}},
                           shared_endpoint_);
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

// The plugin is called without the manager's lock: a list update (or the
// resource's removal) from the plugin's stream during the call neither
// deadlocks nor leaves a dangling endpoint, and the answer is checked
// against what is free after the call.
TEST_F(DeviceManagerTest, PluginCallsRunWithoutTheLockAndSurviveRemoval) {
  // A list update from the plugin's stream during the call.
  endpoint_.during_call = [this] {
    devices_->UpdateResource(kGpu, FourGpus(), shared_endpoint_);
  };
  endpoint_.preferred_answer = {"g1"};
  ASSERT_TRUE(manager_->Admit(GpuPod("p", 1)).admit);
  EXPECT_THAT(devices_->ContainerDevices("p", "c", kGpu), ElementsAre("g1"));
  ASSERT_EQ(endpoint_.preferred_calls.size(), 1u);
  devices_->RemovePod("p");
  manager_->RemovePod("p");

  // The plugin goes away (resource removed, endpoint replaced and dropped)
  // while GetPreferredAllocation is in flight.
  std::weak_ptr<ScriptedEndpoint> watch = shared_endpoint_;
  auto replaced = std::make_shared<ScriptedEndpoint>();
  replaced->preferred_answer = {"g0"};
  replaced->during_call = [this] { devices_->RemoveResource(kGpu); };
  devices_->UpdateResource(kGpu, FourGpus(), replaced);
  shared_endpoint_.reset();
  EXPECT_TRUE(watch.expired());  // the manager kept no stale reference
  const AdmitResult second = manager_->Admit(GpuPod("q", 1));
  ASSERT_EQ(replaced->preferred_calls.size(), 1u);
  EXPECT_FALSE(second.admit);
  EXPECT_EQ(second.reason, "UnexpectedAdmissionError");
  EXPECT_THAT(second.message,
              ::testing::HasSubstr("cannot allocate unregistered device"));
  EXPECT_THAT(devices_->Allocations(), IsEmpty());
}

// Counts are 64-bit, as in the kubelet: 2^32 + 1 devices is not 1.
TEST_F(DeviceManagerTest, QuantitiesAboveTwoToTheThirtyOneAreNotTruncated) {
  const int64_t huge = (int64_t{1} << 32) + 1;
  Pod pod = GpuPod("p", 1);
  pod.containers[0].limits[kGpu] = huge;
  const ProviderHints hints =
      devices_->GetTopologyHints(pod, pod.containers[0]);
  ASSERT_TRUE(hints.at(kGpu).has_value());
  EXPECT_THAT(*hints.at(kGpu), IsEmpty());
  const Status status = devices_->Allocate(pod, pod.containers[0]);
  EXPECT_EQ(status.code(), StatusCode::kResourceExhausted);
  EXPECT_THAT(status.message(),
              ::testing::HasSubstr("Requested: 4294967297, Available: 4"));
  EXPECT_THAT(devices_->InUse(kGpu), IsEmpty());
}

// Pod-level sums of hostile limits saturate instead of overflowing.
TEST_F(DeviceManagerTest, PodRequestSaturates) {
  Pod pod = GpuPod("p", 1);
  pod.containers[0].limits[kGpu] = INT64_MAX - 1;
  pod.containers.push_back(Container{"d", {{kGpu, INT64_MAX - 1}}, false});
  EXPECT_EQ(DeviceManager::PodRequest(pod, kGpu), INT64_MAX);
}

// The kubelet's isDevicePluginResource: a resource whose plugin is gone but
// whose devices some pod still holds is still a device plugin resource, so
// a new pod asking for it is refused, not admitted without devices.
TEST_F(DeviceManagerTest, ResourceHeldOnlyByAllocationsCannotBeAllocated) {
  ASSERT_TRUE(manager_->Admit(GpuPod("p", 1)).admit);
  devices_->RemoveResource(kGpu);
  EXPECT_FALSE(devices_->HasResource(kGpu));
  EXPECT_TRUE(devices_->IsDevicePluginResource(kGpu));
  EXPECT_FALSE(devices_->IsDevicePluginResource("example.com/never"));
  Build(kPolicyNone, kScopeContainer);  // fresh manager, fresh allocations
  devices_->Restore("p", "c", kGpu, {"g0"});
  devices_->RemoveResource(kGpu);
  const Pod pod = GpuPod("q", 1);
  const AdmitResult result = manager_->Admit(pod);
  EXPECT_FALSE(result.admit);
  EXPECT_THAT(result.message,
              ::testing::HasSubstr("cannot allocate unregistered device " +
                                   std::string(kGpu)));
  EXPECT_THAT(devices_->ContainerDevices("q", "c", kGpu), IsEmpty());
}

}  // namespace
}  // namespace topology::manager
