// `topology-manager merge` as a user runs it: JSON in, JSON out, exit codes.
#include <fstream>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "build_paths.h"
#include "run_command.h"
#include "temp_dir.h"

namespace topology::manager {
namespace {

using nlohmann::json;
using ::testing::HasSubstr;

using testing::CommandResult;

CommandResult Merge(const std::string& input, const std::string& args = "") {
  testing::TempDir dir;
  const auto file = dir.path() / "case.json";
  std::ofstream(file) << input;
  return testing::RunCommand(
      topology::testing::ProgramPath("topology-manager") + " merge " + args +
      " < '" + file.string() + "'");
}

constexpr char kIssueExample[] = R"({
  "policy": "best-effort",
  "options": {"prefer-closest-numa-nodes": "true"},
  "numa_nodes": [0, 1, 2, 3],
  "distances": {"0": [10, 11, 12, 12], "1": [11, 10, 12, 12],
                "2": [12, 12, 10, 11], "3": [12, 12, 11, 10]},
  "providers": [null, {"resA": null}, {"resB": []},
                {"gpu": [{"mask": [0], "preferred": true},
                         {"mask": null, "preferred": false}]}]
})";

TEST(MergeToolTest, TheDocumentedExample) {
  for (const char* engine : {"fast", "reference"}) {
    const CommandResult r =
        Merge(kIssueExample, std::string("--engine ") + engine);
    ASSERT_EQ(r.exit_code, 0) << r.out;
    const json out = json::parse(r.out);
    // resB's empty list makes every permutation non-preferred; the gpu
    // list's {0} ANDs to {0}, and nil ANDs to all four nodes; B = 1.
    EXPECT_EQ(out["mask"], json::array({0}));
    EXPECT_EQ(out["preferred"], false);
    EXPECT_EQ(out["admit"], true);
  }
}

TEST(MergeToolTest, ExplainSaysWhy) {
  const CommandResult r = Merge(kIssueExample, "--explain");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  const json out = json::parse(r.out);
  EXPECT_EQ(out["explanation"]["best_non_preferred_count"], 1);
  EXPECT_EQ(out["explanation"]["hint_lists"], 4);
  EXPECT_EQ(out["explanation"]["permutations"], 2.0);
  EXPECT_THAT(out["explanation"]["reason"].get<std::string>(),
              HasSubstr("non-preferred"));
}

// The memory manager's lists as a case: one list per memory type, the same
// sets in each (as calculateHints gives them), merged with a device list.
// A 10 GiB pod on two 7 GiB nodes beside a GPU on node 1: {1} AND {0,1}
// is not preferred (a merge is preferred only when every affinity is the
// same), nor is the GPU's {0,1}; restricted refuses the pod, as a kubelet
// does (k/k #138523: CPU or device and memory locality that cannot both be
// met).
TEST(MergeToolTest, MemoryManagerListsMergeLikeAnyProvider) {
  const std::string memory =
      R"({"memory":[{"mask":[0,1],"preferred":true}],
          "hugepages-1Gi":[{"mask":[0,1],"preferred":true}]})";
  for (const char* engine : {"fast", "reference"}) {
    const CommandResult r = Merge(
        R"({"policy":"restricted","numa_nodes":[0,1],"providers":[
            {"example.com/gpu":[{"mask":[1],"preferred":true},
                                {"mask":[0,1],"preferred":false}]},
            {},)" +
            memory + "]}",
        std::string("--engine ") + engine);
    ASSERT_EQ(r.exit_code, 0) << r.out;
    EXPECT_EQ(json::parse(r.out),
              json::parse(R"({"mask":[0,1],"preferred":false,"admit":false})"))
        << engine;
  }
  // Alone, the memory lists admit {0,1}, preferred.
  const CommandResult alone =
      Merge(R"({"policy":"restricted","numa_nodes":[0,1],"providers":[)" +
            memory + "]}");
  ASSERT_EQ(alone.exit_code, 0) << alone.out;
  EXPECT_EQ(json::parse(alone.out),
            json::parse(R"({"mask":[0,1],"preferred":true,"admit":true})"));
}

TEST(MergeToolTest, SingleNumaNodeAndBooleanOptions) {
  const CommandResult r = Merge(R"({"policy":"single-numa-node",
      "options":{"max-allowable-numa-nodes":16},
      "numa_nodes":[0,2],
      "providers":[{"gpu":[{"mask":[2],"preferred":true}]}, {}]})");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_EQ(json::parse(r.out),
            json::parse(R"({"mask":[2],"preferred":true,"admit":true})"));
}

TEST(MergeToolTest, BadInputExitsTwoNamingTheField) {
  struct Bad {
    const char* input;
    const char* field;
  };
  const Bad cases[] = {
      {"{nope", "not valid JSON"},
      {R"({"policy":"bogus","numa_nodes":[0],"providers":[]})",
       "policy: unknown policy: \"bogus\""},
      {R"({"policy":"best-effort","numa_nodes":[0],"providers":[{"g":[{"mask":[64],"preferred":true}]}]})",
       "providers[0].g[0].mask[0]"},
      {R"({"policy":"best-effort","numa_nodes":[0],"providers":[{"g":[{"mask":[1],"preferred":true}]}]})",
       "is not in numa_nodes"},
      {R"({"policy":"best-effort","options":{"prefer-closest-numa-nodes":true},"numa_nodes":[0],"providers":[]})",
       "distances: required"},
      {R"({"policy":"best-effort","options":{"max-allowable-numa-nodes":"4"},"numa_nodes":[0],"providers":[]})",
       "options: the minimum value"},
      {R"({"policy":"best-effort","options":{"frobnicate":"1"},"numa_nodes":[0],"providers":[]})",
       "unknown Topology Manager Policy option"},
      {R"({"policy":"best-effort","numa_nodes":[0,0],"providers":[]})",
       "numa_nodes[1]"},
      {R"({"policy":"best-effort","numa_nodes":[0],"providers":[{"g":[{"mask":[0]}]}]})",
       "providers[0].g[0].preferred"},
      {R"({"policy":"best-effort","numa_nodes":[0,1],"distances":{"0":[10,20]},"providers":[]})",
       "distances.1: missing row"},
      {R"({"policy":"best-effort","numa_nodes":[0],"providers":{}})",
       "providers"},
      {R"({"policy":"best-effort","numa_nodes":[0],"providers":[],"extra":1})",
       "extra: unknown key"},
  };
  for (const Bad& bad : cases) {
    const CommandResult r = Merge(bad.input);
    EXPECT_EQ(r.exit_code, 2) << bad.input << "\n" << r.out;
    EXPECT_THAT(r.out, HasSubstr(bad.field)) << bad.input;
    EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), 1) << r.out;
  }
}

// Beyond the kubelet: "dynamic" merges with the case's pod_policy (none
// when absent); a fixed policy ignores it and says so.
TEST(MergeToolTest, DynamicMergesWithThePodsPolicy) {
  const std::string split = R"("numa_nodes": [0, 1],
    "providers": [{"gpu": [{"mask": [0, 1], "preferred": true}]}]})";
  const auto run = [&](const std::string& head) {
    const CommandResult r = Merge("{" + head + split);
    EXPECT_EQ(r.exit_code, 0) << r.out;
    return json::parse(r.out);
  };
  json out = run(R"("policy": "dynamic", "pod_policy": "single-numa-node",)");
  EXPECT_FALSE(out["admit"].get<bool>());
  EXPECT_EQ(out["applied_policy"]["policy"], "single-numa-node");
  out = run(R"("policy": "dynamic", "pod_policy": "restricted",)");
  EXPECT_TRUE(out["admit"].get<bool>());
  out = run(R"("policy": "dynamic",)");
  EXPECT_EQ(out["applied_policy"]["policy"], "none");
  EXPECT_EQ(out["applied_policy"]["source"], "default");
  out = run(R"("policy": "restricted", "pod_policy": "single-numa-node",)");
  EXPECT_TRUE(out["admit"].get<bool>());
  EXPECT_EQ(out["applied_policy"]["policy"], "restricted");
  EXPECT_EQ(out["applied_policy"]["source"], "node");
  const CommandResult bad =
      Merge(R"({"policy": "dynamic", "pod_policy": "sometimes",)" + split);
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_THAT(bad.out, HasSubstr("pod_policy"));
}

}  // namespace
}  // namespace topology::manager
