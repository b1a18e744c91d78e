#include "topology/cost_model.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "status_matchers.h"

namespace topology {
namespace {

using testing::StatusIs;

PciAddress A(const char* text) { return *PciAddress::Parse(text); }

// A device below `chain` (nearest first) on `host`, local to `nodes`.
PciDevice Device(const char* address, const char* host,
                 const std::vector<const char*>& chain_nearest_first,
                 std::vector<bool> is_switch, std::vector<int> nodes) {
  PciDevice d;
  d.address = A(address);
  d.class_code = 0x030200;
  d.host_bridge = host;
  for (const char* b : chain_nearest_first) d.upstream_bridges.push_back(A(b));
  d.upstream_is_switch = std::move(is_switch);
  d.numa_nodes = std::move(nodes);
  d.numa_source =
      d.numa_nodes.empty() ? NumaSource::kUnknown : NumaSource::kSysfs;
  return d;
}

// Two sockets (SLIT 10/21). The DGX-2 shape on socket 0: root port 2b,
// switch A (2c/2d:xx), switches B (32/33) and B' (37/38) below A.
Topology DgxLike() {
  Topology::Parts parts;
  parts.numa_nodes.resize(2);
  parts.numa_nodes[0].id = 0;
  parts.numa_nodes[0].cpus = CpuSet::Of({0, 1});
  parts.numa_nodes[1].id = 1;
  parts.numa_nodes[1].cpus = CpuSet::Of({2, 3});
  parts.distances = {{10, 21}, {21, 10}};
  const std::vector<bool> two_switches = {false, true, false, true, false};
  parts.pci_devices = {
      Device("0000:34:00.0", "pci0000:2b",
             {"0000:33:00.0", "0000:32:00.0", "0000:2d:04.0", "0000:2c:00.0",
              "0000:2b:00.0"},
             two_switches, {0}),
      Device("0000:36:00.0", "pci0000:2b",
             {"0000:33:04.0", "0000:32:00.0", "0000:2d:04.0", "0000:2c:00.0",
              "0000:2b:00.0"},
             two_switches, {0}),
      Device("0000:39:00.0", "pci0000:2b",
             {"0000:38:00.0", "0000:37:00.0", "0000:2d:08.0", "0000:2c:00.0",
              "0000:2b:00.0"},
             two_switches, {0}),
      Device("0000:39:00.1", "pci0000:2b",
             {"0000:38:00.0", "0000:37:00.0", "0000:2d:08.0", "0000:2c:00.0",
              "0000:2b:00.0"},
             two_switches, {0}),
      Device("0000:2e:00.0", "pci0000:2b", {"0000:2b:00.0"}, {false}, {0}),
      Device("0000:2f:00.0", "pci0000:2b", {"0000:2b:01.0"}, {false}, {0}),
      Device("0000:57:00.0", "pci0000:4e", {"0000:4e:00.0"}, {false}, {0}),
      Device("0000:b7:00.0", "pci0000:ae", {"0000:ae:00.0"}, {false}, {1}),
      Device("0000:c0:00.0", "pci0000:c0", {}, {}, {}),
  };
  return Topology(std::move(parts));
}

class CostModelTest : public ::testing::Test {
 protected:
  DeviceCost Cost(const char* a, const char* b) {
    auto cost = model_.Between(A(a), A(b));
    EXPECT_TRUE(cost.ok()) << cost.status().ToString();
    return cost.value_or(DeviceCost{});
  }
  Topology topology_ = DgxLike();
  CostModel model_{topology_};
};

TEST_F(CostModelTest, LevelsFollowTheNvidiaLadder) {
  EXPECT_EQ(Cost("0000:34:00.0", "0000:34:00.0").level, CostLevel::kSelf);
  EXPECT_EQ(Cost("0000:39:00.0", "0000:39:00.1").level, CostLevel::kSameBoard);
  EXPECT_EQ(Cost("0000:34:00.0", "0000:36:00.0").level, CostLevel::kSameSwitch);
  EXPECT_EQ(Cost("0000:34:00.0", "0000:39:00.0").level,
            CostLevel::kMultipleSwitches);
  EXPECT_EQ(Cost("0000:2e:00.0", "0000:2f:00.0").level,
            CostLevel::kSameHostBridge);
  EXPECT_EQ(Cost("0000:34:00.0", "0000:57:00.0").level,
            CostLevel::kSameNumaNode);
  EXPECT_EQ(Cost("0000:34:00.0", "0000:b7:00.0").level, CostLevel::kCrossNuma);
}

TEST_F(CostModelTest, CostsAreOrderedAndNormalised) {
  const int self = Cost("0000:34:00.0", "0000:34:00.0").cost;
  const int board = Cost("0000:39:00.0", "0000:39:00.1").cost;
  const int pix = Cost("0000:34:00.0", "0000:36:00.0").cost;
  const int pxb = Cost("0000:34:00.0", "0000:39:00.0").cost;
  const int phb = Cost("0000:2e:00.0", "0000:2f:00.0").cost;
  const int node = Cost("0000:34:00.0", "0000:57:00.0").cost;
  const int sys = Cost("0000:34:00.0", "0000:b7:00.0").cost;
  EXPECT_EQ(self, 0);
  EXPECT_LT(self, board);
  EXPECT_LT(board, pix);
  EXPECT_LT(pix, pxb);
  EXPECT_LT(pxb, phb);
  EXPECT_LT(phb, node);
  EXPECT_LT(node, sys);
  EXPECT_EQ(sys, 100);  // the largest SLIT of the machine
}

TEST_F(CostModelTest, SymmetricEverywhere) {
  const auto& devices = topology_.pci_devices();
  for (size_t i = 0; i < devices.size(); ++i) {
    for (size_t j = 0; j < devices.size(); ++j) {
      const DeviceCost ij = model_.BetweenIndexes(i, j);
      const DeviceCost ji = model_.BetweenIndexes(j, i);
      EXPECT_EQ(ij.level, ji.level) << i << "," << j;
      EXPECT_EQ(ij.cost, ji.cost) << i << "," << j;
      EXPECT_GE(ij.cost, 0);
      EXPECT_LE(ij.cost, 100);
    }
  }
}

TEST_F(CostModelTest, UnknownLocalityIsAssumedAndFlagged) {
  const DeviceCost c = Cost("0000:34:00.0", "0000:c0:00.0");
  EXPECT_EQ(c.level, CostLevel::kCrossNuma);
  EXPECT_FALSE(c.locality_known);
  EXPECT_GE(c.cost, CostModel::kCrossNumaMinCost);
}

TEST_F(CostModelTest, DeviceAndNodeCosts) {
  EXPECT_EQ(*model_.DeviceToNode(A("0000:34:00.0"), 0), 0);
  EXPECT_EQ(*model_.DeviceToNode(A("0000:34:00.0"), 1), 100);
  EXPECT_EQ(*model_.DeviceToNode(A("0000:c0:00.0"), 0), 50);  // mean of 0, 100
  EXPECT_EQ(*model_.NodeToNode(1, 0), 100);
  EXPECT_EQ(*model_.NodeToNode(1, 1), 0);
  EXPECT_THAT(model_.NodeToNode(0, 7), StatusIs(StatusCode::kNotFound));
  EXPECT_THAT(model_.DeviceToNode(A("0000:99:00.0"), 0),
              StatusIs(StatusCode::kNotFound));
  EXPECT_THAT(model_.Between(A("0000:34:00.0"), A("0000:99:00.0")),
              StatusIs(StatusCode::kNotFound));
}

TEST_F(CostModelTest, DevicesOnOnePathShareItsId) {
  const auto& devices = topology_.pci_devices();
  const auto index = [&](const char* address) {
    for (size_t i = 0; i < devices.size(); ++i) {
      if (devices[i].address == A(address)) return i;
    }
    ADD_FAILURE() << address << " is not in the topology";
    return size_t{0};
  };
  // Switch B's two GPUs and the two functions below switch B' share their
  // paths; the root ports' devices and the lone host bridge's do not.
  EXPECT_EQ(model_.PathId(index("0000:34:00.0")),
            model_.PathId(index("0000:36:00.0")));
  EXPECT_EQ(model_.PathId(index("0000:39:00.0")),
            model_.PathId(index("0000:39:00.1")));
  EXPECT_NE(model_.PathId(index("0000:34:00.0")),
            model_.PathId(index("0000:39:00.0")));
  EXPECT_NE(model_.PathId(index("0000:2e:00.0")),
            model_.PathId(index("0000:2f:00.0")));
  // In general: one id exactly when the host bridge and the hops agree.
  for (size_t a = 0; a < devices.size(); ++a) {
    for (size_t b = 0; b < devices.size(); ++b) {
      const bool same_path = model_.HostBridgeId(a) == model_.HostBridgeId(b) &&
                             model_.PathHops(a) == model_.PathHops(b);
      EXPECT_EQ(model_.PathId(a) == model_.PathId(b), same_path)
          << devices[a].address.ToString() << " and "
          << devices[b].address.ToString();
    }
  }
}

TEST(CostModelScaleTest, CrossNumaCostGrowsWithSlit) {
  Topology::Parts parts;
  parts.numa_nodes.resize(3);
  for (int i = 0; i < 3; ++i) parts.numa_nodes[static_cast<size_t>(i)].id = i;
  parts.distances = {{10, 16, 32}, {16, 10, 25}, {32, 25, 10}};
  parts.pci_devices = {Device("0000:01:00.0", "pci0000:01", {}, {}, {0}),
                       Device("0000:02:00.0", "pci0000:02", {}, {}, {1}),
                       Device("0000:03:00.0", "pci0000:03", {}, {}, {2})};
  const Topology topology(std::move(parts));
  const CostModel model(topology);
  const int near = model.BetweenIndexes(0, 1).cost;
  const int mid = model.BetweenIndexes(1, 2).cost;
  const int far = model.BetweenIndexes(0, 2).cost;
  EXPECT_LT(near, mid);
  EXPECT_LT(mid, far);
  EXPECT_EQ(far, 100);
  EXPECT_EQ(near, 60 + (40 * 6 + 11) / 22);  // 60 + round(40 * 6 / 22)
}

}  // namespace
}  // namespace topology
