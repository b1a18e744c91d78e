// accel-dra-driver's tests, written with libtopology's installed kits only
// (libtopology::draplugin and libtopology::dra_testing): a generated
// two-socket machine with accelerators, the driver's inventory checked
// with the API server's rules, and its claim handler served by the DRA
// framework to the kubelet's DRA side over real unix sockets, which
// registers it, prepares a claim and gives a container its CDI ids as the
// kubelet does. docs/dra-driver-guide.md quotes the parts between the
// "guide:" markers.
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "accel_driver.h"

// guide:test_includes
#include "topology/testing/fake_dra_kubelet.h"  // FakeDraKubelet
#include "topology/testing/machines.h"          // WriteMachine
#include "topology/testing/slice_validator.h"   // ValidatePublishedSlices
// guide:end

namespace {

namespace fs = std::filesystem;
namespace dra = topology::draplugin;
using topology::testing::FakeDraKubelet;

// A directory for the test, removed at the end. Short, under /tmp: a unix
// socket path holds at most 107 bytes.
class TempDir {
 public:
  TempDir() {
    char name[] = "/tmp/accel-dra.XXXXXX";
    path_ = ::mkdtemp(name) != nullptr ? fs::path(name) : fs::path();
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  ~TempDir() {
    std::error_code ignored;
    if (!path_.empty()) fs::remove_all(path_, ignored);
  }
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

// Claims as the API server would hand them over, allocated by hand.
class Claims : public dra::ClaimSource {
 public:
  void Add(dra::Claim claim) { claims_[claim.ref.uid] = std::move(claim); }
  topology::StatusOr<dra::Claim> Get(const dra::ClaimRef& ref,
                                     const std::string& /*driver*/) override {
    const auto it = claims_.find(ref.uid);
    if (it == claims_.end()) return topology::NotFoundError("no claim");
    return it->second;
  }

 private:
  std::map<std::string, dra::Claim> claims_;
};

class AccelDraDriverTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_FALSE(dir_.path().empty());
    ASSERT_TRUE(topology::testing::WriteMachine("dual-socket-accel",
                                                dir_.path() / "machine"));
    flags_.node = "node-a";
    flags_.host_root = (dir_.path() / "machine").string();
    flags_.registry_dir = (dir_.path() / "registry").string();
    flags_.plugin_dir = (dir_.path() / "plugin").string();
    flags_.cdi_dir = (dir_.path() / "cdi").string();
    fs::create_directories(flags_.cdi_dir);
    auto topo = topology::Discover({.host_root = flags_.host_root});
    ASSERT_TRUE(topo.ok()) << topo.status().ToString();
    auto sysfs = topology::NewHostRootReader(flags_.host_root);
    devices_ = accel::InventoryOf(*topo, *sysfs, flags_, addresses_);
  }

  TempDir dir_;
  accel::Flags flags_;
  std::map<std::string, std::string> addresses_;
  std::vector<dra::SliceDevice> devices_;
};

// guide:test_inventory
// The machine's eight accelerators (class 1200), with the standard
// topology attributes, in slices the API server accepts: those the
// framework's publisher sends for them, judged by the server's rules.
TEST_F(AccelDraDriverTest, PublishesEveryAcceleratorWithItsTopology) {
  ASSERT_EQ(devices_.size(), 8u);
  const topology::Status valid = topology::testing::ValidatePublishedSlices(
      flags_.driver, flags_.node, devices_);
  EXPECT_TRUE(valid.ok()) << valid.ToString();
  for (const dra::SliceDevice& device : devices_) {
    EXPECT_TRUE(device.attributes.contains("resource.kubernetes.io/pcieRoot"))
        << device.name;
    EXPECT_TRUE(device.attributes.contains("resource.kubernetes.io/numaNode"))
        << device.name;
  }
}
// guide:end

// guide:test_prepare
// The kubelet registers the driver, prepares a claim of two accelerators
// and gives the container that names the claim's request their CDI ids;
// the spec behind them sets the addresses. Unprepare removes the spec.
TEST_F(AccelDraDriverTest, ContainersGetTheirDevicesThroughCdi) {
  Claims claims;
  claims.Add(
      {.ref = {.ns = "default", .uid = "c-1", .name = "two"},
       .results = {{"accel", flags_.driver, "node-a", devices_[0].name},
                   {"accel", flags_.driver, "node-a", devices_[1].name}}});
  accel::AcceleratorDriver driver(flags_, addresses_);
  auto runner = dra::DriverRunner::Create({.driver_name = flags_.driver,
                                           .registry_dir = flags_.registry_dir,
                                           .plugin_dir = flags_.plugin_dir},
                                          &claims, &driver);
  ASSERT_TRUE(runner.ok()) << runner.status().ToString();
  ASSERT_TRUE((*runner)->Start().ok());

  FakeDraKubelet kubelet(flags_.registry_dir);
  ASSERT_TRUE(kubelet.Register(flags_.driver).ok());
  auto answers = kubelet.Prepare({{"default", "c-1", "two"}});
  ASSERT_TRUE(answers.ok()) << answers.status().ToString();
  const FakeDraKubelet::ClaimAnswer& answer = answers->at("c-1");
  ASSERT_EQ(answer.error, "");
  const std::vector<std::string> ids =
      FakeDraKubelet::ContainerCdiIds(answer, "accel");
  ASSERT_EQ(ids.size(), 2u);

  const fs::path spec =
      fs::path(flags_.cdi_dir) / (flags_.driver + "-c-1.json");
  std::ifstream in(spec);
  const std::string text((std::istreambuf_iterator<char>(in)), {});
  EXPECT_NE(
      text.find("ACCEL_VISIBLE_DEVICES=" + addresses_.at(devices_[0].name) +
                "," + addresses_.at(devices_[1].name)),
      std::string::npos)
      << text;

  auto undone = kubelet.Unprepare({{"default", "c-1", "two"}});
  ASSERT_TRUE(undone.ok());
  EXPECT_EQ(undone->at("c-1"), "");
  EXPECT_FALSE(fs::exists(spec));
  (*runner)->Stop();
}
// guide:end

// Shared by capacity: every accelerator publishes 100 of "compute" in
// steps of 25, which the API server's rules take; two shares of one
// accelerator in a claim are prepared under names of their own, each
// answered with its share id, the container told what each may use.
TEST_F(AccelDraDriverTest, SharesOfAnAcceleratorHaveNamesOfTheirOwn) {
  flags_.share_percent = 25;
  auto topo = topology::Discover({.host_root = flags_.host_root});
  ASSERT_TRUE(topo.ok());
  auto sysfs = topology::NewHostRootReader(flags_.host_root);
  addresses_.clear();
  devices_ = accel::InventoryOf(*topo, *sysfs, flags_, addresses_);
  ASSERT_EQ(devices_.size(), 8u);
  EXPECT_TRUE(devices_[0].allow_multiple_allocations);
  const topology::Status valid = topology::testing::ValidatePublishedSlices(
      flags_.driver, flags_.node, devices_);
  EXPECT_TRUE(valid.ok()) << valid.ToString();

  dra::AllocationResult first{"a", flags_.driver, "node-a", devices_[0].name};
  first.share_id = "0c1d2e3f-4a5b-6c7d-8e9f-0a1b2c3d4e5f";
  first.consumed_capacity["compute"] = "25";
  dra::AllocationResult second = first;
  second.request = "b";
  second.share_id = "8f7e2c1a-0b9d-4c3e-a5f6-1d2e3f4a5b6c";
  second.consumed_capacity["compute"] = "50";
  accel::AcceleratorDriver driver(flags_, addresses_);
  auto prepared =
      driver.Prepare({.ref = {.ns = "default", .uid = "c-2", .name = "shares"},
                      .results = {first, second}});
  ASSERT_TRUE(prepared.ok()) << prepared.status().ToString();
  ASSERT_EQ(prepared->size(), 2u);
  EXPECT_EQ((*prepared)[0].share_id, first.share_id);
  EXPECT_EQ((*prepared)[1].share_id, second.share_id);
  EXPECT_NE((*prepared)[0].cdi_device_ids, (*prepared)[1].cdi_device_ids);
  std::ifstream in(fs::path(flags_.cdi_dir) / (flags_.driver + "-c-2.json"));
  const std::string text((std::istreambuf_iterator<char>(in)), {});
  EXPECT_NE(text.find("ACCEL_COMPUTE_PERCENT=25,50"), std::string::npos)
      << text;
}

}  // namespace
