// The hwloc XML front-end, on the recorded DGX-2 and SGI UV exports: the
// worked PIX/PXB/NODE/SYS example of docs/cost-model.md.
#include <fstream>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "topology/cost_model.h"
#include "topology/discovery.h"

#include "real_machines.h"
#include "status_matchers.h"
#include "temp_dir.h"

namespace topology {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using testing::StatusIs;

PciAddress A(const char* text) { return *PciAddress::Parse(text); }

StatusOr<Topology> LoadRecording(const char* name) {
  const auto dir = testing::RealMachinesDir();
  if (!dir) return NotFoundError("recordings absent");
  return LoadHwlocXml(*dir / name);
}

TEST(HwlocXmlTest, Dgx2WorkedExample) {
  ASSERT_TRUE(testing::RealMachinesDir()) << "tests/data/real-machines missing";
  auto t = LoadRecording("nvidiaDGX2.xml");
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  const PciDevice* gpu = t->FindDevice(A("0000:34:00.0"));
  ASSERT_NE(gpu, nullptr);
  EXPECT_EQ(gpu->vendor_id, 0x10de);
  EXPECT_EQ(gpu->host_bridge, "pci0000:2b");
  ASSERT_EQ(gpu->upstream_bridges.size(), 5u);
  EXPECT_EQ(gpu->upstream_bridges[0].ToString(), "0000:33:00.0");
  EXPECT_EQ(gpu->upstream_bridges[4].ToString(), "0000:2b:00.0");
  EXPECT_THAT(gpu->upstream_is_switch,
              ElementsAre(false, true, false, true, false));
  EXPECT_THAT(gpu->numa_nodes, ElementsAre(0));

  const CostModel model(*t);
  const auto level = [&](const char* a, const char* b) {
    auto cost = model.Between(A(a), A(b));
    EXPECT_TRUE(cost.ok()) << cost.status().ToString();
    return cost.ok() ? cost->level : CostLevel::kSelf;
  };
  EXPECT_EQ(level("0000:34:00.0", "0000:36:00.0"), CostLevel::kSameSwitch);
  EXPECT_EQ(level("0000:34:00.0", "0000:39:00.0"),
            CostLevel::kMultipleSwitches);
  EXPECT_EQ(level("0000:34:00.0", "0000:57:00.0"), CostLevel::kSameNumaNode);
  EXPECT_EQ(level("0000:34:00.0", "0000:b7:00.0"), CostLevel::kCrossNuma);
}

TEST(HwlocXmlTest, ManyNodesAndDistanceLevels) {
  ASSERT_TRUE(testing::RealMachinesDir()) << "tests/data/real-machines missing";
  auto t = LoadRecording("192em64t-24n8c2t.xml");
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ(t->numa_nodes().size(), 24u);
  EXPECT_EQ(*t->Distance(0, 1), 50);
  EXPECT_EQ(*t->Distance(0, 2), 65);
  EXPECT_EQ(*t->Distance(0, 10), 79);
  EXPECT_EQ(t->MaxDistance(), 79);
  const CostModel model(*t);
  EXPECT_LT(*model.NodeToNode(0, 1), *model.NodeToNode(0, 2));
  EXPECT_EQ(*model.NodeToNode(0, 10), 100);
}

TEST(HwlocXmlTest, RejectsWhatHwlocCannotLoad) {
  testing::TempDir dir;
  const auto bad = dir.path() / "bad.xml";
  std::ofstream(bad) << "<topology><object type=\"Machine\"";
  EXPECT_THAT(LoadHwlocXml(bad),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("bad.xml")));
  EXPECT_THAT(LoadHwlocXml(dir.path() / "absent.xml"),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("absent.xml")));
}

}  // namespace
}  // namespace topology
