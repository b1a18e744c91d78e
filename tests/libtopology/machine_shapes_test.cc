// Machine shapes unlike our fixtures, one synthetic tree each, with the answer
// hwloc gives for the same tree (lstopo_comparison_test.cc checks the same
// trees against the real lstopo-no-graphics). Where libtopology differs from
// hwloc on purpose (docs/sysfs.md), the test says so.
#include <filesystem>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "topology/discovery.h"
#include "topology/testing/sysfs_tree_builder.h"

#include "temp_dir.h"

namespace topology {
namespace {

namespace fs = std::filesystem;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using testing::PciFunctionSpec;
using testing::SysfsTreeBuilder;
using testing::TempDir;

constexpr uint64_t kGiB = 1ULL << 30;

Topology DiscoverOrDie(const fs::path& root) {
  DiscoveryOptions options;
  options.host_root = root;
  auto topology = Discover(options);
  EXPECT_TRUE(topology.ok()) << topology.status().ToString();
  return topology.ok() ? *std::move(topology) : Topology();
}

PciAddress A(const char* text) { return *PciAddress::Parse(text); }

std::string AllWarnings(const Topology& t) {
  std::string out;
  for (const std::string& w : t.warnings()) out += w + "\n";
  return out;
}

// Two sockets of four single-thread cores; nodes 0 and 1.
void TwoSockets(SysfsTreeBuilder* b) {
  for (int cpu = 0; cpu < 8; ++cpu) {
    b->AddCpu(cpu, cpu / 4, cpu % 4, std::to_string(cpu));
  }
  b->AddNode(0, "0-3", 4 * kGiB);
  b->AddNode(1, "4-7", 8 * kGiB);
  b->SetDistances({{10, 21}, {21, 10}});
}

PciFunctionSpec Nic(const char* host_bridge, const char* address,
                    std::optional<int> numa_node,
                    std::optional<std::string> local_cpus) {
  PciFunctionSpec nic;
  nic.host_bridge = host_bridge;
  nic.path = {address};
  nic.class_code = 0x020000;
  nic.vendor = 0x15b3;
  nic.device = 0x1017;
  nic.numa_node = numa_node;
  nic.local_cpulist = std::move(local_cpus);
  return nic;
}

// 1. Nodes present as nodeN folders but no node/online (older kernels).
TEST(MachineShapesTest, NodesWithoutOnlineFileAreReadFromTheFolders) {
  TempDir dir;
  SysfsTreeBuilder b(dir.path());
  TwoSockets(&b);
  b.AddPciFunction(Nic("pci0000:80", "0000:80:00.0", 1, "4-7"));
  b.Finish({.node_online_file = false});
  const Topology t = DiscoverOrDie(dir.path());
  EXPECT_THAT(t.NumaNodeIds(), ElementsAre(0, 1));
  EXPECT_EQ(t.FindNumaNode(0)->cpus.ToList(), "0-3");
  EXPECT_EQ(t.FindNumaNode(1)->cpus.ToList(), "4-7");
  EXPECT_EQ(t.FindNumaNode(1)->memory_bytes, 8 * kGiB);
  EXPECT_EQ(t.Distance(0, 1), 21);
  EXPECT_THAT(t.FindDevice(A("0000:80:00.0"))->numa_nodes, ElementsAre(1));
  EXPECT_THAT(AllWarnings(t), ::testing::Not(HasSubstr("NUMA")));
}

// 2. No node folder at all (kernels without NUMA), and no cpu/online either.
TEST(MachineShapesTest, KernelWithoutNumaHasOneNodeWithMemoryAndCpus) {
  TempDir dir;
  SysfsTreeBuilder b(dir.path());
  for (int cpu = 0; cpu < 4; ++cpu) {
    b.AddCpu(cpu, 0, cpu, std::to_string(cpu));
  }
  b.Finish({.cpu_online_file = false});
  b.WriteFile("../proc/meminfo",
              "MemTotal:        8388608 kB\nMemFree:         1024 kB\n");
  const Topology t = DiscoverOrDie(dir.path());
  ASSERT_THAT(t.NumaNodeIds(), ElementsAre(0));
  EXPECT_EQ(t.FindNumaNode(0)->cpus.ToList(), "0-3");
  EXPECT_EQ(t.FindNumaNode(0)->memory_bytes, 8 * kGiB);  // /proc/meminfo
  EXPECT_EQ(t.cpus().size(), 4u);
  EXPECT_THAT(AllWarnings(t), HasSubstr("devices/system/node is absent"));
}

// The same machine without hwloc: the cpuN folders still give the CPUs.
TEST(MachineShapesTest, WithoutHwlocCpusComeFromTheCpuFolders) {
  TempDir dir;
  SysfsTreeBuilder b(dir.path());
  for (int cpu = 0; cpu < 4; ++cpu) b.AddCpu(cpu, 0, cpu, std::to_string(cpu));
  b.AddOfflineCpu(4);
  b.Finish({.cpu_online_file = false});
  DiscoveryOptions options;
  options.host_root = dir.path();
  options.use_hwloc = false;
  const Topology t = *Discover(options);
  EXPECT_EQ(t.FindNumaNode(0)->cpus.ToList(), "0-3");
}

// 3. Node lists naming offline CPUs (SMT off by offlining siblings) or CPUs
//    beyond cpu/present.
TEST(MachineShapesTest, OfflineAndAbsentCpusLeaveTheNodeLists) {
  TempDir dir;
  SysfsTreeBuilder b(dir.path());
  // CPUs 0-3 online; 4-7 are SMT siblings taken offline.
  for (int cpu = 0; cpu < 4; ++cpu) b.AddCpu(cpu, 0, cpu, std::to_string(cpu));
  for (int cpu = 4; cpu < 8; ++cpu) b.AddOfflineCpu(cpu);
  b.AddNode(0, "0-1,4-5", 4 * kGiB);
  b.AddNode(1, "2-3,6-7", 4 * kGiB);
  // A GPU-memory node whose list names CPUs that do not exist at all.
  b.AddNode(2, "64-71", 16 * kGiB);
  b.SetDistances({{10, 20, 40}, {20, 10, 40}, {40, 40, 10}});
  b.Finish();
  const Topology t = DiscoverOrDie(dir.path());
  EXPECT_EQ(t.FindNumaNode(0)->cpus.ToList(), "0-1");
  EXPECT_EQ(t.FindNumaNode(1)->cpus.ToList(), "2-3");
  EXPECT_FALSE(t.FindNumaNode(2)->has_cpus());
  EXPECT_EQ(t.AllCpus().ToList(), "0-3");
  EXPECT_THAT(AllWarnings(t), HasSubstr("node/node0/cpulist names CPUs 4-5 "
                                        "that are offline or absent"));
  EXPECT_THAT(AllWarnings(t), HasSubstr("node/node2/cpulist names CPUs 64-71"));
}

// 4. physical_package_id repeated with disjoint siblings masks, or -1.
TEST(MachineShapesTest, PackagesFollowTheSiblingsMasksNotTheRepeatedIds) {
  for (const char* id : {"0", "-1"}) {
    TempDir dir;
    SysfsTreeBuilder b(dir.path());
    for (int cpu = 0; cpu < 8; ++cpu) {
      b.AddCpu(cpu, cpu / 4, cpu % 4, std::to_string(cpu));
    }
    b.AddNode(0, "0-7", 8 * kGiB);
    b.Finish();
    // Every CPU claims the same package id; the masks say two packages.
    for (int cpu = 0; cpu < 8; ++cpu) {
      b.WriteFile("devices/system/cpu/cpu" + std::to_string(cpu) +
                      "/topology/physical_package_id",
                  std::string(id) + "\n");
    }
    const Topology t = DiscoverOrDie(dir.path());
    ASSERT_EQ(t.cpus().size(), 8u) << id;
    EXPECT_EQ(t.cpus()[0].package_id, t.cpus()[3].package_id) << id;
    EXPECT_EQ(t.cpus()[4].package_id, t.cpus()[7].package_id) << id;
    EXPECT_NE(t.cpus()[0].package_id, t.cpus()[4].package_id) << id;
    EXPECT_GE(t.cpus()[0].package_id, 0) << id;
  }
}

// 5. Contradictory firmware: every node claims every CPU, SLIT all 10.
TEST(MachineShapesTest, ContradictoryFirmwareCollapsesToOneNodeAsHwloc) {
  TempDir dir;
  SysfsTreeBuilder b(dir.path());
  for (int cpu = 0; cpu < 8; ++cpu) b.AddCpu(cpu, 0, cpu, std::to_string(cpu));
  std::vector<std::vector<int>> slit;
  for (int node = 0; node < 8; ++node) {
    b.AddNode(node, "0-7", 2 * kGiB);
    slit.emplace_back(8, 10);
  }
  b.SetDistances(slit);
  b.AddPciFunction(Nic("pci0000:00", "0000:00:03.0", 5, "0-7"));
  b.Finish();
  const Topology t = DiscoverOrDie(dir.path());
  ASSERT_THAT(t.NumaNodeIds(), ElementsAre(0));
  EXPECT_EQ(t.FindNumaNode(0)->cpus.ToList(), "0-7");
  EXPECT_FALSE(t.has_distances());
  EXPECT_THAT(AllWarnings(t),
              HasSubstr("nodes 0-7 all claim CPUs 0-7 and every distance is "
                        "10 (contradictory firmware data); only node 0 is "
                        "kept"));
  // numa_node 5 no longer exists; the one node remains.
  EXPECT_THAT(t.FindDevice(A("0000:00:03.0"))->numa_nodes, ElementsAre(0));
}

// 6. One NUMA node: numa_node -1 means that node.
TEST(MachineShapesTest, SingleNodeMachinePlacesUnknownDevicesOnIt) {
  TempDir dir;
  SysfsTreeBuilder b(dir.path());
  for (int cpu = 0; cpu < 4; ++cpu) b.AddCpu(cpu, 0, cpu, std::to_string(cpu));
  b.AddNode(0, "0-3", 8 * kGiB);
  b.AddPciFunction(Nic("pci0000:00", "0000:00:05.0", -1, "0-3"));
  b.Finish();
  const Topology t = DiscoverOrDie(dir.path());
  const PciDevice* nic = t.FindDevice(A("0000:00:05.0"));
  ASSERT_NE(nic, nullptr);
  EXPECT_THAT(nic->numa_nodes, ElementsAre(0));
  EXPECT_EQ(nic->numa_source, NumaSource::kSingleNode);
  EXPECT_EQ(NumaSourceName(nic->numa_source), "single_node");
}

// ... but on two nodes -1 with every CPU local stays unknown (the kubelet's
// view; hwloc attaches such a device to the whole machine).
TEST(MachineShapesTest, TwoNodeMachineKeepsUncoreDevicesUnknown) {
  TempDir dir;
  SysfsTreeBuilder b(dir.path());
  TwoSockets(&b);
  b.AddPciFunction(Nic("pci0000:ff", "0000:ff:0b.0", -1, "0-7"));
  b.Finish();
  const Topology t = DiscoverOrDie(dir.path());
  EXPECT_THAT(t.FindDevice(A("0000:ff:0b.0"))->numa_nodes, IsEmpty());
  EXPECT_EQ(t.FindDevice(A("0000:ff:0b.0"))->numa_source, NumaSource::kUnknown);
}

// 7. Two ordinary nodes sharing one CPU set (Cluster-on-Die exports).
TEST(MachineShapesTest, NodesSharingCpusBothKeepThem) {
  TempDir dir;
  SysfsTreeBuilder b(dir.path());
  for (int cpu = 0; cpu < 8; ++cpu) b.AddCpu(cpu, 0, cpu, std::to_string(cpu));
  b.AddNode(0, "0-7", 4 * kGiB);
  b.AddNode(1, "0-7", 4 * kGiB);
  b.SetDistances({{10, 11}, {11, 10}});
  b.AddPciFunction(Nic("pci0000:00", "0000:00:03.0", -1, "0-7"));
  b.AddPciFunction(Nic("pci0000:40", "0000:40:00.0", 1, "0-7"));
  b.Finish();
  const Topology t = DiscoverOrDie(dir.path());
  ASSERT_THAT(t.NumaNodeIds(), ElementsAre(0, 1));
  EXPECT_EQ(t.FindNumaNode(0)->cpus.ToList(), "0-7");
  EXPECT_EQ(t.FindNumaNode(1)->cpus.ToList(), "0-7");
  EXPECT_THAT(AllWarnings(t), HasSubstr("nodes 0 and 1 both list CPUs 0-7"));
  EXPECT_THAT(t.FindDevice(A("0000:40:00.0"))->numa_nodes, ElementsAre(1));
  // Local to every CPU of both nodes: the whole machine, so unknown.
  EXPECT_THAT(t.FindDevice(A("0000:00:03.0"))->numa_nodes, IsEmpty());
  EXPECT_EQ(t.cpus()[0].numa_node, 0);
}

// 8. CPU-less memory nodes say which CPUs are near: HMAT initiators first,
//    else the SLIT.
TEST(MachineShapesTest, CpulessNodesReportTheirNearCpus) {
  TempDir dir;
  SysfsTreeBuilder b(dir.path());
  TwoSockets(&b);
  b.AddNode(2, "", 64 * kGiB);  // CXL memory behind socket 1 (initiators)
  b.AddNode(3, "", 16 * kGiB);  // HBM of socket 0 (SLIT only)
  b.SetDistances(
      {{10, 21, 24, 14}, {21, 10, 14, 24}, {24, 14, 10, 26}, {14, 24, 26, 10}});
  b.Finish();
  // node2/access0/initiators/node1 (a link in real sysfs; a folder will do
  // for the name).
  fs::create_directories(
      b.Sys("devices/system/node/node2/access0/initiators/node1"));
  const Topology t = DiscoverOrDie(dir.path());
  ASSERT_THAT(t.NumaNodeIds(), ElementsAre(0, 1, 2, 3));
  EXPECT_FALSE(t.FindNumaNode(2)->has_cpus());
  EXPECT_FALSE(t.FindNumaNode(3)->has_cpus());
  EXPECT_EQ(t.FindNumaNode(2)->near_cpus.ToList(), "4-7");
  EXPECT_EQ(t.FindNumaNode(3)->near_cpus.ToList(), "0-3");
  EXPECT_TRUE(t.FindNumaNode(0)->near_cpus.empty());
}

// The same without hwloc: our own reading of initiators and SLIT.
TEST(MachineShapesTest, CpulessNodesNearCpusWithoutHwloc) {
  TempDir dir;
  SysfsTreeBuilder b(dir.path());
  TwoSockets(&b);
  b.AddNode(2, "", 64 * kGiB);
  b.AddNode(3, "", 16 * kGiB);
  b.SetDistances(
      {{10, 21, 24, 14}, {21, 10, 14, 24}, {24, 14, 10, 26}, {14, 24, 26, 10}});
  b.Finish();
  fs::create_directories(
      b.Sys("devices/system/node/node2/access0/initiators/node1"));
  DiscoveryOptions options;
  options.host_root = dir.path();
  options.use_hwloc = false;
  const Topology t = *Discover(options);
  EXPECT_EQ(t.FindNumaNode(2)->near_cpus.ToList(), "4-7");
  EXPECT_EQ(t.FindNumaNode(3)->near_cpus.ToList(), "0-3");
}

// OS devices below PCI functions, as hwloc shows them.
TEST(MachineShapesTest, OsDevicesAreListedPerFunction) {
  TempDir dir;
  SysfsTreeBuilder b(dir.path());
  TwoSockets(&b);
  b.AddPciFunction(Nic("pci0000:17", "0000:17:00.0", 0, "0-3"));
  PciFunctionSpec nvme = Nic("pci0000:80", "0000:80:00.0", 1, "4-7");
  nvme.class_code = 0x010802;
  b.AddPciFunction(nvme);
  PciFunctionSpec gpu = Nic("pci0000:81", "0000:81:00.0", 1, "4-7");
  gpu.class_code = 0x030200;
  b.AddPciFunction(gpu);
  b.Finish();
  b.AddClassDevice("net", "ens1f0", "0000:17:00.0", "net");
  b.AddClassDevice("infiniband", "mlx5_0", "0000:17:00.0", "infiniband");
  b.AddClassDevice("block", "nvme0n1", "0000:80:00.0", "nvme/nvme0");
  // A partition of it: not an OS device of its own.
  b.AddClassDevice("block", "nvme0n1p1", "0000:80:00.0", "nvme/nvme0/nvme0n1");
  b.AddClassDevice("drm", "card1", "0000:81:00.0", "drm");
  b.AddClassDevice("drm", "renderD128", "0000:81:00.0", "drm");
  b.AddClassDevice("drm", "card1-DP-1", "0000:81:00.0", "drm/card1");
  // A virtual interface, below no PCI function.
  fs::create_directories(b.Sys("devices/virtual/net/lo"));
  fs::create_directory_symlink("../../devices/virtual/net/lo",
                               b.Sys("class/net/lo"));
  const Topology t = DiscoverOrDie(dir.path());
  EXPECT_THAT(t.FindDevice(A("0000:17:00.0"))->os_devices,
              ElementsAre(OsDevice{"net", "ens1f0"},
                          OsDevice{"openfabrics", "mlx5_0"}));
  EXPECT_THAT(t.FindDevice(A("0000:80:00.0"))->os_devices,
              ElementsAre(OsDevice{"block", "nvme0n1"}));
  EXPECT_THAT(
      t.FindDevice(A("0000:81:00.0"))->os_devices,
      ElementsAre(OsDevice{"gpu", "card1"}, OsDevice{"gpu", "renderD128"}));
}

}  // namespace
}  // namespace topology
