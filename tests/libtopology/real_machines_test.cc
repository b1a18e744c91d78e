// Discovery on the recorded real machines, compared with what hwloc 2.9
// computes for them (the *.expected.json beside each recording).
//
// Where hwloc differs from sysfs by design, the comparison follows our
// documented behaviour (docs/sysfs.md, "Differences from hwloc"):
//  * hwloc's "numa" of a device is the nodeset of the CPU-side object its PCI
//    tree hangs from; when that is every node, locality is unknown and we
//    report [] with source "unknown".
//  * that nodeset includes CPU-less memory nodes attached to the same package
//    (GPU memory); our affinity names the nodes with CPUs, plus a CPU-less node
//    only when numa_node says so.
//  * hwloc's upstream bridge is the nearest bridge listed in bus/pci/devices;
//    ours comes from the sysfs path and may name an unlisted bridge first.
//  * hwloc drops devices of 32-bit PCI domains (Debian's build) and bridges
//    with bus numbers 0; we report them.
#include "real_machines.h"

#include <fstream>
#include <set>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "topology/discovery.h"

namespace topology {
namespace {

using nlohmann::json;

struct Machine {
  const char* data;                        // tarball or XML
  const char* expected;                    // expected JSON
  std::vector<const char*> extra_devices;  // reported by us, dropped by hwloc
};

std::ostream& operator<<(std::ostream& os, const Machine& m) {
  return os << m.data;
}

const Machine kMachines[] = {
    {"32intel64-2p8co2t+8ve.tar.bz2",
     "32intel64-2p8co2t+8ve.expected.json",
     {}},
    {"32em64t-2n8c+dax+nvme+mic+dimms.tar.bz2",
     "32em64t-2n8c+dax+nvme+mic+dimms.expected.json",
     {"0000:00:11.0"}},
    {"2pa-pcidomain32bits.tar.bz2",
     "2pa-pcidomain32bits.expected.json",
     {"10000:00:00.0", "10000:00:04.0"}},
    {"nvidiagpunumanodes.tar.bz2", "nvidiagpunumanodes.expected.json", {}},
    {"memorysidecaches.tar.bz2", "memorysidecaches.expected.json", {}},
    {"128arm-2pa2n8cluster4co.tar.bz2",
     "128arm-2pa2n8cluster4co.expected.json",
     {}},
    {"nvidiaDGX2.xml", "nvidiaDGX2.expected.json", {}},
    {"192em64t-24n8c2t.xml", "192em64t-24n8c2t.expected.json", {}},
};

class RealMachineTest : public ::testing::TestWithParam<Machine> {
 protected:
  void SetUp() override {
    const auto dir = testing::RealMachinesDir();
    ASSERT_TRUE(dir) << "tests/data/real-machines missing";
    const std::string data = GetParam().data;
    std::ifstream in(*dir / GetParam().expected);
    ASSERT_TRUE(in) << "cannot read " << GetParam().expected;
    expected_ = json::parse(in);
    StatusOr<Topology> topology = NotFoundError("unset");
    if (data.ends_with(".xml")) {
      topology = LoadHwlocXml(*dir / data);
    } else {
      const auto root = testing::UnpackRealMachine(data);
      ASSERT_TRUE(root.has_value()) << "cannot unpack " << data;
      DiscoveryOptions options;
      options.host_root = *root;
      topology = Discover(options);
    }
    ASSERT_TRUE(topology.ok()) << topology.status().ToString();
    topology_ = *std::move(topology);
  }

  json expected_;
  Topology topology_;
};

TEST_P(RealMachineTest, NumaNodeIds) {
  EXPECT_EQ(topology_.NumaNodeIds(),
            expected_["numa_nodes"].get<std::vector<int>>());
}

TEST_P(RealMachineTest, DistanceMatrix) {
  const json& distances = expected_["distances"];
  if (distances.is_null()) {
    // hwloc keeps no matrix for one node; sysfs still prints "10".
    ASSERT_LE(topology_.numa_nodes().size(), 1u);
    return;
  }
  const auto nodes = distances["nodes"].get<std::vector<int>>();
  const auto matrix = distances["matrix"].get<std::vector<std::vector<int>>>();
  ASSERT_TRUE(topology_.has_distances());
  for (size_t i = 0; i < nodes.size(); ++i) {
    for (size_t j = 0; j < nodes.size(); ++j) {
      EXPECT_EQ(topology_.Distance(nodes[i], nodes[j]), matrix[i][j])
          << "from node " << nodes[i] << " to node " << nodes[j];
    }
  }
}

TEST_P(RealMachineTest, PciDevicesAndTheirNumaAffinity) {
  std::set<int> all_nodes;
  std::set<int> cpuless;
  for (const NumaNode& node : topology_.numa_nodes()) {
    all_nodes.insert(node.id);
    if (!node.has_cpus()) cpuless.insert(node.id);
  }
  std::set<std::string> seen;
  for (const json& entry : expected_["pci"]) {
    const std::string bdf = entry["bdf"];
    seen.insert(bdf);
    const PciDevice* device = topology_.FindDevice(*PciAddress::Parse(bdf));
    ASSERT_NE(device, nullptr) << bdf << " not discovered";
    SCOPED_TRACE(bdf);

    EXPECT_EQ(device->class_code >> 8,
              std::stoul(entry["class"].get<std::string>(), nullptr, 16));
    EXPECT_EQ(device->vendor_id,
              std::stoul(entry["vendor"].get<std::string>(), nullptr, 16));
    EXPECT_EQ(device->device_id,
              std::stoul(entry["device"].get<std::string>(), nullptr, 16));
    if (entry.contains("sysfs_numa_node")) {
      if (entry["sysfs_numa_node"].is_null()) {
        EXPECT_EQ(device->sysfs_numa_node, std::nullopt);
      } else {
        EXPECT_EQ(device->sysfs_numa_node, entry["sysfs_numa_node"].get<int>());
      }
    }

    const auto hwloc_numa = entry["numa"].get<std::set<int>>();
    if (hwloc_numa == all_nodes && all_nodes.size() == 1) {
      // One node: hwloc's answer, and ours.
      EXPECT_EQ(device->numa_nodes, std::vector<int>{*all_nodes.begin()});
      EXPECT_NE(device->numa_source, NumaSource::kUnknown);
    } else if (hwloc_numa == all_nodes) {
      EXPECT_TRUE(device->numa_nodes.empty())
          << "hwloc attaches it to the whole machine";
      EXPECT_EQ(device->numa_source, NumaSource::kUnknown);
    } else {
      std::vector<int> want;
      for (int id : hwloc_numa) {
        if (!cpuless.count(id)) want.push_back(id);
      }
      EXPECT_EQ(device->numa_nodes, want);
      EXPECT_NE(device->numa_source, NumaSource::kUnknown);
    }

    // hwloc's upstream bridge is the nearest one listed as a device.
    const PciAddress* nearest_listed = nullptr;
    for (const PciAddress& b : device->upstream_bridges) {
      if (topology_.FindDevice(b) != nullptr) {
        nearest_listed = &b;
        break;
      }
    }
    if (entry["upstream_bridge"].is_null()) {
      EXPECT_EQ(nearest_listed, nullptr);
    } else {
      ASSERT_NE(nearest_listed, nullptr);
      EXPECT_EQ(nearest_listed->ToString(), entry["upstream_bridge"]);
    }
  }
  std::vector<std::string> extras;
  for (const PciDevice& d : topology_.pci_devices()) {
    if (!seen.count(d.address.ToString()))
      extras.push_back(d.address.ToString());
  }
  std::vector<std::string> documented(GetParam().extra_devices.begin(),
                                      GetParam().extra_devices.end());
  EXPECT_EQ(extras, documented);
}

TEST_P(RealMachineTest, CpuCountMatchesHwloc) {
  EXPECT_EQ(static_cast<int>(topology_.cpus().size()),
            expected_["pus"].get<int>());
}

INSTANTIATE_TEST_SUITE_P(Recordings, RealMachineTest,
                         ::testing::ValuesIn(kMachines),
                         [](const ::testing::TestParamInfo<Machine>& param) {
                           std::string name = param.param.data;
                           name = name.substr(0, name.find('.'));
                           for (char& c : name) {
                             if (!std::isalnum(static_cast<unsigned char>(c)))
                               c = '_';
                           }
                           return name;
                         });

// Class, ids and revision are the same whether libpci or the pass reads
// them (the pass reads those libpci has no time for). These kernels predate
// the revision file: both take byte 8 of config space.
TEST(RealMachineIdentityTest, TheSameWithoutLibpci) {
  for (const Machine& machine : kMachines) {
    const std::string data = machine.data;
    if (data.ends_with(".xml")) continue;  // an hwloc export
    SCOPED_TRACE(data);
    const auto root = testing::UnpackRealMachine(data);
    ASSERT_TRUE(root.has_value());
    DiscoveryOptions options;
    options.host_root = *root;
    const auto with = Discover(options);
    options.use_libpci = false;
    options.use_hwloc = false;
    const auto without = Discover(options);
    ASSERT_TRUE(with.ok()) << with.status().ToString();
    ASSERT_TRUE(without.ok()) << without.status().ToString();
    ASSERT_EQ(without->pci_devices().size(), with->pci_devices().size());
    for (size_t i = 0; i < with->pci_devices().size(); ++i) {
      const PciDevice& x = with->pci_devices()[i];
      const PciDevice& y = without->pci_devices()[i];
      SCOPED_TRACE(x.address.ToString());
      EXPECT_EQ(x.class_code, y.class_code);
      EXPECT_EQ(x.vendor_id, y.vendor_id);
      EXPECT_EQ(x.device_id, y.device_id);
      EXPECT_EQ(x.subsystem_vendor_id, y.subsystem_vendor_id);
      EXPECT_EQ(x.subsystem_device_id, y.subsystem_device_id);
      EXPECT_EQ(x.revision, y.revision);
    }
  }
}

}  // namespace
}  // namespace topology
