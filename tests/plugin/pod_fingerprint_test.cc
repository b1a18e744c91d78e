// topology::common::PodFingerprint against upstream's own package
// (github.com/k8stopologyawareschedwg/podfingerprint, pinned by
// fingerprint_oracle/go.mod), run as a Go program: upstream's 259-pod test
// vectors and its Check table, and 300 seeded pod sets (empty, one pod,
// duplicates, non-ASCII and long names, thousands of pods) signed alike.
#include "topology/common/pod_fingerprint.h"

#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "build_paths.h"
#include "run_command.h"
#include "status_matchers.h"
#include "temp_dir.h"

namespace topology::common {
namespace {

using ::testing::HasSubstr;
using ::topology::testing::IsOk;
using ::topology::testing::StatusIs;

using Pod = std::pair<std::string, std::string>;  // namespace, name

// The oracle's path; empty (and the test fails saying why) without Go.
std::string Oracle() {
  const std::string& path =
      topology::testing::ProgramPath("fingerprint-oracle");
  EXPECT_FALSE(path.empty())
      << "the pod fingerprint oracle was not built (no Go 1.26 or newer)";
  return path;
}

// Upstream's testdata/pods.txt ("kubectl get pods -A": namespace, name,
// ...), from the module the oracle was built with.
std::vector<Pod> UpstreamPods(const std::string& oracle) {
  std::ifstream moddir_file(oracle + ".moddir");
  std::string moddir;
  std::getline(moddir_file, moddir);
  std::ifstream text(std::filesystem::path(moddir) / "testdata" / "pods.txt");
  EXPECT_TRUE(text.good()) << "no testdata/pods.txt under \"" << moddir << "\"";
  std::vector<Pod> pods;
  for (std::string line; std::getline(text, line);) {
    std::istringstream fields(line);
    Pod pod;
    if (fields >> pod.first >> pod.second) pods.push_back(pod);
  }
  return pods;
}

std::string Sign(const std::vector<Pod>& pods) {
  PodFingerprint fingerprint(pods.size());
  for (const auto& [ns, name] : pods) fingerprint.Add(ns, name);
  return fingerprint.Sign();
}

// The oracle's signature of each set, in order.
std::vector<std::string> OracleSigns(const std::string& oracle,
                                     const std::vector<std::vector<Pod>>& sets,
                                     const std::filesystem::path& dir) {
  const std::filesystem::path input = dir / "pods.txt";
  {
    std::ofstream out(input);
    for (const auto& set : sets) {
      // An empty set is one empty line; the oracle signs it too.
      for (const auto& [ns, name] : set) out << ns << " " << name << "\n";
      out << "\n";
    }
  }
  const auto result = topology::testing::RunCommand("'" + oracle + "' < '" +
                                                    input.string() + "'");
  EXPECT_EQ(result.exit_code, 0) << result.out;
  std::vector<std::string> signs;
  std::istringstream lines(result.out);
  for (std::string line; std::getline(lines, line);) signs.push_back(line);
  return signs;
}

TEST(PodFingerprintTest, UpstreamsVectorsAndCheckTable) {
  const std::string oracle = Oracle();
  ASSERT_FALSE(oracle.empty());
  const std::vector<Pod> pods = UpstreamPods(oracle);
  ASSERT_EQ(pods.size(), 259u);
  PodFingerprint fingerprint(pods.size());
  for (const auto& [ns, name] : pods) fingerprint.Add(ns, name);
  // podfingerprint_test.go's table, case by case.
  EXPECT_EQ(fingerprint.Sign(), "pfp0v001e477a4e3b2fc0ec6");
  EXPECT_THAT(fingerprint.Check("pfp0v001e477a4e3b2fc0ec6"), IsOk());
  EXPECT_THAT(fingerprint.Check("wrngv001e477a4e3b2fc0ec6"),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("malformed")));
  EXPECT_THAT(fingerprint.Check("pfp0vX"),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("malformed")));
  EXPECT_THAT(fingerprint.Check("pfp0v000e477a4e3b2fc0ec6"),
              StatusIs(StatusCode::kFailedPrecondition, HasSubstr("v000")));
  EXPECT_THAT(fingerprint.Check("pfp0v001e477abb123fc0ec1"),
              StatusIs(StatusCode::kAborted,
                       HasSubstr("got pfp0v001e477a4e3b2fc0ec6")));
  // The order pods are added in does not matter.
  std::vector<Pod> reversed(pods.rbegin(), pods.rend());
  EXPECT_EQ(Sign(reversed), "pfp0v001e477a4e3b2fc0ec6");
}

TEST(PodFingerprintTest, SeededPodSetsAgreeWithUpstream) {
  const std::string oracle = Oracle();
  ASSERT_FALSE(oracle.empty());
  topology::testing::TempDir dir;
  std::mt19937_64 random(20261207);
  const std::vector<std::string> words = {
      "default", "kube-system", "gpu-operator", "numaresources", "a",    "z",
      "äöü-ns",  "日本",        "pod",          "worker-0",      "x-y-z"};
  std::vector<std::vector<Pod>> sets = {{}, {{"default", "one"}}};
  for (int s = 0; s < 300; ++s) {
    std::vector<Pod> set;
    const size_t count = s % 50 == 49 ? 3000 : random() % 40;
    for (size_t p = 0; p < count; ++p) {
      std::string ns = words[random() % words.size()];
      std::string name = words[random() % words.size()] + "-" +
                         std::to_string(random() % 100000);
      if (random() % 20 == 0) name += std::string(200, 'n');  // long names
      set.emplace_back(std::move(ns), std::move(name));
      if (random() % 10 == 0) set.push_back(set.back());  // a duplicate
    }
    sets.push_back(std::move(set));
  }
  const std::vector<std::string> expected =
      OracleSigns(oracle, sets, dir.path());
  ASSERT_EQ(expected.size(), sets.size());
  for (size_t s = 0; s < sets.size(); ++s) {
    EXPECT_EQ(Sign(sets[s]), expected[s])
        << "set " << s << " of " << sets[s].size() << " pods";
  }
}

}  // namespace
}  // namespace topology::common
