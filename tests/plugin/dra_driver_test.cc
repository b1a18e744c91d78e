// The reference DRA driver's inventory and Prepare on a generated machine
// (dual-socket-accel: vfio-pci VFs behind PCIe switches): the same devices
// as the device plugin, the standard and own attributes, and a claim's CDI
// spec with exactly the container edits the device plugin's Allocate gives.
#include "dra_driver.h"

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include <grpcpp/grpcpp.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "topology/dra_attributes.h"
#include "topology/draplugin/claim_cdi.h"
#include "topology/sysfs_reader.h"

#include "build_paths.h"
#include "podresources/v1/api.grpc.pb.h"
#include "status_matchers.h"
#include "synthetic_machines.h"
#include "temp_dir.h"

namespace topology::device_plugin {
namespace {

using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::SizeIs;
using ::topology::testing::IsOk;
using ::topology::testing::StatusIs;

constexpr char kDriver[] = "pci.libtopology.dev";

class DraDriverTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(testing::WriteMachine("dual-socket-accel", root_.path()));
    auto config = ParseConfig(
        "resources:\n"
        "  - name: example.com/vf\n"
        "    selectors: [{drivers: [vfio-pci]}]\n",
        "test");
    ASSERT_THAT(config.status(), IsOk());
    config_ = *config;
    sysfs_ = NewHostRootReader(root_.path());
    auto snapshot =
        DiscoverSnapshot(config_, root_.path(), *sysfs_, cdi_.path(), {});
    ASSERT_THAT(snapshot.status(), IsOk());
    snapshot_ = *snapshot;
  }
  DraHandler Handler() {
    return DraHandler(config_, root_.path(), cdi_.path(), kDriver, "node-a",
                      [this] { return snapshot_; });
  }
  std::vector<std::string> Vfs() const {
    std::vector<std::string> ids;
    for (const auto& [address, index] : snapshot_->claims) {
      ids.push_back(address.ToString());
    }
    return ids;
  }

  ::topology::testing::TempDir root_;
  ::topology::testing::TempDir cdi_;
  Config config_;
  std::unique_ptr<SysfsReader> sysfs_;
  std::shared_ptr<Snapshot> snapshot_;
};

TEST_F(DraDriverTest, TheInventoryIsTheDevicePluginsWithTopologyAttributes) {
  std::vector<std::string> warnings;
  const auto devices = DraInventory(config_, *snapshot_, *sysfs_,
                                    dra::NumaAttributeForm::kScalar, &warnings);
  ASSERT_THAT(devices, SizeIs(Vfs().size()));
  ASSERT_THAT(devices, SizeIs(8));
  EXPECT_THAT(draplugin::ValidateDevices(kDriver, devices), IsOk());
  for (const auto& device : devices) {
    const auto& a = device.attributes;
    EXPECT_TRUE(a.contains("resource.kubernetes.io/pciBusID")) << device.name;
    EXPECT_TRUE(a.contains("resource.kubernetes.io/pcieRoot")) << device.name;
    EXPECT_EQ(a.at("resource").value,
              (draplugin::AttributeValue{std::string("example.com/vf"), false})
                  .value);
    // Behind a switch: the switch is named, tighter than the root.
    EXPECT_TRUE(a.contains("pcieSwitch")) << device.name;
    EXPECT_TRUE(a.contains("vendorID"));
  }
  // The name carries the address.
  EXPECT_EQ(devices[0].name.substr(0, 4), "pci-");
}

// The guide's attribute table names every attribute the driver publishes,
// in both NUMA forms (docs/dra-driver-guide.md, "Attributes").
TEST_F(DraDriverTest, EveryPublishedAttributeIsInTheGuide) {
  std::ifstream in(topology::testing::SourceDir() +
                   "/docs/dra-driver-guide.md");
  const std::string guide((std::istreambuf_iterator<char>(in)),
                          std::istreambuf_iterator<char>());
  const size_t table = guide.find("### Attributes");
  ASSERT_NE(table, std::string::npos);
  const std::string section =
      guide.substr(table, guide.find("\n**", table) - table);
  for (const auto form :
       {dra::NumaAttributeForm::kScalar, dra::NumaAttributeForm::kList}) {
    for (const auto& device :
         DraInventory(config_, *snapshot_, *sysfs_, form, nullptr)) {
      for (const auto& [name, value] : device.attributes) {
        EXPECT_NE(section.find("| `" + name + "` |"), std::string::npos)
            << name << " is published but not in the guide's table";
      }
    }
  }
  // The IDs in one form: "0x" and lower-case hex, as the table says.
  const auto devices = DraInventory(config_, *snapshot_, *sysfs_,
                                    dra::NumaAttributeForm::kScalar, nullptr);
  ASSERT_FALSE(devices.empty());
  const auto& vendor =
      std::get<std::string>(devices[0].attributes.at("vendorID").value);
  EXPECT_EQ(vendor.size(), 6u);
  EXPECT_EQ(vendor.substr(0, 2), "0x");
}

// A PF and its VFs published together are partitions of one counter set
// named as the PF: the PF consumes all of it, each VF one; a PF published
// without its VFs (or VFs without their PF) consume nothing.
TEST_F(DraDriverTest, SriovFunctionsArePartitionsOfTheirPf) {
  auto config = ParseConfig(
      "resources:\n"
      "  - name: example.com/nic\n"
      "    selectors: [{vendors: [\"15b3\"]}]\n",
      "test");
  ASSERT_THAT(config.status(), IsOk());
  auto snapshot =
      DiscoverSnapshot(*config, root_.path(), *sysfs_, cdi_.path(), {});
  ASSERT_THAT(snapshot.status(), IsOk());
  auto devices = DraInventory(*config, **snapshot, *sysfs_,
                              dra::NumaAttributeForm::kScalar, nullptr);
  ASSERT_THAT(devices, SizeIs(10));  // 2 PFs with 4 VFs each
  const auto sets = PartitionSriov(**snapshot, &devices);
  ASSERT_THAT(sets, SizeIs(2));
  draplugin::Pool pool{
      .name = "node-a",
      .devices = devices,
      .counter_sets = sets,
      .partition_type_attribute = std::string(kDriver) + "/partitionType"};
  EXPECT_THAT(draplugin::ValidatePool(kDriver, pool), IsOk());
  std::map<std::string, int> vfs_of;
  for (const auto& device : devices) {
    ASSERT_THAT(device.consumes_counters, SizeIs(1)) << device.name;
    const auto& use = device.consumes_counters[0];
    const auto& type =
        std::get<std::string>(device.attributes.at("partitionType").value);
    if (type == "vf") {
      EXPECT_EQ(use.counters.at("vfs"), "1");
      ++vfs_of[use.counter_set];
    } else {
      EXPECT_EQ(type, "pf-4");
      EXPECT_EQ(use.counter_set, device.name);
      EXPECT_EQ(use.counters.at("vfs"), "4");
    }
  }
  for (const auto& set : sets) {
    EXPECT_EQ(set.counters.at("vfs"), "4");
    EXPECT_EQ(vfs_of[set.name], 4) << set.name;
  }
  // The VFs alone (this fixture's configuration): no PF, no partitions.
  auto vfs = DraInventory(config_, *snapshot_, *sysfs_,
                          dra::NumaAttributeForm::kScalar, nullptr);
  EXPECT_THAT(PartitionSriov(*snapshot_, &vfs), IsEmpty());
  for (const auto& device : vfs)
    EXPECT_THAT(device.consumes_counters, IsEmpty());
}

TEST_F(DraDriverTest, AFaultTaintsTheDeviceAndReportsItUnhealthyUntilQuiet) {
  const std::string vf = Vfs().front();
  const auto aer = root_.path() / "sys/bus/pci/devices" / vf / "aer_dev_fatal";
  std::ofstream(aer) << "DLP 0\nTOTAL_ERR_FATAL 0\n";
  DraHealth health(std::chrono::nanoseconds(0));
  EXPECT_FALSE(health.Judge(*snapshot_, *sysfs_));
  EXPECT_TRUE(health.unhealthy().empty());

  // The fatal counter moves: the device plugin's source and verdict.
  std::ofstream(aer) << "DLP 1\nTOTAL_ERR_FATAL 1\n";
  EXPECT_TRUE(health.Recheck(*snapshot_, *sysfs_));
  const auto address = *PciAddress::Parse(vf);
  ASSERT_THAT(health.unhealthy(), SizeIs(1));
  ASSERT_TRUE(health.unhealthy().contains(address));
  EXPECT_THAT(health.unhealthy().at(address), HasSubstr("AER"));

  auto devices = DraInventory(config_, *snapshot_, *sysfs_,
                              dra::NumaAttributeForm::kScalar, nullptr);
  TaintUnhealthy(kDriver, health.unhealthy(), &devices);
  size_t tainted = 0;
  for (const auto& device : devices) {
    if (device.taints.empty()) continue;
    ++tainted;
    EXPECT_EQ(device.name, dra::PciDeviceName(address));
    EXPECT_EQ(device.taints[0].key, "pci.libtopology.dev/unhealthy");
    EXPECT_EQ(device.taints[0].effect, "NoSchedule");
  }
  EXPECT_EQ(tainted, 1u);
  EXPECT_THAT(draplugin::ValidateDevices(kDriver, devices), IsOk());
  const auto report = HealthReport("node-a", *snapshot_, health.unhealthy());
  ASSERT_EQ(report.size(), devices.size());
  for (const auto& entry : report) {
    EXPECT_EQ(entry.pool, "node-a");
    if (entry.device == dra::PciDeviceName(address)) {
      EXPECT_EQ(entry.health, draplugin::HealthStatus::kUnhealthy);
      EXPECT_THAT(entry.message, HasSubstr("AER"));
    } else {
      EXPECT_EQ(entry.health, draplugin::HealthStatus::kHealthy);
      EXPECT_EQ(entry.message, "");
    }
  }
  // No new fault over the (here zero) quiet period: Healthy again.
  EXPECT_TRUE(health.Recheck(*snapshot_, *sysfs_));
  EXPECT_TRUE(health.unhealthy().empty());
}

TEST_F(DraDriverTest,
       AConfigurationSharingADeviceWithTheDevicePluginIsRefused) {
  auto theirs = ParseConfig(
      "resources:\n"
      "  - name: example.com/accel\n"
      "    selectors: [{drivers: [vfio-pci]}]\n",
      "device plugin");
  ASSERT_THAT(theirs.status(), IsOk());
  const Status refused = CheckNoOverlap(config_, *snapshot_, *theirs, *sysfs_);
  EXPECT_THAT(refused, StatusIs(StatusCode::kFailedPrecondition,
                                HasSubstr(Vfs().front())));
  EXPECT_THAT(refused.message(), HasSubstr("8 device(s)"));
  EXPECT_THAT(refused.message(), HasSubstr("example.com/accel"));
  EXPECT_THAT(refused.message(), HasSubstr("distinct selectors"));

  // Distinct selectors: both run.
  auto other = ParseConfig(
      "resources:\n"
      "  - name: example.com/nvme\n"
      "    selectors: [{drivers: [nvme]}]\n",
      "device plugin");
  ASSERT_THAT(other.status(), IsOk());
  EXPECT_THAT(CheckNoOverlap(config_, *snapshot_, *other, *sysfs_), IsOk());
}

// The kubelet device manager's checkpoint as the kubelet writes it
// (checkpoint.go): DeviceIDs per NUMA node, AllocResp base64.
constexpr char kKubeletCheckpoint[] = R"({"Data":{"PodDeviceEntries":[
  {"PodUID":"6c1e8f50-0b8a-4d1e-9d1c-7a3f2b4c5d6e","ContainerName":"train",
   "ResourceName":"example.com/accel",
   "DeviceIDs":{"0":["%0"],"1":["%1"]},"AllocResp":"CgA="},
  {"PodUID":"0a9b8c7d-1111-2222-3333-444455556666","ContainerName":"side",
   "ResourceName":"nvidia.com/gpu",
   "DeviceIDs":{"-1":["GPU-8f2c0d5e-1a2b-3c4d-5e6f-708192a3b4c5"]},
   "AllocResp":""}],
 "RegisteredDevices":{"example.com/accel":["%0","%1"]}},"Checksum":3141592653})";

std::string WithDevices(std::string text, const std::string& first,
                        const std::string& second) {
  for (const auto& [mark, id] :
       {std::pair<std::string, std::string>{"%0", first}, {"%1", second}}) {
    for (size_t at = text.find(mark); at != std::string::npos;
         at = text.find(mark)) {
      text.replace(at, mark.size(), id);
    }
  }
  return text;
}

TEST(KubeletCheckpointTest, EntriesAreReadWithEveryNumaNodesIds) {
  auto entries = kubelet::ParseDeviceCheckpoint(
      WithDevices(kKubeletCheckpoint, "0000:af:00.1", "0000:3b:00.1"));
  ASSERT_THAT(entries.status(), IsOk());
  ASSERT_THAT(*entries, SizeIs(2));
  EXPECT_EQ((*entries)[0].pod_uid, "6c1e8f50-0b8a-4d1e-9d1c-7a3f2b4c5d6e");
  EXPECT_EQ((*entries)[0].container, "train");
  EXPECT_EQ((*entries)[0].resource, "example.com/accel");
  EXPECT_EQ((*entries)[0].device_ids,
            (std::vector<std::string>{"0000:3b:00.1", "0000:af:00.1"}));
  EXPECT_EQ(
      (*entries)[1].device_ids,
      (std::vector<std::string>{"GPU-8f2c0d5e-1a2b-3c4d-5e6f-708192a3b4c5"}));
}

TEST(KubeletCheckpointTest, TheFormatBefore120HasAFlatList) {
  // checkpointv1.go: DeviceIDs was a list.
  auto entries = kubelet::ParseDeviceCheckpoint(
      R"({"Data":{"PodDeviceEntries":[{"PodUID":"u","ContainerName":"c",)"
      R"("ResourceName":"r","DeviceIDs":["b","a","b"],"AllocResp":""}],)"
      R"("RegisteredDevices":{}},"Checksum":1})");
  ASSERT_THAT(entries.status(), IsOk());
  ASSERT_THAT(*entries, SizeIs(1));
  EXPECT_EQ((*entries)[0].device_ids, (std::vector<std::string>{"a", "b"}));
}

TEST(KubeletCheckpointTest, AnythingElseIsRefusedNamingWhere) {
  EXPECT_THAT(kubelet::ParseDeviceCheckpoint("{\"Checksum\":1}"),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("Data")));
  EXPECT_THAT(kubelet::ParseDeviceCheckpoint(
                  R"({"Data":{"PodDeviceEntries":[{"ContainerName":"c",)"
                  R"("ResourceName":"r","DeviceIDs":{}}]}})"),
              StatusIs(StatusCode::kInvalidArgument,
                       HasSubstr("Data.PodDeviceEntries[0].PodUID")));
  EXPECT_THAT(
      kubelet::ParseDeviceCheckpoint(
          R"({"Data":{"PodDeviceEntries":[{"PodUID":"u","ContainerName":"c",)"
          R"("ResourceName":"r","DeviceIDs":{"0":[7]}}]}})"),
      StatusIs(StatusCode::kInvalidArgument, HasSubstr("DeviceIDs[0]")));
  EXPECT_THAT(kubelet::ParseDeviceCheckpoint(std::string(10000, '[')),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("not JSON")));
  // No entries at all (null, as Go writes an empty slice): nothing held.
  auto none = kubelet::ParseDeviceCheckpoint(
      R"({"Data":{"PodDeviceEntries":null,"RegisteredDevices":null},"Checksum":0})");
  ASSERT_THAT(none.status(), IsOk());
  EXPECT_TRUE(none->empty());
}

TEST_F(DraDriverTest,
       ADeviceAPodHoldsThroughTheDevicePluginIsTaintedWithItsUid) {
  const std::vector<std::string> vfs = Vfs();
  ASSERT_GE(vfs.size(), 2u);
  auto entries = kubelet::ParseDeviceCheckpoint(
      WithDevices(kKubeletCheckpoint, vfs[0], vfs[1]));
  ASSERT_THAT(entries.status(), IsOk());
  const auto held = HeldThroughDevicePlugins(*entries);
  // The GPU UUID names no PCI function: only the two addresses are held.
  ASSERT_THAT(held, SizeIs(2));
  auto devices = DraInventory(config_, *snapshot_, *sysfs_,
                              dra::NumaAttributeForm::kScalar, nullptr);
  TaintHeld(kDriver, held, &devices);
  std::set<std::string> tainted;
  for (const auto& device : devices) {
    if (device.taints.empty()) continue;
    tainted.insert(device.name);
    ASSERT_THAT(device.taints, SizeIs(1));
    EXPECT_EQ(device.taints[0].key,
              "pci.libtopology.dev/device-plugin-allocated");
    EXPECT_EQ(device.taints[0].value, "6c1e8f50-0b8a-4d1e-9d1c-7a3f2b4c5d6e");
    EXPECT_EQ(device.taints[0].effect, "NoSchedule");
  }
  EXPECT_EQ(tainted, (std::set<std::string>{
                         dra::PciDeviceName(*PciAddress::Parse(vfs[0])),
                         dra::PciDeviceName(*PciAddress::Parse(vfs[1]))}));
  // What the API server accepts.
  EXPECT_THAT(draplugin::ValidateDevices(kDriver, devices), IsOk());
  // A UID that is no label value leaves the value empty, not the slice
  // refused.
  EXPECT_EQ(HeldTaint(kDriver, std::string(70, 'a')).value, "");
  EXPECT_EQ(HeldTaint(kDriver, "bad uid").value, "");
}

TEST(DraDeviceNameTest, ANameIsReadBackToItsAddressAndNothingElse) {
  const auto address = *PciAddress::Parse("0000:3b:00.1");
  EXPECT_EQ(dra::PciDeviceName(address), "pci-0000-3b-00-1");
  EXPECT_EQ(dra::AddressOfPciDeviceName("pci-0000-3b-00-1"), address);
  for (const char* other :
       {"", "pci-0000-3b-00-8", "pci-0000:3b:00.1", "PCI-0000-3B-00-1",
        "pci-0000-3b-00-1-", "accel-0000-3b-00-1", "pci-0000-3B-00-1"}) {
    EXPECT_EQ(dra::AddressOfPciDeviceName(other), std::nullopt) << other;
  }
}

TEST_F(DraDriverTest, TheListFormPublishesTheNodeAndItsNearestAsInts) {
  const auto scalar = DraInventory(config_, *snapshot_, *sysfs_,
                                   dra::NumaAttributeForm::kScalar, nullptr);
  const auto list = DraInventory(config_, *snapshot_, *sysfs_,
                                 dra::NumaAttributeForm::kList, nullptr);
  ASSERT_EQ(scalar.size(), list.size());
  EXPECT_THAT(draplugin::ValidateDevices(kDriver, list), IsOk());
  constexpr char kNuma[] = "resource.kubernetes.io/numaNode";
  for (size_t i = 0; i < list.size(); ++i) {
    ASSERT_TRUE(scalar[i].attributes.contains(kNuma)) << scalar[i].name;
    const auto* nodes =
        std::get_if<std::vector<int64_t>>(&list[i].attributes.at(kNuma).value);
    ASSERT_NE(nodes, nullptr) << list[i].name;
    ASSERT_FALSE(nodes->empty());
    // The device's own node first.
    EXPECT_EQ(nodes->front(),
              std::get<int64_t>(scalar[i].attributes.at(kNuma).value));
  }
}

TEST_F(DraDriverTest, PrepareGivesTheDevicePluginsEditsAsOneSpecPerClaim) {
  const std::vector<std::string> vfs = Vfs();
  ASSERT_GE(vfs.size(), 2u);
  draplugin::Claim claim;
  claim.ref = {"ml", "uid-1", "pair"};
  for (size_t i = 0; i < 2; ++i) {
    claim.results.push_back({"vf", kDriver, "node-a",
                             dra::PciDeviceName(*PciAddress::Parse(vfs[i]))});
  }
  DraHandler handler = Handler();
  auto prepared = handler.Prepare(claim);
  ASSERT_THAT(prepared.status(), IsOk());
  ASSERT_THAT(*prepared, SizeIs(2));
  EXPECT_EQ((*prepared)[0].request_names, std::vector<std::string>{"vf"});
  ASSERT_THAT((*prepared)[0].cdi_device_ids, SizeIs(1));
  EXPECT_EQ((*prepared)[0].cdi_device_ids[0],
            std::string(kDriver) + "/pci=uid-1-" + claim.results[0].device);
  // The spec against the device plugin's Allocate of the same two devices.
  const auto allocation = AllocationFor(config_.resources[0], *snapshot_,
                                        root_.path(), {vfs[0], vfs[1]}, false);
  ASSERT_THAT(allocation.status(), IsOk());
  const auto file = cdi_.path() / draplugin::ClaimCdiFileName(kDriver, "uid-1");
  std::ifstream in(file);
  const auto spec = nlohmann::json::parse(in);
  std::set<std::string> spec_nodes;
  for (const auto& device : spec["devices"]) {
    for (const auto& node : device["containerEdits"]["deviceNodes"]) {
      spec_nodes.insert(node["path"].get<std::string>());
    }
    // One variable, every address, on every device of the claim.
    EXPECT_EQ(device["containerEdits"]["env"][0],
              "PCIDEVICE_EXAMPLE_COM_VF=" + vfs[0] + "," + vfs[1]);
  }
  std::set<std::string> allocated_nodes;
  for (const auto& node : allocation->devices) {
    allocated_nodes.insert(node.container_path);
  }
  EXPECT_EQ(spec_nodes, allocated_nodes);
  EXPECT_TRUE(spec_nodes.contains("/dev/vfio/vfio"));
  ASSERT_THAT(handler.Unprepare(claim.ref, *prepared), IsOk());
  EXPECT_FALSE(std::filesystem::exists(file));
}

// Devices the configuration marks shareable (KEP-5075) are published with
// allowMultipleAllocations and their capacity's request policy; each share
// a claim holds is prepared under a CDI name of its own, and the container
// learns what the claim's shares of each device may use.
TEST_F(DraDriverTest, SharesOfADeviceEachGetTheirCdiNameAndTheirCapacity) {
  auto config = ParseConfig(
      "resources:\n"
      "  - name: example.com/vf\n"
      "    selectors: [{drivers: [vfio-pci]}]\n"
      "    shareable:\n"
      "      capacity:\n"
      "        bandwidth: {value: \"100\", default: \"10\",\n"
      "                    validRange: {min: \"10\", step: \"10\"}}\n",
      "test");
  ASSERT_THAT(config.status(), IsOk());
  EXPECT_THAT(ValidateSharing(*config, kDriver), IsOk());
  const auto devices = DraInventory(*config, *snapshot_, *sysfs_,
                                    dra::NumaAttributeForm::kScalar, nullptr);
  ASSERT_FALSE(devices.empty());
  EXPECT_TRUE(devices[0].allow_multiple_allocations);
  const auto& bandwidth = devices[0].capacity.at("bandwidth");
  EXPECT_EQ(bandwidth.value, "100");
  ASSERT_TRUE(bandwidth.request_policy.has_value());
  EXPECT_EQ(bandwidth.request_policy->default_value, "10");
  EXPECT_EQ(bandwidth.request_policy->valid_range->step, "10");
  EXPECT_THAT(draplugin::ValidateDevices(kDriver, devices), IsOk());

  const std::vector<std::string> vfs = Vfs();
  const std::string vf0 = dra::PciDeviceName(*PciAddress::Parse(vfs[0]));
  const std::string vf1 = dra::PciDeviceName(*PciAddress::Parse(vfs[1]));
  draplugin::Claim claim;
  claim.ref = {"ml", "uid-s", "shares"};
  const auto share = [&](const char* request, const std::string& device,
                         const std::string& id, const char* amount) {
    draplugin::AllocationResult result{request, kDriver, "node-a", device};
    result.share_id = id;
    result.consumed_capacity["bandwidth"] = amount;
    return result;
  };
  claim.results = {
      share("a", vf0, "0c1d2e3f-4a5b-6c7d-8e9f-0a1b2c3d4e5f", "10"),
      share("b", vf0, "8f7e2c1a-0b9d-4c3e-a5f6-1d2e3f4a5b6c", "30"),
      share("c", vf1, "11111111-2222-3333-4444-555555555555", "20")};
  DraHandler handler(*config, root_.path(), cdi_.path(), kDriver, "node-a",
                     [this] { return snapshot_; });
  auto prepared = handler.Prepare(claim);
  ASSERT_THAT(prepared.status(), IsOk());
  ASSERT_THAT(*prepared, SizeIs(3));
  std::set<std::string> ids;
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ((*prepared)[i].share_id, claim.results[i].share_id);
    ASSERT_THAT((*prepared)[i].cdi_device_ids, SizeIs(1));
    EXPECT_EQ((*prepared)[i].cdi_device_ids[0],
              std::string(kDriver) + "/pci=uid-s-" + claim.results[i].device +
                  "-" + claim.results[i].share_id);
    ids.insert((*prepared)[i].cdi_device_ids[0]);
  }
  EXPECT_THAT(ids, SizeIs(3));
  std::ifstream in(cdi_.path() / draplugin::ClaimCdiFileName(kDriver, "uid-s"));
  const auto spec = nlohmann::json::parse(in);
  ASSERT_EQ(spec["devices"].size(), 3u);
  for (const auto& device : spec["devices"]) {
    std::set<std::string> env(device["containerEdits"]["env"].begin(),
                              device["containerEdits"]["env"].end());
    EXPECT_TRUE(
        env.contains("PCIDEVICE_EXAMPLE_COM_VF=" + vfs[0] + "," + vfs[1]));
    // vf0: its two shares' 10 and 30; vf1: 20.
    EXPECT_TRUE(env.contains("PCIDEVICE_EXAMPLE_COM_VF_BANDWIDTH=40,20"))
        << device.dump();
  }
  EXPECT_EQ(ShareEnvName("example.com/vf", "example.com/bandwidth"),
            "PCIDEVICE_EXAMPLE_COM_VF_BANDWIDTH");

  // A policy the API server would refuse is refused when the driver starts.
  auto bad = ParseConfig(
      "resources:\n"
      "  - name: example.com/vf\n"
      "    selectors: [{drivers: [vfio-pci]}]\n"
      "    shareable:\n"
      "      capacity:\n"
      "        bandwidth: {value: \"100\", default: \"15\",\n"
      "                    validValues: [\"10\", \"20\"]}\n",
      "test");
  ASSERT_THAT(bad.status(), IsOk());
  EXPECT_THAT(ValidateSharing(*bad, kDriver),
              StatusIs(StatusCode::kInvalidArgument,
                       HasSubstr("resources[0] (example.com/vf).shareable: "
                                 "capacity[bandwidth].requestPolicy."
                                 "validValues: Invalid value: default value "
                                 "is not valid")));
  EXPECT_THAT(ParseConfig("resources:\n"
                          "  - name: example.com/vf\n"
                          "    selectors: [{drivers: [vfio-pci]}]\n"
                          "    shareable: {capacity: {bandwidth: {value: "
                          "lots}}}\n",
                          "test")
                  .status(),
              StatusIs(StatusCode::kInvalidArgument,
                       HasSubstr("resources[0].shareable.capacity.bandwidth."
                                 "value: expected a quantity")));
}

// The driver's configuration ({"env": {...}}) from the class (FromClass:
// the only configuration a pod written for the device plugin can have) and
// from the claim, the claim's over the class's, reaches the container of
// each device of the requests it names; a parameter the driver does not
// know refuses the claim, naming the configuration.
TEST_F(DraDriverTest, ClassAndClaimConfigurationsSetTheEnvironment) {
  const std::vector<std::string> vfs = Vfs();
  draplugin::Claim claim;
  claim.ref = {"ml", "uid-c", "configured"};
  claim.results = {
      {"a", kDriver, "node-a", dra::PciDeviceName(*PciAddress::Parse(vfs[0]))},
      {"b", kDriver, "node-a", dra::PciDeviceName(*PciAddress::Parse(vfs[1]))}};
  claim.configs = {
      {"FromClass", {}, R"({"env":{"MODE":"class","ONLY_CLASS":"1"}})"},
      {"FromClaim", {"b"}, R"({"env":{"MODE":"claim"}})"}};
  auto a = ConfiguredEnvironment(claim, "a");
  ASSERT_THAT(a.status(), IsOk());
  EXPECT_EQ(a->at("MODE"), "class");
  auto b = ConfiguredEnvironment(claim, "b");
  ASSERT_THAT(b.status(), IsOk());
  EXPECT_EQ(b->at("MODE"), "claim");
  EXPECT_EQ(b->at("ONLY_CLASS"), "1");

  // Prepared: each device's CDI edits carry its request's environment.
  claim.configs = {{"FromClass", {}, R"({"env":{"FROM_CLASS":"yes"}})"}};
  DraHandler handler = Handler();
  ASSERT_THAT(handler.Prepare(claim).status(), IsOk());
  std::ifstream in(cdi_.path() / draplugin::ClaimCdiFileName(kDriver, "uid-c"));
  const auto spec = nlohmann::json::parse(in);
  ASSERT_EQ(spec["devices"].size(), 2u);
  for (const auto& device : spec["devices"]) {
    const auto& env = device["containerEdits"]["env"];
    EXPECT_NE(std::find(env.begin(), env.end(), "FROM_CLASS=yes"), env.end())
        << device.dump();
  }

  claim.ref.uid = "uid-d";
  claim.configs = {{"FromClass", {}, R"({"mode":"fast"})"}};
  EXPECT_THAT(handler.Prepare(claim).status(),
              StatusIs(StatusCode::kFailedPrecondition,
                       HasSubstr("configuration (FromClass) of request a: "
                                 "unknown parameter \"mode\"")));
  claim.configs = {{"FromClaim", {}, R"({"env":{"1BAD":"x"}})"}};
  EXPECT_THAT(handler.Prepare(claim).status(),
              StatusIs(StatusCode::kFailedPrecondition,
                       HasSubstr("is not a variable name")));
  claim.configs = {{"FromClaim", {}, R"({"env":{"N":3}})"}};
  EXPECT_THAT(handler.Prepare(claim).status(),
              StatusIs(StatusCode::kFailedPrecondition,
                       HasSubstr("env N is not a string")));
}

// A device a running pod holds through a device plugin (the kubelet's
// device checkpoint, read at each Prepare) is never prepared for a claim,
// taint or no taint; a checkpoint that cannot be read refuses every claim.
TEST_F(DraDriverTest, DevicesHeldThroughADevicePluginAreNeverPrepared) {
  const std::vector<std::string> vfs = Vfs();
  ASSERT_GE(vfs.size(), 2u);
  const PciAddress first = *PciAddress::Parse(vfs[0]);
  StatusOr<std::map<PciAddress, std::vector<std::string>>> held =
      std::map<PciAddress, std::vector<std::string>>{{first, {"u1"}}};
  DraHandler handler(
      config_, root_.path(), cdi_.path(), kDriver, "node-a",
      [this] { return snapshot_; }, [&held] { return held; });
  draplugin::Claim claim;
  claim.ref = {"ml", "uid-3", "both"};
  claim.results.push_back({"vf", kDriver, "node-a", dra::PciDeviceName(first)});
  EXPECT_THAT(handler.Prepare(claim).status(),
              StatusIs(StatusCode::kFailedPrecondition,
                       HasSubstr("is held by pod u1 through a device plugin")));
  EXPECT_TRUE(std::filesystem::is_empty(cdi_.path()));
  // adminAccess (a monitoring claim, KEP-5018): the device may be in use
  // by others, through a device plugin too, and is prepared.
  claim.results[0].admin_access = true;
  EXPECT_THAT(handler.Prepare(claim).status(), IsOk());
  claim.results[0].admin_access = false;
  // Another device is free.
  claim.results[0].device = dra::PciDeviceName(*PciAddress::Parse(vfs[1]));
  EXPECT_THAT(handler.Prepare(claim).status(), IsOk());
  // The checkpoint unreadable: nothing is prepared.
  held = FailedPreconditionError("kubelet_internal_checkpoint: a link");
  claim.ref.uid = "uid-4";
  EXPECT_THAT(handler.Prepare(claim).status(),
              StatusIs(StatusCode::kFailedPrecondition,
                       HasSubstr("no device is prepared until it can be "
                                 "read")));
  // Read from the kubelet's file as topology-dra-driver reads it.
  const auto file = root_.path() / "kubelet_internal_checkpoint";
  EXPECT_THAT(ReadHeldThroughDevicePlugins(file), IsOk());
  EXPECT_THAT(*ReadHeldThroughDevicePlugins(file), IsEmpty());
  std::ofstream(file) << "{not json";
  EXPECT_FALSE(ReadHeldThroughDevicePlugins(file).ok());
  // Larger than any node's checkpoint (parsed, it would take the driver
  // past its memory limit): refused by its size, before it is read.
  std::ofstream(file, std::ios::trunc)
      << std::string(kubelet::kMaxDeviceCheckpointBytes + 1, ' ');
  EXPECT_FALSE(ReadHeldThroughDevicePlugins(file).ok());
}

// The kubelet's pod resources API, as the kubelet serves it: List names
// the devices of the running pods it is given.
class PodResourcesServer final : public v1::PodResourcesLister::Service {
 public:
  PodResourcesServer(const std::filesystem::path& socket,
                     std::vector<std::string> device_ids)
      : device_ids_(std::move(device_ids)) {
    grpc::ServerBuilder builder;
    builder.AddListeningPort("unix:" + socket.string(),
                             grpc::InsecureServerCredentials());
    builder.RegisterService(this);
    server_ = builder.BuildAndStart();
  }
  ~PodResourcesServer() override { server_->Shutdown(); }
  grpc::Status List(grpc::ServerContext*, const v1::ListPodResourcesRequest*,
                    v1::ListPodResourcesResponse* answer) override {
    auto* container = answer->add_pod_resources()->add_containers();
    container->set_name("app");
    auto* devices = container->add_devices();
    devices->set_resource_name("example.com/vf");
    for (const std::string& id : device_ids_) devices->add_device_ids(id);
    return grpc::Status::OK;
  }

 private:
  std::vector<std::string> device_ids_;
  std::unique_ptr<grpc::Server> server_;
};

// The kubelet keeps a deleted pod's devices in its checkpoint until its
// next device allocation (found on the real kubelet v1.37): a device the
// checkpoint names is held only while the pod resources API lists it for a
// running pod. Where that API does not answer, the checkpoint alone
// decides (a deleted pod's device stays held: never one device twice).
TEST_F(DraDriverTest, ACheckpointEntryOfADeletedPodHoldsNothing) {
  const std::vector<std::string> vfs = Vfs();
  ASSERT_GE(vfs.size(), 2u);
  const auto checkpoint = root_.path() / "kubelet_internal_checkpoint";
  std::string entries;
  for (size_t i = 0; i < 2; ++i) {
    if (!entries.empty()) entries += ",";
    entries += R"({"PodUID":"pod-)" + std::to_string(i) +
               R"(","ContainerName":"app","ResourceName":"example.com/vf",)"
               R"("DeviceIDs":{"0":[")" +
               vfs[i] + R"("]},"AllocResp":""})";
  }
  std::ofstream(checkpoint) << R"({"Data":{"PodDeviceEntries":[)" << entries
                            << R"(],"RegisteredDevices":{}},"Checksum":1})";
  const PciAddress running = *PciAddress::Parse(vfs[0]);
  const PciAddress deleted = *PciAddress::Parse(vfs[1]);
  ::topology::testing::TempDir sockets;
  const auto socket = sockets.path() / "kubelet.sock";
  HeldDevicesReader reader(checkpoint, socket);

  // No API: both count as held.
  auto held = reader.Read();
  ASSERT_THAT(held.status(), IsOk());
  EXPECT_THAT(*held, SizeIs(2));
  {
    // Only the running pod's device is listed.
    PodResourcesServer kubelet(socket, {vfs[0], "GPU-8d3f"});
    held = reader.Read();
    ASSERT_THAT(held.status(), IsOk());
    ASSERT_THAT(*held, SizeIs(1));
    EXPECT_EQ(held->begin()->first, running);
    EXPECT_EQ(held->begin()->second, std::vector<std::string>{"pod-0"});
  }
  // The API gone again: the checkpoint alone.
  held = reader.Read();
  ASSERT_THAT(held.status(), IsOk());
  EXPECT_TRUE(held->contains(deleted));

  EXPECT_THAT(
      RunningHolders({{running, {"pod-0"}}, {deleted, {"pod-1"}}}, {vfs[1]}),
      ::testing::ElementsAre(::testing::Key(deleted)));
}

TEST_F(DraDriverTest, DevicesThisDriverDoesNotHaveAreRefused) {
  DraHandler handler = Handler();
  draplugin::Claim claim;
  claim.ref = {"ml", "uid-2", "x"};
  claim.results.push_back({"vf", kDriver, "node-a", "pci-0000-ff-00-0"});
  EXPECT_THAT(handler.Prepare(claim).status(),
              StatusIs(StatusCode::kFailedPrecondition,
                       HasSubstr("not one this driver has")));
  claim.results[0] = {"vf", kDriver, "node-b",
                      dra::PciDeviceName(*PciAddress::Parse(Vfs()[0]))};
  EXPECT_THAT(
      handler.Prepare(claim).status(),
      StatusIs(StatusCode::kFailedPrecondition, HasSubstr("not this node's")));
  EXPECT_TRUE(std::filesystem::is_empty(cdi_.path()));
}

}  // namespace
}  // namespace topology::device_plugin
