// Unit tests of topology-device-plugin's parts: configuration, durations,
// AER counters, health hysteresis and selectors.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "topology/common/duration.h"
#include "topology/discovery.h"
#include "topology/plugin/health.h"
#include "topology/testing/sysfs_tree_builder.h"

#include "config.h"
#include "nvidia.h"
#include "selectors.h"
#include "status_matchers.h"
#include "synthetic_machines.h"
#include "temp_dir.h"

namespace topology::device_plugin {
namespace {

using namespace std::chrono_literals;
using plugin::HealthReading;
using plugin::HealthTracker;
using plugin::ParseAerCounters;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::topology::testing::IsOk;
using ::topology::testing::StatusIs;

TEST(ConfigTest, MinimalFormFromTheDocumentation) {
  auto config = ParseConfig(R"(
resources:
  - name: example.com/gpu
    selectors:
      - vendors: ["10de"]
        classes: ["0302"]
)",
                            "config.yaml");
  ASSERT_THAT(config.status(), IsOk());
  ASSERT_EQ(config->resources.size(), 1u);
  const ResourceConfig& gpu = config->resources[0];
  EXPECT_EQ(gpu.name, "example.com/gpu");
  ASSERT_EQ(gpu.selectors.size(), 1u);
  EXPECT_THAT(gpu.selectors[0].vendors, ElementsAre(0x10de));
  EXPECT_THAT(gpu.selectors[0].classes, ElementsAre("0302"));
  EXPECT_TRUE(gpu.preferred_allocation);
  EXPECT_FALSE(gpu.exclude_topology);
}

TEST(ConfigTest, EveryFieldAndHexWithPrefix) {
  auto config = ParseConfig(R"(
resources:
  - name: example.com/vf
    selectors:
      - vendors: ["0x8086", "15B3"]
        devices: ["0X154c"]
        classes: ["02", "0x020000"]
        drivers: [vfio-pci]
        pciAddresses: ["0000:3b:02.1", "3b:02.2"]
        pfNames: ["ens1f0", "ens2f0#2-5"]
      - pciAddresses: ["0000:af:00.0"]
    deviceNodes: ["/dev/infiniband/uverbs*"]
    cdiKind: example.com/vf
    excludeTopology: true
    preferredAllocation: false
)",
                            "c");
  ASSERT_THAT(config.status(), IsOk());
  const ResourceConfig& vf = config->resources[0];
  EXPECT_THAT(vf.selectors[0].vendors, ElementsAre(0x8086, 0x15b3));
  EXPECT_THAT(vf.selectors[0].devices, ElementsAre(0x154c));
  EXPECT_THAT(vf.selectors[0].classes, ElementsAre("02", "020000"));
  EXPECT_THAT(vf.selectors[0].drivers, ElementsAre("vfio-pci"));
  ASSERT_EQ(vf.selectors[0].pci_addresses.size(), 2u);
  EXPECT_EQ(vf.selectors[0].pci_addresses[1].ToString(), "0000:3b:02.2");
  ASSERT_EQ(vf.selectors[0].pf_names.size(), 2u);
  EXPECT_FALSE(vf.selectors[0].pf_names[0].vf_range.has_value());
  EXPECT_EQ(vf.selectors[0].pf_names[1].vf_range, std::make_pair(2, 5));
  EXPECT_EQ(vf.selectors.size(), 2u);
  EXPECT_THAT(vf.device_nodes, ElementsAre("/dev/infiniband/uverbs*"));
  EXPECT_EQ(vf.cdi_kind, "example.com/vf");
  EXPECT_TRUE(vf.exclude_topology);
  EXPECT_FALSE(vf.preferred_allocation);
}

TEST(ConfigTest, ErrorsNameTheKeyPathAndPosition) {
  struct Case {
    const char* yaml;
    const char* message;
  };
  const Case cases[] = {
      {"resources:\n  - name: example.com/gpu\n    selectors:\n"
       "      - vendor: [\"10de\"]\n",
       "c.yaml:4:9: resources[0].selectors[0]: unknown key \"vendor\""},
      {"resources:\n  - name: example.com/gpu\n    selectors:\n"
       "      - vendors: [\"10dex\"]\n",
       "resources[0].selectors[0].vendors[0]: \"10dex\" is not a 16-bit hex "
       "id"},
      {"resources:\n  - name: example.com/gpu\n    selectors:\n"
       "      - classes: [\"030\"]\n",
       "resources[0].selectors[0].classes[0]"},
      {"resources:\n  - name: example.com/gpu\n    selectors:\n      - {}\n",
       "an empty selector would claim every device"},
      {"resources:\n  - name: gpu\n    selectors:\n      - vendors: [\"1\"]\n",
       "resources[0].name: the ResourceName \"gpu\" is invalid"},
      {"resources:\n  - name: example.com/gpu\n", "resources[0].selectors"},
      {"resources:\n  - name: a.com/x\n    selectors: [{vendors: [\"1\"]}]\n"
       "  - name: a.com/x\n    selectors: [{vendors: [\"2\"]}]\n",
       "resources[1].name: resource \"a.com/x\" is declared twice"},
      {"resources: [\n", "c.yaml:2:1"},
      {"", "the configuration is empty"},
      {"resources:\n  - name: a.com/x\n    selectors: [{pfNames: "
       "[\"p#3-1\"]}]\n",
       "VF range"},
      {"resources:\n  - name: a.com/x\n    selectors: [{vendors: [\"1\"]}]\n"
       "    deviceNodes: [\"dev/x\"]\n",
       "must be a path under /dev/"},
      {"resources:\n  - name: a.com/x\n    selectors: [{vendors: [\"1\"]}]\n"
       "    excludeTopology: maybe\n",
       "resources[0].excludeTopology: expected true or false"},
  };
  for (const Case& c : cases) {
    auto config = ParseConfig(c.yaml, "c.yaml");
    EXPECT_THAT(config.status(),
                StatusIs(StatusCode::kInvalidArgument, HasSubstr(c.message)))
        << c.yaml;
  }
  EXPECT_THAT(
      LoadConfig("/nonexistent/config.yaml").status(),
      StatusIs(StatusCode::kNotFound, HasSubstr("/nonexistent/config.yaml")));
  // Bounded whatever it is given: a directory, an endless device.
  EXPECT_THAT(LoadConfig("/").status(),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("directory")));
  EXPECT_THAT(LoadConfig("/dev/zero").status(),
              StatusIs(StatusCode::kInvalidArgument,
                       HasSubstr("/dev/zero is larger than 1 MiB")));
  // A key given twice: which one was meant is unknown.
  EXPECT_THAT(ParseConfig("resources:\n  - name: example.com/a\n"
                          "    name: example.com/b\n"
                          "    selectors: [{vendors: [\"10de\"]}]\n",
                          "twice.yaml")
                  .status(),
              StatusIs(StatusCode::kInvalidArgument,
                       HasSubstr("twice.yaml: resources[0]: key \"name\" is "
                                 "given twice (lines 2 and 3)")));
}

TEST(ConfigTest, PciDeviceEnvNameFollowsSriov) {
  EXPECT_EQ(PciDeviceEnvName("example.com/gpu"), "PCIDEVICE_EXAMPLE_COM_GPU");
  EXPECT_EQ(PciDeviceEnvName("intel.com/intel_sriov-netdevice"),
            "PCIDEVICE_INTEL_COM_INTEL_SRIOV_NETDEVICE");
}

TEST(DurationTest, GoSyntax) {
  using common::ParseDuration;
  EXPECT_EQ(*ParseDuration("1s"), 1s);
  EXPECT_EQ(*ParseDuration("500ms"), 500ms);
  EXPECT_EQ(*ParseDuration("1m30s"), 90s);
  EXPECT_EQ(*ParseDuration("2h"), 7200s);
  EXPECT_EQ(*ParseDuration("1.5s"), 1500ms);
  EXPECT_EQ(*ParseDuration("250us"), 250us);
  EXPECT_EQ(*ParseDuration("10ns"), 10ns);
  EXPECT_EQ(*ParseDuration("0"), 0ns);
  for (const char* bad : {"", "1", "s", "1x", "-1s", "1ss", "1.2.3s", "ms1"}) {
    EXPECT_THAT(ParseDuration(bad).status(),
                StatusIs(StatusCode::kInvalidArgument))
        << bad;
  }
}

TEST(AerTest, ParsesTheKernelFormat) {
  const char* text =
      "Undefined 0\nDLP 1\nSDES 0\nTLP 0\nFCP 0\nCmpltTO 2\nCmpltAbrt 0\n"
      "UnxCmplt 0\nRxOF 0\nMalfTLP 0\nECRC 0\nUnsupReq 0\nACSViol 0\n"
      "UncorrIntErr 0\nBlockedTLP 0\nAtomicOpBlocked 0\nTLPBlockedErr 0\n"
      "TOTAL_ERR_FATAL 3\n";
  EXPECT_EQ(*ParseAerCounters(text), 3u);
  EXPECT_EQ(*ParseAerCounters("DLP 4\nTLP 5\n"), 9u);  // older kernels
  for (const char* bad : {"", "DLP\n", "DLP x\n", "DLP -1\n", "DLP 1 2x\n",
                          "DLP 99999999999999999999\n"}) {
    EXPECT_THAT(ParseAerCounters(bad).status(), StatusIs(StatusCode::kDataLoss))
        << bad;
  }
}

TEST(NvidiaInformationTest, ParsesTheDriversFile) {
  const std::string text =
      "Model: \t\t Tesla V100-SXM2-32GB\n"
      "IRQ:   \t\t 86\n"
      "GPU UUID: \t GPU-6a1b2c3d-0000-1111-2222-333344445555\n"
      "Video BIOS: \t 88.00.80.00.01\n"
      "Bus Type: \t PCIe\n"
      "DMA Size: \t 47 bits\n"
      "DMA Mask: \t 0x7fffffffffff\n"
      "Bus Location: \t 0000:3b:00.0\n"
      "Device Minor: \t 5\n"
      "GPU Excluded:\t No\n";
  auto info = ParseNvidiaGpuInformation(text);
  ASSERT_THAT(info.status(), IsOk());
  EXPECT_EQ(info->model, "Tesla V100-SXM2-32GB");
  EXPECT_EQ(info->uuid, "GPU-6a1b2c3d-0000-1111-2222-333344445555");
  EXPECT_EQ(info->minor, 5u);
  EXPECT_EQ(info->bus_location, "0000:3b:00.0");

  for (const char* bad :
       {"", "Model: x\n", "GPU UUID: GPU-12\nDevice Minor: 256\n",
        "GPU UUID: GPU-12\nDevice Minor: -1\n",
        "GPU UUID: 12345\nDevice Minor: 1\n",
        "GPU UUID: GPU-12/../x\nDevice Minor: 1\n", "Device Minor: 1\n",
        // A field twice: which one the driver meant is unknown.
        "GPU UUID: GPU-12\nDevice Minor: 1\nDevice Minor: 2\n",
        "GPU UUID: GPU-12\nGPU UUID: GPU-13\nDevice Minor: 1\n"}) {
    EXPECT_THAT(ParseNvidiaGpuInformation(bad).status(),
                StatusIs(StatusCode::kDataLoss))
        << bad;
  }
  const std::string location_twice =
      std::string("GPU UUID: GPU-12\nDevice Minor: 1\n") +
      "Bus Location: 0000:01:00.0\nBus Location: 0000:02:00.0\n";
  EXPECT_THAT(ParseNvidiaGpuInformation(location_twice).status(),
              StatusIs(StatusCode::kDataLoss, HasSubstr("given twice")));
}

TEST(NvidiaInformationTest, OutputsAsTheNvidiaToolsNameThem) {
  plugin::ContainerAllocation allocation;
  allocation.devices.push_back({"/dev/nvidiactl", "/dev/nvidiactl", "rw"});
  AddNvidiaOutputs(
      {{.uuid = "GPU-a", .minor = 3}, {.uuid = "GPU-b", .minor = 0}},
      {"/dev/nvidiactl", "/dev/nvidia-uvm"}, allocation);
  EXPECT_EQ(allocation.envs.at("NVIDIA_VISIBLE_DEVICES"), "GPU-a,GPU-b");
  EXPECT_THAT(allocation.cdi_devices,
              ElementsAre("nvidia.com/gpu=GPU-a", "nvidia.com/gpu=GPU-b"));
  std::vector<std::string> nodes;
  for (const auto& node : allocation.devices) nodes.push_back(node.host_path);
  EXPECT_THAT(nodes, ElementsAre("/dev/nvidiactl", "/dev/nvidia3",
                                 "/dev/nvidia0", "/dev/nvidia-uvm"));
}

TEST(HealthTrackerTest, FaultsAreImmediateRecoveryNeedsQuiet) {
  HealthTracker tracker(10s);
  const PciAddress a = *PciAddress::Parse("0000:01:00.0");
  const auto t0 = HealthTracker::TimePoint{};
  HealthReading bound{.driver = "nvidia", .aer_fatal = 0u};
  EXPECT_EQ(tracker.Observe(a, bound, t0).health, plugin::Health::kHealthy);
  HealthReading unbound{.driver = std::nullopt, .aer_fatal = 0};
  auto verdict = tracker.Observe(a, unbound, t0 + 1s);
  EXPECT_EQ(verdict.health, plugin::Health::kUnhealthy);
  EXPECT_THAT(verdict.reason, HasSubstr("driver unbound"));
  // Rebound: still unhealthy until 10 s without a fault.
  verdict = tracker.Observe(a, bound, t0 + 2s);
  EXPECT_EQ(verdict.health, plugin::Health::kUnhealthy);
  EXPECT_THAT(verdict.reason, HasSubstr("recovering"));
  EXPECT_EQ(tracker.Observe(a, bound, t0 + 10s).health,
            plugin::Health::kUnhealthy);
  EXPECT_EQ(tracker.Observe(a, bound, t0 + 11s).health,
            plugin::Health::kHealthy);
  // A rising AER counter is a fault; a steady high one is not.
  HealthReading errors{.driver = "nvidia", .aer_fatal = 2};
  verdict = tracker.Observe(a, errors, t0 + 12s);
  EXPECT_EQ(verdict.health, plugin::Health::kUnhealthy);
  EXPECT_THAT(verdict.reason, HasSubstr("AER fatal errors rose from 0 to 2"));
  EXPECT_EQ(tracker.Observe(a, errors, t0 + 23s).health,
            plugin::Health::kHealthy);
  // A device that never had a driver is not unhealthy for lacking one.
  const PciAddress b = *PciAddress::Parse("0000:02:00.0");
  EXPECT_EQ(tracker.Observe(b, unbound, t0).health, plugin::Health::kHealthy);
  // Fault injection wins until cleared.
  tracker.SetOverride(b, plugin::Health::kUnhealthy);
  EXPECT_EQ(tracker.Observe(b, unbound, t0).health, plugin::Health::kUnhealthy);
  tracker.SetOverride(b, std::nullopt);
  EXPECT_EQ(tracker.Observe(b, unbound, t0).health, plugin::Health::kHealthy);
}

TEST(HealthTrackerTest, RecheckFollowsOnlyWhatChangesWithoutAnEvent) {
  HealthTracker tracker(10s);
  const auto t0 = HealthTracker::TimePoint{};
  const PciAddress plain = *PciAddress::Parse("0000:01:00.0");
  const PciAddress with_aer = *PciAddress::Parse("0000:02:00.0");
  const PciAddress unbound = *PciAddress::Parse("0000:03:00.0");
  tracker.Observe(plain, {.driver = "ixgbevf", .aer_fatal = std::nullopt}, t0);
  tracker.Observe(with_aer, {.driver = "ice", .aer_fatal = 4}, t0);
  tracker.Observe(unbound, {.driver = "ice", .aer_fatal = std::nullopt}, t0);
  EXPECT_THAT(tracker.NeedRecheck(), ElementsAre(with_aer));
  tracker.Observe(unbound, {.driver = std::nullopt, .aer_fatal = std::nullopt},
                  t0 + 1s);
  EXPECT_THAT(tracker.NeedRecheck(), ElementsAre(with_aer, unbound));
  // A recheck keeps the driver as last read: still unbound, still a fault.
  auto verdict = tracker.Recheck(unbound, std::nullopt, t0 + 20s);
  EXPECT_EQ(verdict.health, plugin::Health::kUnhealthy);
  EXPECT_THAT(verdict.reason, HasSubstr("driver unbound"));
  // A rising counter is seen by a recheck; the verdict is kept for Last.
  verdict = tracker.Recheck(with_aer, 5, t0 + 2s);
  EXPECT_THAT(verdict.reason, HasSubstr("AER fatal errors rose from 4 to 5"));
  EXPECT_EQ(tracker.Last(with_aer)->reason, verdict.reason);
  EXPECT_EQ(tracker.Recheck(with_aer, 5, t0 + 13s).health,
            plugin::Health::kHealthy);
  EXPECT_TRUE(tracker.Last(with_aer)->reason.empty());
  // Rebound (an event, so a full Observe): recovering, then healthy and
  // no longer rechecked.
  tracker.Observe(unbound, {.driver = "ice", .aer_fatal = std::nullopt},
                  t0 + 21s);
  EXPECT_THAT(tracker.Last(unbound)->reason, HasSubstr("recovering"));
  EXPECT_EQ(tracker.Recheck(unbound, std::nullopt, t0 + 32s).health,
            plugin::Health::kHealthy);
  EXPECT_THAT(tracker.NeedRecheck(), ElementsAre(with_aer));
  // An override shows in Last at once; unknown devices have no verdict.
  tracker.SetOverride(plain, plugin::Health::kUnhealthy);
  EXPECT_EQ(tracker.Last(plain)->health, plugin::Health::kUnhealthy);
  EXPECT_FALSE(tracker.Last(*PciAddress::Parse("0000:04:00.0")).has_value());
  tracker.Forget(with_aer);
  EXPECT_THAT(tracker.NeedRecheck(), ::testing::IsEmpty());
}

// Devices observed in any order keep their own state; many go at once.
TEST(HealthTrackerTest, StatesStayPerDeviceInAnyOrderAndGoInOnePass) {
  HealthTracker tracker(10s);
  const auto t0 = HealthTracker::TimePoint{};
  std::vector<PciAddress> addresses;
  for (int function : {5, 1, 7, 3, 0, 6, 2, 4}) {
    addresses.push_back(
        *PciAddress::Parse("0000:0" + std::to_string(function) + ":00.0"));
  }
  // Odd buses carry an AER counter; bus 3 then loses its driver.
  for (const PciAddress& a : addresses) {
    const bool odd = a.bus % 2 == 1;
    tracker.Observe(
        a,
        {.driver = "vfio-pci",
         .aer_fatal = odd ? std::optional<uint64_t>(a.bus) : std::nullopt},
        t0);
  }
  const PciAddress three = *PciAddress::Parse("0000:03:00.0");
  tracker.Observe(three, {.driver = std::nullopt, .aer_fatal = 3}, t0 + 1s);
  for (const PciAddress& a : addresses) {
    ASSERT_TRUE(tracker.Last(a).has_value()) << a.ToString();
    EXPECT_EQ(tracker.Last(a)->health, a == three ? plugin::Health::kUnhealthy
                                                  : plugin::Health::kHealthy)
        << a.ToString();
  }
  // Each kept its own counter: only bus 5's rising counter is a fault.
  EXPECT_THAT(
      tracker.Recheck(*PciAddress::Parse("0000:05:00.0"), 6, t0 + 2s).reason,
      HasSubstr("rose from 5 to 6"));
  EXPECT_EQ(
      tracker.Recheck(*PciAddress::Parse("0000:07:00.0"), 7, t0 + 2s).health,
      plugin::Health::kHealthy);
  tracker.ForgetIf([](const PciAddress& a) { return a.bus >= 4; });
  EXPECT_THAT(tracker.NeedRecheck(),
              ElementsAre(*PciAddress::Parse("0000:01:00.0"), three));
  EXPECT_FALSE(tracker.Last(*PciAddress::Parse("0000:05:00.0")).has_value());
  EXPECT_TRUE(tracker.Last(*PciAddress::Parse("0000:02:00.0")).has_value());
  // A device seen again after being forgotten starts afresh.
  EXPECT_EQ(tracker
                .Observe(*PciAddress::Parse("0000:05:00.0"),
                         {.driver = "vfio-pci", .aer_fatal = 9}, t0 + 3s)
                .health,
            plugin::Health::kHealthy);
}

TEST(ClaimsTest, SortedByAddressFirstClaimWins) {
  const PciAddress a = *PciAddress::Parse("0000:01:00.0");
  const PciAddress b = *PciAddress::Parse("0000:02:00.0");
  const PciAddress c = *PciAddress::Parse("0000:03:00.0");
  const Claims claims({{c, 2}, {a, 0}, {c, 1}, {b, 1}});
  ASSERT_EQ(claims.size(), 3u);
  std::vector<PciAddress> order;
  for (const auto& [address, resource] : claims) order.push_back(address);
  EXPECT_THAT(order, ElementsAre(a, b, c));
  EXPECT_EQ(claims.at(c), 2u);
  EXPECT_TRUE(claims.contains(b));
  EXPECT_FALSE(claims.contains(*PciAddress::Parse("0000:04:00.0")));
  EXPECT_THROW(claims.at(*PciAddress::Parse("0000:00:1f.0")),
               std::out_of_range);
  EXPECT_TRUE(Claims().empty());
}

class SelectorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(testing::WriteMachine("dual-socket-8gpu", dir_.path()));
    DiscoveryOptions options;
    options.host_root = dir_.path();
    options.use_hwloc = false;
    auto topology = Discover(options);
    ASSERT_THAT(topology.status(), IsOk());
    topology_ = std::move(*topology);
    reader_ = NewHostRootReader(dir_.path());
  }

  std::vector<std::string> Claimed(const std::string& yaml, size_t resource) {
    auto config = ParseConfig(yaml, "test");
    EXPECT_THAT(config.status(), IsOk());
    std::vector<std::string> out;
    for (const auto& [address, index] :
         AssignDevices(*config, topology_, *reader_, {})) {
      if (index == resource) out.push_back(address.ToString());
    }
    return out;
  }

  testing::TempDir dir_;
  Topology topology_;
  std::unique_ptr<SysfsReader> reader_;
};

TEST_F(SelectorTest, VendorClassDriverAndAddress) {
  EXPECT_EQ(Claimed("resources: [{name: a.com/gpu, selectors: "
                    "[{vendors: [\"10de\"], classes: [\"0302\"]}]}]",
                    0)
                .size(),
            8u);
  EXPECT_THAT(Claimed("resources: [{name: a.com/nic, selectors: "
                      "[{classes: [\"0200\"], drivers: [mlx5_core]}]}]",
                      0),
              ElementsAre("0000:1c:00.0", "0000:3f:00.0", "0000:9c:00.0",
                          "0000:bc:00.0"));
  EXPECT_THAT(Claimed("resources: [{name: a.com/gpu, selectors: "
                      "[{vendors: [\"10de\"], drivers: [vfio-pci]}]}]",
                      0),
              ElementsAre());
  EXPECT_THAT(Claimed("resources: [{name: a.com/two, selectors: "
                      "[{pciAddresses: [\"0000:1a:00.0\"]}, "
                      "{pciAddresses: [\"9b:00.0\"]}]}]",
                      0),
              ElementsAre("0000:1a:00.0", "0000:9b:00.0"));
  // Bridges are never claimed, even by a catch-all class.
  EXPECT_THAT(Claimed("resources: [{name: a.com/b, selectors: "
                      "[{classes: [\"06\"]}]}]",
                      0),
              ElementsAre());
}

TEST_F(SelectorTest, FirstResourceWinsAndClaimsAreSticky) {
  const char* yaml =
      "resources:\n"
      "  - {name: a.com/first, selectors: [{pciAddresses: "
      "[\"0000:1a:00.0\"]}]}\n"
      "  - {name: a.com/all, selectors: [{vendors: [\"10de\"]}]}\n";
  EXPECT_THAT(Claimed(yaml, 0), ElementsAre("0000:1a:00.0"));
  EXPECT_EQ(Claimed(yaml, 1).size(), 7u);
  auto config = ParseConfig(yaml, "t");
  const Claims previous({{*PciAddress::Parse("0000:1b:00.0"), 0}});
  auto claims = AssignDevices(*config, topology_, *reader_, previous);
  EXPECT_EQ(claims.at(*PciAddress::Parse("0000:1b:00.0")), 0u);
}

TEST(PfNameSelectorTest, VirtualFunctionsOfANamedPf) {
  testing::TempDir dir;
  testing::SysfsTreeBuilder builder(dir.path());
  builder.AddNode(0, "0-3", 1 << 30);
  builder.AddCpu(0, 0, 0, "0");
  testing::PciFunctionSpec pf;
  pf.host_bridge = "pci0000:3a";
  pf.path = {"0000:3a:00.0", "0000:3b:00.0"};
  pf.class_code = 0x020000;
  pf.vendor = 0x15b3;
  pf.device = 0x101d;
  pf.numa_node = 0;
  pf.driver = "mlx5_core";
  pf.sriov_totalvfs = 4;
  builder.AddPciFunction(pf);
  for (int vf = 0; vf < 4; ++vf) {
    testing::PciFunctionSpec spec = pf;
    spec.path = {"0000:3a:00.0", "0000:3b:00." + std::to_string(vf + 1)};
    spec.device = 0x101e;
    spec.physfn = "0000:3b:00.0";
    spec.sriov_totalvfs.reset();
    spec.driver = "vfio-pci";
    builder.AddPciFunction(spec);
  }
  builder.Finish();
  const auto pf_dir = std::filesystem::canonical(
      dir.path() / "sys/bus/pci/devices/0000:3b:00.0");
  std::filesystem::create_directories(pf_dir / "net/ens1f0");
  DiscoveryOptions options;
  options.host_root = dir.path();
  options.use_hwloc = false;
  auto topology = Discover(options);
  ASSERT_THAT(topology.status(), IsOk());
  auto reader = NewHostRootReader(dir.path());
  auto claimed = [&](const std::string& names) {
    auto config =
        ParseConfig("resources: [{name: a.com/vf, selectors: [{pfNames: [" +
                        names + "]}]}]",
                    "t");
    EXPECT_THAT(config.status(), IsOk());
    std::vector<std::string> out;
    for (const auto& [address, index] :
         AssignDevices(*config, *topology, *reader, {})) {
      out.push_back(address.ToString());
    }
    return out;
  };
  if (topology->FindDevice(*PciAddress::Parse("0000:3b:00.0"))
          ->virtfns.empty()) {
    GTEST_SKIP() << "the builder wrote no virtfn links";
  }
  EXPECT_THAT(claimed("ens1f0"), ElementsAre("0000:3b:00.1", "0000:3b:00.2",
                                             "0000:3b:00.3", "0000:3b:00.4"));
  EXPECT_THAT(claimed("\"ens1f0#1-2\""),
              ElementsAre("0000:3b:00.2", "0000:3b:00.3"));
  EXPECT_THAT(claimed("ens9"), ElementsAre());
}

}  // namespace
}  // namespace topology::device_plugin
