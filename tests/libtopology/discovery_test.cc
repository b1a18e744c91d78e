// Discovery on the synthetic machines of tests/testing/synthetic_machines.h.
#include "topology/discovery.h"

#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "topology/cost_model.h"
#include "topology/testing/sysfs_tree_builder.h"

#include "libpci_scanner.h"
#include "status_matchers.h"
#include "synthetic_machines.h"
#include "sysfs_discovery.h"
#include "temp_dir.h"

namespace topology {
namespace {

using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Not;
using testing::StatusIs;
using testing::TempDir;

PciAddress A(const char* text) { return *PciAddress::Parse(text); }

Topology DiscoverOrDie(const std::filesystem::path& root) {
  DiscoveryOptions options;
  options.host_root = root;
  auto topology = Discover(options);
  EXPECT_TRUE(topology.ok()) << topology.status().ToString();
  return topology.ok() ? *std::move(topology) : Topology();
}

std::vector<const PciDevice*> WithClass(const Topology& t,
                                        uint32_t class_code) {
  std::vector<const PciDevice*> out;
  for (const PciDevice& d : t.pci_devices()) {
    if (d.class_code == class_code) out.push_back(&d);
  }
  return out;
}

TEST(DiscoveryTest, DualSocketEightGpus) {
  TempDir dir;
  testing::WriteDualSocketGpuMachine(dir.path());
  const Topology t = DiscoverOrDie(dir.path());
  EXPECT_THAT(t.warnings(), IsEmpty());
  ASSERT_EQ(t.numa_nodes().size(), 2u);
  EXPECT_EQ(t.numa_nodes()[1].cpus.ToList(), "8-15,24-31");
  EXPECT_EQ(t.numa_nodes()[0].memory_bytes, 256ULL << 30);
  EXPECT_EQ(*t.Distance(0, 1), 21);
  // Huge pages per node and size, by increasing size, free pages too.
  ASSERT_EQ(t.numa_nodes()[0].hugepages.size(), 2u);
  EXPECT_EQ(t.numa_nodes()[0].hugepages[0],
            (HugePages{.page_size_bytes = 2ULL << 20,
                       .total_pages = 4096,
                       .free_pages = 4096}));
  EXPECT_EQ(
      t.numa_nodes()[0].hugepages[1],
      (HugePages{
          .page_size_bytes = 1ULL << 30, .total_pages = 16, .free_pages = 12}));
  EXPECT_EQ(t.numa_nodes()[1].hugepages[1].free_pages, 16u);
  EXPECT_EQ(
      HugePagesResourceName(t.numa_nodes()[0].hugepages[0].page_size_bytes),
      "hugepages-2Mi");
  EXPECT_EQ(HugePagesResourceName(1ULL << 30), "hugepages-1Gi");
  EXPECT_EQ(BinaryQuantity(1536), "1536");
  EXPECT_EQ(BinaryQuantity(64 * 1024), "64Ki");

  // hwloc: 32 CPUs, 2 packages, SMT siblings.
  ASSERT_EQ(t.cpus().size(), 32u);
  EXPECT_EQ(t.cpus()[9].package_id, 1);
  EXPECT_EQ(t.cpus()[9].thread_siblings.ToList(), "9,25");
  EXPECT_EQ(t.cpus()[9].numa_node, 1);

  const auto gpus = WithClass(t, 0x030200);
  const auto nics = WithClass(t, 0x020000);
  ASSERT_EQ(gpus.size(), 8u);
  ASSERT_EQ(nics.size(), 4u);
  const PciDevice& gpu = *gpus[0];
  EXPECT_EQ(gpu.address.ToString(), "0000:1a:00.0");
  EXPECT_EQ(gpu.vendor_id, 0x10de);
  EXPECT_EQ(gpu.driver, "nvidia");
  EXPECT_EQ(gpu.sysfs_numa_node, 0);
  EXPECT_THAT(gpu.numa_nodes, ElementsAre(0));
  EXPECT_EQ(gpu.numa_source, NumaSource::kSysfs);
  EXPECT_EQ(gpu.host_bridge, "pci0000:17");
  EXPECT_EQ(gpu.iommu_group, 10);
  EXPECT_EQ(gpu.link.current_width, 16);
  EXPECT_EQ(gpu.link.current_speed, "16.0 GT/s PCIe");
  ASSERT_EQ(gpu.upstream_bridges.size(), 3u);
  EXPECT_EQ(gpu.upstream_bridges[0].ToString(), "0000:19:04.0");  // dsp
  EXPECT_EQ(gpu.upstream_bridges[2].ToString(), "0000:17:00.0");  // root port
  EXPECT_THAT(gpu.upstream_is_switch, ElementsAre(false, true, false));
  EXPECT_THAT(gpus[7]->numa_nodes, ElementsAre(1));

  const CostModel model(t);
  EXPECT_EQ(model.Between(A("0000:1a:00.0"), A("0000:1b:00.0"))->level,
            CostLevel::kSameSwitch);
  EXPECT_EQ(model.Between(A("0000:1a:00.0"), A("0000:3d:00.0"))->level,
            CostLevel::kSameNumaNode);
  EXPECT_EQ(model.Between(A("0000:1a:00.0"), A("0000:9a:00.0"))->level,
            CostLevel::kCrossNuma);
}

// The test kit's accelerator machine: what a plugin for class-12 devices or
// SR-IOV VFs finds on it.
TEST(DiscoveryTest, DualSocketAccelerators) {
  TempDir dir;
  ASSERT_TRUE(testing::WriteMachine("dual-socket-accel", dir.path()));
  const Topology t = DiscoverOrDie(dir.path());
  EXPECT_THAT(t.warnings(), IsEmpty());
  const auto accelerators = WithClass(t, 0x120000);
  ASSERT_EQ(accelerators.size(), 8u);
  for (const PciDevice* accel : accelerators) {
    const int node = accel->address.bus >= 0x80 ? 1 : 0;
    EXPECT_THAT(accel->numa_nodes, ElementsAre(node))
        << accel->address.ToString();
    EXPECT_EQ(accel->driver, "habanalabs");
    ASSERT_FALSE(accel->upstream_is_switch.empty());
    // Endpoint, switch downstream port, switch upstream port, root port.
    ASSERT_EQ(accel->upstream_bridges.size(), 3u) << accel->address.ToString();
    EXPECT_TRUE(accel->upstream_is_switch[1]) << accel->address.ToString();
  }
  EXPECT_EQ(accelerators[0]->address.ToString(), "0000:1a:00.0");
  EXPECT_EQ(accelerators[4]->address.ToString(), "0000:9a:00.0");
  // The accelerators' device nodes and class entries.
  for (int minor = 0; minor < 8; ++minor) {
    const std::string name = "accel" + std::to_string(minor);
    EXPECT_TRUE(std::filesystem::exists(dir.path() / "dev/accel" / name));
    EXPECT_TRUE(std::filesystem::exists(dir.path() / "sys/class/accel" / name /
                                        "device"))
        << name;
  }
  const auto nics = WithClass(t, 0x020000);
  ASSERT_EQ(nics.size(), 10u);  // 2 PFs, 8 VFs
  for (const char* pf_text : {"0000:1e:00.0", "0000:9e:00.0"}) {
    const PciDevice* pf = t.FindDevice(A(pf_text));
    ASSERT_NE(pf, nullptr) << pf_text;
    EXPECT_EQ(pf->sriov_totalvfs, 4);
    ASSERT_EQ(pf->virtfns.size(), 4u) << pf_text;
    for (const PciAddress& vf_address : pf->virtfns) {
      const PciDevice* vf = t.FindDevice(vf_address);
      ASSERT_NE(vf, nullptr) << vf_address.ToString();
      EXPECT_EQ(vf->physfn, pf->address);
      EXPECT_EQ(vf->driver, "vfio-pci");
      EXPECT_EQ(vf->numa_nodes, pf->numa_nodes);
    }
  }
}

// L3 caches as sysfs gives them (cache/index3/id and shared_cpu_map), the
// kubelet's uncore caches: 4 per node on the split-L3 machine, one per
// socket over two nodes with sub-NUMA clustering, none where sysfs has no
// cache directories.
TEST(DiscoveryTest, L3CachesAsSysfsNumbersThem) {
  TempDir split;
  testing::WriteSplitL3Machine(split.path());
  const Topology t = DiscoverOrDie(split.path());
  ASSERT_EQ(t.cpus().size(), 32u);
  for (const CpuInfo& cpu : t.cpus()) {
    const int first = cpu.id % 16 / 4 * 4;
    EXPECT_EQ(cpu.l3_cache_id, cpu.id % 16 / 4) << cpu.id;
    EXPECT_EQ(cpu.l3_shared,
              CpuSet::Of({first, first + 1, first + 2, first + 3, first + 16,
                          first + 17, first + 18, first + 19}))
        << cpu.id;
  }
  TempDir snc;
  testing::WriteSubNumaClusterMachine(snc.path());
  const Topology s = DiscoverOrDie(snc.path());
  EXPECT_EQ(s.cpus()[8].l3_cache_id, 0);
  EXPECT_EQ(s.cpus()[8].l3_shared.ToList(), "0-15");
  EXPECT_EQ(s.cpus()[20].l3_cache_id, 1);
  TempDir none;
  testing::WriteVmMachine(none.path());
  const Topology vm = DiscoverOrDie(none.path());
  for (const CpuInfo& cpu : vm.cpus()) {
    EXPECT_EQ(cpu.l3_cache_id, -1);
    EXPECT_TRUE(cpu.l3_shared.empty());
  }
}

TEST(DiscoveryTest, SubNumaClustering) {
  TempDir dir;
  testing::WriteSubNumaClusterMachine(dir.path());
  const Topology t = DiscoverOrDie(dir.path());
  ASSERT_EQ(t.numa_nodes().size(), 4u);
  EXPECT_EQ(*t.Distance(0, 1), 11);
  EXPECT_EQ(*t.Distance(1, 2), 21);
  // Sockets need package ids: nodes 0 and 1 share package 0.
  EXPECT_EQ(t.cpus()[8].package_id, 0);
  EXPECT_EQ(t.cpus()[8].numa_node, 1);
  EXPECT_EQ(t.cpus()[16].package_id, 1);
  const auto gpus = WithClass(t, 0x030200);
  ASSERT_EQ(gpus.size(), 4u);
  for (size_t i = 0; i < gpus.size(); ++i) {
    EXPECT_THAT(gpus[i]->numa_nodes, ElementsAre(static_cast<int>(i)));
  }
  const CostModel model(t);
  // Same socket, other sub-node is cheaper than the other socket.
  const int sibling = model.Between(gpus[0]->address, gpus[1]->address)->cost;
  const int remote = model.Between(gpus[0]->address, gpus[2]->address)->cost;
  EXPECT_LT(sibling, remote);
}

TEST(DiscoveryTest, VmWithMinusOneEverywhereIsUnknownNotZero) {
  TempDir dir;
  testing::WriteVmMachine(dir.path());
  const Topology t = DiscoverOrDie(dir.path());
  ASSERT_EQ(t.pci_devices().size(), 4u);
  for (const PciDevice& d : t.pci_devices()) {
    EXPECT_EQ(d.sysfs_numa_node, -1);
    EXPECT_THAT(d.numa_nodes, IsEmpty());
    EXPECT_EQ(d.numa_source, NumaSource::kUnknown);
    EXPECT_THAT(d.upstream_bridges, IsEmpty());
  }
}

TEST(DiscoveryTest, CpuLessMemoryNode) {
  TempDir dir;
  testing::WriteCpulessNodeMachine(dir.path());
  const Topology t = DiscoverOrDie(dir.path());
  ASSERT_EQ(t.numa_nodes().size(), 3u);
  EXPECT_FALSE(t.FindNumaNode(2)->has_cpus());
  EXPECT_EQ(t.FindNumaNode(2)->memory_bytes, 512ULL << 30);
  EXPECT_EQ(*t.Distance(2, 0), 14);
  const PciDevice* cxl = t.FindDevice(A("0000:39:00.0"));
  ASSERT_NE(cxl, nullptr);
  ASSERT_TRUE(cxl->local_cpus.has_value());
  EXPECT_TRUE(cxl->local_cpus->empty());
  EXPECT_THAT(cxl->numa_nodes, ElementsAre(2));
  EXPECT_EQ(cxl->numa_source, NumaSource::kSysfs);
  EXPECT_THAT(cxl->conflicts, IsEmpty());
}

TEST(DiscoveryTest, SparseNodeIdsMapDistanceColumnsByOnlineOrder) {
  TempDir dir;
  testing::WriteSparseNodeMachine(dir.path());
  const Topology t = DiscoverOrDie(dir.path());
  EXPECT_THAT(t.NumaNodeIds(), ElementsAre(0, 2, 5));
  EXPECT_EQ(*t.Distance(0, 5), 30);
  EXPECT_EQ(*t.Distance(2, 5), 25);
  EXPECT_EQ(t.Distance(0, 1), std::nullopt);
  const auto gpus = WithClass(t, 0x030200);
  ASSERT_EQ(gpus.size(), 3u);
  EXPECT_THAT(gpus[2]->numa_nodes, ElementsAre(5));
}

TEST(DiscoveryTest, SriovRelations) {
  TempDir dir;
  testing::WriteSriovMachine(dir.path(), 2, 8);
  const Topology t = DiscoverOrDie(dir.path());
  EXPECT_THAT(t.warnings(), IsEmpty());
  const PciDevice* pf = t.FindDevice(A("0000:10:00.0"));
  ASSERT_NE(pf, nullptr);
  EXPECT_EQ(pf->sriov_totalvfs, 8);
  EXPECT_EQ(pf->sriov_numvfs, 8);
  ASSERT_EQ(pf->virtfns.size(), 8u);
  EXPECT_EQ(pf->virtfns[0].ToString(), "0000:10:02.0");
  const PciDevice* vf = t.FindDevice(pf->virtfns[7]);
  ASSERT_NE(vf, nullptr);
  EXPECT_TRUE(vf->is_virtual_function());
  EXPECT_EQ(vf->physfn, pf->address);
  EXPECT_EQ(vf->driver, "vfio-pci");
  EXPECT_THAT(vf->numa_nodes, ElementsAre(0));
  EXPECT_TRUE(vf->iommu_group.has_value());
  EXPECT_NE(vf->iommu_group, pf->iommu_group);
}

// A VF cannot carry an SR-IOV capability of its own: a stray sriov_totalvfs
// in a VF's directory is not read, so the VF never looks like a PF.
TEST(DiscoveryTest, VirtualFunctionIsNeverAPhysicalFunction) {
  TempDir dir;
  testing::WriteSriovMachine(dir.path(), 1, 4);
  const auto vf_dir = dir.path() / "sys/bus/pci/devices/0000:10:02.0";
  ASSERT_TRUE(std::filesystem::exists(vf_dir / "physfn"));
  std::ofstream(vf_dir / "sriov_totalvfs") << "4\n";
  std::ofstream(vf_dir / "sriov_numvfs") << "4\n";
  const Topology t = DiscoverOrDie(dir.path());
  const PciDevice* vf = t.FindDevice(A("0000:10:02.0"));
  ASSERT_NE(vf, nullptr);
  EXPECT_TRUE(vf->is_virtual_function());
  EXPECT_EQ(vf->sriov_totalvfs, std::nullopt);
  EXPECT_EQ(vf->sriov_numvfs, std::nullopt);
  EXPECT_EQ(t.FindDevice(A("0000:10:00.0"))->sriov_totalvfs, 4);
}

// The kernel gives every VF of a PF the ids it read for the first (Linux
// 4.18 and later): a PF's VFs take them from its first VF, with libpci and
// without; another VF's own files are not read (here one that would be
// named as malformed, and one that disagrees).
TEST(DiscoveryTest, VirtualFunctionsShareTheirFirstSiblingsIdentity) {
  TempDir dir;
  testing::WriteSriovMachine(dir.path(), 2, 3);
  std::vector<testing::SriovFunction> vfs;
  for (const auto& f : testing::SriovLayout(2, 3)) {
    if (!f.physfn.empty()) vfs.push_back(f);
  }
  ASSERT_EQ(vfs.size(), 6u);
  const auto devices = dir.path() / "sys/bus/pci/devices";
  std::ofstream(devices / vfs[0].address / "device") << "0x1515\n";
  std::ofstream(devices / vfs[0].address / "revision") << "0x07\n";
  std::ofstream(devices / vfs[1].address / "vendor") << "0xZZZZ\n";
  std::ofstream(devices / vfs[2].address / "device") << "0x9999\n";
  for (bool use_libpci : {true, false}) {
    SCOPED_TRACE(use_libpci);
    DiscoveryOptions options;
    options.host_root = dir.path();
    options.use_libpci = use_libpci;
    auto t = Discover(options);
    ASSERT_TRUE(t.ok()) << t.status().ToString();
    for (size_t i = 0; i < vfs.size(); ++i) {
      const PciDevice* vf = t->FindDevice(A(vfs[i].address.c_str()));
      ASSERT_NE(vf, nullptr) << vfs[i].address;
      EXPECT_EQ(*vf->physfn, A(vfs[i].physfn.c_str()));
      const bool first_pf = vfs[i].physfn == vfs[0].physfn;
      EXPECT_EQ(vf->device_id, first_pf ? 0x1515 : 0x101e) << vfs[i].address;
      EXPECT_EQ(vf->revision, first_pf ? 7 : 1) << vfs[i].address;
      EXPECT_NE(vf->vendor_id, 0) << vfs[i].address;
    }
    for (const std::string& warning : t->warnings()) {
      EXPECT_THAT(warning, Not(HasSubstr(vfs[1].address))) << warning;
    }
  }
}

// The generator behind topology-sysfs-fixture sriov-PxV: every function gets
// its own address and none lands on a root port, at every size it accepts
// (sriov-64x255 once lost a function to node 1's root port).
TEST(DiscoveryTest, SriovLayoutNeverCollides) {
  for (const auto& [pfs, vfs] : {std::pair{64, 255}, std::pair{0xc0, 496},
                                 std::pair{97, 240}, std::pair{1, 1}}) {
    const auto layout = testing::SriovLayout(pfs, vfs);
    ASSERT_EQ(layout.size(), static_cast<size_t>(pfs * (vfs + 1)))
        << pfs << "x" << vfs;
    std::set<std::string> seen;
    for (const auto& f : layout) seen.insert(f.root_port);
    const size_t root_ports = seen.size();
    for (const auto& f : layout) {
      EXPECT_TRUE(PciAddress::Parse(f.address).ok()) << f.address;
      EXPECT_TRUE(seen.insert(f.address).second)
          << f.address << " twice in " << pfs << "x" << vfs;
    }
    EXPECT_EQ(seen.size(), root_ports + layout.size());
  }
}

TEST(DiscoveryTest, LibpciAndSysfsAgreeOnIdentity) {
  TempDir dir;
  testing::WriteDualSocketGpuMachine(dir.path());
  DiscoveryOptions with;
  with.host_root = dir.path();
  DiscoveryOptions without = with;
  without.use_libpci = false;
  without.use_hwloc = false;
  auto a = Discover(with);
  auto b = Discover(without);
  ASSERT_TRUE(a.ok());
  ASSERT_TRUE(b.ok());
  ASSERT_EQ(a->pci_devices().size(), b->pci_devices().size());
  for (size_t i = 0; i < a->pci_devices().size(); ++i) {
    const PciDevice& x = a->pci_devices()[i];
    const PciDevice& y = b->pci_devices()[i];
    EXPECT_EQ(x.class_code, y.class_code) << x.address.ToString();
    EXPECT_EQ(x.vendor_id, y.vendor_id);
    EXPECT_EQ(x.device_id, y.device_id);
    EXPECT_EQ(x.subsystem_vendor_id, y.subsystem_vendor_id);
    EXPECT_EQ(x.subsystem_device_id, y.subsystem_device_id);
    EXPECT_EQ(x.revision, y.revision);
  }
  // Without hwloc the CPUs still come from the node lists.
  EXPECT_EQ(b->cpus().size(), 32u);
  EXPECT_EQ(b->cpus()[0].package_id, -1);
}

// What libpci did not reach is read after the pass, through each
// function's link and without a listing: the same class, ids and revision
// as the pass reads, subsystem ids left as the pass read them, and a
// revision file that is there but malformed named and read as 0 on both
// paths (config space stands in only for an absent one).
TEST(DiscoveryTest, IdentityReadAfterThePassMatchesThePass) {
  TempDir dir;
  testing::WriteDualSocketGpuMachine(dir.path());
  DiscoveryOptions options;
  options.host_root = dir.path();
  options.use_libpci = false;
  options.use_hwloc = false;
  auto pass = Discover(options);
  ASSERT_TRUE(pass.ok());
  const auto reader = NewHostRootReader(dir.path());
  std::vector<PciDevice> devices;
  std::vector<size_t> all;
  for (const PciDevice& d : pass->pci_devices()) {
    if (d.physfn) continue;  // a VF's identity is its first sibling's
    PciDevice device;
    device.address = d.address;
    device.subsystem_vendor_id = 0xabcd;  // as if the pass had read it
    all.push_back(devices.size());
    devices.push_back(device);
  }
  ASSERT_GE(devices.size(), 10u);
  std::vector<std::string> warnings;
  internal::ReadPciIdentity(*reader, all, &devices, &warnings);
  EXPECT_THAT(warnings, IsEmpty());
  for (const PciDevice& read : devices) {
    SCOPED_TRACE(read.address.ToString());
    const PciDevice* seen = pass->FindDevice(read.address);
    ASSERT_NE(seen, nullptr);
    EXPECT_EQ(read.class_code, seen->class_code);
    EXPECT_EQ(read.vendor_id, seen->vendor_id);
    EXPECT_EQ(read.device_id, seen->device_id);
    EXPECT_EQ(read.revision, seen->revision);
    EXPECT_EQ(read.subsystem_vendor_id, 0xabcd);
  }

  // A malformed revision beside a config space whose byte 8 says 0x42.
  const std::filesystem::path gpu = std::filesystem::canonical(
      dir.path() / "sys/bus/pci/devices/0000:1a:00.0");
  std::ofstream(gpu / "revision", std::ios::trunc) << "0xZZ\n";
  std::string config(64, '\0');
  config[8] = '\x42';
  std::ofstream(gpu / "config", std::ios::binary | std::ios::trunc) << config;
  auto again = Discover(options);
  ASSERT_TRUE(again.ok());
  const PciDevice* by_pass = again->FindDevice(A("0000:1a:00.0"));
  ASSERT_NE(by_pass, nullptr);
  EXPECT_EQ(by_pass->revision, 0);
  EXPECT_THAT(again->warnings(),
              ::testing::Contains(HasSubstr("0000:1a:00.0/revision")));
  std::vector<PciDevice> one(1);
  one[0].address = A("0000:1a:00.0");
  warnings.clear();
  internal::ReadPciIdentity(*reader, {0}, &one, &warnings);
  EXPECT_EQ(one[0].revision, 0);
  EXPECT_EQ(one[0].vendor_id, by_pass->vendor_id);
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_THAT(warnings[0], HasSubstr("0000:1a:00.0/revision"));
  // Without the file, both take byte 8 of config space.
  std::filesystem::remove(gpu / "revision");
  auto without_file = Discover(options);
  ASSERT_TRUE(without_file.ok());
  const PciDevice* from_config = without_file->FindDevice(A("0000:1a:00.0"));
  ASSERT_NE(from_config, nullptr);
  EXPECT_EQ(from_config->revision, 0x42);
  warnings.clear();
  internal::ReadPciIdentity(*reader, {0}, &one, &warnings);
  EXPECT_EQ(one[0].revision, 0x42);
  EXPECT_THAT(warnings, IsEmpty());
}

// The pass lets libpci read the functions whose files it found safe, and
// libpci, run after it, reads those and no other: one without a class file
// (libpci's error hook would end the process) is left to the pass, and a
// VF whose identity is its PF's first VF's is not asked for.
TEST(LibpciPlanTest, LibpciReadsWhatThePassFoundSafe) {
  TempDir dir;
  testing::WriteSriovMachine(dir.path(), 2, 2);
  const auto reader = NewHostRootReader(dir.path());
  const auto entries = reader->ListDirectory("bus/pci/devices");
  ASSERT_TRUE(entries.ok());
  ASSERT_FALSE(entries->empty());
  const std::string refused = entries->front();
  std::filesystem::remove(dir.path() / "sys/bus/pci/devices" / refused /
                          "class");
  internal::LibpciPlan plan(*entries);
  std::vector<std::string> warnings;
  const auto functions = internal::ReadPciDevices(
      *reader, *entries, /*read_identity=*/false, {}, &plan, &warnings);
  ASSERT_TRUE(functions.ok()) << functions.status().ToString();
  EXPECT_THAT(warnings, ElementsAre(AllOf(HasSubstr(refused),
                                          HasSubstr("missing class"))));
  ASSERT_TRUE(internal::ScanWithLibpci(dir.path(), &plan).ok());
  std::set<std::string> read;
  for (const internal::LibpciIdentity& id : plan.Read()) {
    EXPECT_NE(id.vendor_id, 0);
    read.insert(id.address.ToString());
  }
  size_t asked = 0;
  for (size_t i = 0; i < entries->size(); ++i) {
    SCOPED_TRACE((*entries)[i]);
    const bool own = functions->identity_of[i] == i;
    const bool asked_for =
        plan.verdict(i) == internal::LibpciPlan::Verdict::kIdentity;
    EXPECT_EQ(asked_for, own && (*entries)[i] != refused);
    EXPECT_EQ(read.count((*entries)[i]), asked_for ? 1u : 0u);
    asked += asked_for ? 1 : 0;
  }
  EXPECT_GT(asked, 2u);
  EXPECT_LT(asked, entries->size() - 1);
}

TEST(DiscoveryTest, MissingTreeIsNotFound) {
  TempDir dir;
  DiscoveryOptions options;
  options.host_root = dir.path() / "nothing-here";
  EXPECT_THAT(Discover(options),
              StatusIs(StatusCode::kNotFound, HasSubstr("not a sysfs tree")));
}

TEST(DiscoveryTest, MalformedHugePagesEntriesAreSkippedWithAWarning) {
  TempDir dir;
  testing::SysfsTreeBuilder b(dir.path());
  b.AddCpu(0, 0, 0, "0");
  b.AddNode(0, "0", 8ULL << 30);
  b.AddHugePages(0, 2ULL << 20, 512, 500);
  b.WriteFile("devices/system/node/node0/hugepages/hugepages-xkB/nr_hugepages",
              "1\n");
  b.WriteFile(
      "devices/system/node/node0/hugepages/hugepages-1048576kB/nr_hugepages",
      "lots\n");
  // 2^34 pages of 1 GiB: 2^64 bytes.
  b.WriteFile(
      "devices/system/node/node0/hugepages/hugepages-2097152kB/nr_hugepages",
      "17179869184\n");
  b.Finish();
  const Topology t = DiscoverOrDie(dir.path());
  ASSERT_EQ(t.numa_nodes().size(), 1u);
  ASSERT_EQ(t.numa_nodes()[0].hugepages.size(), 1u);
  EXPECT_EQ(t.numa_nodes()[0].hugepages[0].total_pages, 512u);
  EXPECT_EQ(t.numa_nodes()[0].hugepages[0].free_pages, 500u);
  std::string all;
  for (const std::string& w : t.warnings()) all += w + "\n";
  EXPECT_THAT(all, HasSubstr("hugepages-xkB"));
  EXPECT_THAT(all, HasSubstr("hugepages-1048576kB/nr_hugepages"));
  EXPECT_THAT(all, HasSubstr("hugepages-2097152kB/nr_hugepages: more bytes "
                             "of pages than 64 bits hold"));
}

// Entry names whose number is not spelled as the kernel spells it
// ("hugepages-02048kB", "node01", "cpu007") are twins of real entries, not
// entries: skipped, so they can neither replace nor hide the real ones.
TEST(DiscoveryTest, TwinEntriesWithLeadingZerosAreNotEntries) {
  TempDir dir;
  testing::SysfsTreeBuilder b(dir.path());
  b.AddCpu(0, 0, 0, "0");
  b.AddCpu(1, 0, 1, "1");
  b.AddNode(0, "0", 8ULL << 30);
  b.AddNode(1, "1", 8ULL << 30);
  b.AddHugePages(0, 2ULL << 20, 1024, 1024);
  b.SetDistances({{10, 21}, {21, 10}});
  b.WriteFile(
      "devices/system/node/node0/hugepages/hugepages-02048kB/nr_hugepages",
      "0\n");
  b.WriteFile(
      "devices/system/node/node0/hugepages/hugepages-02048kB/free_hugepages",
      "0\n");
  b.WriteFile("devices/system/node/node01/meminfo",
              "Node 1 MemTotal:        4 kB\n");
  b.WriteFile("devices/system/node/node01/cpulist", "0-1\n");
  b.Finish();
  const Topology t = DiscoverOrDie(dir.path());
  ASSERT_EQ(t.numa_nodes().size(), 2u);
  ASSERT_EQ(t.numa_nodes()[0].hugepages.size(), 1u);
  EXPECT_EQ(t.numa_nodes()[0].hugepages[0].total_pages, 1024u);
  EXPECT_EQ(t.numa_nodes()[1].memory_bytes, 8ULL << 30);
  std::string all;
  for (const std::string& w : t.warnings()) all += w + "\n";
  EXPECT_THAT(all, HasSubstr("hugepages-02048kB"));
}

}  // namespace
}  // namespace topology
