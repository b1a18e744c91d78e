// Device metadata (KEP-5304) against the Go helper's own encoding: the
// files the framework writes equal, byte for byte, what upstream's metadata
// scheme and serializer write for the same request (metadata_oracle, at
// the k8s.io/dynamic-resource-allocation version its go.mod pins), and the
// container path is upstream's. Then through the runner: a prepared claim's
// request gets its file, its read-only CDI mount and the CDI id; Unprepare
// removes them.
#include "topology/draplugin/device_metadata.h"

#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "topology/draplugin/driver.h"
#include "topology/testing/fake_dra_kubelet.h"

#include "build_paths.h"
#include "run_command.h"
#include "status_matchers.h"
#include "temp_dir.h"

namespace topology::draplugin {
namespace {

using nlohmann::json;
using ::testing::Contains;
using ::testing::HasSubstr;
using ::topology::testing::IsOk;

constexpr char kDriver[] = "pci.libtopology.dev";

std::string ReadFile(const std::filesystem::path& path) {
  std::ifstream in(path);
  return {std::istreambuf_iterator<char>(in), {}};
}

json AttributeInput(const AttributeValue& value) {
  if (const auto* text = std::get_if<std::string>(&value.value)) {
    return {{value.version ? "version" : "string", *text}};
  }
  if (const auto* number = std::get_if<int64_t>(&value.value)) {
    return {{"int", *number}};
  }
  if (const auto* flag = std::get_if<bool>(&value.value)) {
    return {{"bool", *flag}};
  }
  if (const auto* ints = std::get_if<std::vector<int64_t>>(&value.value)) {
    return {{"ints", *ints}};
  }
  if (const auto* bools = std::get_if<std::vector<bool>>(&value.value)) {
    return {{"bools", *bools}};
  }
  return {{value.version ? "versions" : "strings",
           std::get<std::vector<std::string>>(value.value)}};
}

// What the oracle prints for `metadata`: the stream, "---", the path.
std::string OracleOf(const RequestMetadata& metadata,
                     const std::vector<std::string>& versions,
                     const std::filesystem::path& dir) {
  const std::string& oracle = topology::testing::ProgramPath("metadata-oracle");
  EXPECT_FALSE(oracle.empty())
      << "the device metadata oracle was not built (no Go 1.26 or newer)";
  json input = {
      {"name", metadata.claim_name}, {"namespace", metadata.claim_namespace},
      {"uid", metadata.claim_uid},   {"generation", metadata.generation},
      {"driver", kDriver},           {"request", metadata.request},
      {"versions", versions},        {"devices", json::array()}};
  if (!metadata.pod_claim_name.empty()) {
    input["podClaimName"] = metadata.pod_claim_name;
  }
  for (const MetadataDevice& device : metadata.devices) {
    json attributes = json::object();
    for (const auto& [name, value] : device.attributes) {
      attributes[name] = AttributeInput(value);
    }
    input["devices"].push_back({{"driver", device.driver},
                                {"pool", device.pool},
                                {"name", device.name},
                                {"attributes", attributes}});
  }
  const auto file = dir / "input.json";
  std::ofstream(file) << input.dump();
  const auto result = topology::testing::RunCommand("'" + oracle + "' < '" +
                                                    file.string() + "'");
  EXPECT_EQ(result.exit_code, 0) << result.out;
  return result.out;
}

RequestMetadata Sample() {
  RequestMetadata metadata;
  metadata.claim_namespace = "default";
  metadata.claim_name = "gpu-claim";
  metadata.claim_uid = "4f9e1c2a-7b3d-4e5f-8a9b-0c1d2e3f4a5b";
  metadata.request = "gpu";
  MetadataDevice device{
      .driver = kDriver, .pool = "node-a", .name = "pci-0000-3b-00-0"};
  device.attributes["resource.kubernetes.io/numaNode"] = {int64_t{1}, false};
  device.attributes["resource.kubernetes.io/pciBusID"] = {
      std::string("0000:3b:00.0"), false};
  device.attributes["vendorID"] = {std::string("0x10de"), false};
  device.attributes["driverVersion"] = {std::string("1.2.3-rc.1"), true};
  device.attributes["healthy"] = {true, false};
  device.attributes["numaNodes"] = {std::vector<int64_t>{0, 1}, false};
  device.attributes["ports"] = {std::vector<std::string>{"a<b", "c&d"}, false};
  device.attributes["flags"] = {std::vector<bool>{true, false}, false};
  device.attributes["line"] = {std::string("x\u2028y>z"), false};
  metadata.devices.push_back(device);
  metadata.devices.push_back(
      {.driver = kDriver, .pool = "node-a", .name = "pci-0000-3b-00-1"});
  return metadata;
}

TEST(DeviceMetadataTest, TheFileIsTheGoHelpersByteForByte) {
  ::topology::testing::TempDir dir;
  std::vector<RequestMetadata> cases;
  cases.push_back(Sample());
  RequestMetadata templated = Sample();  // a claim from a template
  templated.pod_claim_name = "accel";
  templated.request = "gpu/big";  // a subrequest of a prioritized list
  cases.push_back(templated);
  RequestMetadata empty = Sample();
  empty.devices.clear();
  empty.generation = 3;
  cases.push_back(empty);
  for (const auto& versions :
       {MetadataVersions(), std::vector<std::string>{"v1beta1"}}) {
    for (const RequestMetadata& metadata : cases) {
      auto ours = EncodeDeviceMetadata(metadata, versions);
      ASSERT_THAT(ours.status(), IsOk());
      EXPECT_EQ(
          *ours + "---\n" + MetadataContainerPath(kDriver, metadata) + "\n",
          OracleOf(metadata, versions, dir.path()))
          << metadata.request << " " << versions.size() << " version(s)";
    }
  }
  EXPECT_FALSE(EncodeDeviceMetadata(Sample(), {"v2"}).ok());
}

// Claims from a table; a handler that mirrors each device's attributes.
class Source : public ClaimSource {
 public:
  StatusOr<Claim> Get(const ClaimRef& ref, const std::string&) override {
    Claim claim{.ref = ref,
                .results = {{"gpu", kDriver, "node-a", "gpu-0"},
                            {"gpu", kDriver, "node-a", "gpu-1"},
                            {"nic", kDriver, "node-a", "nic-0"}}};
    claim.pod_claim_name = "accel";
    return claim;
  }
};
class Handler : public DriverHandler {
 public:
  StatusOr<std::vector<PreparedDevice>> Prepare(const Claim& claim) override {
    std::vector<PreparedDevice> devices;
    for (const AllocationResult& result : claim.results) {
      PreparedDevice device{.pool = result.pool, .device = result.device};
      device.cdi_device_ids = {std::string(kDriver) + "/pci=" + result.device};
      device.metadata_attributes["model"] = {std::string("x"), false};
      devices.push_back(std::move(device));
    }
    return devices;
  }
  Status Unprepare(const ClaimRef&,
                   const std::vector<PreparedDevice>&) override {
    return OkStatus();
  }
};

TEST(DeviceMetadataTest, EachRequestGetsItsFileMountedThroughCdi) {
  ::topology::testing::TempDir dir;
  Source source;
  Handler handler;
  DriverOptions options;
  options.driver_name = kDriver;
  options.registry_dir = dir.path() / "registry";
  options.plugin_dir = dir.path() / "plugin";
  options.cdi_dir = dir.path() / "cdi";
  options.device_metadata = true;
  auto runner = DriverRunner::Create(options, &source, &handler);
  ASSERT_THAT(runner.status(), IsOk());
  ASSERT_THAT((*runner)->Start(), IsOk());
  ::topology::testing::FakeDraKubelet kubelet(options.registry_dir);
  ASSERT_THAT(kubelet.Register(kDriver), IsOk());
  const std::string uid = "4f9e1c2a-7b3d-4e5f-8a9b-0c1d2e3f4a5b";
  auto answers = kubelet.Prepare({{"ml", uid, "pair"}});
  ASSERT_THAT(answers.status(), IsOk());
  const auto& answer = answers->at(uid);
  ASSERT_EQ(answer.error, "");
  const std::string gpu_id = std::string(kDriver) + "/metadata=" + uid + "_gpu";
  EXPECT_THAT(
      ::topology::testing::FakeDraKubelet::ContainerCdiIds(answer, "gpu"),
      Contains(gpu_id));
  EXPECT_THAT(
      ::topology::testing::FakeDraKubelet::ContainerCdiIds(answer, "nic"),
      Contains(std::string(kDriver) + "/metadata=" + uid + "_nic"));
  const auto file = options.plugin_dir / kMetadataSubDir / "ml_pair" / "gpu" /
                    "metadata.json";
  const std::string text = ReadFile(file);
  EXPECT_THAT(text, HasSubstr("\"name\": \"gpu-1\""));
  EXPECT_THAT(text, HasSubstr("\"podClaimName\": \"accel\""));
  EXPECT_THAT(text, HasSubstr("metadata.resource.k8s.io/v1alpha1"));
  EXPECT_EQ(
      std::filesystem::status(file).permissions() & std::filesystem::perms::all,
      std::filesystem::perms(0644));
  const auto spec = json::parse(
      ReadFile(options.cdi_dir /
               (std::string(kDriver) + "_metadata_" + uid + "_gpu.json")));
  EXPECT_EQ(spec["kind"], std::string(kDriver) + "/metadata");
  const json& mount = spec["devices"][0]["containerEdits"]["mounts"][0];
  EXPECT_EQ(mount["hostPath"], file.string());
  EXPECT_EQ(
      mount["containerPath"],
      "/var/run/kubernetes.io/dra-device-attributes/"
      "resourceclaimtemplates/accel/gpu/pci.libtopology.dev-metadata.json");
  EXPECT_THAT(mount["options"], Contains("ro"));

  auto undone = kubelet.Unprepare({{"ml", uid, "pair"}});
  ASSERT_THAT(undone.status(), IsOk());
  EXPECT_EQ(undone->at(uid), "");
  EXPECT_FALSE(std::filesystem::exists(file.parent_path().parent_path()));
  EXPECT_FALSE(std::filesystem::exists(
      options.cdi_dir /
      (std::string(kDriver) + "_metadata_" + uid + "_gpu.json")));
  (*runner)->Stop();
}

// A metadata spec whose claim is not prepared (a Prepare interrupted
// before its record) goes at the start; a prepared claim's stays, and so
// does anything not named as ours.
TEST(DeviceMetadataTest, SpecsOfClaimsNotPreparedAreRemoved) {
  ::topology::testing::TempDir dir;
  const std::string kept = "4f9e1c2a-7b3d-4e5f-8a9b-0c1d2e3f4a5b";
  const std::string stale = "0c1d2e3f-4a5b-6c7d-8e9f-0a1b2c3d4e5f";
  for (const std::string& name :
       {std::string(kDriver) + "_metadata_" + kept + "_gpu.json",
        std::string(kDriver) + "_metadata_" + stale + "_gpu.json",
        std::string(kDriver) + "_metadata_" + stale + "_nic.json",
        std::string("other.example.com_metadata_") + stale + "_gpu.json",
        std::string(kDriver) + "_metadata_not-a-uid_gpu.json"}) {
    std::ofstream(dir.path() / name) << "{}";
  }
  auto removed = RemoveUnpreparedMetadataSpecs(dir.path(), kDriver, {kept});
  ASSERT_THAT(removed.status(), IsOk());
  EXPECT_EQ(removed->size(), 2u);
  size_t left = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir.path())) {
    EXPECT_THAT(
        entry.path().filename().string(),
        ::testing::Not(HasSubstr(std::string(kDriver) + "_metadata_" + stale)));
    ++left;
  }
  EXPECT_EQ(left, 3u);
  // A directory that does not exist holds nothing to remove.
  EXPECT_THAT(
      RemoveUnpreparedMetadataSpecs(dir.path() / "none", kDriver, {}).status(),
      IsOk());
}

}  // namespace
}  // namespace topology::draplugin
