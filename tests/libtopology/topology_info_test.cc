// topology-info as a user runs it: exit codes, the JSON contract, text and
// DOT (rendered by Graphviz when installed).
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "topology/discovery.h"

#include "build_paths.h"
#include "real_machines.h"
#include "render.h"
#include "run_command.h"
#include "synthetic_machines.h"
#include "temp_dir.h"

namespace topology {
namespace {

using nlohmann::json;
using ::testing::HasSubstr;
using ::testing::Not;

using testing::CommandResult;
using testing::RunCommand;

class TopologyInfoTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new testing::TempDir();
    testing::WriteDualSocketGpuMachine(dir_->path() / "dual");
  }
  static void TearDownTestSuite() { delete dir_; }
  static CommandResult Info(const std::string& args) {
    return RunCommand(topology::testing::ProgramPath("topology-info") +
                      " --host-root '" + (dir_->path() / "dual").string() +
                      "' " + args);
  }
  static testing::TempDir* dir_;
};

testing::TempDir* TopologyInfoTest::dir_ = nullptr;

TEST_F(TopologyInfoTest, JsonKeepsTheContractKeys) {
  const CommandResult run = Info("--format json");
  ASSERT_EQ(run.exit_code, 0) << run.out;
  const json doc = json::parse(run.out);
  ASSERT_EQ(doc["numa_nodes"].size(), 2u);
  const json& node = doc["numa_nodes"][1];
  EXPECT_EQ(node["id"], 1);
  EXPECT_EQ(node["cpus"], "8-15,24-31");
  EXPECT_EQ(node["memory_bytes"], 256ULL << 30);
  ASSERT_EQ(node["hugepages"].size(), 2u);
  EXPECT_EQ(node["hugepages"][1]["page_size_bytes"], 1ULL << 30);
  EXPECT_EQ(node["hugepages"][1]["total_pages"], 16);
  EXPECT_EQ(node["hugepages"][1]["free_pages"], 16);
  EXPECT_EQ(node["distances"]["0"], 21);
  EXPECT_EQ(node["distances"]["1"], 10);
  ASSERT_EQ(doc["pci_devices"].size(), 32u);
  const json* gpu = nullptr;
  for (const json& d : doc["pci_devices"]) {
    if (d["address"] == "0000:1a:00.0") gpu = &d;
  }
  ASSERT_NE(gpu, nullptr);
  EXPECT_EQ((*gpu)["class"], "0x030200");
  EXPECT_EQ((*gpu)["vendor"], "0x10de");
  EXPECT_EQ((*gpu)["device"], "0x20b0");
  EXPECT_EQ((*gpu)["driver"], "nvidia");
  EXPECT_EQ((*gpu)["sysfs_numa_node"], 0);
  EXPECT_EQ((*gpu)["numa_nodes"], json::array({0}));
  EXPECT_EQ((*gpu)["numa_source"], "sysfs");
  EXPECT_EQ((*gpu)["local_cpus"], "0-7,16-23");
  EXPECT_EQ((*gpu)["upstream_bridges"],
            json::array({"0000:19:04.0", "0000:18:00.0", "0000:17:00.0"}));
}

// The command writes the JSON one element at a time; it must be exactly
// the document RenderJson builds, dumped: on generated and recorded
// machines (warnings, CPU-less nodes, no distances, no devices selected).
TEST(TopologyInfoJsonTest, StreamedJsonIsTheDocumentDumped) {
  std::vector<Topology> topologies;
  testing::TempDir dir;
  testing::WriteDualSocketGpuMachine(dir.path() / "dual");
  DiscoveryOptions options;
  options.host_root = dir.path() / "dual";
  auto dual = Discover(options);
  ASSERT_TRUE(dual.ok()) << dual.status().ToString();
  topologies.push_back(std::move(*dual));
  // The same machine with one unreadable numa_node: a warning.
  testing::WriteDualSocketGpuMachine(dir.path() / "warned");
  std::ofstream(dir.path() /
                "warned/sys/bus/pci/devices/0000:1a:00.0/numa_node")
      << "not a number\n";
  options.host_root = dir.path() / "warned";
  auto warned = Discover(options);
  ASSERT_TRUE(warned.ok()) << warned.status().ToString();
  EXPECT_FALSE(warned->warnings().empty());
  topologies.push_back(std::move(*warned));
  const auto recordings = testing::RealMachinesDir();
  ASSERT_TRUE(recordings) << "tests/data/real-machines missing";
  for (const char* xml : {"nvidiaDGX2.xml", "192em64t-24n8c2t.xml"}) {
    auto loaded = LoadHwlocXml(*recordings / xml);
    ASSERT_TRUE(loaded.ok()) << xml << ": " << loaded.status().ToString();
    topologies.push_back(std::move(*loaded));
  }
  for (const char* tarball : {"32em64t-2n8c+dax+nvme+mic+dimms.tar.bz2",
                              "2pa-pcidomain32bits.tar.bz2"}) {
    const auto root = testing::UnpackRealMachine(tarball);
    ASSERT_TRUE(root) << tarball;
    options.host_root = *root;
    auto discovered = Discover(options);
    ASSERT_TRUE(discovered.ok()) << discovered.status().ToString();
    topologies.push_back(std::move(*discovered));
  }
  bool saw_warnings = false;
  for (const Topology& topology : topologies) {
    saw_warnings = saw_warnings || !topology.warnings().empty();
    for (const std::string& classes : {std::string(), std::string("0b")}) {
      auto filter = tools::DeviceFilter::Parse(classes, "", "");
      ASSERT_TRUE(filter.ok());
      std::ostringstream streamed;
      tools::WriteJson(streamed, topology, *filter);
      EXPECT_EQ(streamed.str(),
                tools::RenderJson(topology, *filter).dump(2) + "\n")
          << topology.source() << " classes=" << classes;
    }
  }
  EXPECT_TRUE(saw_warnings);  // the case of a non-empty warnings array
}

TEST_F(TopologyInfoTest, FiltersSelectDevices) {
  const CommandResult run = Info("--format json --class 0302 --vendor 10de");
  ASSERT_EQ(run.exit_code, 0) << run.out;
  EXPECT_EQ(json::parse(run.out)["pci_devices"].size(), 8u);
  const CommandResult nics =
      Info("--format json --vendor 0x15b3 --device 101d");
  EXPECT_EQ(json::parse(nics.out)["pci_devices"].size(), 4u);
}

// --format dra: the standard DRA attributes per function, as a
// ResourceSlice's devices, each named as topology-dra-driver names it (a
// DNS label: a device name cannot be the bus id).
TEST_F(TopologyInfoTest, DraFormatPrintsTheStandardAttributes) {
  const CommandResult run = Info("--format dra --class 0302");
  ASSERT_EQ(run.exit_code, 0) << run.out;
  EXPECT_THAT(run.out, HasSubstr("- name: pci-0000-1a-00-0\n"
                                 "  attributes:\n"
                                 "    resource.kubernetes.io/pciBusID:\n"
                                 "      string: \"0000:1a:00.0\"\n"
                                 "    resource.kubernetes.io/pcieRoot:\n"
                                 "      string: \"pci0000:17\"\n"
                                 "    resource.kubernetes.io/numaNode:\n"
                                 "      int: 0\n"));
  EXPECT_THAT(run.out, Not(HasSubstr("15b3")));  // the filter holds
  EXPECT_THAT(run.out, Not(HasSubstr("omitted")));
  const CommandResult list = Info("--format dra --dra-numa-list --class 0302");
  ASSERT_EQ(list.exit_code, 0) << list.out;
  // Two sockets: no other node of the same package, so the list is [node].
  EXPECT_THAT(list.out, HasSubstr("numaNode:\n      ints: [1]\n"));

  // A VM's devices say numa_node -1: numaNode is omitted, with the reason.
  testing::TempDir vm;
  testing::WriteVmMachine(vm.path());
  const CommandResult omitted =
      RunCommand(topology::testing::ProgramPath("topology-info") +
                 " --format dra --host-root '" + vm.path().string() + "'");
  ASSERT_EQ(omitted.exit_code, 0) << omitted.out;
  EXPECT_THAT(omitted.out,
              HasSubstr("resource.kubernetes.io/numaNode: \"PCI device"));
  EXPECT_THAT(omitted.out, HasSubstr("has no NUMA affinity (numa_node=-1)"));

  const CommandResult xml =
      RunCommand(topology::testing::ProgramPath("topology-info") +
                 " --format dra --hwloc-xml /nonexistent.xml");
  EXPECT_EQ(xml.exit_code, 2) << xml.out;
  EXPECT_THAT(xml.out, HasSubstr("--format dra"));
}

TEST_F(TopologyInfoTest, TextShowsNodesDistancesAndCostMatrix) {
  const CommandResult run = Info("--class 0302");
  ASSERT_EQ(run.exit_code, 0) << run.out;
  EXPECT_THAT(run.out, HasSubstr("NUMA distances (SLIT)"));
  // node, size, pages, free
  EXPECT_THAT(run.out, HasSubstr("Huge pages"));
  EXPECT_THAT(run.out, HasSubstr("  0     1Gi         16        12\n"));
  EXPECT_THAT(run.out, HasSubstr("  1     2Mi         4096      4096\n"));
  EXPECT_THAT(run.out, HasSubstr("Device cost matrix"));
  EXPECT_THAT(run.out, HasSubstr("PIX/20"));
  EXPECT_THAT(run.out, HasSubstr("SYS/100"));
  EXPECT_THAT(run.out, HasSubstr("0000:1a:00.0"));
}

TEST_F(TopologyInfoTest, DotRendersWithGraphviz) {
  const CommandResult run = Info("--format dot");
  ASSERT_EQ(run.exit_code, 0) << run.out;
  EXPECT_THAT(run.out, HasSubstr("digraph pci"));
  EXPECT_THAT(run.out, HasSubstr("\"0000:19:04.0\" -> \"0000:1a:00.0\""));
  if (RunCommand("command -v dot").exit_code != 0) {
    GTEST_SKIP() << "graphviz not installed";
  }
  const auto file = dir_->path() / "pci.dot";
  std::ofstream(file) << run.out;
  const CommandResult svg = RunCommand("dot -Tsvg '" + file.string() + "'");
  EXPECT_EQ(svg.exit_code, 0) << svg.out;
  EXPECT_THAT(svg.out, HasSubstr("<svg"));
}

TEST_F(TopologyInfoTest, BadInputExitsTwoWithTheArgumentNamed) {
  CommandResult run = Info("--class 3");
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_THAT(run.out, HasSubstr("--class"));
  run = Info("--vendor zz");
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_THAT(run.out, HasSubstr("--vendor"));
  run = Info("--format yaml");
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_THAT(run.out, HasSubstr("--format"));
  run = RunCommand(topology::testing::ProgramPath("topology-info") +
                   " --host-root /nonexistent-root");
  EXPECT_EQ(run.exit_code, 1);
  EXPECT_THAT(run.out, HasSubstr("not a sysfs tree"));
  run = RunCommand(topology::testing::ProgramPath("topology-info") +
                   " --hwloc-xml /x.xml --host-root /");
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_THAT(run.out, Not(HasSubstr("Segmentation")));
}

// The command line: options of the command and of select in any order
// around the word select (also with POSIXLY_CORRECT, which stops GNU
// getopt's reordering), help and version on stdout with exit 0, and every
// misuse exits 2 naming the option.
TEST_F(TopologyInfoTest, CommandLineParsesAsDocumented) {
  const std::string binary = topology::testing::ProgramPath("topology-info");
  CommandResult run = RunCommand(binary + " --help");
  EXPECT_EQ(run.exit_code, 0);
  for (const char* option :
       {"--host-root", "--hwloc-xml", "--format", "--dra-numa-list", "--libpci",
        "--class", "--vendor", "--device", "--from", "--count",
        "--must-include", "--request", "--pool", "--cost-table"}) {
    EXPECT_THAT(run.out, HasSubstr(option));
  }
  run = RunCommand(binary + " --version");
  EXPECT_EQ(run.exit_code, 0);
  EXPECT_THAT(run.out, HasSubstr("topology-info "));

  const std::string pick = "--from 0000:1a:00.0,0000:1b:00.0 --count 1";
  for (const std::string& args : std::vector<std::string>{
           "select " + pick + " --format json", "--format json select " + pick,
           "--format=json select --count=1 --from=0000:1a:00.0,0000:1b:00.0"}) {
    for (const char* env : {"", "POSIXLY_CORRECT=1 "}) {
      run = RunCommand(env + binary + " --host-root '" +
                       (dir_->path() / "dual").string() + "' " + args);
      ASSERT_EQ(run.exit_code, 0) << env << args << "\n" << run.out;
      EXPECT_EQ(json::parse(run.out)["devices"].size(), 1u) << env << args;
    }
  }

  const std::pair<const char*, const char*> misuses[] = {
      {"--bogus", "--bogus"},
      {"--format", "--format needs a value"},
      {"--from 0000:1a:00.0", "--from is an option of select"},
      {"select --count x --from 0000:1a:00.0", "--count: 'x'"},
      {"select --from 0000:1a:00.0 --count 1 --request gpu=1",
       "excludes --request"},
      {"select select", "unexpected argument 'select'"},
      {"selection", "unexpected argument 'selection'"},
      {"--hwloc-xml /x.xml", "--hwloc-xml excludes --host-root"},
  };
  for (const auto& [args, message] : misuses) {
    run = Info(args);
    EXPECT_EQ(run.exit_code, 2) << args << "\n" << run.out;
    EXPECT_THAT(run.out, HasSubstr(message)) << args;
  }
  run = RunCommand(binary + " --hwloc-xml /x.xml --libpci");
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_THAT(run.out, HasSubstr("--libpci excludes --hwloc-xml"));
}

TEST(SplitCommasTest, KeepsTheNonEmptyItemsInOrder) {
  using V = std::vector<std::string>;
  EXPECT_EQ(tools::SplitCommas("a,b,,c"), (V{"a", "b", "c"}));
  EXPECT_EQ(tools::SplitCommas(",0302,"), (V{"0302"}));
  EXPECT_EQ(tools::SplitCommas("10de"), (V{"10de"}));
  EXPECT_EQ(tools::SplitCommas(""), V{});
  EXPECT_EQ(tools::SplitCommas(",,"), V{});
}

// libpci reads the same identities as the command's own pass.
TEST_F(TopologyInfoTest, LibpciGivesTheSameDocument) {
  const CommandResult own = Info("--format json");
  const CommandResult libpci = Info("--format json --libpci");
  ASSERT_EQ(own.exit_code, 0) << own.out;
  ASSERT_EQ(libpci.exit_code, 0) << libpci.out;
  EXPECT_EQ(json::parse(libpci.out), json::parse(own.out));
}

// Output that cannot be written (a full disk) is an error, not a document
// cut short that exits 0.
TEST_F(TopologyInfoTest, OutputThatCannotBeWrittenExitsOne) {
  if (!std::filesystem::exists("/dev/full")) GTEST_SKIP() << "no /dev/full";
  for (const char* format : {"json", "text", "dot"}) {
    const CommandResult run = RunCommand(
        std::string("{ ") + topology::testing::ProgramPath("topology-info") +
        " --host-root '" + (dir_->path() / "dual").string() + "' --format " +
        format + " > /dev/full; }");
    EXPECT_EQ(run.exit_code, 1) << format;
    EXPECT_THAT(run.out, HasSubstr("cannot write the output")) << format;
  }
}

// The JSON contract on every recorded machine, against hwloc's expected
// JSON, with the documented rules (docs/sysfs.md, "Differences from hwloc").
TEST(TopologyInfoRecordingsTest,
     JsonAgreesWithTheExpectedJsonOfEveryRecording) {
  const auto dir = testing::RealMachinesDir();
  ASSERT_TRUE(dir) << "tests/data/real-machines missing";
  const std::pair<const char*, const char*> machines[] = {
      {"32intel64-2p8co2t+8ve.tar.bz2", "32intel64-2p8co2t+8ve.expected.json"},
      {"32em64t-2n8c+dax+nvme+mic+dimms.tar.bz2",
       "32em64t-2n8c+dax+nvme+mic+dimms.expected.json"},
      {"2pa-pcidomain32bits.tar.bz2", "2pa-pcidomain32bits.expected.json"},
      {"nvidiagpunumanodes.tar.bz2", "nvidiagpunumanodes.expected.json"},
      {"memorysidecaches.tar.bz2", "memorysidecaches.expected.json"},
      {"128arm-2pa2n8cluster4co.tar.bz2",
       "128arm-2pa2n8cluster4co.expected.json"},
      {"nvidiaDGX2.xml", "nvidiaDGX2.expected.json"},
      {"192em64t-24n8c2t.xml", "192em64t-24n8c2t.expected.json"},
  };
  for (const auto& [data, expected_name] : machines) {
    SCOPED_TRACE(data);
    std::string source;
    if (std::string(data).ends_with(".xml")) {
      source = "--hwloc-xml '" + (*dir / data).string() + "'";
    } else {
      const auto root = testing::UnpackRealMachine(data);
      ASSERT_TRUE(root.has_value());
      source = "--host-root '" + root->string() + "'";
    }
    const CommandResult run =
        RunCommand(topology::testing::ProgramPath("topology-info") + " " +
                   source + " --format json");
    ASSERT_EQ(run.exit_code, 0) << run.out;
    const json ours = json::parse(run.out);
    std::ifstream in(*dir / expected_name);
    const json expected = json::parse(in);

    std::set<int> all;
    std::set<int> cpuless;
    std::vector<int> ids;
    for (const json& node : ours["numa_nodes"]) {
      ids.push_back(node["id"].get<int>());
      all.insert(node["id"].get<int>());
      if (node["cpus"].get<std::string>().empty())
        cpuless.insert(node["id"].get<int>());
    }
    EXPECT_EQ(ids, expected["numa_nodes"].get<std::vector<int>>());
    if (!expected["distances"].is_null()) {
      const auto nodes = expected["distances"]["nodes"].get<std::vector<int>>();
      const auto matrix = expected["distances"]["matrix"];
      for (size_t i = 0; i < nodes.size(); ++i) {
        const json& row = ours["numa_nodes"][i]["distances"];
        for (size_t j = 0; j < nodes.size(); ++j) {
          EXPECT_EQ(row[std::to_string(nodes[j])], matrix[i][j]);
        }
      }
    }
    std::map<std::string, json> by_address;
    for (const json& d : ours["pci_devices"]) by_address[d["address"]] = d;
    for (const json& entry : expected["pci"]) {
      const std::string bdf = entry["bdf"];
      ASSERT_TRUE(by_address.count(bdf)) << bdf;
      const json& d = by_address[bdf];
      const auto hwloc = entry["numa"].get<std::set<int>>();
      if (hwloc == all && all.size() == 1) {
        // One node: hwloc's answer, and ours (docs/sysfs.md).
        EXPECT_EQ(d["numa_nodes"], json::array({*all.begin()})) << bdf;
        EXPECT_THAT(
            d["numa_source"].get<std::string>(),
            ::testing::AnyOf("single_node", "sysfs", "local_cpus", "bridge"))
            << bdf;
      } else if (hwloc == all) {
        // The whole machine: unknown, by design.
        EXPECT_EQ(d["numa_nodes"], json::array()) << bdf;
        EXPECT_EQ(d["numa_source"], "unknown") << bdf;
      } else {
        std::vector<int> want;
        for (int id : hwloc) {
          if (!cpuless.count(id)) want.push_back(id);
        }
        EXPECT_EQ(d["numa_nodes"].get<std::vector<int>>(), want) << bdf;
      }
    }
  }
}

TEST_F(TopologyInfoTest, SelectPicksASwitchPairWithItsReasons) {
  const CommandResult run = Info(
      "select --from 0000:1a:00.0,0000:3d:00.0,0000:1b:00.0,0000:9a:00.0 "
      "--count 2 --format json");
  ASSERT_EQ(run.exit_code, 0) << run.out;
  const json doc = json::parse(run.out);
  EXPECT_EQ(doc["devices"], json::array({"0000:1a:00.0", "0000:1b:00.0"}));
  EXPECT_EQ(doc["cost"], 20);
  EXPECT_EQ(doc["numa_nodes"], json::array({0}));
  EXPECT_EQ(doc["explanation"]["runner_up_cost"], 50);
  const CommandResult must = Info(
      "select --from 0000:1a:00.0,0000:9a:00.0,0000:9b:00.0 --count 2 "
      "--must-include 0000:1a:00.0 --format json");
  ASSERT_EQ(must.exit_code, 0) << must.out;
  EXPECT_EQ(json::parse(must.out)["cost"], 100);
}

TEST_F(TopologyInfoTest, SelectSeveralResourcesOnTheCostGraph) {
  const CommandResult run = Info(
      "select --request gpu=2 --request nic=1 --request cpu=4 "
      "--pool gpu=0000:1a:00.0,0000:3d:00.0,0000:1b:00.0,0000:9a:00.0 "
      "--pool nic=0000:1c:00.0,0000:9c:00.0 --pool cpu=numa:0*8,numa:1*8 "
      "--format json");
  ASSERT_EQ(run.exit_code, 0) << run.out;
  const json doc = json::parse(run.out);
  EXPECT_EQ(doc["selection"]["gpu"],
            json::array({"0000:1a:00.0", "0000:1b:00.0"}));
  EXPECT_EQ(doc["selection"]["nic"], json::array({"0000:1c:00.0"}));
  EXPECT_EQ(doc["selection"]["cpu"].size(), 4u);
  EXPECT_EQ(doc["cost"], 60);
  EXPECT_EQ(doc["numa_nodes"], json::array({0}));
  // A plugin's link between two GPUs of different sockets wins.
  const auto table = dir_->path() / "links.json";
  std::ofstream(table)
      << R"([{"a":"0000:1a:00.0","b":"0000:9a:00.0","cost":-100}])";
  const CommandResult linked = Info(
      "select --request gpu=2 --pool "
      "gpu=0000:1a:00.0,0000:1b:00.0,0000:9a:00.0 "
      "--cost-table '" +
      table.string() + "' --format json");
  ASSERT_EQ(linked.exit_code, 0) << linked.out;
  EXPECT_EQ(json::parse(linked.out)["selection"]["gpu"],
            json::array({"0000:1a:00.0", "0000:9a:00.0"}));
  for (const char* bad : {"select --request gpu=2 --pool nic=0000:1c:00.0",
                          "select --request gpu=x --pool gpu=0000:1a:00.0",
                          "select --request gpu=1 --pool gpu=numa:x",
                          "select --request gpu=1 --pool gpu=0000:1a:00.0 "
                          "--cost-table /nonexistent"}) {
    const CommandResult r = Info(bad);
    EXPECT_EQ(r.exit_code, 2) << bad << "\n" << r.out;
    EXPECT_THAT(r.out, HasSubstr("--")) << bad;
  }
}

TEST_F(TopologyInfoTest, SelectBadInputNamesTheArgument) {
  CommandResult run = Info("select --from 0000:1a:00.0 --count 2");
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_THAT(run.out, HasSubstr("--count: size 2 exceeds"));
  run =
      Info("select --from 0000:1a:00.0 --count 1 --must-include 0000:9a:00.0");
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_THAT(run.out, HasSubstr("--must-include"));
  run = Info("select --from nonsense --count 1");
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_THAT(run.out, HasSubstr("--from: bad PCI address"));
  run = Info("select --from 0000:1a:00.0,0000:1a:00.0 --count 1");
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_THAT(run.out, HasSubstr("listed twice"));
  run = Info("select --count 1");
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_THAT(run.out, HasSubstr("--from"));
}

}  // namespace
}  // namespace topology

namespace topology {
namespace {

CommandResult InfoOn(const char* tarball, const std::string& args) {
  const auto root = testing::UnpackRealMachine(tarball);
  EXPECT_TRUE(root.has_value()) << tarball;
  return RunCommand(topology::testing::ProgramPath("topology-info") +
                    " --host-root '" + root.value_or("/nonexistent").string() +
                    "' " + args);
}

// OS devices per function (operators write pfNames selectors from them),
// whole 5-digit domains in the matrix, and each device's CPU affinity.
TEST(TopologyInfoRecordingsTest, OsDevicesDomainsAndCpuAffinity) {
  const CommandResult text = InfoOn("2pa-pcidomain32bits.tar.bz2", "");
  ASSERT_EQ(text.exit_code, 0) << text.out;
  EXPECT_THAT(text.out, HasSubstr("os devices: net:ens3"));
  EXPECT_THAT(text.out, HasSubstr("os devices: block:vda"));
  EXPECT_THAT(text.out, HasSubstr("d8 10000:00:04.0  "));
  EXPECT_THAT(text.out, Not(HasSubstr(" :00:04.0")));
  EXPECT_THAT(text.out, HasSubstr("NUMA    CPU affinity"));
  EXPECT_THAT(text.out, HasSubstr("PHB/40   X        0       0-1\n"));

  const CommandResult run =
      InfoOn("2pa-pcidomain32bits.tar.bz2", "--format json");
  ASSERT_EQ(run.exit_code, 0) << run.out;
  const json doc = json::parse(run.out);
  bool found = false;
  for (const json& d : doc["pci_devices"]) {
    if (d["address"] != "0000:00:03.0") continue;
    found = true;
    EXPECT_EQ(d["os_devices"],
              json::parse(R"([{"kind": "net", "name": "ens3"}])"));
    EXPECT_EQ(d["numa_nodes"], json::array({0}));
    EXPECT_EQ(d["numa_source"], "single_node");
  }
  EXPECT_TRUE(found);
}

TEST(TopologyInfoCommandTest, PrintsItsVersion) {
  const CommandResult result = RunCommand(
      topology::testing::ProgramPath("topology-info") + " --version");
  EXPECT_EQ(result.exit_code, 0) << result.out;
  EXPECT_EQ(result.out,
            std::string("topology-info ") + TOPOLOGY_PROJECT_VERSION + "\n");
}

// GPU-memory nodes stay CPU-less and say which CPUs are near them.
TEST(TopologyInfoRecordingsTest, CpulessNodesShowTheirNearCpus) {
  const CommandResult text = InfoOn("nvidiagpunumanodes.tar.bz2", "");
  ASSERT_EQ(text.exit_code, 0) << text.out;
  EXPECT_THAT(text.out, HasSubstr("250   15.0 GiB    (no CPUs; near 88-103)"));
  EXPECT_THAT(text.out, HasSubstr("255   15.0 GiB    (no CPUs; near 0-15)"));
  EXPECT_THAT(text.out,
              HasSubstr("node0/cpulist names CPUs 16-87 that are offline or "
                        "absent"));
  const CommandResult run =
      InfoOn("nvidiagpunumanodes.tar.bz2", "--format json");
  ASSERT_EQ(run.exit_code, 0) << run.out;
  const json doc = json::parse(run.out);
  for (const json& node : doc["numa_nodes"]) {
    if (node["id"] == 0) {
      EXPECT_EQ(node["cpus"], "0-15");
      EXPECT_TRUE(node["near_cpus"].is_null());
    }
    if (node["id"] == 252) {
      EXPECT_EQ(node["near_cpus"], "88-103");
    }
  }
}

}  // namespace
}  // namespace topology
