// The static CPU manager policy's Allocate against upstream's own table:
// TestStaticPolicyAdd of pkg/kubelet/cm/cpumanager/policy_static_test.go
// (Kubernetes v1.37.2), each row under its upstream description: the
// options-insensitive rows with no options and with full-pcpus-only, as
// upstream runs them, then the default, full-pcpus-only and align-by-socket
// rows. A row's state (the assignments and the default CPU set) becomes
// ours as restored assignments: CPUs neither in the default set, nor
// reserved, nor assigned are held by another pod.
//
// Left out: the rows on topoQuadSocketFourWayHT, whose core ids are not
// the lowest id of their threads as the kubelet's topology.Discover names
// a real machine's cores, so that machine cannot be described through a
// Topology (the kubelet oracle covers machines of that size instead).
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "topology/manager/cpu_manager.h"

#include "upstream_machines.h"

namespace topology::manager {
namespace {

using upstream::DualSocketHT;
using upstream::DualSocketMultiNumaPerSocketHT;
using upstream::DualSocketNoHT;
using upstream::SingleSocketHT;

// topologymanager.NewFakeManagerWithHint: every container's affinity.
class FixedStore final : public Store {
 public:
  explicit FixedStore(TopologyHint hint) : hint_(hint) {}
  TopologyHint GetAffinity(const std::string&,
                           const std::string&) const override {
    return hint_;
  }

 private:
  TopologyHint hint_;
};

struct Row {
  std::string description;
  Topology (*topology)();
  std::map<std::string, std::string> options;
  CpuSet reserved;
  std::map<std::string, CpuSet> assignments;  // of "fakePod"
  CpuSet default_set;
  std::string container;
  int64_t request_milli;
  int64_t limit_milli;
  std::optional<std::vector<int>> hint;  // preferred NUMA affinity
  std::string error;                     // "" when none
  std::optional<CpuSet> expected;        // nullopt: nothing allocated
};

CpuSet L(const std::string& list) { return *CpuSet::ParseList(list); }

void RunStaticPolicyTestCase(const Row& row) {
  SCOPED_TRACE(row.description);
  const Topology machine = row.topology();
  TopologyHint hint;
  if (row.hint) {
    hint.affinity = *NumaMask::FromIds(*row.hint);
    hint.preferred = true;
  }
  FixedStore store(hint);
  CpuManagerConfig config;
  config.policy = kCpuPolicyStatic;
  config.reserved = row.reserved;
  config.options = row.options;
  config.alpha_options = true;
  auto cpus = CpuManager::Create(config, machine, &store);
  ASSERT_TRUE(cpus.ok()) << cpus.status().message();
  CpuSet assigned;
  for (const auto& [container, set] : row.assignments) {
    ASSERT_TRUE((*cpus)->Restore("fakePod", container, set).ok());
    assigned = assigned.Union(set);
  }
  CpuSet held;
  for (const CpuInfo& cpu : machine.cpus()) {
    if (!row.default_set.Contains(cpu.id) && !row.reserved.Contains(cpu.id) &&
        !assigned.Contains(cpu.id)) {
      held.Add(cpu.id);
    }
  }
  ASSERT_TRUE((*cpus)->Restore("another pod", "held", held).ok());
  Pod pod;
  pod.uid = "fakePod";
  pod.name = "fakePod";
  // makePod: requests and limits of CPU and memory, Guaranteed when the
  // CPU request is the limit.
  pod.guaranteed = row.request_milli == row.limit_milli;
  pod.containers = {
      Container{row.container, {{"cpu", row.limit_milli}}, false}};
  const Status status = (*cpus)->Allocate(pod, pod.containers[0]);
  if (row.error.empty()) {
    EXPECT_TRUE(status.ok()) << status.message();
  } else {
    EXPECT_EQ(status.message(), row.error);
  }
  const CpuSet got = (*cpus)->ContainerCpus("fakePod", row.container);
  EXPECT_EQ(got.ToList(), row.expected ? row.expected->ToList() : "");
}

constexpr char kFullPcpusOnly[] = "full-pcpus-only";

TEST(StaticPolicyTest, TestStaticPolicyAdd) {
  const std::vector<Row> options_insensitive = {
      {"GuPodMultipleCores, SingleSocketHT, ExpectAllocOneCore",
       SingleSocketHT,
       {},
       L("0"),
       {{"fakeContainer100", L("2-3,6-7")}},
       L("0-1,4-5"),
       "fakeContainer3",
       2000,
       2000,
       std::nullopt,
       "",
       L("1,5")},
      {"GuPodMultipleCores, DualSocketHT, ExpectAllocOneSocket",
       DualSocketHT,
       {},
       L("0"),
       {{"fakeContainer100", L("2")}},
       L("0-1,3-11"),
       "fakeContainer3",
       6000,
       6000,
       std::nullopt,
       "",
       L("1,3,5,7,9,11")},
      {"GuPodMultipleCores, DualSocketHT, ExpectAllocThreeCores",
       DualSocketHT,
       {},
       L("0"),
       {{"fakeContainer100", L("1,5")}},
       L("0,2-4,6-11"),
       "fakeContainer3",
       6000,
       6000,
       std::nullopt,
       "",
       L("2-4,8-10")},
      {"GuPodMultipleCores, DualSocketNoHT, ExpectAllocOneSocket",
       DualSocketNoHT,
       {},
       L("0"),
       {{"fakeContainer100", CpuSet()}},
       L("0-1,3-7"),
       "fakeContainer1",
       4000,
       4000,
       std::nullopt,
       "",
       L("4-7")},
      {"GuPodMultipleCores, DualSocketNoHT, ExpectAllocFourCores",
       DualSocketNoHT,
       {},
       L("0"),
       {{"fakeContainer100", L("4-5")}},
       L("0-1,3,6-7"),
       "fakeContainer1",
       4000,
       4000,
       std::nullopt,
       "",
       L("1,3,6-7")},
      {"GuPodMultipleCores, DualSocketHT, ExpectAllocOneSocketOneCore",
       DualSocketHT,
       {},
       L("0"),
       {{"fakeContainer100", L("2")}},
       L("0-1,3-11"),
       "fakeContainer3",
       8000,
       8000,
       std::nullopt,
       "",
       L("1,3-5,7,9-11")},
      {"NonGuPod, SingleSocketHT, NoAlloc",
       SingleSocketHT,
       {},
       L("0"),
       {},
       L("0-7"),
       "fakeContainer1",
       1000,
       2000,
       std::nullopt,
       "",
       std::nullopt},
      {"GuPodNonIntegerCore, SingleSocketHT, NoAlloc",
       SingleSocketHT,
       {},
       L("0"),
       {},
       L("0-7"),
       "fakeContainer4",
       977,
       977,
       std::nullopt,
       "",
       std::nullopt},
  };
  // As upstream: each with no options and with full-pcpus-only.
  for (const Row& row : options_insensitive) {
    RunStaticPolicyTestCase(row);
    Row with = row;
    with.description = "options=map[full-pcpus-only:true] " + row.description;
    with.options = {{kFullPcpusOnly, "true"}};
    RunStaticPolicyTestCase(with);
  }
  const std::vector<Row> default_options = {
      {"GuPodSingleCore, SingleSocketHT, ExpectAllocOneCPU",
       SingleSocketHT,
       {},
       L("0"),
       {},
       L("0-7"),
       "fakeContainer2",
       1000,
       1000,
       std::nullopt,
       "",
       L("4")},
      {"GuPodSingleCore, SingleSocketHT, ExpectError",
       SingleSocketHT,
       {},
       L("0"),
       {},
       L("0-7"),
       "fakeContainer2",
       8000,
       8000,
       std::nullopt,
       "not enough cpus available to satisfy request: requested=8, "
       "available=7",
       std::nullopt},
      {"GuPodMultipleCores, SingleSocketHT, ExpectSameAllocation",
       SingleSocketHT,
       {},
       L("0"),
       {{"fakeContainer3", L("2-3,6-7")}},
       L("0-1,4-5"),
       "fakeContainer3",
       4000,
       4000,
       std::nullopt,
       "",
       L("2-3,6-7")},
      {"GuPodMultipleCores, DualSocketHT, NoAllocExpectError",
       DualSocketHT,
       {},
       L("0"),
       {{"fakeContainer100", L("1-3")}},
       L("0,4-11"),
       "fakeContainer5",
       10000,
       10000,
       std::nullopt,
       "not enough cpus available to satisfy request: requested=10, "
       "available=8",
       std::nullopt},
      {"GuPodMultipleCores, SingleSocketHT, NoAllocExpectError",
       SingleSocketHT,
       {},
       L("0"),
       {{"fakeContainer100", L("1-6")}},
       L("0,7"),
       "fakeContainer5",
       2000,
       2000,
       std::nullopt,
       "not enough cpus available to satisfy request: requested=2, "
       "available=1",
       std::nullopt},
  };
  for (const Row& row : default_options) RunStaticPolicyTestCase(row);
  const std::map<std::string, std::string> full = {{kFullPcpusOnly, "true"}};
  const std::vector<Row> smt_align = {
      {"GuPodSingleCore, SingleSocketHT, ExpectAllocOneCPU",
       SingleSocketHT,
       full,
       L("0"),
       {},
       L("0-7"),
       "fakeContainer2",
       1000,
       1000,
       std::nullopt,
       "SMT Alignment Error: requested 1 cpus not multiple cpus per core = 2",
       std::nullopt},
      {"GuPodManyCores, topoDualSocketHT, ExpectDoNotAllocPartialCPU",
       DualSocketHT,
       full,
       L("1,6"),
       {},
       L("0,2-5,7-11"),
       "fakeContainerBug113537_1",
       10000,
       10000,
       std::nullopt,
       "SMT Alignment Error: not enough free physical CPUs: available "
       "physical CPUs = 8, requested CPUs = 10, CPUs per core = 2",
       std::nullopt},
      // numReservedCPUs 2 and no list: the kubelet takes CPUs 0 and 6.
      {"GuPodManyCores, topoDualSocketHT, AutoReserve, ExpectAllocAllCPUs",
       DualSocketHT,
       full,
       L("0,6"),
       {},
       L("1-5,7-11"),
       "fakeContainerBug113537_2",
       10000,
       10000,
       std::nullopt,
       "",
       L("1-5,7-11")},
      {"GuPodManyCores, topoDualSocketHT, ExpectAllocAllCPUs",
       DualSocketHT,
       full,
       L("0,6"),
       {},
       L("1-5,7-11"),
       "fakeContainerBug113537_2",
       10000,
       10000,
       std::nullopt,
       "",
       L("1-5,7-11")},
      {"GuPodManyCores, DualSocketHT, ExpectReAllocCPUs",
       DualSocketHT,
       full,
       L("0-1,6-7"),
       {{"fakeContainer", L("2-4,8-10")}},
       L("0-1,5-7,11"),
       "fakeContainer",
       6000,
       6000,
       std::nullopt,
       "",
       L("2-4,8-10")},
      {"GuPodManyCores, DualSocketHT, NotEnoughAvailable, NoAlloc",
       DualSocketHT,
       full,
       L("0-1,6-7"),
       {},
       L("0-11"),
       "fakeContainer",
       10000,
       10000,
       std::nullopt,
       "SMT Alignment Error: not enough free physical CPUs: available "
       "physical CPUs = 8, requested CPUs = 10, CPUs per core = 2",
       std::nullopt},
  };
  for (const Row& row : smt_align) RunStaticPolicyTestCase(row);
  const std::vector<Row> align_by_socket = {
      {"Align by socket: true, cpu's within same socket of numa in hint are "
       "part of allocation",
       DualSocketMultiNumaPerSocketHT,
       {{"align-by-socket", "true"}},
       L("0"),
       {},
       L("2,11,21-22"),
       "fakeContainer2",
       2000,
       2000,
       std::vector<int>{0, 2},
       "",
       L("2,11")},
      {"Align by socket: false, cpu's are taken strictly from NUMA nodes in "
       "hint",
       DualSocketMultiNumaPerSocketHT,
       {{"align-by-socket", "false"}},
       L("0"),
       {},
       L("2,11,21-22"),
       "fakeContainer2",
       2000,
       2000,
       std::vector<int>{0, 2},
       "",
       L("2,21")},
  };
  for (const Row& row : align_by_socket) RunStaticPolicyTestCase(row);
}

}  // namespace
}  // namespace topology::manager
