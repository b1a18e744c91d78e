// The static CPU manager policy's options: upstream's tables of
// pkg/kubelet/cm/cpumanager/policy_options_test.go (Kubernetes v1.37.2),
// each under its upstream name and row description, run through
// CpuManager::Create (NewStaticPolicyOptions and
// ValidateStaticPolicyOptions in one), on the machines of policy_test.go;
// then the kubelet's words, and what the options change in hints and
// CPUs. The choice of CPUs under every option is also judged, admission
// by admission, by the kubelet oracle (kubelet_oracle_test.cc).
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "topology/discovery.h"
#include "topology/manager/cpu_manager.h"
#include "topology/manager/topology_manager.h"
#include "topology/testing/machines.h"

#include "status_matchers.h"
#include "temp_dir.h"
#include "upstream_machines.h"

namespace topology::manager {
namespace {

using testing::StatusIs;

constexpr char kAlphaGate[] = "CPUManagerPolicyAlphaOptions";
constexpr char kBetaGate[] = "CPUManagerPolicyBetaOptions";

using upstream::DualSocketMultiNumaPerSocketHT;
using upstream::MultiSocketDualSocketPerNumaHT;

// The CPU manager as the kubelet makes it: static, CPU 0 reserved, the
// Topology Manager's policy and the feature gates given.
Status CreateWith(const Topology& topology,
                  std::map<std::string, std::string> options,
                  std::map<std::string, bool> gates = {},
                  const std::string& topology_policy = kPolicyNone) {
  CpuManagerConfig config;
  config.policy = kCpuPolicyStatic;
  config.reserved = CpuSet::Of({0});
  config.options = std::move(options);
  if (gates.count(kAlphaGate)) config.alpha_options = gates[kAlphaGate];
  if (gates.count(kBetaGate)) config.beta_options = gates[kBetaGate];
  config.topology_policy = topology_policy;
  return CpuManager::Create(config, topology, nullptr).status();
}

TEST(CpuPolicyOptionsTest, PolicyDefaultsAvailable) {
  const Topology machine = DualSocketMultiNumaPerSocketHT();
  const struct {
    std::string option;
    bool available;
  } rows[] = {{"this-option-does-not-exist", false}, {"full-pcpus-only", true}};
  for (const auto& row : rows) {
    EXPECT_EQ(CreateWith(machine, {{row.option, "true"}}).ok(), row.available)
        << row.option;
  }
}

TEST(CpuPolicyOptionsTest, PolicyOptionsAvailable) {
  const Topology machine = DualSocketMultiNumaPerSocketHT();
  const struct {
    std::string option;
    std::string gate;
    bool enabled;
    bool available;
  } rows[] = {
      {"this-option-does-not-exist", kBetaGate, false, false},
      {"this-option-does-not-exist", kBetaGate, true, false},
      {"align-by-socket", kAlphaGate, true, true},
      {"align-by-socket", kBetaGate, true, false},
      {"distribute-cpus-across-numa", kBetaGate, true, true},
      {"distribute-cpus-across-numa", kBetaGate, false, false},
      {"distribute-cpus-across-cores", kAlphaGate, true, true},
      {"distribute-cpus-across-cores", kBetaGate, true, false},
  };
  for (const auto& row : rows) {
    EXPECT_EQ(
        CreateWith(machine, {{row.option, "true"}}, {{row.gate, row.enabled}})
            .ok(),
        row.available)
        << row.option << " with " << row.gate << "=" << row.enabled;
  }
}

TEST(CpuPolicyOptionsTest, PolicyOptionsAlwaysAvailableOnceGA) {
  const Topology machine = DualSocketMultiNumaPerSocketHT();
  for (const char* option : {"full-pcpus-only", "strict-cpu-reservation",
                             "prefer-align-cpus-by-uncorecache"}) {
    EXPECT_TRUE(CreateWith(machine, {{option, "true"}},
                           {{kAlphaGate, false}, {kBetaGate, false}})
                    .ok())
        << option;
  }
}

TEST(CpuPolicyOptionsTest, ValidateStaticPolicyOptions) {
  const Topology multi_numa = DualSocketMultiNumaPerSocketHT();
  const Topology multi_socket = MultiSocketDualSocketPerNumaHT();
  const struct {
    std::string description;
    std::map<std::string, std::string> options;
    const Topology* topology;
    std::string topology_policy;
    bool error;
  } rows[] = {
      {"Align by socket not enabled",
       {{"full-pcpus-only", "true"}},
       &multi_numa,
       kPolicySingleNumaNode,
       false},
      {"Align by socket enabled with topology manager single numa node",
       {{"align-by-socket", "true"}},
       &multi_numa,
       kPolicySingleNumaNode,
       true},
      {"Align by socket enabled with num_sockets > num_numa",
       {{"align-by-socket", "true"}},
       &multi_socket,
       kPolicyNone,
       true},
      {"Align by socket enabled: with topology manager None policy",
       {{"align-by-socket", "true"}},
       &multi_numa,
       kPolicyNone,
       false},
      {"Align by socket enabled: with topology manager best-effort policy",
       {{"align-by-socket", "true"}},
       &multi_numa,
       kPolicyBestEffort,
       false},
      {"Align by socket enabled: with topology manager restricted policy",
       {{"align-by-socket", "true"}},
       &multi_numa,
       kPolicyRestricted,
       false},
  };
  for (const auto& row : rows) {
    EXPECT_EQ(!CreateWith(*row.topology, row.options, {{kAlphaGate, true}},
                          row.topology_policy)
                   .ok(),
              row.error)
        << row.description;
  }
}

// policy_static_test.go's TestStaticPolicyOptions (NewStaticPolicyOptions):
// refused or taken; what it parses to is what the other tests observe.
TEST(CpuPolicyOptionsTest, StaticPolicyOptions) {
  const Topology machine = DualSocketMultiNumaPerSocketHT();
  const struct {
    std::string description;
    std::map<std::string, std::string> options;
    bool error;
  } rows[] = {
      {"nil args", {}, false},
      {"empty args", {}, false},
      {"bad single arg", {{"badValue1", ""}}, true},
      {"bad multiple arg", {{"badValue1", ""}, {"badvalue2", "aaaa"}}, true},
      {"good arg", {{"full-pcpus-only", "true"}}, false},
      {"good arg, bad value", {{"full-pcpus-only", "enabled!"}}, true},
      {"bad arg intermixed",
       {{"full-pcpus-only", "1"}, {"badvalue2", "lorem ipsum"}},
       true},
  };
  for (const auto& row : rows) {
    EXPECT_EQ(!CreateWith(machine, row.options).ok(), row.error)
        << row.description;
  }
}

TEST(CpuPolicyOptionsTest, PolicyOptionsCompatibility) {
  const Topology machine = DualSocketMultiNumaPerSocketHT();
  const struct {
    std::string description;
    std::string gate;
    std::map<std::string, std::string> options;
    bool error;
  } rows[] = {
      {"FullPhysicalCPUsOnly set to true only",
       kBetaGate,
       {{"full-pcpus-only", "true"}},
       false},
      {"DistributeCPUsAcrossCores set to true only",
       kAlphaGate,
       {{"distribute-cpus-across-cores", "true"}},
       false},
      {"PreferAlignByUnCoreCache and StrictCPUReservation set to true",
       kAlphaGate,
       {{"prefer-align-cpus-by-uncorecache", "true"},
        {"strict-cpu-reservation", "true"}},
       false},
      {"PreferAlignByUnCoreCache and FullPCPUsOnly set to true",
       kAlphaGate,
       {{"prefer-align-cpus-by-uncorecache", "true"},
        {"full-pcpus-only", "true"}},
       false},
      {"PreferAlignByUnCoreCache and AlignBySocket set to true",
       kAlphaGate,
       {{"prefer-align-cpus-by-uncorecache", "true"},
        {"align-by-socket", "true"}},
       false},
      {"FullPhysicalCPUsOnly and DistributeCPUsAcrossCores options can not "
       "coexist",
       kAlphaGate,
       {{"full-pcpus-only", "true"}, {"distribute-cpus-across-cores", "true"}},
       true},
      {"PreferAlignByUnCoreCache and DistributeCPUsAcrossCores options can "
       "not coexist",
       kAlphaGate,
       {{"prefer-align-cpus-by-uncorecache", "true"},
        {"distribute-cpus-across-cores", "true"}},
       true},
      {"PreferAlignByUnCoreCache and DistributeCPUsAcrossNUMA options can "
       "not coexist",
       kAlphaGate,
       {{"prefer-align-cpus-by-uncorecache", "true"},
        {"distribute-cpus-across-numa", "true"}},
       true},
  };
  for (const auto& row : rows) {
    EXPECT_EQ(!CreateWith(machine, row.options, {{row.gate, true}}).ok(),
              row.error)
        << row.description;
  }
}

// The kubelet's words for each refusal.
TEST(CpuPolicyOptionsTest, RefusedInTheKubeletsWords) {
  const Topology machine = DualSocketMultiNumaPerSocketHT();
  EXPECT_THAT(
      CreateWith(machine, {{"distribute-cpus-across-numa", "true"}},
                 {{kBetaGate, false}}),
      StatusIs(StatusCode::kInvalidArgument,
               "CPU Manager Policy Beta-level Options not enabled, but option "
               "\"distribute-cpus-across-numa\" provided"));
  EXPECT_THAT(
      CreateWith(machine, {{"distribute-cpus-across-cores", "true"}}),
      StatusIs(StatusCode::kInvalidArgument,
               "CPU Manager Policy Alpha-level Options not enabled, but option "
               "\"distribute-cpus-across-cores\" provided"));
  EXPECT_THAT(
      CreateWith(machine,
                 {{"full-pcpus-only", "true"},
                  {"distribute-cpus-across-cores", "true"}},
                 {{kAlphaGate, true}}),
      StatusIs(StatusCode::kInvalidArgument,
               "static policy options full-pcpus-only and "
               "distribute-cpus-across-cores can not be used at the same "
               "time"));
  EXPECT_THAT(
      CreateWith(machine, {{"prefer-align-cpus-by-uncorecache", "true"},
                           {"distribute-cpus-across-numa", "true"}}),
      StatusIs(StatusCode::kInvalidArgument,
               "static policy options prefer-align-cpus-by-uncorecache and "
               "distribute-cpus-across-numa can not be used at the same "
               "time"));
  EXPECT_THAT(
      CreateWith(machine, {{"align-by-socket", "true"}}, {{kAlphaGate, true}},
                 kPolicySingleNumaNode),
      StatusIs(StatusCode::kInvalidArgument,
               "Topolgy manager single-numa-node policy is incompatible with "
               "CPUManager align-by-socket policy option"));
  EXPECT_THAT(
      CreateWith(MultiSocketDualSocketPerNumaHT(),
                 {{"align-by-socket", "true"}}, {{kAlphaGate, true}}),
      StatusIs(StatusCode::kInvalidArgument,
               "Align by socket is not compatible with hardware where number "
               "of sockets are more than number of NUMA"));
  // A false option is still checked for its gate and value, and then off.
  EXPECT_THAT(CreateWith(machine, {{"align-by-socket", "false"}}),
              StatusIs(StatusCode::kInvalidArgument));
  EXPECT_THAT(CreateWith(machine, {{"full-pcpus-only", "yes"}}),
              StatusIs(StatusCode::kInvalidArgument,
                       "bad value for option \"full-pcpus-only\": "
                       "strconv.ParseBool: parsing \"yes\": invalid syntax"));
}

Pod CpuPod(const std::string& uid, int64_t cpus) {
  Pod pod;
  pod.uid = uid;
  pod.name = uid;
  pod.guaranteed = true;
  pod.containers = {Container{"c", {{"cpu", cpus * 1000}}, false}};
  return pod;
}

// prefer-align-cpus-by-uncorecache on a machine of four L3 caches of 4
// cores: 8 CPUs are one whole cache; without the option the whole cores
// in id order span two (cores 1-4, beside the reserved CPU 0).
TEST(CpuPolicyOptionsTest, PreferAlignByUncoreCacheTakesOneWholeL3Cache) {
  testing::TempDir dir;
  testing::WriteSplitL3Machine(dir.path());
  DiscoveryOptions discovery;
  discovery.host_root = dir.path();
  const Topology machine = *Discover(discovery);
  for (const bool prefer : {false, true}) {
    ManagerConfig config;
    auto manager =
        *TopologyManager::Create(config, *NumaInfo::FromTopology(machine));
    CpuManagerConfig cpu_config;
    cpu_config.policy = kCpuPolicyStatic;
    cpu_config.reserved = CpuSet::Of({0});
    if (prefer) cpu_config.options["prefer-align-cpus-by-uncorecache"] = "true";
    auto cpus = *CpuManager::Create(cpu_config, machine, manager.get());
    manager->AddHintProvider(cpus.get());
    ASSERT_TRUE(manager->Admit(CpuPod("a", 8)).admit);
    EXPECT_EQ(cpus->ContainerCpus("a", "c").ToList(),
              prefer ? "4-7,20-23" : "1-4,17-20")
        << prefer;
    // Then 3 CPUs: the fewest caches, here the reserved CPU's one (its
    // first free cores, the highest free thread left out).
    ASSERT_TRUE(manager->Admit(CpuPod("b", 3)).admit);
    EXPECT_EQ(cpus->ContainerCpus("b", "c").ToList(),
              prefer ? "1,16-17" : "5,16,21")
        << prefer;
  }
}

// align-by-socket: a hint whose nodes span as few sockets as the request
// needs is preferred, though it has more nodes than the fewest that hold
// it (the kubelet's isHintSocketAligned).
TEST(CpuPolicyOptionsTest, AlignBySocketPrefersHintsOfOneSocket) {
  const Topology machine = DualSocketMultiNumaPerSocketHT();
  for (const bool align : {false, true}) {
    ManagerConfig config;
    auto manager =
        *TopologyManager::Create(config, *NumaInfo::FromTopology(machine));
    CpuManagerConfig cpu_config;
    cpu_config.policy = kCpuPolicyStatic;
    cpu_config.reserved = CpuSet::Of({0});
    cpu_config.alpha_options = true;
    if (align) cpu_config.options["align-by-socket"] = "true";
    auto cpus = *CpuManager::Create(cpu_config, machine, manager.get());
    const Pod pod = CpuPod("a", 10);
    const ProviderHints hints = cpus->GetTopologyHints(pod, pod.containers[0]);
    std::map<std::vector<int>, bool> preferred;
    for (const TopologyHint& hint : *hints.at(kCpuResource)) {
      preferred[hint.affinity->Ids()] = hint.preferred;
    }
    EXPECT_TRUE(preferred.at({0}));
    EXPECT_EQ(preferred.at({0, 1}), align);
    EXPECT_EQ(preferred.at({2, 3}), align);
    EXPECT_FALSE(preferred.at({1, 2}));
  }
}

}  // namespace
}  // namespace topology::manager
