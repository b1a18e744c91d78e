// The framework's CDI spec writer: names and kinds as the CDI parser
// accepts them, the oldest version that expresses a spec, atomic files with
// an explicit mode that never follow a planted link.
#include "topology/common/cdi.h"

#include <filesystem>
#include <fstream>

#include <sys/stat.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "status_matchers.h"
#include "temp_dir.h"

namespace topology::common {
namespace {

using ::testing::HasSubstr;
using topology::testing::IsOk;
using topology::testing::StatusIs;

TEST(CdiTest, KindsAndNamesAsTheCdiParserTakesThem) {
  for (const char* good :
       {"vendor.com/class", "foo.bar.baz/foo-bar123.B_az", "example.com/gpu"}) {
    EXPECT_THAT(ValidateCdiKind(good), IsOk()) << good;
  }
  for (const char* bad : {"foo", "vendor.com/foo/", "vendor.com/foo/bar",
                          "-vendor.com/x", "vendor.com/-x", "/x", "v..c/x"}) {
    EXPECT_THAT(ValidateCdiKind(bad), StatusIs(StatusCode::kInvalidArgument))
        << bad;
  }
  for (const char* good : {"0000:1a:00.0", "GPU-6a1b", "gpu0", "a_b.c"}) {
    EXPECT_THAT(ValidateCdiDeviceName(good), IsOk()) << good;
  }
  for (const char* bad : {"", "-a", "a-", "a/b", "a b", "a=b"}) {
    EXPECT_THAT(ValidateCdiDeviceName(bad),
                StatusIs(StatusCode::kInvalidArgument))
        << bad;
  }
}

TEST(CdiTest, TheOldestVersionThatExpressesTheSpec) {
  CdiSpec spec{.kind = "example.com/gpu",
               .devices = {{.name = "gpu0",
                            .device_nodes = {{"/dev/x", "/dev/x", "rw"}}}}};
  EXPECT_EQ(MinimumCdiVersion(spec), "0.3.0");
  spec.devices[0].name = "0000:1a:00.0";  // starts with a digit
  EXPECT_EQ(MinimumCdiVersion(spec), "0.5.0");
  spec.devices[0].name = "gpu0";
  spec.devices[0].device_nodes[0].host_path = "/dev/y";  // hostPath
  EXPECT_EQ(MinimumCdiVersion(spec), "0.5.0");
}

TEST(CdiTest, WritesAtomicallyWithModeAndNeverThroughALink) {
  testing::TempDir dir;
  const CdiSpec spec{
      .kind = "example.com/gpu",
      .devices = {{.name = "0000:1a:00.0",
                   .device_nodes = {{"/dev/dri/renderD128",
                                     "/dev/dri/renderD128", "rw"}},
                   .mounts = {{"/opt/lib", "/host/lib", true}}}}};
  const mode_t old_umask = umask(077);
  ASSERT_THAT(WriteCdiSpec(dir.path(), "x.json", spec), IsOk());
  umask(old_umask);
  const auto path = dir.path() / "x.json";
  EXPECT_EQ(std::filesystem::status(path).permissions(),
            std::filesystem::perms(0644));
  std::ifstream in(path);
  const nlohmann::json json = nlohmann::json::parse(in);
  EXPECT_EQ(json["cdiVersion"], "0.5.0");
  EXPECT_EQ(json["kind"], "example.com/gpu");
  EXPECT_EQ(json["devices"][0]["containerEdits"]["deviceNodes"][0]["path"],
            "/dev/dri/renderD128");
  EXPECT_EQ(json["devices"][0]["containerEdits"]["mounts"][0]["options"],
            nlohmann::json({"bind", "ro"}));
  // What the runtime's reader finds in the directory.
  std::vector<std::string> warnings;
  EXPECT_EQ(CdiDefinedNames({dir.path()}, &warnings),
            std::set<std::string>({"example.com/gpu=0000:1a:00.0"}));
  EXPECT_TRUE(warnings.empty());
  // A link planted at the path is replaced, the file it names untouched.
  const auto victim = dir.path() / "victim";
  std::ofstream(victim) << "keep";
  std::filesystem::remove(path);
  std::filesystem::create_symlink(victim, path);
  ASSERT_THAT(WriteCdiSpec(dir.path(), "x.json", spec), IsOk());
  EXPECT_FALSE(std::filesystem::is_symlink(path));
  std::ifstream kept(victim);
  EXPECT_EQ(std::string(std::istreambuf_iterator<char>(kept), {}), "keep");
  // Nothing left beside it; removal is idempotent.
  size_t files = 0;
  for ([[maybe_unused]] const auto& entry :
       std::filesystem::directory_iterator(dir.path())) {
    ++files;
  }
  EXPECT_EQ(files, 2U);
  EXPECT_THAT(RemoveCdiSpec(dir.path(), "x.json"), IsOk());
  EXPECT_THAT(RemoveCdiSpec(dir.path(), "x.json"), IsOk());
  // Refused before anything is written.
  EXPECT_THAT(WriteCdiSpec(dir.path(), "../x.json", spec),
              StatusIs(StatusCode::kInvalidArgument));
  CdiSpec twice = spec;
  twice.devices.push_back(spec.devices[0]);
  EXPECT_THAT(WriteCdiSpec(dir.path(), "y.json", twice),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("twice")));
  CdiSpec bare = spec;
  bare.devices[0].device_nodes.clear();
  bare.devices[0].mounts.clear();
  EXPECT_THAT(
      WriteCdiSpec(dir.path(), "y.json", bare),
      StatusIs(StatusCode::kInvalidArgument, HasSubstr("no container edits")));
  EXPECT_THAT(WriteCdiSpec(dir.path() / "absent", "y.json", spec),
              StatusIs(StatusCode::kFailedPrecondition));
}

TEST(CdiTest, TheReaderSkipsWhatARuntimeSkips) {
  testing::TempDir dir;
  std::ofstream(dir.path() / "broken.yaml") << "kind: [a\n";
  std::ofstream(dir.path() / "nokind.json") << "{\"devices\": []}";
  std::ofstream(dir.path() / "ignored.txt")
      << "kind: a/b\ndevices: [{name: x}]";
  std::ofstream(dir.path() / "good.yml")
      << "cdiVersion: 0.5.0\nkind: nvidia.com/gpu\ndevices:\n- name: \"0\"\n";
  std::vector<std::string> warnings;
  EXPECT_EQ(CdiDefinedNames({dir.path(), dir.path() / "absent"}, &warnings),
            std::set<std::string>({"nvidia.com/gpu=0"}));
  EXPECT_EQ(warnings.size(), 2U);
}

}  // namespace
}  // namespace topology::common
