// libtopology against the real hwloc: lstopo-no-graphics (Debian's hwloc-nox)
// is run on each recorded machine and on a few hundred seeded random sysfs
// trees, and its XML is compared with Discover() on the same root: NUMA ids,
// node CPUs and memory, near CPUs of CPU-less nodes, distances, online CPUs,
// packages, PCI locality and OS devices. The only differences allowed are the
// documented ones (docs/sysfs.md, "Differences from hwloc").
#include <cstdlib>
#include <filesystem>
#include <map>
#include <set>
#include <string>
#include <vector>

#include <hwloc.h>

#include <gtest/gtest.h>

#include "topology/discovery.h"
#include "topology/testing/sysfs_tree_builder.h"

#include "real_machines.h"
#include "run_command.h"
#include "seeded_random.h"
#include "temp_dir.h"

namespace topology {
namespace {

namespace fs = std::filesystem;
using testing::PciFunctionSpec;
using testing::SeededRandom;
using testing::SysfsTreeBuilder;
using testing::TempDir;

constexpr uint64_t kGiB = 1ULL << 30;

CpuSet FromBitmap(hwloc_const_bitmap_t bitmap) {
  CpuSet set;
  if (bitmap == nullptr) return set;
  for (int id = hwloc_bitmap_first(bitmap); id >= 0;
       id = hwloc_bitmap_next(bitmap, id)) {
    set.Add(id);
  }
  return set;
}

// What lstopo printed, read back with libhwloc's XML parser.
struct HwlocView {
  struct Node {
    CpuSet cpus;
    uint64_t memory = 0;
  };
  std::map<int, Node> nodes;
  std::map<std::pair<int, int>, uint64_t> distances;  // by OS index
  CpuSet pus;
  std::set<std::string> packages;  // CPU lists
  bool with_io = true;             // false: lstopo could only run with --no-io
  std::map<PciAddress, std::set<int>> pci_nodeset;
  std::map<PciAddress, std::set<std::pair<std::string, std::string>>>
      os_devices;
};

const char* Kind(hwloc_obj_osdev_type_e type) {
  switch (type) {
    case HWLOC_OBJ_OSDEV_BLOCK:
      return "block";
    case HWLOC_OBJ_OSDEV_GPU:
      return "gpu";
    case HWLOC_OBJ_OSDEV_NETWORK:
      return "net";
    case HWLOC_OBJ_OSDEV_OPENFABRICS:
      return "openfabrics";
    case HWLOC_OBJ_OSDEV_DMA:
      return "dma";
    case HWLOC_OBJ_OSDEV_COPROC:
      return "coproc";
  }
  return "other";
}

std::optional<HwlocView> RunLstopo(const fs::path& root, const fs::path& out) {
  const auto lstopo = [&](const char* extra) {
    return testing::RunCommand(
        "HWLOC_COMPONENTS=linux,stop HWLOC_FSROOT='" + root.string() +
        "' HWLOC_KEEP_NVIDIA_GPU_NUMA_NODES=1 HWLOC_HIDE_ERRORS=2 "
        "lstopo-no-graphics " +
        std::string(extra) + " --of xml - > '" + out.string() +
        "' 2>/dev/null");
  };
  testing::CommandResult run = lstopo("--whole-io");
  if (run.exit_code != 0) {
    // hwloc 2.9 crashes building caches when a node's CPUs are all
    // offline (libtopology loads hwloc without caches, so it does not);
    // caches are not compared.
    run = lstopo("--whole-io --no-caches");
  }
  bool with_io = true;
  if (run.exit_code != 0) {
    // ... and in its I/O discovery on some trees with an all-offline node
    // (libtopology does not use hwloc's I/O discovery).
    run = lstopo("--no-io");
    with_io = false;
  }
  if (run.exit_code != 0) {
    ADD_FAILURE() << "lstopo-no-graphics failed on " << root << ": " << run.out;
    return std::nullopt;
  }
  hwloc_topology_t topology;
  hwloc_topology_init(&topology);
  hwloc_topology_set_io_types_filter(topology, HWLOC_TYPE_FILTER_KEEP_ALL);
  hwloc_topology_set_flags(topology, HWLOC_TOPOLOGY_FLAG_INCLUDE_DISALLOWED);
  if (hwloc_topology_set_xml(topology, out.c_str()) != 0 ||
      hwloc_topology_load(topology) != 0) {
    hwloc_topology_destroy(topology);
    ADD_FAILURE() << "cannot read lstopo's XML for " << root;
    return std::nullopt;
  }
  HwlocView view;
  view.with_io = with_io;
  view.pus = FromBitmap(hwloc_topology_get_topology_cpuset(topology));
  for (hwloc_obj_t o = nullptr;
       (o = hwloc_get_next_obj_by_type(topology, HWLOC_OBJ_NUMANODE, o));) {
    view.nodes[static_cast<int>(o->os_index)] = {
        FromBitmap(o->cpuset), o->attr->numanode.local_memory};
  }
  for (hwloc_obj_t o = nullptr;
       (o = hwloc_get_next_obj_by_type(topology, HWLOC_OBJ_PACKAGE, o));) {
    view.packages.insert(FromBitmap(o->cpuset).ToList());
  }
  unsigned count = 1;
  hwloc_distances_s* distances = nullptr;
  if (hwloc_distances_get_by_name(topology, "NUMALatency", &count, &distances,
                                  0) == 0 &&
      count == 1) {
    const unsigned n = distances->nbobjs;
    for (unsigned i = 0; i < n; ++i) {
      for (unsigned j = 0; j < n; ++j) {
        view.distances[{static_cast<int>(distances->objs[i]->os_index),
                        static_cast<int>(distances->objs[j]->os_index)}] =
            distances->values[i * n + j];
      }
    }
    hwloc_distances_release(topology, distances);
  }
  for (hwloc_obj_t o = nullptr; (o = hwloc_get_next_pcidev(topology, o));) {
    PciAddress address;
    address.domain = o->attr->pcidev.domain;
    address.bus = o->attr->pcidev.bus;
    address.device = o->attr->pcidev.dev;
    address.function = o->attr->pcidev.func;
    hwloc_obj_t anchor = hwloc_get_non_io_ancestor_obj(topology, o);
    std::set<int> nodes;
    for (int id : FromBitmap(anchor->nodeset).Ids()) nodes.insert(id);
    view.pci_nodeset[address] = nodes;
    auto& os = view.os_devices[address];
    for (hwloc_obj_t c = o->io_first_child; c != nullptr; c = c->next_sibling) {
      if (c->type == HWLOC_OBJ_OS_DEVICE && c->name != nullptr) {
        os.insert({Kind(c->attr->osdev.type), c->name});
      }
    }
  }
  hwloc_topology_destroy(topology);
  return view;
}

bool HasWarning(const Topology& t, const std::string& text) {
  for (const std::string& w : t.warnings()) {
    if (w.find(text) != std::string::npos) return true;
  }
  return false;
}

// Compares, allowing only the differences docs/sysfs.md lists.
void Compare(const fs::path& root, const HwlocView& hwloc) {
  DiscoveryOptions options;
  options.host_root = root;
  auto discovered = Discover(options);
  ASSERT_TRUE(discovered.ok()) << discovered.status().ToString();
  const Topology& t = *discovered;

  // NUMA ids: the kernel's. hwloc drops a node whose CPUs overlap an
  // earlier node's (we keep both, with a warning naming them).
  std::set<int> ours;
  for (int id : t.NumaNodeIds()) ours.insert(id);
  std::set<int> theirs;
  for (const auto& [id, node] : hwloc.nodes) theirs.insert(id);
  for (int id : theirs) EXPECT_TRUE(ours.count(id)) << "node " << id;
  for (int id : ours) {
    if (theirs.count(id)) continue;
    EXPECT_TRUE(HasWarning(t, "and " + std::to_string(id) + " both list CPUs"))
        << "node " << id << " is ours only, without the overlap warning";
  }
  std::set<int> cpuless;
  for (const NumaNode& node : t.numa_nodes()) {
    if (!node.has_cpus()) cpuless.insert(node.id);
    const auto it = hwloc.nodes.find(node.id);
    if (it == hwloc.nodes.end()) continue;
    SCOPED_TRACE("node " + std::to_string(node.id));
    if (node.has_cpus()) {
      EXPECT_EQ(node.cpus.ToList(), it->second.cpus.ToList());
    } else if (!it->second.cpus.empty()) {
      EXPECT_EQ(node.near_cpus.ToList(), it->second.cpus.ToList());
    }  // else hwloc 2.9 leaves it unplaced; ours comes from the SLIT
    EXPECT_EQ(node.memory_bytes, it->second.memory);
  }
  // Distances between the nodes both keep.
  if (t.has_distances() && !hwloc.distances.empty()) {
    for (int a : theirs) {
      for (int b : theirs) {
        EXPECT_EQ(static_cast<uint64_t>(t.Distance(a, b).value_or(-1)),
                  hwloc.distances.at({a, b}))
            << a << "->" << b;
      }
    }
  } else if (theirs.size() > 1) {
    EXPECT_EQ(t.has_distances(), !hwloc.distances.empty());
  }
  // CPUs and packages.
  CpuSet cpus;
  std::map<int, CpuSet> packages;
  for (const CpuInfo& cpu : t.cpus()) {
    cpus.Add(cpu.id);
    packages[cpu.package_id].Add(cpu.id);
  }
  EXPECT_EQ(cpus.ToList(), hwloc.pus.ToList());
  if (!hwloc.packages.empty()) {
    std::set<std::string> grouped;
    for (const auto& [id, set] : packages) grouped.insert(set.ToList());
    EXPECT_EQ(grouped, hwloc.packages);
  }
  // PCI locality and OS devices.
  if (!hwloc.with_io) return;
  std::set<int> all_nodes(theirs.begin(), theirs.end());
  for (const auto& [address, nodeset] : hwloc.pci_nodeset) {
    const PciDevice* d = t.FindDevice(address);
    ASSERT_NE(d, nullptr) << address.ToString() << " is hwloc's only";
    SCOPED_TRACE(address.ToString());
    std::set<std::pair<std::string, std::string>> os;
    for (const OsDevice& o : d->os_devices) os.insert({o.kind, o.name});
    EXPECT_EQ(os, hwloc.os_devices.at(address));
    std::vector<int> want;
    for (int id : nodeset) {
      if (!cpuless.count(id)) want.push_back(id);
    }
    // hwloc ignores numa_node; where it is set, ours follows it.
    if (d->numa_source == NumaSource::kSysfs) continue;
    // The whole machine, in nodes with CPUs (hwloc attaches CPU-less nodes
    // beside or above the CPUs' objects).
    if (want.size() == all_nodes.size() - cpuless.size() && want.size() > 1) {
      // hwloc attaches it to the whole machine: unknown to us, or the
      // locality of the nearest bridge that numa_node places.
      if (d->numa_source == NumaSource::kBridge) continue;
      // Local CPUs naming offline CPUs match no hwloc object, so hwloc
      // falls back to the whole machine; ours are the nodes they meet.
      if (d->local_cpus && !d->local_cpus->IsSubsetOf(hwloc.pus)) continue;
      want.clear();
    }
    EXPECT_EQ(d->numa_nodes, want) << NumaSourceName(d->numa_source);
  }
}

TEST(LstopoComparisonTest, EveryRecordedMachine) {
  const auto dir = testing::RealMachinesDir();
  ASSERT_TRUE(dir) << "tests/data/real-machines missing";
  int compared = 0;
  for (const auto& entry : fs::directory_iterator(*dir)) {
    const std::string name = entry.path().filename().string();
    if (!name.ends_with(".tar.bz2")) continue;
    SCOPED_TRACE(name);
    const auto root = testing::UnpackRealMachine(name);
    ASSERT_TRUE(root) << name;
    TempDir out;
    const auto view = RunLstopo(*root, out.path() / "lstopo.xml");
    ASSERT_TRUE(view);
    Compare(*root, *view);
    ++compared;
  }
  EXPECT_GE(compared, 6);
}

// A random machine: 1-4 nodes (sometimes no node/online, sometimes no node
// folder at all), some offline CPUs, sometimes a CPU-less memory node,
// packages of one or two nodes, devices with and without numa_node and
// local CPUs, some with a network interface.
void WriteRandomMachine(SeededRandom& rng, const fs::path& root) {
  SysfsTreeBuilder b(root);
  const int nodes = rng.Uniform(1, 4);
  const int per_node = rng.Uniform(1, 4) * 2;
  const bool numa = nodes > 1 || rng.Chance(70);
  const int nodes_per_package = rng.Chance(30) ? 2 : 1;
  int cpu = 0;
  std::vector<std::string> node_lists;
  for (int n = 0; n < nodes; ++n) {
    std::vector<int> online;
    for (int i = 0; i < per_node; ++i, ++cpu) {
      // CPU 0 stays online, as on Linux.
      if (cpu != 0 && rng.Chance(10)) {
        b.AddOfflineCpu(cpu);
      } else {
        b.AddCpu(cpu, n / nodes_per_package, cpu, std::to_string(cpu));
        online.push_back(cpu);
      }
    }
    // Some kernels leave offline CPUs in the node lists (category 3 of
    // docs/sysfs.md). Only where packages do not span nodes: hwloc cannot
    // place a node that cuts a package's online CPUs and falls back to the
    // whole machine, a failure of its own, not a reading to compare with.
    const std::string list = nodes_per_package == 1 && rng.Chance(50)
                                 ? std::to_string(n * per_node) + "-" +
                                       std::to_string((n + 1) * per_node - 1)
                                 : CpuSet::Of(online).ToList();
    node_lists.push_back(list);
    if (numa) {
      b.AddNode(n, list, static_cast<uint64_t>(rng.Uniform(1, 64)) * kGiB);
    }
  }
  int total_nodes = nodes;
  if (numa && rng.Chance(25)) {
    b.AddNode(nodes, "", static_cast<uint64_t>(rng.Uniform(1, 64)) * kGiB);
    ++total_nodes;
  }
  if (numa) {
    const auto n = static_cast<size_t>(total_nodes);
    std::vector<std::vector<int>> slit(n, std::vector<int>(n, 10));
    for (size_t a = 0; a < n; ++a) {
      for (size_t c = a + 1; c < n; ++c) {
        const int d = rng.Uniform(11, 40);
        slit[a][c] = slit[c][a] = d;
      }
    }
    b.SetDistances(slit);
  }
  const int devices = rng.Uniform(0, 6);
  std::vector<std::string> functions;
  for (int i = 0; i < devices; ++i) {
    const int node = rng.Uniform(0, nodes - 1);
    char bus[16];
    std::snprintf(bus, sizeof(bus), "%02x", 0x10 * (node + 1) + i);
    PciFunctionSpec spec;
    spec.host_bridge = std::string("pci0000:") + bus;
    char address[32];
    std::snprintf(address, sizeof(address), "0000:%s:00.0", bus);
    spec.path = {address};
    spec.class_code = rng.Chance(50) ? 0x020000 : 0x030200;
    if (rng.Chance(70)) spec.numa_node = numa && rng.Chance(80) ? node : -1;
    if (rng.Chance(80)) {
      spec.local_cpulist = rng.Chance(80)
                               ? node_lists[static_cast<size_t>(node)]
                               : "0-" + std::to_string(cpu - 1);
    }
    b.AddPciFunction(spec);
    functions.emplace_back(address);
  }
  SysfsTreeBuilder::FinishOptions options;
  options.node_online_file = rng.Chance(75);
  options.cpu_online_file = rng.Chance(85);
  b.Finish(options);
  b.WriteFile(
      "../proc/meminfo",
      "MemTotal:       " + std::to_string(rng.Uniform(1, 64) << 20) + " kB\n");
  for (size_t i = 0; i < functions.size(); ++i) {
    if (rng.Chance(50)) {
      b.AddClassDevice("net", "eth" + std::to_string(i), functions[i], "net");
    }
  }
}

TEST(LstopoComparisonTest, SeededRandomTrees) {
  const int trees =
      static_cast<int>(testing::EnvOr("TOPOLOGY_LSTOPO_TREES", 200));
  const auto seed =
      static_cast<uint64_t>(testing::EnvOr("TOPOLOGY_TEST_SEED", 20261124));
  SeededRandom rng(seed);
  for (int i = 0; i < trees; ++i) {
    SCOPED_TRACE("tree " + std::to_string(i) + " of seed " +
                 std::to_string(seed));
    TempDir dir;
    WriteRandomMachine(rng, dir.path() / "root");
    const auto view = RunLstopo(dir.path() / "root", dir.path() / "lstopo.xml");
    if (view) Compare(dir.path() / "root", *view);
    if (HasFailure()) {
      // The trace names the tree and seed; TOPOLOGY_LSTOPO_KEEP=<dir> keeps
      // the tree for a closer look.
      if (const char* keep = std::getenv("TOPOLOGY_LSTOPO_KEEP")) {
        fs::copy(dir.path(), keep,
                 fs::copy_options::recursive | fs::copy_options::copy_symlinks);
      }
      return;
    }
  }
}

}  // namespace
}  // namespace topology
