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

}  // namespace
