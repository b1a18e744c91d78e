// The standard DRA attributes against the cases the Kubernetes helpers
// (k8s.io/dynamic-resource-allocation/deviceattribute) define: the same
// values on good trees and the same refusals, message included, on bad ones.
#include "topology/dra_attributes.h"

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "topology/discovery.h"
#include "topology/sysfs_reader.h"
#include "topology/testing/sysfs_tree_builder.h"

#include "real_machines.h"
#include "status_matchers.h"
#include "temp_dir.h"

namespace topology::dra {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using ::topology::testing::IsOk;
using ::topology::testing::StatusIs;

class DraAttributesTest : public ::testing::Test {
 protected:
  // <root>/sys/devices/<root_dir>/<path...> with a bus/pci/devices link
  // named `bus_id` pointing at it (relative, as the kernel makes it).
  void AddDevice(const std::string& root_dir,
                 const std::vector<std::string>& path,
                 const std::string& bus_id) {
    fs::path dir = sys() / "devices" / root_dir;
    fs::path relative = fs::path("..") / ".." / ".." / "devices" / root_dir;
    for (const std::string& part : path) {
      dir /= part;
      relative /= part;
    }
    fs::create_directories(dir);
    fs::create_directories(sys() / "bus/pci/devices");
    fs::create_symlink(relative, sys() / "bus/pci/devices" / bus_id);
  }
  void Write(const std::string& relative, const std::string& text) {
    fs::create_directories((sys() / relative).parent_path());
    std::ofstream(sys() / relative) << text;
  }
  fs::path sys() const { return dir_.path() / "sys"; }
  std::unique_ptr<SysfsReader> Reader() const {
    return NewHostRootReader(dir_.path());
  }

  testing::TempDir dir_;
};

TEST_F(DraAttributesTest, PcieRootIsTheFolderBelowDevices) {
  AddDevice("pci0000:00", {"0000:00:01.0", "0000:01:00.0", "0000:02:00.0"},
            "0000:02:00.0");
  auto attribute = PcieRootAttribute(*Reader(), "0000:02:00.0");
  ASSERT_THAT(attribute, IsOk());
  EXPECT_EQ(attribute->name, "resource.kubernetes.io/pcieRoot");
  EXPECT_EQ(std::get<std::string>(attribute->value), "pci0000:00");
}

// A link written with a trailing slash (and doubled ones) is cleaned as Go's
// filepath.Join cleans it: the upstream helper publishes pci0000:17.
TEST_F(DraAttributesTest, PcieRootOfALinkEndingInASlash) {
  fs::create_directories(sys() / "devices/pci0000:17/0000:17:00.0");
  fs::create_directories(sys() / "bus/pci/devices");
  fs::create_symlink("../../../devices//pci0000:17/0000:17:00.0/",
                     sys() / "bus/pci/devices/0000:17:00.0");
  auto attribute = PcieRootAttribute(*Reader(), "0000:17:00.0");
  ASSERT_THAT(attribute, IsOk());
  EXPECT_EQ(std::get<std::string>(attribute->value), "pci0000:17");
  // Absolute, below the host root, with trailing slashes too.
  fs::create_directories(sys() / "devices/pci0000:18/0000:18:00.0");
  fs::create_symlink(sys() / "devices/pci0000:18/0000:18:00.0//",
                     sys() / "bus/pci/devices/0000:18:00.0");
  auto absolute = PcieRootAttribute(*Reader(), "0000:18:00.0");
  ASSERT_THAT(absolute, IsOk());
  EXPECT_EQ(std::get<std::string>(absolute->value), "pci0000:18");
}

TEST_F(DraAttributesTest, BusIdFormatIsTheHelpersStrictOne) {
  EXPECT_THAT(VerifyPciBusId(""), StatusIs(StatusCode::kInvalidArgument,
                                           "PCI Bus ID cannot be empty"));
  for (const char* bad : {"invalid-pci-id", "0000:3B:00.0", "10000:00:00.0",
                          "00:1f.0", "0000:00:1f.00", "0000:00:1f",
                          " 0000:00:1f.0", "0000-00:1f.0", "0000:00:1g.0"}) {
    EXPECT_THAT(VerifyPciBusId(bad),
                StatusIs(StatusCode::kInvalidArgument,
                         std::string("invalid PCI Bus ID format: ") + bad))
        << bad;
  }
  // One hex digit of function, as the helpers' pattern allows.
  EXPECT_THAT(VerifyPciBusId("0123:45:1e.7"), IsOk());
  EXPECT_THAT(VerifyPciBusId("0000:00:1f.f"), IsOk());
  auto bus_id = PciBusIdAttribute("0000:02:00.0");
  ASSERT_THAT(bus_id, IsOk());
  EXPECT_EQ(bus_id->name, "resource.kubernetes.io/pciBusID");
  EXPECT_EQ(std::get<std::string>(bus_id->value), "0000:02:00.0");
  EXPECT_THAT(PciBusIdAttribute("invalid-pci-id").status(),
              StatusIs(StatusCode::kInvalidArgument));
  EXPECT_THAT(PcieRootAttribute(*Reader(), "").status(),
              StatusIs(StatusCode::kInvalidArgument));
}

TEST_F(DraAttributesTest, PcieRootErrorsAsTheHelpers) {
  fs::create_directories(sys() / "bus/pci/devices");
  auto missing = PcieRootAttribute(*Reader(), "0000:02:00.0");
  EXPECT_THAT(missing.status(), StatusIs(StatusCode::kNotFound));
  EXPECT_THAT(missing.status().message(),
              HasSubstr("failed to resolve PCIe Root Complex for PCI Bus ID "
                        "0000:02:00.0: failed to read symlink for PCI Bus ID"));

  // The link leads somewhere other than devices/pci...
  AddDevice("invalid-pci-root", {"0000:01:00.0", "0000:02:00.0"},
            "0000:02:00.0");
  EXPECT_THAT(PcieRootAttribute(*Reader(), "0000:02:00.0").status().message(),
              HasSubstr("symlink target for PCI Bus ID 0000:02:00.0 is "
                        "invalid: it must start with"));
  // ... or to another function.
  AddDevice("pci0000:00", {"0000:01:00.0", "0000:00:13.1"}, "0000:03:00.0");
  EXPECT_THAT(PcieRootAttribute(*Reader(), "0000:03:00.0").status().message(),
              HasSubstr("symlink target for PCI Bus ID 0000:03:00.0 is "
                        "invalid: it must end with 0000:03:00.0"));
  // A link climbing out of the tree is refused the same way.
  fs::create_symlink("../../../../../etc/0000:04:00.0",
                     sys() / "bus/pci/devices/0000:04:00.0");
  EXPECT_THAT(PcieRootAttribute(*Reader(), "0000:04:00.0").status().message(),
              HasSubstr("it must start with"));
}

TEST_F(DraAttributesTest, NumaNodeIsTheRawNumaNodeFile) {
  AddDevice("pci0000:00", {"0000:00:01.0"}, "0000:00:01.0");
  Write("devices/pci0000:00/0000:00:01.0/numa_node", "1\n");
  auto node =
      NumaNodeAttribute(*Reader(), "0000:00:01.0", NumaAttributeForm::kScalar);
  ASSERT_THAT(node, IsOk());
  EXPECT_EQ(node->name, "resource.kubernetes.io/numaNode");
  EXPECT_EQ(std::get<int64_t>(node->value), 1);

  // No affinity: never published, whatever libtopology would infer.
  Write("devices/pci0000:00/0000:00:01.0/numa_node", "-1\n");
  auto none =
      NumaNodeAttribute(*Reader(), "0000:00:01.0", NumaAttributeForm::kScalar);
  EXPECT_THAT(none.status(),
              StatusIs(StatusCode::kFailedPrecondition,
                       "PCI device 0000:00:01.0 has no NUMA affinity "
                       "(numa_node=-1); do not publish the numaNode attribute "
                       "for it"));

  Write("devices/pci0000:00/0000:00:01.0/numa_node", "one\n");
  EXPECT_THAT(
      NumaNodeAttribute(*Reader(), "0000:00:01.0", NumaAttributeForm::kScalar)
          .status()
          .message(),
      HasSubstr("failed to read NUMA node for PCI Bus ID 0000:00:01.0"));
  fs::remove(sys() / "devices/pci0000:00/0000:00:01.0/numa_node");
  EXPECT_THAT(
      NumaNodeAttribute(*Reader(), "0000:00:01.0", NumaAttributeForm::kScalar)
          .status(),
      StatusIs(StatusCode::kNotFound));
  EXPECT_THAT(
      NumaNodeAttribute(*Reader(), "0000:00:01.F", NumaAttributeForm::kScalar)
          .status(),
      StatusIs(StatusCode::kInvalidArgument,
               "invalid PCI Bus ID format: 0000:00:01.F"));
}

TEST_F(DraAttributesTest, NumaNodeListAddsTheNearestNodesOfThePackage) {
  // Four nodes, two per package (sub-NUMA clustering): 0,1 on package 0 at
  // distance 11, 2,3 on package 1; a CPU-less node 4 at 11 from node 0.
  testing::SysfsTreeBuilder tree(dir_.path());
  tree.AddNode(0, "0-1", 1 << 30);
  tree.AddNode(1, "2-3", 1 << 30);
  tree.AddNode(2, "4-5", 1 << 30);
  tree.AddNode(3, "6-7", 1 << 30);
  tree.AddNode(4, "", 1 << 30);
  for (int cpu = 0; cpu < 8; ++cpu) {
    tree.AddCpu(cpu, cpu < 4 ? 0 : 1, cpu, std::to_string(cpu));
  }
  tree.SetDistances({{10, 11, 21, 21, 11},
                     {11, 10, 21, 21, 14},
                     {21, 21, 10, 11, 30},
                     {21, 21, 11, 10, 30},
                     {11, 14, 30, 30, 10}});
  testing::PciFunctionSpec near;
  near.host_bridge = "pci0000:00";
  near.path = {"0000:00:01.0", "0000:01:00.0"};
  near.numa_node = 0;
  tree.AddPciFunction(near);
  testing::PciFunctionSpec far = near;
  far.host_bridge = "pci0000:80";
  far.path = {"0000:80:01.0", "0000:81:00.0"};
  far.numa_node = 3;
  tree.AddPciFunction(far);
  tree.Finish();

  auto list =
      NumaNodeAttribute(*Reader(), "0000:01:00.0", NumaAttributeForm::kList);
  ASSERT_THAT(list, IsOk());
  // Node 1 (same package) and node 4 (no CPUs, package unknown: kept).
  EXPECT_EQ(std::get<std::vector<int64_t>>(list->value),
            (std::vector<int64_t>{0, 1, 4}));
  auto other =
      NumaNodeAttribute(*Reader(), "0000:81:00.0", NumaAttributeForm::kList);
  ASSERT_THAT(other, IsOk());
  EXPECT_EQ(std::get<std::vector<int64_t>>(other->value),
            (std::vector<int64_t>{3, 2}));

  auto root = PcieRootAttribute(*Reader(), "0000:81:00.0");
  ASSERT_THAT(root, IsOk());
  EXPECT_EQ(std::get<std::string>(root->value), "pci0000:80");

  // Without a distance file the list is the node alone.
  fs::remove(sys() / "devices/system/node/node3/distance");
  auto alone =
      NumaNodeAttribute(*Reader(), "0000:81:00.0", NumaAttributeForm::kList);
  ASSERT_THAT(alone, IsOk());
  EXPECT_EQ(std::get<std::vector<int64_t>>(alone->value),
            (std::vector<int64_t>{3}));
}

TEST_F(DraAttributesTest, NumaNodeOfAKnownNodeIsBounded) {
  fs::create_directories(sys());
  EXPECT_THAT(
      NumaNodeAttributeOfNode(*Reader(), -1, NumaAttributeForm::kScalar)
          .status(),
      StatusIs(StatusCode::kInvalidArgument,
               "invalid NUMA node -1: do not publish the numaNode attribute "
               "for a device with no NUMA affinity"));
  EXPECT_THAT(
      NumaNodeAttributeOfNode(*Reader(), 1024, NumaAttributeForm::kScalar)
          .status(),
      StatusIs(StatusCode::kInvalidArgument,
               "invalid NUMA node 1024: exceeds maximum supported (1023)"));
  auto last =
      NumaNodeAttributeOfNode(*Reader(), 1023, NumaAttributeForm::kScalar);
  ASSERT_THAT(last, IsOk());
  EXPECT_EQ(std::get<int64_t>(last->value), 1023);
  // The list form needs a distance row; without one it is the node alone.
  auto list = NumaNodeAttributeOfNode(*Reader(), 2, NumaAttributeForm::kList);
  ASSERT_THAT(list, IsOk());
  EXPECT_EQ(std::get<std::vector<int64_t>>(list->value),
            (std::vector<int64_t>{2}));
}

// On every recorded machine: pcieRoot is the host bridge folder libtopology
// found for the function, pciBusID its address, numaNode its raw numa_node
// when that is set.
TEST(DraAttributesRecordings, AgreeWithDiscoveryOnEveryRecording) {
  const auto dir = testing::RealMachinesDir();
  ASSERT_TRUE(dir) << "tests/data/real-machines missing";
  int machines = 0;
  int linked_devices = 0;
  for (const auto& entry : fs::directory_iterator(*dir)) {
    const std::string name = entry.path().filename().string();
    if (!name.ends_with(".tar.bz2")) continue;
    SCOPED_TRACE(name);
    const auto root = testing::UnpackRealMachine(name);
    ASSERT_TRUE(root) << name;
    ++machines;
    DiscoveryOptions options;
    options.host_root = *root;
    options.use_hwloc = false;
    auto topo = Discover(options);
    ASSERT_THAT(topo, IsOk());
    const auto reader = NewHostRootReader(*root);
    for (const PciDevice& device : topo->pci_devices()) {
      const std::string id = device.address.ToString();
      if (!VerifyPciBusId(id).ok()) continue;  // 5-digit (VMD) domains
      const PciAttributes attributes =
          StandardPciAttributes(*reader, id, NumaAttributeForm::kScalar);
      // Some recordings flatten bus/pci/devices into folders: no link, so
      // no pcieRoot, exactly as the Go helper (readlink fails).
      const bool linked = reader->ReadLink("bus/pci/devices/" + id).ok();
      std::string expected_root;
      if (linked) {
        auto canonical = reader->CanonicalPath("bus/pci/devices/" + id);
        ASSERT_THAT(canonical, IsOk());
        expected_root = (++fs::path(*canonical).begin())->string();
      }
      bool saw_root = false;
      for (const DeviceAttribute& attribute : attributes.attributes) {
        if (attribute.name == kPcieRootAttribute) {
          EXPECT_EQ(std::get<std::string>(attribute.value), expected_root)
              << id;
          saw_root = true;
        } else if (attribute.name == kNumaNodeAttribute) {
          ASSERT_TRUE(device.sysfs_numa_node.has_value()) << id;
          EXPECT_EQ(std::get<int64_t>(attribute.value), *device.sysfs_numa_node)
              << id;
        }
      }
      EXPECT_EQ(saw_root, linked) << id;
      for (const auto& [omitted, reason] : attributes.omitted) {
        if (omitted == kPcieRootAttribute) {
          EXPECT_THAT(reason.message(), HasSubstr("failed to read symlink"));
        }
      }
      // numaNode is omitted exactly when numa_node is absent or negative.
      const bool has_numa =
          device.sysfs_numa_node && *device.sysfs_numa_node >= 0;
      EXPECT_EQ(attributes.attributes.size(),
                1u + (linked ? 1u : 0u) + (has_numa ? 1u : 0u))
          << id;
      if (linked) ++linked_devices;
    }
  }
  EXPECT_GE(machines, 6);
  EXPECT_GT(linked_devices, 0);
}

}  // namespace
}  // namespace topology::dra
