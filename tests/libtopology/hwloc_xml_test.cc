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

namespace topology {
namespace {

// The DGX-2 export rewritten the way hwloc 3 writes format 3.0 (its own
// cxlmem+dax.v3.xml test file shows the differences): version 3.0, an id on
// every object, OS device types as flags, topology-level infos.
std::string AsFormat3(const std::string& v2) {
  std::string out;
  int id = 0;
  size_t at = 0;
  while (true) {
    const size_t object = v2.find("<object type=\"", at);
    if (object == std::string::npos) break;
    const size_t type_end = v2.find('"', object + 14);
    out += v2.substr(at, type_end + 1 - at);
    out += " id=\"obj" + std::to_string(++id) + "\"";
    at = type_end + 1;
  }
  out += v2.substr(at);
  const auto replace = [&](const std::string& from, const std::string& to) {
    for (size_t p = out.find(from); p != std::string::npos;
         p = out.find(from, p + to.size())) {
      out.replace(p, from.size(), to);
    }
  };
  replace("<topology version=\"2.0\">", "<topology version=\"3.0\">");
  replace("osdev_type=\"5\"", "osdev_type=\"12\"");  // CUDA/NVML: GPU|coproc
  replace("osdev_type=\"2\"", "osdev_type=\"16\"");  // network
  replace("osdev_type=\"3\"", "osdev_type=\"32\"");  // OpenFabrics
  replace("</topology>",
          "  <info name=\"Backend\" value=\"Linux\"/>\n"
          "  <info name=\"OSName\" value=\"Linux\"/>\n</topology>");
  return out;
}

std::string ReadAll(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

TEST(HwlocXmlTest, ReadsFormat3AsHwloc3ExportsIt) {
  const auto dir = testing::RealMachinesDir();
  ASSERT_TRUE(dir) << "tests/data/real-machines missing";
  const std::string v2 = ReadAll(*dir / "nvidiaDGX2.xml");
  const std::string v3 = AsFormat3(v2);
  ASSERT_NE(v3.find("<topology version=\"3.0\">"), std::string::npos);
  ASSERT_NE(v3.find("osdev_type=\"12\""), std::string::npos);
  testing::TempDir tmp;
  const auto file = tmp.path() / "dgx2.v3.xml";
  std::ofstream(file) << v3;

  auto from_v2 = LoadHwlocXml(*dir / "nvidiaDGX2.xml");
  auto from_v3 = LoadHwlocXml(file);
  ASSERT_TRUE(from_v2.ok()) << from_v2.status().ToString();
  ASSERT_TRUE(from_v3.ok()) << from_v3.status().ToString();
  EXPECT_THAT(from_v3->warnings(),
              ::testing::Contains(HasSubstr("hwloc XML format \"3.0\"")));
  EXPECT_EQ(from_v3->NumaNodeIds(), from_v2->NumaNodeIds());
  ASSERT_EQ(from_v3->pci_devices().size(), from_v2->pci_devices().size());
  for (size_t i = 0; i < from_v2->pci_devices().size(); ++i) {
    const PciDevice& a = from_v2->pci_devices()[i];
    const PciDevice& b = from_v3->pci_devices()[i];
    EXPECT_EQ(a.address, b.address);
    EXPECT_EQ(a.numa_nodes, b.numa_nodes);
    EXPECT_EQ(a.upstream_bridges, b.upstream_bridges);
    EXPECT_EQ(a.os_devices, b.os_devices) << a.address.ToString();
  }
  // The GPUs' NVML devices, coprocessors in either format.
  EXPECT_THAT(from_v3->FindDevice(A("0000:34:00.0"))->os_devices,
              ::testing::Contains(OsDevice{"coproc", "nvml0"}));
}

TEST(HwlocXmlTest, NamesTheFormatItCannotRead) {
  testing::TempDir tmp;
  const auto future = tmp.path() / "future.xml";
  std::ofstream(future) << "<?xml version=\"1.0\"?>\n<topology version=\"4.1\">"
                           "\n</topology>\n";
  EXPECT_THAT(LoadHwlocXml(future),
              StatusIs(StatusCode::kInvalidArgument,
                       ::testing::AllOf(HasSubstr("format \"4.1\""),
                                        HasSubstr("--export-xml-flags 2"))));
  const auto garbage = tmp.path() / "garbage.xml";
  std::ofstream(garbage) << "hello";
  EXPECT_THAT(LoadHwlocXml(garbage),
              StatusIs(StatusCode::kInvalidArgument,
                       HasSubstr("not an hwloc XML export")));
  EXPECT_THAT(
      LoadHwlocXml(tmp.path()),
      StatusIs(StatusCode::kInvalidArgument, HasSubstr("not a regular file")));
}

}  // namespace
}  // namespace topology
