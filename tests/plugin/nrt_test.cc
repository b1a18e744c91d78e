// The NodeResourceTopology exporter's pieces without a kubelet: its
// readers of outside text, the object built from what they read (zones,
// costs, CPUs, memory as the Memory Manager split it, devices by NUMA node,
// DRA classes, the fingerprint) and its rendering.
#include <set>
#include <tuple>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "topology/common/pod_fingerprint.h"
#include "topology/topology.h"

#include "build.h"
#include "node_inputs.h"
#include "nrt_object.h"

namespace topology::nrt {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

constexpr uint64_t kGiB = uint64_t{1} << 30;

// Two sockets: CPUs 0-3 and 4-7, 16 GiB each, SLIT 10/21.
Topology TwoNodes() {
  Topology::Parts parts;
  parts.numa_nodes = {
      NumaNode{
          .id = 0, .cpus = CpuSet::Of({0, 1, 2, 3}), .memory_bytes = 16 * kGiB},
      NumaNode{.id = 1,
               .cpus = CpuSet::Of({4, 5, 6, 7}),
               .memory_bytes = 16 * kGiB}};
  parts.distances = {{10, 21}, {21, 10}};
  return Topology(std::move(parts));
}

Topology OneNode() {
  Topology::Parts parts;
  parts.numa_nodes = {
      NumaNode{.id = 0, .cpus = CpuSet::Of({0, 1}), .memory_bytes = 4 * kGiB}};
  parts.distances = {{10}};
  return Topology(std::move(parts));
}

const ZoneResource* Find(const NodeTopology& object, int zone,
                         const std::string& name) {
  for (const Zone& z : object.zones) {
    if (z.id != zone) continue;
    for (const ZoneResource& r : z.resources) {
      if (r.name == name) return &r;
    }
  }
  return nullptr;
}

Built BuildWith(const Topology& topology, const NodeResources& resources,
                const MemoryManagerState* memory = nullptr,
                const std::vector<DraDevice>* dra = nullptr,
                const std::vector<ClassSelector>* classes = nullptr,
                const std::string& method = "all") {
  return Build({.topology = &topology,
                .kubelet = {},
                .resources = &resources,
                .memory = memory,
                .dra_devices = dra,
                .classes = classes,
                .node_name = "node-a",
                .node_uid = "uid-1",
                .fingerprint_method = method});
}

// The Static Memory Manager's state after a 60-byte block over nodes 0
// and 1 took 40 from node 0 (of 90 allocatable) and 20 from node 1 (of
// 100).
MemoryManagerState SplitBlockState() {
  MemoryManagerState memory;
  memory.policy = "Static";
  memory.machine[0].memory["memory"] = {.total = 100,
                                        .system_reserved = 10,
                                        .allocatable = 90,
                                        .reserved = 40,
                                        .free = 50};
  memory.machine[1].memory["memory"] = {.total = 100,
                                        .system_reserved = 0,
                                        .allocatable = 100,
                                        .reserved = 20,
                                        .free = 80};
  return memory;
}

TEST(NrtBuildTest, ZonesCarryTheSlitCostsAndTheCpusPodsHold) {
  const Topology topology = TwoNodes();
  NodeResources resources;
  resources.allocatable_cpus = {1, 2, 3, 4, 5, 6, 7};  // CPU 0 reserved
  resources.pods = {{.ns = "default", .name = "pinned", .cpus = {2, 5}},
                    {.ns = "default", .name = "shared"}};
  const Built built = BuildWith(topology, resources);
  ASSERT_EQ(built.object.zones.size(), 2u);
  EXPECT_THAT(built.object.zones[0].costs,
              ElementsAre(std::pair{0, 10}, std::pair{1, 21}));
  EXPECT_THAT(built.object.zones[1].costs,
              ElementsAre(std::pair{0, 21}, std::pair{1, 10}));
  EXPECT_EQ(*Find(built.object, 0, "cpu"), (ZoneResource{"cpu", 4, 3, 2}));
  EXPECT_EQ(*Find(built.object, 1, "cpu"), (ZoneResource{"cpu", 4, 4, 3}));
  // No Memory Manager state: the node's memory, nothing set aside.
  EXPECT_EQ(*Find(built.object, 1, "memory"),
            (ZoneResource{"memory", 16 * kGiB, 16 * kGiB, 16 * kGiB}));
  EXPECT_THAT(built.notes, IsEmpty());
}

// The None CPU policy names no allocatable CPU: all are shared.
TEST(NrtBuildTest, WithoutAllocatableCpusEveryCpuIsAvailable) {
  const Topology topology = TwoNodes();
  const Built built = BuildWith(topology, NodeResources{});
  EXPECT_EQ(*Find(built.object, 0, "cpu"), (ZoneResource{"cpu", 4, 4, 4}));
}

// A pod's 60-byte block over nodes 0 and 1, which the Memory Manager took
// as 40 from node 0 and 20 from node 1: each zone shows its own share, not
// the whole block on each (as RTE counts it).
TEST(NrtBuildTest, ACrossNumaBlockIsCountedOnceAsTheMemoryManagerSplitIt) {
  const Topology topology = TwoNodes();
  MemoryManagerState memory = SplitBlockState();
  NodeResources resources;
  resources.pods = {
      {.ns = "default", .name = "wide", .memory = {{"memory", 60, {0, 1}}}}};
  const Built built = BuildWith(topology, resources, &memory);
  const ZoneResource* zero = Find(built.object, 0, "memory");
  const ZoneResource* one = Find(built.object, 1, "memory");
  ASSERT_NE(zero, nullptr);
  ASSERT_NE(one, nullptr);
  EXPECT_EQ(*zero, (ZoneResource{"memory", 100, 90, 50}));
  EXPECT_EQ(*one, (ZoneResource{"memory", 100, 100, 80}));
  EXPECT_EQ((zero->allocatable - zero->available) +
                (one->allocatable - one->available),
            60u);
}

// A pod the kubelet removed keeps its blocks in the Memory Manager's state
// until the next admission frees them (removeStaleState): the object
// counts them free, released from each node as the manager releases them.
TEST(NrtBuildTest, AGonePodsMemoryIsFreeBeforeTheManagerFreesIt) {
  const Topology topology = TwoNodes();
  MemoryManagerState memory = SplitBlockState();
  memory.blocks["uid-gone"] = {
      {.numa_affinity = {0, 1}, .type = "memory", .size = 60}};
  const NodeResources resources;
  for (const auto& [live, zero, one] :
       std::vector<std::tuple<std::set<std::string>, uint64_t, uint64_t>>{
           {{"uid-gone"}, 50, 80}, {{}, 90, 100}}) {
    const Built built = Build({.topology = &topology,
                               .kubelet = {},
                               .resources = &resources,
                               .memory = &memory,
                               .live_pods = &live,
                               .node_name = "node-a"});
    EXPECT_EQ(Find(built.object, 0, "memory")->available, zero);
    EXPECT_EQ(Find(built.object, 1, "memory")->available, one);
  }
}

TEST(NrtBuildTest, DevicesCountOnTheirNodesLessThoseHeld) {
  const Topology topology = TwoNodes();
  NodeResources resources;
  resources.allocatable_devices = {{"example.com/gpu", "a", {0}},
                                   {"example.com/gpu", "b", {1}},
                                   {"example.com/gpu", "c", {1}},
                                   {"example.com/nic", "n", {}}};
  resources.pods = {{.ns = "default",
                     .name = "trainer",
                     .devices = {{"example.com/gpu", "c", {1}}}}};
  const Built built = BuildWith(topology, resources);
  EXPECT_EQ(*Find(built.object, 0, "example.com/gpu"),
            (ZoneResource{"example.com/gpu", 1, 1, 1}));
  EXPECT_EQ(*Find(built.object, 1, "example.com/gpu"),
            (ZoneResource{"example.com/gpu", 2, 2, 1}));
  // No NUMA node on a machine of two: left out, and said so.
  EXPECT_EQ(Find(built.object, 0, "example.com/nic"), nullptr);
  EXPECT_EQ(Find(built.object, 1, "example.com/nic"), nullptr);
  EXPECT_THAT(built.notes,
              ElementsAre("1 device(s) of example.com/nic report no NUMA "
                          "node; left out"));
}

// On a machine of one NUMA node, a device is on it whatever it reports.
TEST(NrtBuildTest, OnOneNodeADeviceWithoutTopologyIsOnIt) {
  const Topology topology = OneNode();
  NodeResources resources;
  resources.allocatable_devices = {{"example.com/nic", "n", {}}};
  const Built built = BuildWith(topology, resources);
  EXPECT_EQ(*Find(built.object, 0, "example.com/nic"),
            (ZoneResource{"example.com/nic", 1, 1, 1}));
  EXPECT_THAT(built.notes, IsEmpty());
}

TEST(NrtBuildTest, DraDevicesCountUnderTheirClassOnTheirNumaNode) {
  const Topology topology = TwoNodes();
  std::vector<DraDevice> dra = {
      {.driver = "gpu.example.com",
       .pool = "node-a",
       .name = "gpu-0",
       .numa_node = 0,
       .attributes = {{"gpu.example.com/model", "\"h100\""}}},
      {.driver = "gpu.example.com",
       .pool = "node-a",
       .name = "gpu-1",
       .numa_node = 1,
       .attributes = {{"gpu.example.com/model", "\"h100\""}}},
      {.driver = "gpu.example.com",
       .pool = "node-a",
       .name = "gpu-2",
       .numa_node = 1,
       .attributes = {{"gpu.example.com/model", "\"a10\""}}},
      {.driver = "nic.example.com",
       .pool = "node-a",
       .name = "nic-0",
       .numa_node = 1,
       .attributes = {}}};
  std::vector<ClassSelector> classes(3);
  classes[0].name = "h100.example.com";
  ASSERT_TRUE(ParseCelSelector(
      "device.driver == \"gpu.example.com\" && "
      "device.attributes[\"gpu.example.com\"].model == \"h100\"",
      &classes[0]));
  classes[1].name = "gpu.example.com";
  ASSERT_TRUE(
      ParseCelSelector("device.driver == \"gpu.example.com\"", &classes[1]));
  classes[2].name = "big.example.com";
  EXPECT_FALSE(
      ParseCelSelector("device.capacity[\"gpu.example.com\"].memory.compareTo("
                       "quantity(\"40Gi\")) >= 0",
                       &classes[2]));
  NodeResources resources;
  resources.pods = {{.ns = "default",
                     .name = "claimant",
                     .dra = {{"gpu.example.com", "node-a", "gpu-1"}}}};
  const Built built = BuildWith(topology, resources, nullptr, &dra, &classes);
  EXPECT_EQ(*Find(built.object, 0, "h100.example.com"),
            (ZoneResource{"h100.example.com", 1, 1, 1}));
  EXPECT_EQ(*Find(built.object, 1, "h100.example.com"),
            (ZoneResource{"h100.example.com", 1, 1, 0}));
  EXPECT_EQ(*Find(built.object, 1, "gpu.example.com"),
            (ZoneResource{"gpu.example.com", 2, 2, 1}));
  EXPECT_EQ(Find(built.object, 1, "big.example.com"), nullptr);
  ASSERT_EQ(built.notes.size(), 1u);
  EXPECT_THAT(built.notes[0], HasSubstr("DeviceClass big.example.com is not "
                                        "counted"));
}

TEST(NrtBuildTest, TheFingerprintCoversThePodsOfItsMethod) {
  const Topology topology = OneNode();
  NodeResources resources;
  resources.pods = {{.ns = "default", .name = "pinned", .cpus = {1}},
                    {.ns = "kube-system", .name = "shared"}};
  common::PodFingerprint all;
  all.Add("default", "pinned");
  all.Add("kube-system", "shared");
  common::PodFingerprint exclusive;
  exclusive.Add("default", "pinned");
  const Built by_all = BuildWith(topology, resources);
  EXPECT_EQ(by_all.object.fingerprint, all.Sign());
  EXPECT_EQ(by_all.object.fingerprint_method, "all");
  const Built by_exclusive = BuildWith(topology, resources, nullptr, nullptr,
                                       nullptr, "with-exclusive-resources");
  EXPECT_EQ(by_exclusive.object.fingerprint, exclusive.Sign());
  EXPECT_EQ(by_exclusive.object.fingerprint_method, "with-exclusive-resources");
}

TEST(NrtObjectTest, RendersTheAttributesTheSchedulerReads) {
  NodeTopology object{
      .node_name = "node-a",
      .node_uid = "uid-1",
      .policy = "single-numa-node",
      .scope = "pod",
      .max_numa_nodes = 34,
      .fingerprint = "pfp0v0010123456789abcdef",
      .fingerprint_method = "all",
      .zones = {
          {.id = 3, .costs = {{3, 10}}, .resources = {{"cpu", 8, 6, 4}}}}};
  const nlohmann::json json = Render(object);
  EXPECT_EQ(json["topologyPolicies"],
            nlohmann::json({"SingleNUMANodePodLevel"}));
  EXPECT_EQ(json["metadata"]["ownerReferences"][0]["kind"], "Node");
  EXPECT_EQ(json["metadata"]["ownerReferences"][0]["uid"], "uid-1");
  EXPECT_EQ(json["attributes"][2],
            nlohmann::json(
                {{"name", "topologyManagerMaxNUMANodes"}, {"value", "34"}}));
  EXPECT_EQ(json["zones"][0]["name"], "node-3");
  EXPECT_EQ(json["zones"][0]["type"], "Node");
  EXPECT_EQ(json["zones"][0]["resources"][0],
            nlohmann::json({{"name", "cpu"},
                            {"capacity", "8"},
                            {"allocatable", "6"},
                            {"available", "4"}}));
  EXPECT_EQ(TopologyPolicyName("none", "pod"), "None");
  EXPECT_EQ(TopologyPolicyName("restricted", "container"),
            "RestrictedContainerLevel");
  EXPECT_EQ(TopologyPolicyName("best-effort", "pod"), "BestEffortPodLevel");
}

TEST(NodeInputsTest, KubeletConfigurationAsTheKubeletDefaultsIt) {
  auto defaults = ParseKubeletConfig(
      "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n",
      "config.yaml");
  ASSERT_TRUE(defaults.ok()) << defaults.status().message();
  EXPECT_EQ(*defaults, KubeletSettings());
  EXPECT_EQ(defaults->max_numa_nodes, 8);
  auto set = ParseKubeletConfig(
      "kind: KubeletConfiguration\ntopologyManagerPolicy: single-numa-node\n"
      "topologyManagerScope: pod\ntopologyManagerPolicyOptions:\n"
      "  max-allowable-numa-nodes: \"34\"\ncpuManagerPolicy: static\n"
      "memoryManagerPolicy: Static\n",
      "config.yaml");
  ASSERT_TRUE(set.ok()) << set.status().message();
  EXPECT_EQ(set->policy, "single-numa-node");
  EXPECT_EQ(set->scope, "pod");
  EXPECT_EQ(set->max_numa_nodes, 34);
  EXPECT_EQ(set->memory_policy, "Static");
  // configz's answer.
  auto configz = ParseKubeletConfig(
      R"({"kubeletconfig":{"topologyManagerPolicy":"restricted"}})", "configz");
  ASSERT_TRUE(configz.ok()) << configz.status().message();
  EXPECT_EQ(configz->policy, "restricted");
}

TEST(NodeInputsTest, AKubeletConfigurationTheKubeletRefusesIsRefused) {
  for (const auto& [text, why] :
       std::vector<std::pair<std::string, std::string>>{
           {"topologyManagerPolicy: numa-please\n", "topologyManagerPolicy"},
           {"topologyManagerScope: socket\n", "topologyManagerScope"},
           {"topologyManagerPolicyOptions: {max-allowable-numa-nodes: \"4\"}\n",
            "should not be less than 8"},
           {"topologyManagerPolicyOptions: {so-fast: \"true\"}\n",
            "unknown Topology Manager Policy option"},
           {"kind: Pod\n", "not KubeletConfiguration"},
           {"topologyManagerPolicy: [a]\n", "not a string"},
           {"- a\n", "not a mapping"},
           {"{", "config.yaml"}}) {
    auto parsed = ParseKubeletConfig(text, "config.yaml");
    ASSERT_FALSE(parsed.ok()) << text;
    EXPECT_THAT(parsed.status().message(), HasSubstr(why)) << text;
    EXPECT_THAT(parsed.status().message(), HasSubstr("config.yaml")) << text;
  }
}

TEST(NodeInputsTest, TheMemoryManagersStateOfEachFormat) {
  const std::string v1 =
      R"({"policyName":"Static","machineState":{"0":{"numberOfAssignments":1,)"
      R"("memoryMap":{"memory":{"total":100,"systemReserved":10,)"
      R"("allocatable":90,"reserved":40,"free":50},"hugepages-2Mi":{"total":0,)"
      R"("systemReserved":0,"allocatable":0,"reserved":0,"free":0}},)"
      R"("cells":[0,1]}},"checksum":1})";
  auto state = ParseMemoryManagerState(v1, "memory_manager_state");
  ASSERT_TRUE(state.ok()) << state.status().message();
  EXPECT_EQ(state->policy, "Static");
  EXPECT_THAT(state->blocks, IsEmpty());
  EXPECT_EQ(state->machine.at(0).memory.at("memory").free, 50u);
  EXPECT_THAT(state->machine.at(0).cells, ElementsAre(0, 1));
  // v3: the "data" payload is the state; the v1 fields beside it are not.
  const std::string v3 =
      R"({"policyName":"None","machineState":{},"data":"{\"policyName\":)"
      R"(\"Static\",\"machineState\":{\"1\":{\"numberOfAssignments\":0,)"
      R"(\"memoryMap\":{\"memory\":{\"total\":7,\"systemReserved\":0,)"
      R"(\"allocatable\":7,\"reserved\":0,\"free\":7}},\"cells\":[1]}},)"
      R"(\"entries\":{\"u1\":{\"app\":[{\"numaAffinity\":[1],)"
      R"(\"type\":\"memory\",\"size\":3}]}},\"podEntries\":{\"u2\":)"
      R"({\"memoryBlocks\":[{\"numaAffinity\":[0,1],\"type\":)"
      R"(\"memory\",\"size\":4}]}}}",)"
      R"("dataChecksum":2,"checksum":3})";
  state = ParseMemoryManagerState(v3, "memory_manager_state");
  ASSERT_TRUE(state.ok()) << state.status().message();
  EXPECT_EQ(state->policy, "Static");
  EXPECT_EQ(state->machine.at(1).memory.at("memory").total, 7u);
  ASSERT_EQ(state->blocks.size(), 2u);
  EXPECT_EQ(state->blocks.at("u1")[0].size, 3u);
  EXPECT_THAT(state->blocks.at("u2")[0].numa_affinity, ElementsAre(0, 1));
  for (
      const std::string bad :
      {R"({"machineState":{}})",
       R"({"policyName":"Static","machineState":{"x":{}}})",
       R"({"policyName":"Static","machineState":{"0":{"numberOfAssignments":0,"memoryMap":{"memory":{"total":-1}}}}})",
       "[", R"({"policyName":"Static","data":"{"})"}) {
    auto refused = ParseMemoryManagerState(bad, "memory_manager_state");
    EXPECT_FALSE(refused.ok()) << bad;
    EXPECT_THAT(refused.status().message(), HasSubstr("memory_manager_state"))
        << bad;
  }
}

TEST(NodeInputsTest, SlicesOfTheNodeInTheirNewestGeneration) {
  const std::string list = R"({"items":[
    {"spec":{"driver":"gpu.example.com","nodeName":"node-a",
      "pool":{"name":"node-a","generation":2,"resourceSliceCount":1},
      "devices":[{"name":"gpu-0","attributes":{
        "resource.kubernetes.io/numaNode":{"int":1},
        "model":{"string":"h100"},"ecc":{"bool":true}}},
      {"name":"gpu-1","attributes":{
        "resource.kubernetes.io/numaNode":{"ints":[3]}}}]}},
    {"spec":{"driver":"gpu.example.com","nodeName":"node-a",
      "pool":{"name":"node-a","generation":1,"resourceSliceCount":1},
      "devices":[{"name":"stale"}]}},
    {"spec":{"driver":"gpu.example.com","nodeName":"node-b",
      "pool":{"name":"node-b","generation":1,"resourceSliceCount":1},
      "devices":[{"name":"elsewhere"}]}}]})";
  auto devices = ParseResourceSlices(list, "node-a");
  ASSERT_TRUE(devices.ok()) << devices.status().message();
  ASSERT_EQ(devices->size(), 2u);
  // The list form of DRAListTypeAttributes: one node.
  EXPECT_EQ((*devices)[1].numa_node, 3);
  const DraDevice& d = (*devices)[0];
  EXPECT_EQ(d.name, "gpu-0");
  EXPECT_EQ(d.numa_node, 1);
  EXPECT_EQ(d.attributes.at("gpu.example.com/model"), "\"h100\"");
  EXPECT_EQ(d.attributes.at("gpu.example.com/ecc"), "true");
  auto refused = ParseResourceSlices(
      R"({"items":[{"spec":{"nodeName":"node-a"}}]})", "node-a");
  EXPECT_FALSE(refused.ok());
  EXPECT_THAT(refused.status().message(), HasSubstr("resourceslices"));
}

TEST(NodeInputsTest, ClassSelectorsOfEqualitiesAndWhatIsNot) {
  ClassSelector s;
  EXPECT_TRUE(ParseCelSelector(
      "(device.driver == \"a.example.com\") && "
      "device.attributes[\"a.example.com\"][\"count\"] == 4 && "
      "device.attributes[\"a.example.com\"].ok == true",
      &s));
  EXPECT_EQ(s.driver, "a.example.com");
  EXPECT_EQ(s.attributes.at("a.example.com/count"), "4");
  EXPECT_EQ(s.attributes.at("a.example.com/ok"), "true");
  DraDevice device{.driver = "a.example.com",
                   .pool = "p",
                   .name = "d",
                   .numa_node = {},
                   .attributes = {{"a.example.com/count", "4"},
                                  {"a.example.com/ok", "true"}}};
  EXPECT_TRUE(Matches(s, device));
  device.attributes["a.example.com/count"] = "5";
  EXPECT_FALSE(Matches(s, device));
  for (const std::string other :
       {"device.driver != \"a\"", "device.driver == \"a\" || true",
        "device.driver == \"a\" && device.driver == \"b\"",
        "device.attributes[\"a\"].x == \"y\\\"\"", "true", ""}) {
    ClassSelector refused;
    EXPECT_FALSE(ParseCelSelector(other, &refused)) << other;
    EXPECT_THAT(refused.unsupported, HasSubstr("is not a conjunction"));
  }
}

}  // namespace
}  // namespace topology::nrt
