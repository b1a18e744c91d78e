// The kubelet's choice of CPUs (cpu_assignment.h) against upstream's own
// tables: pkg/kubelet/cm/cpumanager/cpu_assignment_test.go of Kubernetes
// v1.37.2, TestTakeByTopologyNUMAPacked (with commonTakeByTopologyTestCases)
// and TestTakeByTopologyWithSpreadPhysicalCPUsPreferredOption, each row
// under its upstream description, on the machines of policy_test.go with
// upstream's counts (some leave the NUMA node count 0, as there). Rows of
// options not ported yet (uncore caches) are left out.
#include "cpu_assignment.h"

#include <cctype>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "topology/manager/cpu_manager.h"

namespace topology::manager {
namespace {

CpuSet Parse(const std::string& list) { return *CpuSet::ParseList(list); }

// topoSingleSocketHT: 1 socket, 4 cores, 2 threads (CPU c and c+4).
CpuTopologyView SingleSocketHT() {
  CpuTopologyView view;
  for (int cpu = 0; cpu < 8; ++cpu) view.cpus[cpu] = {cpu % 4, 0, 0};
  view.num_cpus = 8;
  view.num_sockets = 1;
  view.num_cores = 4;
  return view;
}

// topoDualSocketHT: 2 sockets of 3 cores, 2 threads; even cores on socket
// 0, odd on 1; CPU c and c+6 share core c.
CpuTopologyView DualSocketHT() {
  CpuTopologyView view;
  for (int cpu = 0; cpu < 12; ++cpu) {
    const int core = cpu % 6;
    view.cpus[cpu] = {core, core % 2, core % 2};
  }
  view.num_cpus = 12;
  view.num_sockets = 2;
  view.num_cores = 6;
  return view;
}

// topoDualSocketNoHT: 2 sockets of 4 cores, one thread each.
CpuTopologyView DualSocketNoHT() {
  CpuTopologyView view;
  for (int cpu = 0; cpu < 8; ++cpu) view.cpus[cpu] = {cpu, cpu / 4, cpu / 4};
  view.num_cpus = 8;
  view.num_sockets = 2;
  view.num_cores = 8;
  return view;
}

// topoDualSocketMultiNumaPerSocketHT: 2 sockets, 4 NUMA nodes of 10 cores,
// 2 threads (CPU c and c+40).
CpuTopologyView DualSocketMultiNumaPerSocketHT() {
  CpuTopologyView view;
  for (int cpu = 0; cpu < 80; ++cpu) {
    const int core = cpu % 40;
    view.cpus[cpu] = {core, core / 20, core / 10};
  }
  view.num_cpus = 80;
  view.num_sockets = 2;
  view.num_cores = 40;
  view.num_numa_nodes = 4;
  return view;
}

struct Row {
  std::string description;
  CpuTopologyView topology;
  CpuSorting sorting;
  CpuSet available;
  int count;
  std::string error;
  CpuSet expected;
};

std::vector<Row> Rows() {
  const CpuSorting packed = CpuSorting::kPacked;
  const CpuSorting spread = CpuSorting::kSpread;
  return {
      // commonTakeByTopologyTestCases
      {"take more cpus than are available from single socket with HT",
       SingleSocketHT(), packed, CpuSet::Of({0, 2, 4, 6}), 5,
       "not enough cpus available to satisfy request: requested=5, "
       "available=4",
       CpuSet()},
      {"take zero cpus from single socket with HT", SingleSocketHT(), packed,
       Parse("0-7"), 0, "", CpuSet()},
      {"take one cpu from single socket with HT", SingleSocketHT(), packed,
       Parse("0-7"), 1, "", CpuSet::Of({0})},
      {"take one cpu from single socket with HT, some cpus are taken",
       SingleSocketHT(), packed, CpuSet::Of({1, 3, 5, 6, 7}), 1, "",
       CpuSet::Of({6})},
      {"take two cpus from single socket with HT", SingleSocketHT(), packed,
       Parse("0-7"), 2, "", CpuSet::Of({0, 4})},
      {"take all cpus from single socket with HT", SingleSocketHT(), packed,
       Parse("0-7"), 8, "", Parse("0-7")},
      {"take two cpus from single socket with HT, only one core totally free",
       SingleSocketHT(), packed, CpuSet::Of({0, 1, 2, 3, 6}), 2, "",
       CpuSet::Of({2, 6})},
      {"take a socket of cpus from dual socket with HT", DualSocketHT(), packed,
       Parse("0-11"), 6, "", CpuSet::Of({0, 2, 4, 6, 8, 10})},
      {"take a socket of cpus from dual socket with multi-numa-per-socket "
       "with HT",
       DualSocketMultiNumaPerSocketHT(), packed, Parse("0-79"), 40, "",
       Parse("0-19,40-59")},
      {"take a NUMA node of cpus from dual socket with multi-numa-per-socket "
       "with HT",
       DualSocketMultiNumaPerSocketHT(), packed, Parse("0-79"), 20, "",
       Parse("0-9,40-49")},
      {"take a NUMA node of cpus from dual socket with multi-numa-per-socket "
       "with HT, with 1 NUMA node already taken",
       DualSocketMultiNumaPerSocketHT(), packed, Parse("10-39,50-79"), 20, "",
       Parse("10-19,50-59")},
      {"take a socket and a NUMA node of cpus from dual socket with "
       "multi-numa-per-socket with HT",
       DualSocketMultiNumaPerSocketHT(), packed, Parse("0-79"), 60, "",
       Parse("0-29,40-69")},
      {"take a socket and a NUMA node of cpus from dual socket with "
       "multi-numa-per-socket with HT, a core taken",
       DualSocketMultiNumaPerSocketHT(), packed, Parse("1-39,41-79"), 60, "",
       Parse("10-39,50-79")},
      // TestTakeByTopologyNUMAPacked's own
      {"take one cpu from dual socket with HT - core from Socket 0",
       DualSocketHT(), packed, CpuSet::Of({1, 2, 3, 4, 5, 7, 8, 9, 10, 11}), 1,
       "", CpuSet::Of({2})},
      {"allocate 4 full cores with 3 coming from the first NUMA node (filling "
       "it up) and 1 coming from the second NUMA node",
       DualSocketHT(), packed, Parse("0-11"), 8, "",
       CpuSet::Of({0, 6, 2, 8, 4, 10, 1, 7})},
      {"allocate 32 full cores with 30 coming from the first 3 NUMA nodes "
       "(filling them up) and 2 coming from the fourth NUMA node",
       DualSocketMultiNumaPerSocketHT(), packed, Parse("0-79"), 64, "",
       Parse("0-29,40-69,30,31,70,71")},
      // TestTakeByTopologyWithSpreadPhysicalCPUsPreferredOption
      {"take a socket of cpus from single socket with HT, 3 cpus",
       SingleSocketHT(), spread, Parse("0-7"), 3, "", CpuSet::Of({0, 1, 2})},
      {"take a socket of cpus from dual socket with HT, 2 cpus", DualSocketHT(),
       spread, Parse("0-11"), 2, "", CpuSet::Of({0, 2})},
      {"take a socket of cpus from dual socket with HT, 3 cpus", DualSocketHT(),
       spread, Parse("0-11"), 3, "", CpuSet::Of({0, 2, 4})},
      {"take a socket of cpus from dual socket with HT, 6 cpus", DualSocketHT(),
       spread, Parse("0-11"), 6, "", CpuSet::Of({0, 2, 4, 6, 8, 10})},
      {"take cpus from dual socket with HT, 8 cpus", DualSocketHT(), spread,
       Parse("0-11"), 8, "", CpuSet::Of({0, 2, 4, 6, 8, 10, 1, 3})},
      {"take a socket of cpus from dual socket without HT, 2 cpus",
       DualSocketNoHT(), spread, Parse("0-7"), 2, "", CpuSet::Of({0, 1})},
      {"take a socket of cpus from dual socket with multi numa per socket and "
       "HT, 12 cpus",
       DualSocketMultiNumaPerSocketHT(), spread, Parse("0-79"), 8, "",
       Parse("0-7")},
  };
}

class TakeByTopologyNumaPackedTest : public ::testing::TestWithParam<Row> {};

TEST_P(TakeByTopologyNumaPackedTest, AsUpstreamsTable) {
  const Row& row = GetParam();
  auto result = TakeByTopologyNumaPacked(row.topology, row.available, row.count,
                                         row.sorting);
  if (!row.error.empty()) {
    ASSERT_FALSE(result.ok());
    EXPECT_EQ(result.status().message(), row.error);
    return;
  }
  ASSERT_TRUE(result.ok()) << result.status().message();
  EXPECT_EQ(result->ToList(), row.expected.ToList());
}

std::string RowName(const ::testing::TestParamInfo<Row>& info) {
  std::string name;
  for (char c : info.param.description) {
    name += std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
  }
  return name + "_" + std::to_string(info.index);
}

INSTANTIATE_TEST_SUITE_P(Upstream, TakeByTopologyNumaPackedTest,
                         ::testing::ValuesIn(Rows()), RowName);

}  // namespace
}  // namespace topology::manager
