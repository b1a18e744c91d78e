// The one YAML loader (topology/common/yaml_load.h) and every reader of the
// project on top of it: a "billion laughs" document (a few hundred bytes
// whose aliases expand to hundreds of millions of nodes) is refused by
// each, naming the document, instead of walked without end; aliases of a
// normal size are still read.
#include "topology/common/yaml_load.h"

#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "topology/common/cdi.h"
#include "topology/draplugin/kube_config.h"

#include "config.h"
#include "pod_manifest.h"
#include "status_matchers.h"

namespace topology::yaml {
namespace {

using ::testing::HasSubstr;
using ::topology::testing::IsOk;
using ::topology::testing::StatusIs;

// Nine levels of nine aliases: 9^9 (387 million) scalars once expanded,
// under `key` of a mapping whose other lines are `prefix`.
std::string Laughs(const std::string& prefix, const std::string& key) {
  std::string text =
      prefix + "l0: &l0 [lol, lol, lol, lol, lol, lol, lol, lol, lol]\n";
  for (int level = 1; level <= 8; ++level) {
    const std::string below = "*l" + std::to_string(level - 1);
    text += "l" + std::to_string(level) + ": &l" + std::to_string(level) + " [";
    for (int i = 0; i < 9; ++i) text += (i ? ", " : "") + below;
    text += "]\n";
  }
  text += key + ": *l8\n";
  return text;
}

TEST(YamlLoadTest, AliasBombIsRefusedBeforeAnyWalk) {
  EXPECT_THAT(Load(Laughs("", "bomb"), "bomb.yaml").status(),
              StatusIs(StatusCode::kInvalidArgument,
                       HasSubstr("bomb.yaml: more than 1048576 nodes with its "
                                 "aliases expanded (excessive aliasing)")));
  // The bound is for the whole stream: many documents, each under it.
  std::string stream;
  for (int i = 0; i < 40; ++i) {
    stream +=
        "---\nl0: &l0 [a, a, a, a, a, a, a, a]\n"
        "l1: &l1 [*l0, *l0, *l0, *l0, *l0, *l0, *l0, *l0]\n"
        "l2: &l2 [*l1, *l1, *l1, *l1, *l1, *l1, *l1, *l1]\n"
        "l3: &l3 [*l2, *l2, *l2, *l2, *l2, *l2, *l2, *l2]\n"
        "l4: [*l3, *l3, *l3, *l3, *l3, *l3, *l3, *l3]\n";
  }
  EXPECT_THAT(
      LoadAll(stream, "stream.yaml").status(),
      StatusIs(StatusCode::kInvalidArgument, HasSubstr("excessive aliasing")));
}

TEST(YamlLoadTest, AliasesOfANormalSizeAndKeysGivenTwice) {
  auto loaded = Load("base: &b {a: 1, b: [x, y]}\nuse: *b\nmore: *b\n", "ok");
  ASSERT_THAT(loaded.status(), IsOk());
  EXPECT_EQ((*loaded)["more"]["b"][1].as<std::string>(), "y");
  EXPECT_THAT(Load("a: {b: 1, b: 2}\n", "twice.yaml").status(),
              StatusIs(StatusCode::kInvalidArgument,
                       HasSubstr("twice.yaml: a: key \"b\" is given twice "
                                 "(lines 1 and 1)")));
  EXPECT_THAT(Load("a: [b, {c: 1\n", "torn.yaml").status(),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("torn.yaml:")));
  EXPECT_THAT(CheckExpansion(YAML::Load("[a, b, c]"), "small", 3).message(),
              HasSubstr("small: more than 3 nodes"));
  EXPECT_THAT(CheckExpansion(YAML::Load("[a, b]"), "small", 3), IsOk());
}

// Each reader of outside YAML goes through the loader.
TEST(YamlLoadTest, EveryReaderRefusesTheBomb) {
  EXPECT_THAT(host::ParsePodManifests(
                  Laughs("apiVersion: v1\nkind: Pod\n", "spec"), "pod.yaml")
                  .status(),
              StatusIs(StatusCode::kInvalidArgument,
                       HasSubstr("pod.yaml (document 1): more than")));
  EXPECT_THAT(device_plugin::ParseConfig(Laughs("", "resources"), "config.yaml")
                  .status(),
              StatusIs(StatusCode::kInvalidArgument,
                       HasSubstr("config.yaml: more than")));
  EXPECT_THAT(draplugin::ParseKubeConfig(
                  Laughs("current-context: a\n", "contexts"), "/", "kubeconfig")
                  .status(),
              StatusIs(StatusCode::kInvalidArgument,
                       HasSubstr("kubeconfig: more than")));
  EXPECT_THAT(
      common::CdiNamesOf(Laughs("kind: a.com/b\n", "devices")).status(),
      StatusIs(StatusCode::kInvalidArgument, HasSubstr("excessive aliasing")));
}

}  // namespace
}  // namespace topology::yaml
