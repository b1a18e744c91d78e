// The kubelet's choice of CPUs (cpu_assignment.h) against upstream's own
// tables: pkg/kubelet/cm/cpumanager/cpu_assignment_test.go of Kubernetes
// v1.37.2, TestTakeByTopologyNUMAPacked (with commonTakeByTopologyTestCases),
// TestTakeByTopologyWithSpreadPhysicalCPUsPreferredOption and
// TestTakeByTopologyNUMADistributed (with
// commonTakeByTopologyExtendedTestCases), each row under its upstream
// description, on the machines of policy_test.go with upstream's counts
// (some leave the NUMA node count 0, as there), with its rows for
// prefer-align-cpus-by-uncorecache.
#include "cpu_assignment.h"

#include <cctype>
#include <ostream>
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

// 2 sockets of `nodes` / 2 NUMA nodes of `cores_per_node` cores, 2 threads
// (CPU c and c + the number of cores).
CpuTopologyView DualSocketMultiNuma(int nodes, int cores_per_node) {
  CpuTopologyView view;
  const int cores = nodes * cores_per_node;
  for (int cpu = 0; cpu < 2 * cores; ++cpu) {
    const int core = cpu % cores;
    view.cpus[cpu] = {core, core / (cores / 2), core / cores_per_node};
  }
  view.num_cpus = 2 * cores;
  view.num_sockets = 2;
  view.num_cores = cores;
  view.num_numa_nodes = nodes;
  return view;
}

// topoDualSocketMultiNumaPerSocketHT: 2 sockets, 4 NUMA nodes of 10 cores,
// 2 threads (CPU c and c+40).
CpuTopologyView DualSocketMultiNumaPerSocketHT() {
  return DualSocketMultiNuma(4, 10);
}

struct Row {
  std::string description;
  CpuTopologyView topology;
  CpuSorting sorting;
  CpuSet available;
  int count;
  std::string error;
  CpuSet expected;
  bool prefer_uncore = false;  // PreferAlignByUncoreCacheOption
};

// `cpus` CPUs, one thread a core, one NUMA node (the count left 0, as
// upstream leaves it), CPU c on socket c / per_socket and uncore cache
// c / 4: topoUncoreDualSocketNoSMT (16, 8) and topoUncoreSingleSocketNoSMT
// (16, 16).
CpuTopologyView UncoreNoSmt(int per_socket) {
  CpuTopologyView view;
  for (int cpu = 0; cpu < 16; ++cpu) {
    view.cpus[cpu] = {cpu, cpu / per_socket, 0, cpu / 4};
  }
  view.num_cpus = 16;
  view.num_cores = 16;
  view.num_sockets = 16 / per_socket;
  view.num_uncore_caches = 4;
  return view;
}

// topoUncoreSingleSocketMultiNuma: one socket, NUMA nodes of CPUs 0-7 and
// 8-15, four uncore caches of 4 CPUs, one thread a core.
CpuTopologyView UncoreSingleSocketMultiNuma() {
  CpuTopologyView view = UncoreNoSmt(16);
  for (auto& [cpu, detail] : view.cpus) detail.numa_node = cpu / 8;
  return view;
}

// topoUncoreSingleSocketSMT: one socket, 8 cores of 2 threads (CPU c and
// c+8), uncore caches of cores 0-3 and 4-7.
CpuTopologyView UncoreSingleSocketSmt() {
  CpuTopologyView view;
  for (int cpu = 0; cpu < 16; ++cpu) {
    view.cpus[cpu] = {cpu % 8, 0, 0, cpu % 8 / 4};
  }
  view.num_cpus = 16;
  view.num_cores = 8;
  view.num_sockets = 1;
  view.num_uncore_caches = 2;
  return view;
}

// A row's name in test listings (not its bytes).
void PrintTo(const Row& row, std::ostream* os) { *os << row.description; }

// commonTakeByTopologyTestCases.
std::vector<Row> CommonRows() {
  const CpuSorting packed = CpuSorting::kPacked;
  return {
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
  };
}

std::vector<Row> Rows() {
  const CpuSorting packed = CpuSorting::kPacked;
  const CpuSorting spread = CpuSorting::kSpread;
  std::vector<Row> rows = CommonRows();
  std::vector<Row> own = {
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
      // Test cases for PreferAlignByUncoreCache
      {"take cpus from two full UncoreCaches and partial from a single "
       "UncoreCache",
       UncoreNoSmt(16), packed, Parse("1-15"), 10, "",
       CpuSet::Of({1, 2, 4, 5, 6, 7, 8, 9, 10, 11}), true},
      {"take one cpu from dual socket with HT - core from Socket 0",
       DualSocketHT(), packed, CpuSet::Of({1, 2, 3, 4, 5, 7, 8, 9, 10, 11}), 1,
       "", CpuSet::Of({1}), true},
      {"take first available UncoreCache from first socket", UncoreNoSmt(8),
       packed, Parse("0-15"), 4, "", CpuSet::Of({0, 1, 2, 3}), true},
      {"take all available UncoreCache from first socket", UncoreNoSmt(8),
       packed, Parse("2-15"), 6, "", CpuSet::Of({2, 3, 4, 5, 6, 7}), true},
      {"take first available UncoreCache from second socket", UncoreNoSmt(8),
       packed, Parse("8-15"), 4, "", CpuSet::Of({8, 9, 10, 11}), true},
      {"take first available UncoreCache from available NUMA",
       UncoreSingleSocketMultiNuma(), packed, Parse("3,4-8,12"), 2, "",
       CpuSet::Of({4, 5}), true},
      {"take cpus from best available UncoreCache group of multi uncore cache "
       "single socket - SMT enabled",
       UncoreSingleSocketSmt(), packed, Parse("2-3,10-11,4-7,12-15"), 6, "",
       CpuSet::Of({4, 5, 6, 12, 13, 14}), true},
      {"take cpus from multiple UncoreCache of single socket - SMT enabled",
       UncoreSingleSocketSmt(), packed, Parse("1-7,9-15"), 10, "",
       Parse("4-7,12-15,1,9"), true},
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
  rows.insert(rows.end(), own.begin(), own.end());
  return rows;
}

// topoDualSocketMultiNumaPerSocketHTLarge: 2 sockets, 8 NUMA nodes of 16
// cores, 2 threads (CPU c and c+128).
CpuTopologyView DualSocketMultiNumaPerSocketHTLarge() {
  return DualSocketMultiNuma(8, 16);
}

// TestTakeByTopologyNUMADistributed: commonTakeByTopologyExtendedTestCases
// (the common rows with groups of 1, then its own) and the test's own rows.
struct DistributedRow {
  Row row;
  int group_size = 1;
};

void PrintTo(const DistributedRow& row, std::ostream* os) {
  *os << row.row.description << " (groups of " << row.group_size << ")";
}

std::vector<DistributedRow> DistributedRows() {
  std::vector<DistributedRow> rows;
  for (const Row& row : CommonRows()) rows.push_back({row, 1});
  const CpuSorting packed = CpuSorting::kPacked;
  const auto multi = DualSocketMultiNumaPerSocketHT;
  const std::vector<DistributedRow> own = {
      // commonTakeByTopologyExtendedTestCases
      {{"allocate 4 full cores with 2 distributed across each NUMA node",
        DualSocketHT(), packed, Parse("0-11"), 8, "",
        CpuSet::Of({0, 6, 2, 8, 1, 7, 3, 9})}},
      {{"allocate 32 full cores with 8 distributed across each NUMA node",
        multi(), packed, Parse("0-79"), 64, "",
        Parse("0-7,10-17,20-27,30-37,40-47,50-57,60-67,70-77")}},
      {{"allocate 24 full cores with 8 distributed across the first 3 NUMA "
        "nodes",
        multi(), packed, Parse("0-79"), 48, "",
        Parse("0-7,10-17,20-27,40-47,50-57,60-67")}},
      {{"allocate 24 full cores with 8 distributed across the first 3 NUMA "
        "nodes (taking all but 2 from the first NUMA node)",
        multi(), packed, Parse("1-29,32-39,41-69,72-79"), 48, "",
        Parse("1-8,10-17,20-27,41-48,50-57,60-67")}},
      {{"allocate 24 full cores with 8 distributed across the last 3 NUMA "
        "nodes (even though all 8 could be allocated from the first NUMA "
        "node)",
        multi(), packed, Parse("2-29,31-39,42-69,71-79"), 48, "",
        Parse("10-17,20-27,31-38,50-57,60-67,71-78")}},
      {{"allocate 8 full cores with 2 distributed across each NUMA node",
        multi(), packed, Parse("0-2,10-12,20-22,30-32,40-41,50-51,60-61,70-71"),
        16, "", Parse("0-1,10-11,20-21,30-31,40-41,50-51,60-61,70-71")}},
      {{"allocate 8 full cores with 2 distributed across each NUMA node",
        multi(), packed, Parse("0-2,10-12,20-22,30-32,40-41,50-51,60-61,70-71"),
        16, "", Parse("0-1,10-11,20-21,30-31,40-41,50-51,60-61,70-71")}},
      // TestTakeByTopologyNUMADistributed's own
      {{"take one cpu from dual socket with HT - core from Socket 0",
        DualSocketHT(), packed, CpuSet::Of({1, 2, 3, 4, 5, 7, 8, 9, 10, 11}), 1,
        "", CpuSet::Of({1})},
       1},
      {{"take one cpu from dual socket with HT - core from Socket 0 - "
        "cpuGroupSize 2",
        DualSocketHT(), packed, CpuSet::Of({1, 2, 3, 4, 5, 7, 8, 9, 10, 11}), 1,
        "", CpuSet::Of({2})},
       2},
      {{"allocate 13 full cores distributed across the first 2 NUMA nodes",
        multi(), packed, Parse("0-79"), 26, "", Parse("0-6,10-16,40-45,50-55")},
       1},
      {{"allocate 13 full cores distributed across the first 2 NUMA nodes "
        "(cpuGroupSize 2)",
        multi(), packed, Parse("0-79"), 26, "", Parse("0-6,10-15,40-46,50-55")},
       2},
      {{"allocate 31 full cores with 15 CPUs distributed across each NUMA "
        "node and 1 CPU spilling over to each of NUMA 0, 1",
        multi(), packed, Parse("0-79"), 62, "",
        Parse("0-7,10-17,20-27,30-37,40-47,50-57,60-66,70-76")},
       1},
      {{"allocate 31 full cores with 14 CPUs distributed across each NUMA "
        "node and 2 CPUs spilling over to each of NUMA 0, 1, 2 (cpuGroupSize "
        "2)",
        multi(), packed, Parse("0-79"), 62, "",
        Parse("0-7,10-17,20-27,30-36,40-47,50-57,60-67,70-76")},
       2},
      {{"allocate 31 full cores with 15 CPUs distributed across each NUMA "
        "node and 1 CPU spilling over to each of NUMA 2, 3 (to keep balance)",
        multi(), packed, Parse("0-8,10-18,20-39,40-48,50-58,60-79"), 62, "",
        Parse("0-7,10-17,20-27,30-37,40-46,50-56,60-67,70-77")},
       1},
      {{"allocate 31 full cores with 14 CPUs distributed across each NUMA "
        "node and 2 CPUs spilling over to each of NUMA 0, 2, 3 (to keep "
        "balance with cpuGroupSize 2)",
        multi(), packed, Parse("0-8,10-18,20-39,40-48,50-58,60-79"), 62, "",
        Parse("0-7,10-16,20-27,30-37,40-47,50-56,60-67,70-77")},
       2},
      {{"ensure bestRemainder chosen with NUMA nodes that have enough CPUs to "
        "satisfy the request",
        multi(), packed, Parse("0-3,10-13,20-23,30-36,40-43,50-53,60-63,70-76"),
        34, "", Parse("0-3,10-13,20-23,30-34,40-43,50-53,60-63,70-74")},
       1},
      {{"ensure previous failure encountered on live machine has been fixed "
        "(1/1)",
        DualSocketMultiNumaPerSocketHTLarge(), packed,
        Parse("0,128,30,31,158,159,43-47,171-175,62,63,190,191,75-79,203-207,"
              "94,96,222,223,101-111,229-239,126,127,254,255"),
        28, "", Parse("43-47,75-79,96,101-105,171-174,203-206,229-232")},
       1},
  };
  rows.insert(rows.end(), own.begin(), own.end());
  return rows;
}

// The row's error, or its CPUs.
void ExpectAsTheRow(const Row& row, const StatusOr<CpuSet>& result) {
  if (!row.error.empty()) {
    ASSERT_FALSE(result.ok());
    EXPECT_EQ(result.status().message(), row.error);
    return;
  }
  ASSERT_TRUE(result.ok()) << result.status().message();
  EXPECT_EQ(result->ToList(), row.expected.ToList());
}

class TakeByTopologyNumaPackedTest : public ::testing::TestWithParam<Row> {};

TEST_P(TakeByTopologyNumaPackedTest, AsUpstreamsTable) {
  const Row& row = GetParam();
  ExpectAsTheRow(
      row, TakeByTopologyNumaPacked(
               row.topology, row.available, row.count,
               {.sorting = row.sorting, .prefer_uncore = row.prefer_uncore}));
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

class TakeByTopologyNumaDistributedTest
    : public ::testing::TestWithParam<DistributedRow> {};

TEST_P(TakeByTopologyNumaDistributedTest, AsUpstreamsTable) {
  const Row& row = GetParam().row;
  ExpectAsTheRow(row, TakeByTopologyNumaDistributed(
                          row.topology, row.available, row.count,
                          GetParam().group_size, CpuSorting::kPacked,
                          /*align_by_socket=*/false));
}

INSTANTIATE_TEST_SUITE_P(
    Upstream, TakeByTopologyNumaDistributedTest,
    ::testing::ValuesIn(DistributedRows()),
    [](const ::testing::TestParamInfo<DistributedRow>& param) {
      return RowName(
          ::testing::TestParamInfo<Row>(param.param.row, param.index));
    });

}  // namespace
}  // namespace topology::manager
