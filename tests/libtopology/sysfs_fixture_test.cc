// topology-sysfs-fixture, the test kit's command: lists the machines it
// knows, writes each into an empty directory (a tree discovery reads
// without a warning), and refuses what would mix two trees or no machine.
#include <filesystem>
#include <fstream>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "topology/discovery.h"
#include "topology/testing/machines.h"

#include "build_paths.h"
#include "run_command.h"
#include "temp_dir.h"

namespace topology {
namespace {

using ::testing::HasSubstr;
using ::testing::IsEmpty;
using testing::RunCommand;
using testing::TempDir;

std::string Fixture(const std::string& args) {
  return topology::testing::ProgramPath("topology-sysfs-fixture") + " " + args;
}

TEST(SysfsFixtureCommandTest, ListsEveryMachineWithADescription) {
  const auto result = RunCommand(Fixture("--list"));
  ASSERT_EQ(result.exit_code, 0) << result.out;
  for (const auto& machine : testing::Machines()) {
    EXPECT_THAT(result.out,
                HasSubstr(machine.name + "\t" + machine.description));
  }
}

TEST(SysfsFixtureCommandTest, WritesEveryNamedMachineDiscoverably) {
  for (const std::string& name : testing::MachineNames()) {
    if (name == "sriov-4096") continue;  // the benchmarks' size, 4,096 dirs
    SCOPED_TRACE(name);
    TempDir dir;
    const auto root = dir.path() / "machine";
    const auto result = RunCommand(Fixture(name + " '" + root.string() + "'"));
    ASSERT_EQ(result.exit_code, 0) << result.out;
    DiscoveryOptions options;
    options.host_root = root;
    auto topo = Discover(options);
    ASSERT_TRUE(topo.ok()) << topo.status().ToString();
    EXPECT_FALSE(topo->pci_devices().empty());
  }
}

TEST(SysfsFixtureCommandTest, WritesAParameterisedSriovMachine) {
  TempDir dir;
  const auto root = dir.path() / "machine";
  ASSERT_EQ(RunCommand(Fixture("sriov-2x3 '" + root.string() + "'")).exit_code,
            0);
  DiscoveryOptions options;
  options.host_root = root;
  auto topo = Discover(options);
  ASSERT_TRUE(topo.ok()) << topo.status().ToString();
  EXPECT_THAT(topo->warnings(), IsEmpty());
  EXPECT_EQ(topo->pci_devices().size(), 2u + 2u + 6u);  // root ports, PFs, VFs
}

TEST(SysfsFixtureCommandTest, RefusesUnknownNamesAndUsedDirectories) {
  TempDir dir;
  auto result = RunCommand(
      Fixture("no-such-machine '" + (dir.path() / "m").string() + "'"));
  EXPECT_EQ(result.exit_code, 2);
  EXPECT_THAT(result.out, HasSubstr("unknown machine \"no-such-machine\""));
  EXPECT_FALSE(std::filesystem::exists(dir.path() / "m"));

  std::ofstream(dir.path() / "something") << "x";
  result = RunCommand(Fixture("vm '" + dir.path().string() + "'"));
  EXPECT_EQ(result.exit_code, 2);
  EXPECT_THAT(result.out, HasSubstr("exists and is not empty"));
  EXPECT_FALSE(std::filesystem::exists(dir.path() / "sys"));

  result = RunCommand(Fixture("vm"));
  EXPECT_EQ(result.exit_code, 2);
  EXPECT_THAT(result.out, HasSubstr("usage: topology-sysfs-fixture"));
}

}  // namespace
}  // namespace topology
