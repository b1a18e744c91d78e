// The static CPU manager policy's Allocate against upstream's own table:
// TestStaticPolicyAdd of pkg/kubelet/cm/cpumanager/policy_static_test.go
// (Kubernetes v1.37.2), each row under its upstream description: the
// options-insensitive rows with no options and with full-pcpus-only, as
// upstream runs them, then the default, full-pcpus-only and align-by-socket
// rows. A row's state (the assignments and the default CPU set) becomes
// ours as restored assignments: CPUs neither in the default set, nor
// reserved, nor assigned are held by another pod.
//
// Then TestStaticPolicyAddWithResvList, TestTopologyAwareAllocateCPUs,
// TestStaticPolicyStart, TestStaticPolicyStartWithResvList, the reuse and
// remove tables, TestSMTAlignmentErrorText,
// TestPolicyWithAlignBySocketAndDistributeCPUsAcrossNUMAEnabled and
// TestStaticPolicyAddWithUncoreAlignment, its machines given uncore caches
// as L3 caches (upstream_machines.h). Where a table gives the policy a
// count of reserved CPUs and no set, the policy chooses them
// (CpuManagerConfig::reserved_count), as NewStaticPolicy does.
//
// Left out:
// - the rows on topoQuadSocketFourWayHT, whose core ids are not the lowest
//   id of their threads as the kubelet's topology.Discover names a real
//   machine's cores, so that machine cannot be described through a
//   Topology (the kubelet oracle covers machines of that size instead);
// - what belongs to features this CPU manager does not model, each behind
//   a gate off by default: TestStaticPolicyAllocateRecordsBaseline
//   (InPlacePodVerticalScalingExclusiveCPUs), TestStaticPolicyAllocatePod
//   and TestValidatePodScopeResources (PodLevelResourceManagers, which
//   serve refuses), and the Lifecycle tests (resize operations, asserted
//   through log lines);
// - TestStaticPolicyName.
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
namespace machines = upstream;

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
  // Upstream's policy tables run NewStaticPolicy with no reserved CPU.
  config.require_reservation = !row.reserved.empty();
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

TEST(StaticPolicyTest, TestStaticPolicyAddWithResvList) {
  const std::vector<Row> rows = {
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
      {"GuPodSingleCore, SingleSocketHT, ExpectAllocOneCPU",
       SingleSocketHT,
       {},
       L("0-1"),
       {},
       L("0-7"),
       "fakeContainer2",
       1000,
       1000,
       std::nullopt,
       "",
       L("4")},
      {"GuPodMultipleCores, SingleSocketHT, ExpectAllocOneCore",
       SingleSocketHT,
       {},
       L("0-1"),
       {{"fakeContainer100", L("2-3,6-7")}},
       L("0-1,4-5"),
       "fakeContainer3",
       2000,
       2000,
       std::nullopt,
       "",
       L("4-5")},
  };
  for (const Row& row : rows) RunStaticPolicyTestCase(row);
}

// allocateCPUs with a NUMA mask, no CPU reserved: a container whose stored
// affinity is the mask.
TEST(StaticPolicyTest, TestTopologyAwareAllocateCPUs) {
  const auto row = [](std::string description, int count,
                      std::optional<std::vector<int>> mask, CpuSet expected) {
    return Row{std::move(description),
               DualSocketHT,
               {},
               CpuSet(),
               {},
               L("0-11"),
               "fakeContainer",
               count * 1000,
               count * 1000,
               mask,
               "",
               expected};
  };
  const std::vector<Row> rows = {
      row("Request 2 CPUs, No BitMask", 2, std::nullopt, L("0,6")),
      row("Request 2 CPUs, BitMask on Socket 0", 2, std::vector<int>{0},
          L("0,6")),
      row("Request 2 CPUs, BitMask on Socket 1", 2, std::vector<int>{1},
          L("1,7")),
      row("Request 8 CPUs, BitMask on Socket 0", 8, std::vector<int>{0},
          L("0,6,2,8,4,10,1,7")),
      row("Request 8 CPUs, BitMask on Socket 1", 8, std::vector<int>{1},
          L("1,7,3,9,5,11,0,6")),
  };
  for (const Row& r : rows) RunStaticPolicyTestCase(r);
}

// staticPolicyTest as the start tables use it.
struct StartRow {
  std::string description;
  int reserved_count;
  CpuSet reserved;  // empty: the policy chooses reserved_count CPUs
  std::map<std::string, std::string> options;
  CpuManagerState state;
  std::string new_error;  // NewStaticPolicy's
  std::string error;      // Start's
  CpuSet expected;        // the default CPU set after start
};

void RunStartRow(const StartRow& row) {
  SCOPED_TRACE(row.description);
  const Topology machine = DualSocketHT();
  CpuManagerConfig config;
  config.policy = kCpuPolicyStatic;
  config.reserved = row.reserved;
  config.reserved_count = row.reserved_count;
  config.options = row.options;
  config.alpha_options = true;
  config.require_reservation = false;
  auto cpus = CpuManager::Create(config, machine, nullptr);
  if (!row.new_error.empty()) {
    EXPECT_EQ(cpus.status().message(), row.new_error);
    return;
  }
  ASSERT_TRUE(cpus.ok()) << cpus.status().message();
  const Status started = (*cpus)->Start(row.state);
  if (!row.error.empty()) {
    EXPECT_EQ(started.message(), row.error);
    // Refused, it keeps nothing.
    EXPECT_EQ((*cpus)->SharedPool().Union((*cpus)->reserved()).ToList(),
              "0-11");
    return;
  }
  ASSERT_TRUE(started.ok()) << started.message();
  EXPECT_EQ((*cpus)->DefaultCpuSet().ToList(), row.expected.ToList());
}

CpuManagerState StateOf(
    CpuSet default_set,
    std::map<std::pair<std::string, std::string>, CpuSet> assignments = {}) {
  return CpuManagerState{std::move(default_set), std::move(assignments)};
}

TEST(StaticPolicyTest, TestStaticPolicyStart) {
  const std::map<std::string, std::string> strict = {
      {"strict-cpu-reservation", "true"}};
  const std::vector<StartRow> rows = {
      {"non-corrupted state",
       0,
       {},
       {},
       StateOf(L("1-11"), {{{"fakePod", "0"}, L("0")}}),
       "",
       "",
       L("1-11")},
      {"empty cpuset", 1, {}, {}, StateOf(CpuSet()), "", "", L("0-11")},
      {"reserved cores 0 & 6 are not present in available cpuset",
       2,
       {},
       {},
       StateOf(L("0-1")),
       "",
       "not all reserved cpus: \"0,6\" are present in defaultCpuSet: \"0-1\"",
       {}},
      {"some of reserved cores are present in available cpuset "
       "(StrictCPUReservationOption)",
       2,
       {},
       strict,
       StateOf(L("0-1")),
       "",
       "some of strictly reserved cpus: \"0\" are present in defaultCpuSet: "
       "\"0-1\"",
       {}},
      {"assigned core 2 is still present in available cpuset",
       0,
       {},
       {},
       StateOf(L("2-11"), {{{"fakePod", "0"}, L("0-2")}}),
       "",
       "pod: fakePod, container: 0 cpuset: \"0-2\" overlaps with default "
       "cpuset \"2-11\"",
       {}},
      {"assigned core 2 is still present in available cpuset "
       "(StrictCPUReservationOption)",
       0,
       {},
       strict,
       StateOf(L("2-11"), {{{"fakePod", "0"}, L("0-2")}}),
       "",
       "pod: fakePod, container: 0 cpuset: \"0-2\" overlaps with default "
       "cpuset \"2-11\"",
       {}},
      {"core 12 is not present in topology but is in state cpuset",
       0,
       {},
       {},
       StateOf(L("5-12"),
               {{{"fakePod", "0"}, L("0-2")}, {{"fakePod", "1"}, L("3-4")}}),
       "",
       "current set of available CPUs \"0-11\" doesn't match with CPUs in "
       "state \"0-12\"",
       {}},
      {"core 11 is present in topology but is not in state cpuset",
       0,
       {},
       {},
       StateOf(L("5-10"),
               {{{"fakePod", "0"}, L("0-2")}, {{"fakePod", "1"}, L("3-4")}}),
       "",
       "current set of available CPUs \"0-11\" doesn't match with CPUs in "
       "state \"0-10\"",
       {}},
  };
  for (const StartRow& row : rows) RunStartRow(row);
}

TEST(StaticPolicyTest, TestStaticPolicyStartWithResvList) {
  const std::map<std::string, std::string> strict = {
      {"strict-cpu-reservation", "true"}};
  const std::vector<StartRow> rows = {
      {"empty cpuset", 2, L("0-1"), {}, StateOf(CpuSet()), "", "", L("0-11")},
      {"empty cpuset with StrictCPUReservationOption enabled", 2, L("0-1"),
       strict, StateOf(CpuSet()), "", "", L("2-11")},
      {"reserved cores 0 & 1 are not present in available cpuset",
       2,
       L("0-1"),
       {},
       StateOf(L("2-5")),
       "",
       "not all reserved cpus: \"0-1\" are present in defaultCpuSet: \"2-5\"",
       {}},
      {"reserved cores 0 & 1 are present in available cpuset with "
       "StrictCPUReservationOption enabled",
       2,
       L("0-1"),
       strict,
       StateOf(L("0-5")),
       "",
       "some of strictly reserved cpus: \"0-1\" are present in defaultCpuSet: "
       "\"0-5\"",
       {}},
      {"inconsistency between numReservedCPUs and reserved",
       1,
       L("0-1"),
       {},
       StateOf(L("0-11")),
       "[cpumanager] unable to reserve the required amount of CPUs (size of "
       "0-1 did not equal 1)",
       "",
       {}},
  };
  for (const StartRow& row : rows) RunStartRow(row);
}

// A pod of init and app containers on topoSingleSocketHT, no CPU reserved,
// allocated in order.
struct ReuseCase {
  std::unique_ptr<CpuManager> cpus;
  Pod pod;
};

ReuseCase AllocateAll(std::vector<Container> init, std::vector<Container> app) {
  CpuManagerConfig config;
  config.policy = kCpuPolicyStatic;
  config.require_reservation = false;
  auto cpus = CpuManager::Create(config, SingleSocketHT(), nullptr);
  EXPECT_TRUE(cpus.ok()) << cpus.status().message();
  ReuseCase out{std::move(*cpus), Pod{}};
  out.pod.uid = "podUID";
  out.pod.name = "pod";
  out.pod.guaranteed = true;
  out.pod.init_containers = std::move(init);
  out.pod.containers = std::move(app);
  for (const Container& c : out.pod.init_containers) {
    EXPECT_TRUE(out.cpus->Allocate(out.pod, c).ok()) << c.name;
  }
  for (const Container& c : out.pod.containers) {
    EXPECT_TRUE(out.cpus->Allocate(out.pod, c).ok()) << c.name;
  }
  return out;
}

TEST(StaticPolicyTest, TestStaticPolicyReuseCPUs) {
  SCOPED_TRACE("SingleSocketHT, DeAllocOneInitContainer");
  ReuseCase c = AllocateAll({{"initContainer-0", {{"cpu", 4000}}, false}},
                            {{"appContainer-0", {{"cpu", 2000}}, false}});
  EXPECT_EQ(c.cpus->DefaultCpuSet().ToList(), "2-3,6-7");
  c.cpus->RemoveContainer("podUID", "initContainer-0");
  EXPECT_EQ(c.cpus->DefaultCpuSet().ToList(), "1-3,5-7");
  EXPECT_TRUE(c.cpus->ContainerCpus("podUID", "initContainer-0").empty());
}

TEST(StaticPolicyTest, TestStaticPolicyDoNotReuseCPUs) {
  SCOPED_TRACE(
      "SingleSocketHT, Don't reuse CPUs of a restartable init container");
  ReuseCase c = AllocateAll({{"initContainer-0", {{"cpu", 4000}}, true}},
                            {{"appContainer-0", {{"cpu", 2000}}, false}});
  EXPECT_EQ(c.cpus->DefaultCpuSet().ToList(), "3,7");
}

TEST(StaticPolicyTest, TestStaticPolicyRemove) {
  const struct {
    std::string description;
    std::map<std::string, CpuSet> assignments;  // of "fakePod"
    std::string container;
    CpuSet expected;
  } rows[] = {
      {"SingleSocketHT, DeAllocOneContainer",
       {{"fakeContainer1", L("1-3")}},
       "fakeContainer1",
       L("1-7")},
      {"SingleSocketHT, DeAllocOneContainer, BeginEmpty",
       {{"fakeContainer1", L("1-3")}, {"fakeContainer2", L("4-7")}},
       "fakeContainer1",
       L("1-3")},
      {"SingleSocketHT, DeAllocTwoContainer",
       {{"fakeContainer1", L("1,3,5")}, {"fakeContainer2", L("2,4")}},
       "fakeContainer1",
       L("1,3,5-7")},
      {"SingleSocketHT, NoDeAlloc",
       {{"fakeContainer1", L("1,3,5")}},
       "fakeContainer2",
       L("2,4,6-7")},
  };
  // CPU 0 is in no row's default set nor assignment: held by another pod
  // here.
  for (const auto& row : rows) {
    SCOPED_TRACE(row.description);
    CpuManagerConfig config;
    config.policy = kCpuPolicyStatic;
    config.require_reservation = false;
    auto cpus = CpuManager::Create(config, SingleSocketHT(), nullptr);
    ASSERT_TRUE(cpus.ok());
    ASSERT_TRUE((*cpus)->Restore("another pod", "held", L("0")).ok());
    for (const auto& [container, set] : row.assignments) {
      ASSERT_TRUE((*cpus)->Restore("fakePod", container, set).ok());
    }
    (*cpus)->RemoveContainer("fakePod", row.container);
    EXPECT_EQ((*cpus)->DefaultCpuSet().ToList(), row.expected.ToList());
    EXPECT_TRUE((*cpus)->ContainerCpus("fakePod", row.container).empty());
  }
}

// SMTAlignmentError's two texts, as full-pcpus-only refuses (the third
// row, a flag left unset, is a Go value no refusal makes).
TEST(StaticPolicyTest, TestSMTAlignmentErrorText) {
  // 4 cores of 4 threads (CPU c on core c % 4), CPU 0 reserved.
  const Topology four_way = upstream::MachineOf(16, [](int cpu) {
    return upstream::Place{cpu % 4, 0, 0};
  });
  CpuManagerConfig config;
  config.policy = kCpuPolicyStatic;
  config.reserved = L("0");
  config.options = {{"full-pcpus-only", "true"}};
  auto cpus = CpuManager::Create(config, four_way, nullptr);
  ASSERT_TRUE(cpus.ok()) << cpus.status().message();
  Pod pod;
  pod.uid = "pod";
  pod.guaranteed = true;
  pod.containers = {Container{"c", {{"cpu", 15000}}, false}};
  EXPECT_EQ((*cpus)->Allocate(pod, pod.containers[0]).message(),
            "SMT Alignment Error: requested 15 cpus not multiple cpus per "
            "core = 4");
  // 2 cores of 2 threads, the reserved CPU's core and the other one held:
  // no physical CPU is free.
  const Topology two_way = upstream::MachineOf(4, [](int cpu) {
    return upstream::Place{cpu % 2, 0, 0};
  });
  auto small = CpuManager::Create(config, two_way, nullptr);
  ASSERT_TRUE(small.ok()) << small.status().message();
  ASSERT_TRUE((*small)->Restore("another pod", "held", L("1,3")).ok());
  pod.containers = {Container{"c", {{"cpu", 4000}}, false}};
  EXPECT_EQ((*small)->Allocate(pod, pod.containers[0]).message(),
            "SMT Alignment Error: not enough free physical CPUs: available "
            "physical CPUs = 0, requested CPUs = 4, CPUs per core = 2");
}

TEST(StaticPolicyTest,
     TestPolicyWithAlignBySocketAndDistributeCPUsAcrossNUMAEnabled) {
  const auto row = [](std::string description, bool align, CpuSet shared,
                      CpuSet expected) {
    return Row{std::move(description),
               upstream::DualSocketMultiNumaPerSocketHTType2,
               {{"align-by-socket", align ? "true" : "false"},
                {"distribute-cpus-across-numa", "true"}},
               CpuSet(),
               {},
               shared,
               "fakeContainer",
               6000,
               6000,
               std::nullopt,
               "",
               expected};
  };
  const std::vector<Row> rows = {
      row("AlignBySocket and DistributeCPUsAcrossNUMA both enabled", true,
          L("1-15"), L("1,3,5,7,9,11")),
      row("AlignBySocket takes priority over DistributeCPUsAcrossNUMA", true,
          L("1-9,12-13,16-17"), L("1,3,5,7,9,13")),
      row("AlignBySocket isn't enabled", false, L("1-9,12-13,16-17"),
          L("1,4-5,8-9,12")),
      row("No assignment that satisfy AlignBySocket", true, L("1-5,8-9,12-13"),
          L("1,4-5,8-9,12")),
  };
  for (const Row& r : rows) RunStaticPolicyTestCase(r);
}

// staticPolicyTestWithResvList as TestStaticPolicyAddWithUncoreAlignment
// uses it: a pod of app containers, allocated in order over a default CPU
// set; either the first container's CPUs or the uncore caches of every
// container's CPUs (getPodUncoreCacheIDs) are expected.
struct UncoreRow {
  std::string description;
  Topology (*topology)();
  CpuSet reserved;
  std::vector<std::string> options;  // each "true"
  CpuSet default_set;
  std::vector<int64_t> app_milli;  // request = limit
  std::string uid;
  std::optional<CpuSet> expected;  // expCSet when expCPUAlloc
  CpuSet expected_uncore;
};

// The CPUs of `machine` in the given uncore caches (CPUsInUncoreCaches).
CpuSet InUncoreCaches(const Topology& machine, const std::vector<int>& ids) {
  CpuSet out;
  for (const CpuInfo& cpu : machine.cpus()) {
    for (int id : ids) {
      if (cpu.l3_cache_id == id) out.Add(cpu.id);
    }
  }
  return out;
}

CpuSet Minus(const CpuSet& a, const CpuSet& b) {
  CpuSet out;
  for (int cpu : a.Ids()) {
    if (!b.Contains(cpu)) out.Add(cpu);
  }
  return out;
}

CpuSet AllCpus(const Topology& machine) {
  CpuSet out;
  for (const CpuInfo& cpu : machine.cpus()) out.Add(cpu.id);
  return out;
}

void RunUncoreRow(const UncoreRow& row) {
  SCOPED_TRACE(row.description);
  const Topology machine = row.topology();
  FixedStore store(TopologyHint{});
  CpuManagerConfig config;
  config.policy = kCpuPolicyStatic;
  config.reserved = row.reserved;
  for (const std::string& option : row.options) config.options[option] = "true";
  config.alpha_options = true;
  auto cpus = CpuManager::Create(config, machine, &store);
  ASSERT_TRUE(cpus.ok()) << cpus.status().message();
  // The default set less the reserved CPUs (the test's "cpumanager
  // invariant"); every other CPU is held by another pod.
  const CpuSet held =
      Minus(Minus(AllCpus(machine), row.default_set), row.reserved);
  if (!held.empty()) {
    ASSERT_TRUE((*cpus)->Restore("another pod", "held", held).ok());
  }
  Pod pod;
  pod.uid = row.uid;
  pod.name = "pod";
  pod.guaranteed = true;
  for (size_t i = 0; i < row.app_milli.size(); ++i) {
    pod.containers.push_back(Container{"appContainer-" + std::to_string(i),
                                       {{"cpu", row.app_milli[i]}},
                                       false});
  }
  CpuSet uncore;
  for (const Container& container : pod.containers) {
    const Status status = (*cpus)->Allocate(pod, container);
    ASSERT_TRUE(status.ok()) << container.name << ": " << status.message();
    for (int cpu : (*cpus)->ContainerCpus(pod.uid, container.name).Ids()) {
      uncore.Add(machine.cpus()[static_cast<size_t>(cpu)].l3_cache_id);
    }
  }
  if (row.expected) {
    EXPECT_EQ((*cpus)->ContainerCpus(pod.uid, "appContainer-0").ToList(),
              row.expected->ToList());
    return;
  }
  EXPECT_EQ(uncore.ToList(), row.expected_uncore.ToList());
}

TEST(StaticPolicyTest, TestStaticPolicyAddWithUncoreAlignment) {
  const std::vector<std::string> full_uncore = {
      "full-pcpus-only", "prefer-align-cpus-by-uncorecache"};
  const std::vector<std::string> uncore = {"prefer-align-cpus-by-uncorecache"};
  const std::vector<std::string> strict_uncore = {
      "strict-cpu-reservation", "prefer-align-cpus-by-uncorecache"};
  const Topology dual_smt = machines::DualSocketSingleNumaPerSocketSMTUncore();
  const CpuSet dual_smt_clean =
      Minus(AllCpus(dual_smt), InUncoreCaches(dual_smt, {0, 12}));
  const CpuSet dual_smt_reserved = L("0-1,96-97,192-193,288-289");
  const Topology small_smt =
      machines::SingleSocketSingleNumaPerSocketSMTSmallUncore();
  const Topology small_no_smt =
      machines::SingleSocketSingleNumaPerSocketNoSMTSmallUncore();
  const Topology small_dual =
      machines::SmallDualSocketSingleNumaPerSocketNoSMTUncore();
  const Topology large_smt =
      machines::LargeSingleSocketSingleNumaPerSocketSMTUncore();
  const std::vector<UncoreRow> rows = {
      {"GuPodSingleContainerSaturating, DualSocketHTUncore, "
       "ExpectAllocOneUncore, FullUncoreAvail",
       machines::DualSocketSingleNumaPerSocketSMTUncore,
       dual_smt_reserved,
       full_uncore,
       dual_smt_clean,
       {16000},
       "with-app-container-saturating",
       std::nullopt,
       L("1")},
      {"GuPodMainAndSidecarContainer, DualSocketHTUncore, "
       "ExpectAllocOneUncore, FullUncoreAvail",
       machines::DualSocketSingleNumaPerSocketSMTUncore,
       dual_smt_reserved,
       full_uncore,
       dual_smt_clean,
       {12000, 2000},
       "with-app-container-and-sidecar",
       std::nullopt,
       L("1")},
      {"GuPodSidecarAndMainContainer, DualSocketHTUncore, "
       "ExpectAllocOneUncore, FullUncoreAvail",
       machines::DualSocketSingleNumaPerSocketSMTUncore,
       dual_smt_reserved,
       full_uncore,
       dual_smt_clean,
       {2000, 12000},
       "with-sidecar-and-app-container",
       std::nullopt,
       L("1")},
      {"GuPodMainAndManySidecarContainer, DualSocketHTUncore, "
       "ExpectAllocOneUncore, FullUncoreAvail",
       machines::DualSocketSingleNumaPerSocketSMTUncore,
       dual_smt_reserved,
       full_uncore,
       dual_smt_clean,
       {10000, 2000, 2000, 2000},
       "with-app-container-and-multi-sidecar",
       std::nullopt,
       L("1")},
      {"GuPodMainAndSidecarContainer, DualSocketHTUncore, "
       "ExpectAllocTwoUncore",
       machines::DualSocketSingleNumaPerSocketSMTUncore,
       dual_smt_reserved,
       full_uncore,
       AllCpus(dual_smt),
       {12000, 2000},
       "with-app-container-and-sidecar",
       std::nullopt,
       L("0-1")},
      {"GuPodSingleContainer, SingleSocketSMTSmallUncore, "
       "ExpectAllocOneUncore",
       machines::SingleSocketSingleNumaPerSocketSMTSmallUncore,
       L("0-1,64-65"),
       full_uncore,
       AllCpus(small_smt),
       {8000},
       "with-app-container-saturating",
       std::nullopt,
       L("1")},
      {"GuPodSingleContainer, SingleSocketSMTSmallUncore, "
       "ExpectAllocTwoUncore",
       machines::SingleSocketSingleNumaPerSocketSMTSmallUncore,
       L("0-1,64-65"),
       full_uncore,
       Minus(AllCpus(small_smt), InUncoreCaches(small_smt, {1})),
       {12000},
       "with-app-container-saturating",
       std::nullopt,
       L("0,2")},
      {"GuPodSingleContainer, SingleSocketNoSMTSmallUncore, "
       "FragmentedUncore, ExpectAllocThreeUncore",
       machines::SingleSocketSingleNumaPerSocketNoSMTSmallUncore,
       L("0-3"),
       full_uncore,
       Minus(AllCpus(small_no_smt), InUncoreCaches(small_no_smt, {2, 3, 5})),
       {12000},
       "with-app-container-saturating",
       std::nullopt,
       L("1,4,6")},
      {"GuPodMultiContainer, DualSocketSMTUncore, FragmentedUncore, "
       "ExpectAllocOneUncore",
       machines::SmallDualSocketSingleNumaPerSocketNoSMTUncore,
       L("0-1,32-33"),
       full_uncore,
       Minus(AllCpus(small_dual), InUncoreCaches(small_dual, {1})),
       {4000, 2000},
       "with-multiple-container",
       std::nullopt,
       L("0")},
      {"GuPodMultiContainer, DualSocketSMTUncore, FragmentedUncore, "
       "ExpectAllocTwoUncore",
       machines::SmallDualSocketSingleNumaPerSocketNoSMTUncore,
       L("0-1,32-33"),
       full_uncore,
       Minus(AllCpus(small_dual), InUncoreCaches(small_dual, {1})),
       {4000, 4000},
       "with-multiple-container",
       std::nullopt,
       L("0,2")},
      {"GuPodMultiContainer, LargeSingleSocketSMTUncore, PartialUncoreFit, "
       "ExpectAllocTwoUncore",
       machines::LargeSingleSocketSingleNumaPerSocketSMTUncore,
       L("0-1,128-129"),
       full_uncore,
       Minus(AllCpus(large_smt), L("8-9,136-137")),
       {12000, 12000},
       "with-multiple-container",
       std::nullopt,
       L("0-1")},
      {"GuPodMultiContainer, LargeSingleSocketSMTUncore, PartialUncoreNoFit, "
       "ExpectAllocTwoUncore",
       machines::LargeSingleSocketSingleNumaPerSocketSMTUncore,
       L("0-1,128-129"),
       full_uncore,
       Minus(AllCpus(large_smt), L("8-9,136-137")),
       {14000, 14000},
       "with-multiple-container",
       std::nullopt,
       L("2-3")},
      {"GuPodLargeSingleContainer, DualSocketNoSMTUncore, FullNUMAsAvail, "
       "ExpectAllocFullNUMA",
       machines::DualSocketMultiNumaPerSocketUncore,
       L("0-3"),
       full_uncore,
       L("0-191"),
       {48000},
       "with-large-single-container",
       std::nullopt,
       L("6-11")},
      {"GuPodSingleContainer, MonoUncoreCacheHT, ExpectAllocCPUSet",
       machines::DualSocketSubNumaPerSocketHTMonolithicUncore,
       L("0-1,120-121"),
       full_uncore,
       L("0-239"),
       {6000},
       "with-single-container",
       L("2-4,122-124"),
       L("0")},
      {"GuPodSingleContainer, MonoUncoreCacheHT, ExpectAllocCPUSet",
       machines::SingleSocketSingleNumaPerSocketPCoreHTMonolithicUncore,
       L("0-1"),
       full_uncore,
       L("0-3,8-23"),
       {6000},
       "with-single-container",
       L("2-3,8-9,16-17"),
       L("0")},
      {"GuPodSingleContainer, LargeSingleSocketUncore, ExpectAllocOneUncore",
       machines::LargeSingleSocketSingleNumaPerSocketUncore,
       L("0-3"),
       full_uncore,
       L("0-127"),
       {8000},
       "with-single-container",
       std::nullopt,
       L("1")},
      {"GuPodSingleContainer, MonoUncoreCacheHT, ExpectFragmentedAllocCPUSet",
       machines::SingleSocketSingleNumaPerSocketUncore,
       L("0-1"),
       full_uncore,
       Minus(L("0-63"), L("6-9,12-15,18-19")),
       {12000},
       "with-single-container",
       L("2-5,10-11,16-17,20-23"),
       L("0")},
      {"GuPodSingleContainer, SingleSocketUncore, PartialUncore, "
       "ExpectBestEffortAllocTwoUncore",
       machines::SmallSingleSocketSingleNumaPerSocketNoSMTUncore,
       L("0-3"),
       full_uncore,
       Minus(L("0-31"), L("8-11,16-19,24-27")),
       {8000},
       "with-single-container",
       std::nullopt,
       L("0-1")},
      {"odd integer cpu required on smt-disabled",
       machines::SmallSingleSocketSingleNumaPerSocketNoSMTUncore,
       L("0-3"),
       full_uncore,
       L("0-31"),
       {5000},
       "with-single-container",
       L("8-12"),
       {}},
      {"odd integer required on smt-enabled",
       machines::SingleSocketSingleNumaPerSocketSMTSmallUncore,
       L("0-1,64-65"),
       uncore,
       L("0-127"),
       {3000},
       "with-single-container",
       L("2-3,66"),
       {}},
      {"odd integer required on odd integer partial uncore",
       machines::SingleSocketSingleNumaPerSocketSMTSmallUncore,
       L("0-1,64"),
       uncore,
       L("0-127"),
       {3000},
       "with-single-container",
       L("2,65-66"),
       {}},
      {"even integer required on odd integer partial uncore",
       machines::SingleSocketSingleNumaPerSocketSMTSmallUncore,
       L("0-1,64"),
       uncore,
       L("0-127"),
       {4000},
       "with-single-container",
       L("4-5,68-69"),
       {}},
      {"large odd integer required on smt-enabled",
       machines::SingleSocketSingleNumaPerSocketSMTSmallUncore,
       L("0-1,64"),
       uncore,
       L("0-127"),
       {11000},
       "with-single-container",
       L("2,4-7,65-66,68-71"),
       {}},
      // Upstream's default set is another machine's CPUs, 0-127.
      {"odd integer required on HT monolithic uncore",
       machines::DualSocketSubNumaPerSocketHTMonolithicUncore,
       L("0-1,120"),
       uncore,
       L("0-127"),
       {5000},
       "with-single-container",
       L("2-3,121-123"),
       {}},
      {"even integer required on HT monolithic uncore",
       machines::DualSocketSubNumaPerSocketHTMonolithicUncore,
       L("0-1,120"),
       uncore,
       L("0-127"),
       {4000},
       "with-single-container",
       L("2-3,122-123"),
       {}},
      {"GuPodSingleContainer, SingleSocketSMTSmallUncore, "
       "StrictReserveCompatability",
       machines::SingleSocketSingleNumaPerSocketSMTSmallUncore,
       L("0-1,64-65"),
       strict_uncore,
       L("0-127"),
       {2000},
       "with-single-container",
       L("2,66"),
       {}},
      {"GuPodSingleContainer, DualSocketHTMonoUncore, "
       "StrictReserveCompatability",
       machines::DualSocketSubNumaPerSocketHTMonolithicUncore,
       L("0-1,120-121"),
       strict_uncore,
       L("0-239"),
       {4000},
       "with-single-container",
       L("2-3,122-123"),
       {}},
  };
  ASSERT_EQ(rows.size(), 27u);
  for (const UncoreRow& row : rows) RunUncoreRow(row);
}

}  // namespace
}  // namespace topology::manager
