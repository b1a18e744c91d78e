#include "pci_path.h"

#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace topology::internal {
namespace {

using ::testing::ElementsAre;

std::vector<std::string> Strings(const std::vector<PciAddress>& addresses) {
  std::vector<std::string> out;
  out.reserve(addresses.size());
  for (const PciAddress& a : addresses) out.push_back(a.ToString());
  return out;
}

TEST(PciPathTest, ParsesHostBridgeAndBridgeChain) {
  const PciPath path = ParsePciPath(
      "devices/pci0000:17/0000:17:00.0/0000:18:00.0/0000:19:08.0/0000:1b:00.0");
  EXPECT_EQ(path.host_bridge, "pci0000:17");
  EXPECT_THAT(Strings(path.bridges_root_first),
              ElementsAre("0000:17:00.0", "0000:18:00.0", "0000:19:08.0"));
  EXPECT_EQ(path.bridge_dirs.back(),
            "devices/pci0000:17/0000:17:00.0/0000:18:00.0/0000:19:08.0");
}

TEST(PciPathTest, SkipsNonDeviceComponents) {
  const PciPath path = ParsePciPath(
      "devices/LNXSYSTM:00/pci10000:00/0000:17:00.0:pcie001/10000:00:04.0");
  EXPECT_EQ(path.host_bridge, "pci10000:00");
  EXPECT_TRUE(path.bridges_root_first.empty());
}

TEST(PciPathTest, PlainDirectoryHasNoChain) {
  const PciPath path = ParsePciPath("bus/pci/devices/0004:05:00.0");
  EXPECT_EQ(path.host_bridge, "");
  EXPECT_TRUE(path.bridges_root_first.empty());
}

std::string ConfigWithPcieCap(int type) {
  std::string config(256, '\0');
  config[0x06] = 0x10;  // capability list present
  config[0x34] = 0x40;
  config[0x40] = 0x01;  // power management
  config[0x41] = 0x60;
  config[0x60] = 0x10;  // PCI Express
  config[0x61] = 0x00;
  config[0x62] = static_cast<char>((type << 4) | 0x2);
  return config;
}

TEST(PciPathTest, ReadsPortTypeFromCapabilityList) {
  EXPECT_EQ(ParsePciePortType(ConfigWithPcieCap(5)),
            PciePortType::kUpstreamPort);
  EXPECT_EQ(ParsePciePortType(ConfigWithPcieCap(6)),
            PciePortType::kDownstreamPort);
  EXPECT_EQ(ParsePciePortType(ConfigWithPcieCap(4)), PciePortType::kRootPort);
}

TEST(PciPathTest, PortTypeUnreadableOrMalformed) {
  // 64 bytes: what recordings and unprivileged readers get.
  EXPECT_EQ(ParsePciePortType(ConfigWithPcieCap(5).substr(0, 64)),
            std::nullopt);
  std::string loop = ConfigWithPcieCap(5);
  loop[0x60] = 0x05;  // not Express, next -> 0x40 -> 0x60 -> ...
  loop[0x61] = 0x40;
  EXPECT_EQ(ParsePciePortType(loop), std::nullopt);
  std::string no_list = ConfigWithPcieCap(5);
  no_list[0x06] = 0;
  EXPECT_EQ(ParsePciePortType(no_list), std::nullopt);
  EXPECT_EQ(ParsePciePortType(""), std::nullopt);
}

TEST(PciPathTest, SwitchPortsFromShapeWhenTypesUnknown) {
  // root port, usp, dsp, usp, dsp
  const std::vector<std::optional<PciePortType>> unknown(5);
  EXPECT_THAT(MarkSwitchUpstreamPorts(unknown),
              ElementsAre(false, true, false, true, false));
  // root port, usp, dsp
  EXPECT_THAT(
      MarkSwitchUpstreamPorts(std::vector<std::optional<PciePortType>>(3)),
      ElementsAre(false, true, false));
  // A lone bridge below the root port is not a switch.
  EXPECT_THAT(
      MarkSwitchUpstreamPorts(std::vector<std::optional<PciePortType>>(2)),
      ElementsAre(false, false));
}

TEST(PciPathTest, KnownPortTypesDecide) {
  // root port, PCIe-to-PCI bridge, legacy bridge: no switch at all.
  const std::vector<std::optional<PciePortType>> types = {
      PciePortType::kRootPort, PciePortType::kPcieToPciBridge, std::nullopt};
  EXPECT_THAT(MarkSwitchUpstreamPorts(types), ElementsAre(false, false, false));
}

}  // namespace
}  // namespace topology::internal
