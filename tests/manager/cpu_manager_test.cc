// CpuManager (static policy) on the dual-socket synthetic machine.
#include "topology/manager/cpu_manager.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "topology/discovery.h"
#include "topology/manager/topology_manager.h"
#include "topology/testing/sysfs_tree_builder.h"

#include "status_matchers.h"
#include "synthetic_machines.h"
#include "temp_dir.h"

namespace topology::manager {
namespace {

using testing::StatusIs;

class CpuManagerTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new testing::TempDir();
    topology_ =
        new Topology(testing::DiscoverDualSocketGpuMachine(dir_->path()));
  }
  static void TearDownTestSuite() {
    delete topology_;
    delete dir_;
  }
  void SetUp() override {
    ManagerConfig config;
    config.policy = kPolicySingleNumaNode;
    manager_ =
        *TopologyManager::Create(config, *NumaInfo::FromTopology(*topology_));
    cpus_ = *CpuManager::Create(kCpuPolicyStatic, *topology_,
                                CpuSet::Of({0, 16}), manager_.get());
    manager_->AddHintProvider(cpus_.get());
  }
  static Pod CpuPod(const std::string& uid, int64_t millis,
                    bool guaranteed = true) {
    Pod pod;
    pod.uid = uid;
    pod.name = uid;
    pod.guaranteed = guaranteed;
    pod.containers = {Container{"c", {{"cpu", millis}}, false}};
    return pod;
  }

  static testing::TempDir* dir_;
  static Topology* topology_;
  std::unique_ptr<TopologyManager> manager_;
  std::unique_ptr<CpuManager> cpus_;
};

testing::TempDir* CpuManagerTest::dir_ = nullptr;
Topology* CpuManagerTest::topology_ = nullptr;

TEST_F(CpuManagerTest, OnlyGuaranteedIntegerCpusGetHints) {
  const Pod whole = CpuPod("a", 4000);
  EXPECT_EQ(CpuManager::GuaranteedCpus(whole, whole.containers[0]), 4);
  EXPECT_FALSE(cpus_->GetTopologyHints(whole, whole.containers[0]).empty());
  const Pod fraction = CpuPod("b", 1500);
  EXPECT_EQ(CpuManager::GuaranteedCpus(fraction, fraction.containers[0]), 0);
  EXPECT_TRUE(
      cpus_->GetTopologyHints(fraction, fraction.containers[0]).empty());
  const Pod burstable = CpuPod("c", 4000, false);
  EXPECT_TRUE(
      cpus_->GetTopologyHints(burstable, burstable.containers[0]).empty());
}

TEST_F(CpuManagerTest, ExclusiveCpusOnOneNodeWholeCoresFirst) {
  ASSERT_TRUE(manager_->Admit(CpuPod("a", 4000)).admit);
  const CpuSet got = cpus_->ContainerCpus("a", "c");
  EXPECT_EQ(got.Count(), 4);
  // Node 0 is 0-7,16-23; CPUs 0 and 16 are reserved. Whole cores: 1+17, 2+18.
  EXPECT_EQ(got.ToList(), "1-2,17-18");
  EXPECT_FALSE(cpus_->SharedPool().Intersects(got));
  EXPECT_FALSE(cpus_->SharedPool().Contains(0));
}

TEST_F(CpuManagerTest, TooManyCpusForOneNodeIsRejectedBySingleNumaNode) {
  const AdmitResult result = manager_->Admit(CpuPod("a", 20000));
  EXPECT_FALSE(result.admit);
  EXPECT_EQ(result.reason, "TopologyAffinityError");
}

TEST_F(CpuManagerTest, SecondPodGoesToTheOtherNodeWhenTheFirstIsFull) {
  ASSERT_TRUE(manager_->Admit(CpuPod("a", 14000)).admit);  // node 0: 14 of 14
  ASSERT_TRUE(manager_->Admit(CpuPod("b", 2000)).admit);
  EXPECT_EQ(manager_->GetAffinity("b", "c").affinity, NumaMask::FromBits(2));
  cpus_->RemovePod("a");
  EXPECT_EQ(cpus_->SharedPool().Count(), 32 - 2 - 2);
}

TEST_F(CpuManagerTest, CreationErrors) {
  EXPECT_THAT(
      CpuManager::Create("dynamic", *topology_, CpuSet(), manager_.get()),
      StatusIs(StatusCode::kInvalidArgument));
  EXPECT_THAT(CpuManager::Create(kCpuPolicyStatic, *topology_, CpuSet(),
                                 manager_.get()),
              StatusIs(StatusCode::kInvalidArgument));
  EXPECT_THAT(CpuManager::Create(kCpuPolicyStatic, *topology_, CpuSet::Of({99}),
                                 manager_.get()),
              StatusIs(StatusCode::kInvalidArgument));
  EXPECT_TRUE(
      CpuManager::Create(kCpuPolicyNone, *topology_, CpuSet(), manager_.get())
          .ok());
}

TEST_F(CpuManagerTest, RestoreTakesFreeCpusOnly) {
  ASSERT_THAT(cpus_->Restore("old", "c", CpuSet::Of({1, 17})), testing::IsOk());
  EXPECT_EQ(cpus_->ContainerCpus("old", "c"), CpuSet::Of({1, 17}));
  EXPECT_FALSE(cpus_->SharedPool().Contains(1));
  EXPECT_THAT(cpus_->Restore("other", "c", CpuSet::Of({1})),
              testing::StatusIs(StatusCode::kInvalidArgument));
  EXPECT_THAT(cpus_->Restore("other", "c", CpuSet::Of({0})),  // reserved
              testing::StatusIs(StatusCode::kInvalidArgument));
}

// The kubelet fills the half-used core before it splits a free one: on 2
// sockets x 2 cores x 2 threads (siblings c and c+4) with CPU 0 reserved, a
// pod of one CPU gets CPU 4, the reserved CPU's sibling (kubelet v1.37's
// takeByTopologyNUMAPacked; whole cores first gave CPU 1 before).
TEST(CpuManagerOrderTest, TheHalfUsedCoreIsFilledFirst) {
  testing::TempDir dir;
  {
    testing::SysfsTreeBuilder b(dir.path());
    for (int cpu = 0; cpu < 8; ++cpu) {
      const int first = cpu % 4;
      b.AddCpu(cpu, first / 2, first % 2,
               std::to_string(first) + "," + std::to_string(first + 4));
    }
    b.AddNode(0, "0-1,4-5", uint64_t{8} << 30);
    b.AddNode(1, "2-3,6-7", uint64_t{8} << 30);
    b.SetDistances({{10, 21}, {21, 10}});
    b.Finish();
  }
  DiscoveryOptions options;
  options.host_root = dir.path();
  const Topology topology = *Discover(options);
  for (const char* policy : {kPolicyNone, kPolicySingleNumaNode}) {
    ManagerConfig config;
    config.policy = policy;
    auto manager =
        *TopologyManager::Create(config, *NumaInfo::FromTopology(topology));
    auto cpus = *CpuManager::Create(kCpuPolicyStatic, topology, CpuSet::Of({0}),
                                    manager.get());
    manager->AddHintProvider(cpus.get());
    Pod pod;
    pod.uid = "a";
    pod.name = "a";
    pod.guaranteed = true;
    pod.containers = {Container{"c", {{"cpu", 1000}}, false}};
    ASSERT_TRUE(manager->Admit(pod).admit) << policy;
    EXPECT_EQ(cpus->ContainerCpus("a", "c").ToList(), "4") << policy;
    // Then the other half-used one is gone: a whole core of node 0.
    pod.uid = "b";
    pod.name = "b";
    pod.containers = {Container{"c", {{"cpu", 2000}}, false}};
    ASSERT_TRUE(manager->Admit(pod).admit) << policy;
    EXPECT_EQ(cpus->ContainerCpus("b", "c").ToList(), "1,5") << policy;
  }
}

}  // namespace
}  // namespace topology::manager
