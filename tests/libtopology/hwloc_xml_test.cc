// The hwloc XML front-end, on the recorded DGX-2 and SGI UV exports: the
// worked PIX/PXB/NODE/SYS example of docs/cost-model.md.
#include <fstream>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "topology/cost_model.h"
#include "topology/discovery.h"

#include "hwloc_xml_limits.h"
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
  // Huge pages from the NUMA nodes' page types after the normal pages:
  // 2 MiB and 1 GiB, none set aside, free counts unknown to an export.
  ASSERT_EQ(t->numa_nodes()[0].hugepages.size(), 2u);
  EXPECT_EQ(t->numa_nodes()[0].hugepages[0],
            (HugePages{.page_size_bytes = 2 << 20, .total_pages = 0}));
  EXPECT_EQ(t->numa_nodes()[0].hugepages[1].page_size_bytes, 1u << 30);
  EXPECT_FALSE(t->numa_nodes()[0].hugepages[1].free_pages);

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

namespace topology {
namespace {

using internal::CheckHwlocXmlLimits;
using internal::HwlocXmlLimits;

constexpr const char* kSets =
    " cpuset=\"0x1\" complete_cpuset=\"0x1\" nodeset=\"0x1\""
    " complete_nodeset=\"0x1\"";

// A one-PU machine whose body is `inside` (objects under the Machine).
std::string Machine(const std::string& inside,
                    const std::string& version = "2.0") {
  return "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
         "<!DOCTYPE topology SYSTEM \"hwloc2.dtd\">\n"
         "<topology version=\"" +
         version + "\">\n<object type=\"Machine\" os_index=\"0\"" + kSets +
         " allowed_cpuset=\"0x1\" allowed_nodeset=\"0x1\">\n"
         "<object type=\"NUMANode\" os_index=\"0\"" +
         kSets + " local_memory=\"1000\"/>\n" + inside +
         "</object>\n</topology>\n";
}

StatusOr<Topology> LoadText(const std::string& text) {
  testing::TempDir tmp;
  const auto file = tmp.path() / "shape.xml";
  std::ofstream(file) << text;
  return LoadHwlocXml(file);
}

// 30,000 nested groups overflow hwloc's recursive importer (SIGSEGV in
// either format before the pre-scan); the file is refused first.
TEST(HwlocXmlLimitsTest, DeepNestingIsRefusedBeforeHwlocSeesIt) {
  std::string nested;
  for (int i = 0; i < 30000; ++i) {
    nested += std::string("<object type=\"Group\"") + kSets + ">";
  }
  nested += std::string(R"(<object type="PU" os_index="0")") + kSets + "/>";
  for (int i = 0; i < 30000; ++i) nested += "</object>";
  for (const char* version : {"2.0", "3.0"}) {
    EXPECT_THAT(LoadText(Machine(nested, version)),
                StatusIs(StatusCode::kInvalidArgument,
                         ::testing::AllOf(HasSubstr("shape.xml"),
                                          HasSubstr("nested deeper than 128"),
                                          HasSubstr("line 6"))))
        << version;
  }
  // 100 levels are fine.
  std::string fine;
  for (int i = 0; i < 100; ++i) {
    fine += std::string("<object type=\"Group\"") + kSets + ">";
  }
  fine += std::string(R"(<object type="PU" os_index="0")") + kSets + "/>";
  for (int i = 0; i < 100; ++i) fine += "</object>";
  auto loaded = LoadText(Machine(fine));
  ASSERT_THAT(loaded.status(), testing::IsOk());
  EXPECT_EQ(loaded->cpus().size(), 1U);
}

// 30,000 siblings took hwloc 15 s (its insertion is quadratic): more than
// 4,096 children of one element are refused at once.
TEST(HwlocXmlLimitsTest, TooManySiblingsAreRefused) {
  std::string flat;
  for (int i = 0; i < 30000; ++i) {
    flat += R"(<object type="Core" os_index=")" + std::to_string(i) + "\"" +
            kSets + "/>\n";
  }
  EXPECT_THAT(LoadText(Machine(flat)),
              StatusIs(StatusCode::kInvalidArgument,
                       HasSubstr("more than 4096 children")));
}

// hwloc sizes its bitmaps by the largest PU or node index: 2^32-1 cost
// 528 MB; strtoul reads "-1" as the same.
TEST(HwlocXmlLimitsTest, IndicesOutOfRangeAreRefused) {
  for (const char* index : {"4294967295", "65536", "-1", "1e9"}) {
    EXPECT_THAT(
        LoadText(Machine(std::string("<object type=\"PU\" os_index=\"") +
                         index + "\"" + kSets + "/>\n")),
        StatusIs(StatusCode::kInvalidArgument, HasSubstr("PU os_index")))
        << index;
  }
  EXPECT_THAT(
      LoadText(Machine(
          "<object type=\"PU\" os_index=\"0\"" + std::string(kSets) +
          "/>\n<distances2 type=\"NUMANode\" nbobjs=\"1000000\" kind=\"5\" "
          "indexing=\"os\">\n<indexes length=\"1\">0</indexes>\n"
          "</distances2>\n")),
      StatusIs(StatusCode::kInvalidArgument,
               HasSubstr("distance matrix of 1000000 objects")));
  // A core's index goes into no bitmap (ARM cores number from their MPIDR).
  auto core = LoadText(
      Machine(R"(<object type="Core" os_index="524288")" + std::string(kSets) +
              R"(><object type="PU" os_index="0")" + kSets + "/></object>\n"));
  EXPECT_THAT(core.status(), testing::IsOk());
}

TEST(HwlocXmlLimitsTest, ShapesNoExportHasAreRefused) {
  HwlocXmlLimits small;
  small.max_objects = 3;
  small.max_elements = 5;
  const std::string three = "<topology><object/><object/><object/></topology>";
  EXPECT_THAT(CheckHwlocXmlLimits(three, small), testing::IsOk());
  EXPECT_THAT(
      CheckHwlocXmlLimits(
          "<topology><object/><object/><object/><object/></topology>", small),
      StatusIs(StatusCode::kInvalidArgument, HasSubstr("more than 3 objects")));
  EXPECT_THAT(CheckHwlocXmlLimits("<topology><info/><info/><info/><info/>"
                                  "<info/></topology>",
                                  small),
              StatusIs(StatusCode::kInvalidArgument,
                       HasSubstr("more than 5 elements")));
  for (const char* bad :
       {"<!DOCTYPE topology [<!ENTITY a \"aaaa\">]><topology/>",
        "<topology><!-- never closed", "<topology><object type=\"PU",
        "<topology><object type=PU/></topology>", "<topology></a></b>",
        "<topology>< object/></topology>"}) {
    EXPECT_THAT(CheckHwlocXmlLimits(bad),
                StatusIs(StatusCode::kInvalidArgument))
        << bad;
  }
  // Quoted '>' and '/>' inside values, comments and declarations are text.
  EXPECT_THAT(CheckHwlocXmlLimits("<?xml version=\"1.0\"?><!-- <object> -->"
                                  "<topology><info name=\"a>b\" value='/>'/>"
                                  "</topology>"),
              testing::IsOk());
}

// A Cluster-on-Die export without its groups (as hwloc's own
// 28intel64-2p2g7c-CoD.nogroups.v1tov2.xml): two nodes hang under each
// package with the package's cpuset. hwloc gives both nodes the package's
// CPUs; so do we, as the sysfs reader does for nodes listing the same CPUs,
// and the package's devices are near both.
TEST(HwlocXmlTest, NodesSharingAPackagesCpusBothKeepThem) {
  const auto sets = [](const char* cpus, const char* nodes) {
    return std::string(" cpuset=\"") + cpus + "\" complete_cpuset=\"" + cpus +
           "\" nodeset=\"" + nodes + "\" complete_nodeset=\"" + nodes + "\"";
  };
  std::string text =
      "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<topology version=\"2.0\">\n"
      "<object type=\"Machine\" os_index=\"0\"" +
      sets("0x0fffffff", "0x0000000f") +
      " allowed_cpuset=\"0x0fffffff\" allowed_nodeset=\"0x0000000f\">\n";
  for (int package = 0; package < 2; ++package) {
    const char* cpus = package == 0 ? "0x00003fff" : "0x0fffc000";
    const char* nodes = package == 0 ? "0x00000003" : "0x0000000c";
    text += R"(<object type="Package" os_index=")" + std::to_string(package) +
            "\"" + sets(cpus, nodes) + ">\n";
    for (int n = 0; n < 2; ++n) {
      const int id = package * 2 + n;
      char node_set[16];
      std::snprintf(node_set, sizeof(node_set), "0x%08x", 1U << id);
      text += R"(<object type="NUMANode" os_index=")" + std::to_string(id) +
              "\"" + sets(cpus, node_set) + " local_memory=\"1000\"/>\n";
    }
    for (int cpu = package * 14; cpu < package * 14 + 14; ++cpu) {
      char cpu_set[16];
      std::snprintf(cpu_set, sizeof(cpu_set), "0x%08x", 1U << cpu);
      text += R"(<object type="PU" os_index=")" + std::to_string(cpu) + "\"" +
              sets(cpu_set, nodes) + "/>\n";
    }
    char bus[64];
    std::snprintf(bus, sizeof(bus), "0000:%02x", package * 0x80);
    text += std::string(
                "<object type=\"Bridge\" bridge_type=\"0-1\" "
                "depth=\"0\" bridge_pci=\"") +
            bus + ":[00-10]\">\n<object type=\"PCIDev\" pci_busid=\"" + bus +
            ":00.0\" pci_type=\"0200 [8086:1572] [8086:0000] 01\"/>\n" +
            "</object>\n</object>\n";
  }
  text += "</object>\n</topology>\n";
  auto t = LoadText(text);
  ASSERT_THAT(t.status(), testing::IsOk());
  ASSERT_EQ(t->numa_nodes().size(), 4U);
  EXPECT_EQ(t->FindNumaNode(0)->cpus.ToList(), "0-13");
  EXPECT_EQ(t->FindNumaNode(1)->cpus.ToList(), "0-13");
  EXPECT_EQ(t->FindNumaNode(2)->cpus.ToList(), "14-27");
  EXPECT_EQ(t->FindNumaNode(3)->cpus.ToList(), "14-27");
  EXPECT_THAT(
      t->warnings(),
      ::testing::Contains(HasSubstr("nodes 0 and 1 both hold CPUs 0-13")));
  EXPECT_THAT(t->FindDevice(A("0000:00:00.0"))->numa_nodes, ElementsAre(0, 1));
  EXPECT_THAT(t->FindDevice(A("0000:80:00.0"))->numa_nodes, ElementsAre(2, 3));
  // Each shared CPU is counted once, on the lower node.
  for (const CpuInfo& cpu : t->cpus()) {
    EXPECT_EQ(cpu.numa_node, cpu.id < 14 ? 0 : 2) << cpu.id;
  }
}

}  // namespace
}  // namespace topology
