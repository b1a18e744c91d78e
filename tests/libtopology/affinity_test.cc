#include "affinity.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace topology::internal {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

std::vector<NumaNode> TwoSocketsAndCxl() {
  std::vector<NumaNode> nodes(3);
  nodes[0].id = 0;
  nodes[0].cpus = *CpuSet::ParseList("0-7");
  nodes[1].id = 1;
  nodes[1].cpus = *CpuSet::ParseList("8-15");
  nodes[2].id = 4;  // CPU-less, sparse id
  return nodes;
}

LocalityFacts Facts(std::optional<int> node, std::optional<std::string> cpus) {
  LocalityFacts facts;
  facts.numa_node = node;
  if (cpus) facts.local_cpus = *CpuSet::ParseList(*cpus);
  return facts;
}

class AffinityTest : public ::testing::Test {
 protected:
  std::vector<NumaNode> nodes_ = TwoSocketsAndCxl();
  AffinityResolver resolver_{nodes_};
};

TEST_F(AffinityTest, SysfsNodeWins) {
  const Affinity a = resolver_.Resolve(Facts(1, "8-15"), {});
  EXPECT_THAT(a.nodes, ElementsAre(1));
  EXPECT_EQ(a.source, NumaSource::kSysfs);
  EXPECT_THAT(a.conflicts, IsEmpty());
}

TEST_F(AffinityTest, CpuLessNodeFromSysfs) {
  const Affinity a = resolver_.Resolve(Facts(4, ""), {});
  EXPECT_THAT(a.nodes, ElementsAre(4));
  EXPECT_EQ(a.source, NumaSource::kSysfs);
}

TEST_F(AffinityTest, ConflictIsKeptAndReported) {
  const Affinity a = resolver_.Resolve(Facts(1, "0-3"), {});
  EXPECT_THAT(a.nodes, ElementsAre(1));
  ASSERT_EQ(a.conflicts.size(), 1u);
  EXPECT_THAT(a.conflicts[0], HasSubstr("numa_node 1 but local CPUs 0-3"));
}

TEST_F(AffinityTest, MinusOneFallsBackToStrictSubsetOfCpus) {
  const Affinity a = resolver_.Resolve(Facts(-1, "0-3"), {});
  EXPECT_THAT(a.nodes, ElementsAre(0));
  EXPECT_EQ(a.source, NumaSource::kLocalCpus);
}

TEST_F(AffinityTest, AllCpusMeansNoInformation) {
  // The kernel prints every CPU for numa_node -1: never read as "all nodes".
  const Affinity a = resolver_.Resolve(Facts(-1, "0-15"), {});
  EXPECT_THAT(a.nodes, IsEmpty());
  EXPECT_EQ(a.source, NumaSource::kUnknown);
}

TEST_F(AffinityTest, NearestBridgeWithInformationDecides) {
  const Affinity a = resolver_.Resolve(
      Facts(-1, "0-15"),
      {Facts(-1, "0-15"), Facts(1, std::nullopt), Facts(0, std::nullopt)});
  EXPECT_THAT(a.nodes, ElementsAre(1));
  EXPECT_EQ(a.source, NumaSource::kBridge);
}

TEST_F(AffinityTest, NodeThatIsNotOnlineIsIgnoredWithConflict) {
  const Affinity a = resolver_.Resolve(Facts(7, std::nullopt), {});
  EXPECT_THAT(a.nodes, IsEmpty());
  EXPECT_EQ(a.source, NumaSource::kUnknown);
  ASSERT_EQ(a.conflicts.size(), 1u);
  EXPECT_THAT(a.conflicts[0], HasSubstr("not an online NUMA node"));
}

TEST_F(AffinityTest, NothingKnownIsUnknownNeverZero) {
  const Affinity a = resolver_.Resolve(Facts(std::nullopt, std::nullopt), {});
  EXPECT_THAT(a.nodes, IsEmpty());
  EXPECT_EQ(a.source, NumaSource::kUnknown);
}

TEST_F(AffinityTest, CpusSpanningTwoNodes) {
  const Affinity a = resolver_.Resolve(Facts(-1, "6-9"), {});
  EXPECT_THAT(a.nodes, ElementsAre(0, 1));
  EXPECT_EQ(a.source, NumaSource::kLocalCpus);
}

}  // namespace
}  // namespace topology::internal
