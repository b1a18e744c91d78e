// One CDI spec per prepared claim: names with the claim's UID, the claim's
// environment on every device, no variable with two values, removal, and
// the specs of claims no longer prepared removed at a start.
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "topology/common/cdi.h"
#include "topology/draplugin/claim_cdi.h"

#include "status_matchers.h"
#include "temp_dir.h"

namespace topology::draplugin {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::topology::testing::IsOk;
using ::topology::testing::StatusIs;

constexpr char kDriver[] = "pci.libtopology.dev";
constexpr char kKind[] = "pci.libtopology.dev/device";

common::CdiDevice Vfio(const std::string& name, int group) {
  common::CdiDevice device;
  device.name = name;
  device.device_nodes = {{"/dev/vfio/vfio", "/dev/vfio/vfio", "rw"},
                         {"/dev/vfio/" + std::to_string(group),
                          "/dev/vfio/" + std::to_string(group), "rw"}};
  return device;
}

TEST(DraClaimCdiTest, OneSpecPerClaimWithTheClaimsEnvOnEveryDevice) {
  ::topology::testing::TempDir dir;
  auto ids = WriteClaimCdiSpec(
      dir.path(), kDriver, kKind, "6f1c-uid",
      {Vfio("0000-3b-00-0", 41), Vfio("0000-3b-00-1", 42)},
      {{"PCIDEVICE_EXAMPLE_COM_VF", "0000:3b:00.0,0000:3b:00.1"}});
  ASSERT_THAT(ids.status(), IsOk());
  EXPECT_THAT(*ids, ElementsAre(std::string(kKind) + "=6f1c-uid-0000-3b-00-0",
                                std::string(kKind) + "=6f1c-uid-0000-3b-00-1"));
  const auto file = dir.path() / ClaimCdiFileName(kDriver, "6f1c-uid");
  std::ifstream in(file);
  const auto spec = nlohmann::json::parse(in);
  ASSERT_EQ(spec["devices"].size(), 2u);
  for (const auto& device : spec["devices"]) {
    EXPECT_EQ(device["containerEdits"]["env"][0],
              "PCIDEVICE_EXAMPLE_COM_VF=0000:3b:00.0,0000:3b:00.1");
  }
  // What a runtime would resolve.
  std::vector<std::string> warnings;
  const auto defined = common::CdiDefinedNames({dir.path()}, &warnings);
  for (const std::string& id : *ids) EXPECT_TRUE(defined.contains(id)) << id;
  ASSERT_THAT(RemoveClaimCdiSpec(dir.path(), kDriver, "6f1c-uid"), IsOk());
  EXPECT_FALSE(std::filesystem::exists(file));
  EXPECT_THAT(RemoveClaimCdiSpec(dir.path(), kDriver, "6f1c-uid"), IsOk());
}

TEST(DraClaimCdiTest, AVariableWithTwoValuesIsRefused) {
  ::topology::testing::TempDir dir;
  auto a = Vfio("a", 1);
  a.env["MODE"] = "fast";
  auto b = Vfio("b", 2);
  b.env["MODE"] = "slow";
  EXPECT_THAT(
      WriteClaimCdiSpec(dir.path(), kDriver, kKind, "uid", {a, b}, {}).status(),
      StatusIs(StatusCode::kInvalidArgument,
               HasSubstr("MODE is \"fast\" for a and \"slow\" for b")));
  auto c = Vfio("c", 3);
  c.env["PCIDEVICE_X"] = "other";
  EXPECT_THAT(
      WriteClaimCdiSpec(dir.path(), kDriver, kKind, "uid", {c},
                        {{"PCIDEVICE_X", "0000:01:00.0"}})
          .status(),
      StatusIs(StatusCode::kInvalidArgument, HasSubstr("for the claim")));
  EXPECT_TRUE(std::filesystem::is_empty(dir.path()));
}

// A start removes this driver's specs of claims not prepared: a prepared
// claim's spec stays; another driver's whose name extends this one stays;
// a file whose UID is not the API server's form stays; a link is removed,
// not followed; a directory stays.
TEST(DraClaimCdiTest, SpecsOfClaimsNotPreparedAreRemoved) {
  ::topology::testing::TempDir dir;
  constexpr char kPrepared[] = "0b5a2c2e-6a3b-4f0e-9d49-2d1f4c8e7a10";
  constexpr char kLeft[] = "7f3c1a9e-2b4d-4c6e-8a1f-5e9d3b7c2a40";
  constexpr char kLink[] = "c4e8a2f6-1d3b-4a5c-9e7f-0b2d4f6a8c1e";
  constexpr char kDirectory[] = "e1f2a3b4-c5d6-4e7f-8a9b-0c1d2e3f4a5b";
  const auto spec = [&](const std::string& name) {
    std::ofstream(dir.path() / name) << "{}";
    return dir.path() / name;
  };
  spec(ClaimCdiFileName(kDriver, kPrepared));
  spec(ClaimCdiFileName(kDriver, kLeft));
  spec(ClaimCdiFileName(std::string(kDriver) + "-other", kLeft));
  spec(ClaimCdiFileName(kDriver, "u-1"));
  const auto target = spec("elsewhere.json");
  std::filesystem::create_symlink(
      target, dir.path() / ClaimCdiFileName(kDriver, kLink));
  std::filesystem::create_directory(dir.path() /
                                    ClaimCdiFileName(kDriver, kDirectory));

  auto removed = RemoveUnpreparedCdiSpecs(dir.path(), kDriver, {kPrepared});
  ASSERT_THAT(removed.status(), IsOk());
  EXPECT_THAT(*removed, ::testing::UnorderedElementsAre(kLeft, kLink));
  EXPECT_TRUE(std::filesystem::exists(dir.path() /
                                      ClaimCdiFileName(kDriver, kPrepared)));
  EXPECT_FALSE(
      std::filesystem::exists(dir.path() / ClaimCdiFileName(kDriver, kLeft)));
  EXPECT_TRUE(std::filesystem::exists(
      dir.path() / ClaimCdiFileName(std::string(kDriver) + "-other", kLeft)));
  EXPECT_TRUE(
      std::filesystem::exists(dir.path() / ClaimCdiFileName(kDriver, "u-1")));
  EXPECT_TRUE(std::filesystem::exists(target));
  EXPECT_FALSE(std::filesystem::is_symlink(dir.path() /
                                           ClaimCdiFileName(kDriver, kLink)));
  EXPECT_TRUE(std::filesystem::is_directory(
      dir.path() / ClaimCdiFileName(kDriver, kDirectory)));
  // No directory yet: nothing to remove.
  auto none = RemoveUnpreparedCdiSpecs(dir.path() / "absent", kDriver, {});
  ASSERT_THAT(none.status(), IsOk());
  EXPECT_TRUE(none->empty());
}

}  // namespace
}  // namespace topology::draplugin
