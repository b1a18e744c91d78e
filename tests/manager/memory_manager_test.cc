// The kubelet's Memory Manager tables (pkg/kubelet/cm/memorymanager:
// policy_static_test.go, memory_manager_test.go) as our tests: each upstream
// test function is a TEST of the same name, each case a row with the
// upstream description, run as upstream runs it (initTests: the policy over
// a state set directly, without Start, unless the test is about Start).
#include "topology/manager/memory_manager.h"

#include <algorithm>
#include <optional>
#include <random>
#include <set>
#include <tuple>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "status_matchers.h"

namespace topology::manager {
namespace {

using ::testing::HasSubstr;
using testing::IsOk;
using testing::StatusIs;

constexpr uint64_t mb = 1024 * 1024;
constexpr uint64_t gb = 1024 * mb;
const std::string kMem = kMemoryResource;
const std::string kHp1g = "hugepages-1Gi";
const std::string kHp2m = "hugepages-2Mi";

// state.MemoryTable in upstream's field order:
// Allocatable, Free, Reserved, SystemReserved, TotalMemSize.
MemoryTable T(uint64_t allocatable, uint64_t free, uint64_t reserved,
              uint64_t system_reserved, uint64_t total) {
  return MemoryTable{.total = total,
                     .system_reserved = system_reserved,
                     .allocatable = allocatable,
                     .reserved = reserved,
                     .free = free};
}

MemoryNodeState N(std::map<std::string, MemoryTable> memory,
                  std::vector<int> cells, int assignments) {
  return MemoryNodeState{std::move(memory), assignments, std::move(cells)};
}

MemoryBlock B(std::vector<int> affinity, const std::string& type,
              uint64_t size) {
  return MemoryBlock{std::move(affinity), type, size};
}

// cadvisor's machine node: memory and 1Gi pages.
NumaNode MachineNode(int id, uint64_t memory, uint64_t pages_1g) {
  NumaNode node;
  node.id = id;
  node.memory_bytes = memory;
  node.hugepages = {HugePages{.page_size_bytes = gb, .total_pages = pages_1g}};
  return node;
}

Container C(const std::string& name, uint64_t memory, uint64_t hugepages,
            const std::string& hugepages_type = kHp1g) {
  Container c;
  c.name = name;
  c.limits = {{"cpu", 1000},
              {kMem, static_cast<int64_t>(memory)},
              {hugepages_type, static_cast<int64_t>(hugepages)}};
  return c;
}

// getPod with requirementsGuaranteed (1Gi memory, 1Gi of 1Gi pages) or
// requirementsBurstable.
Pod GetPod(const std::string& uid, const std::string& container,
           bool guaranteed = true) {
  Pod pod;
  pod.uid = uid;
  pod.name = uid;
  pod.guaranteed = guaranteed;
  pod.containers = {guaranteed ? C(container, gb, gb)
                               : C(container, 2 * gb, 2 * gb)};
  return pod;
}

Pod GetPodWithInitContainers(const std::string& uid,
                             std::vector<Container> containers,
                             std::vector<Container> init_containers) {
  Pod pod;
  pod.uid = uid;
  pod.name = uid;
  pod.guaranteed = true;
  pod.containers = std::move(containers);
  pod.init_containers = std::move(init_containers);
  return pod;
}

struct Case {
  std::string description;
  ContainerMemoryAssignments assignments = {};
  std::optional<ContainerMemoryAssignments> expected_assignments = {};
  MemoryMachineState machine_state = {};
  std::optional<MemoryMachineState> expected_machine_state = {};
  ReservedMemory system_reserved = {};
  std::string expected_error = {};
  std::vector<NumaNode> machine_info = {};
  Pod pod = {};
  TopologyHint topology_hint = {};
  ProviderHints expected_hints = {};
};

// initTests: a policy over the case's state, set without validation.
struct Setup {
  std::optional<StaticMemoryPolicy> policy;
  MemoryState state;
};
StatusOr<Setup> InitTests(const Case& c) {
  auto policy = StaticMemoryPolicy::Create(c.machine_info, c.system_reserved);
  if (!policy.ok()) return policy.status();
  Setup setup;
  setup.policy = std::move(*policy);
  setup.state.machine = c.machine_state;
  setup.state.assignments = c.assignments;
  return setup;
}

// areContainerMemoryAssignmentsEqual: blocks compared in any order.
ContainerMemoryAssignments Normalized(ContainerMemoryAssignments a) {
  for (auto& [pod, containers] : a) {
    for (auto& [name, blocks] : containers) {
      std::sort(blocks.begin(), blocks.end(),
                [](const MemoryBlock& x, const MemoryBlock& y) {
                  return std::tie(x.type, x.numa_affinity, x.size) <
                         std::tie(y.type, y.numa_affinity, y.size);
                });
    }
  }
  return a;
}

// areMachineStatesEqual of the tests: every field per node.
void ExpectMachineState(const MemoryMachineState& actual,
                        const MemoryMachineState& expected) {
  ASSERT_EQ(actual.size(), expected.size());
  for (const auto& [id, node] : expected) {
    SCOPED_TRACE("node " + std::to_string(id));
    ASSERT_TRUE(actual.contains(id));
    const MemoryNodeState& got = actual.at(id);
    EXPECT_EQ(got.assignments, node.assignments);
    std::vector<int> a = got.cells, b = node.cells;
    std::sort(a.begin(), a.end());
    std::sort(b.begin(), b.end());
    EXPECT_EQ(a, b);
    EXPECT_EQ(got.memory, node.memory);
  }
}

std::string HintsText(const ProviderHints& hints) {
  std::string out;
  for (const auto& [type, list] : hints) {
    out += type + ":";
    if (!list) {
      out += " nil";
    } else {
      for (const TopologyHint& h : *list) out += " " + h.ToString();
    }
    out += "\n";
  }
  return out.empty() ? "(none)" : out;
}

// Two NUMA nodes with 512Mi of memory each and one 1Gi page (the machine
// most RemoveContainer and multi-node cases use).
std::map<std::string, MemoryTable> Fresh(uint64_t allocatable, uint64_t total,
                                         uint64_t reserved_sys = 512 * mb) {
  return {{kMem, T(allocatable, allocatable, 0, reserved_sys, total)},
          {kHp1g, T(gb, gb, 0, 0, gb)}};
}

TEST(MemoryManagerTest, TestStaticPolicyNew) {
  {
    SCOPED_TRACE(
        "should fail, when machine does not have reserved memory for the "
        "system workloads");
    EXPECT_THAT(StaticMemoryPolicy::Create({}, {}).status(),
                StatusIs(StatusCode::kInvalidArgument,
                         "[memorymanager] you should specify the system "
                         "reserved memory"));
  }
  {
    SCOPED_TRACE(
        "should succeed, when at least one NUMA node has reserved memory");
    EXPECT_TRUE(
        StaticMemoryPolicy::Create({}, {{0, {}}, {1, {{kMem, 512 * mb}}}})
            .ok());
  }
}

TEST(MemoryManagerTest, TestStaticPolicyName) {
  MemoryManager::Options options;
  options.policy = kMemoryPolicyStatic;
  options.reserved_memory = {{0, {{kMem, 512 * mb}}}};
  options.node_allocatable_reservation = {{kMem, 512 * mb}};
  auto manager =
      MemoryManager::Create(options, {MachineNode(0, 2 * gb, 0)}, nullptr);
  ASSERT_TRUE(manager.ok()) << manager.status().message();
  EXPECT_EQ((*manager)->policy_name(), "Static");
}

TEST(MemoryManagerTest, TestStaticPolicyStart) {
  const ReservedMemory reserved0 = {{0, {{kMem, 512 * mb}}}};
  const std::vector<Case> cases = {
      {.description = "should fail, if machine state is empty, but it has "
                      "memory assignments",
       .assignments = {{"pod", {{"container1", {B({0}, kMem, 512 * mb)}}}}},
       .system_reserved = reserved0,
       .expected_error = "[memorymanager] machine state can not be empty when "
                         "it has memory assignments"},
      {.description = "should fill the state with default values, when the "
                      "state is empty",
       .expected_assignments = ContainerMemoryAssignments{},
       .expected_machine_state =
           MemoryMachineState{
               {0, N({{kMem, T(1536 * mb, 1536 * mb, 0, 512 * mb, 3 * gb)},
                      {kHp1g, T(gb, gb, 0, 0, gb)}},
                     {0}, 0)}},
       .system_reserved = reserved0,
       .machine_info = {MachineNode(0, 3 * gb, 1)}},
      {.description =
           "should fail when machine state does not have all NUMA nodes",
       .machine_state = {{0, N({{kMem,
                                 T(1536 * mb, 1536 * mb, 0, 512 * mb, 2 * gb)},
                                {kHp1g, T(gb, gb, 0, 0, gb)}},
                               {0}, 0)}},
       .system_reserved = reserved0,
       .expected_error = "[memorymanager] the expected machine state is "
                         "different from the real one",
       .machine_info = {MachineNode(0, 2 * gb, 1), MachineNode(1, 2 * gb, 1)}},
      {.description =
           "should fail when machine state does not have memory resource",
       .machine_state = {{0, N({{kHp1g, T(gb, gb, 0, 0, gb)}}, {0}, 0)}},
       .system_reserved = reserved0,
       .expected_error = "[memorymanager] the expected machine state is "
                         "different from the real one",
       .machine_info = {MachineNode(0, 2 * gb, 1)}},
      {.description =
           "should fail when machine state has wrong size of total memory",
       .machine_state = {{0, N({{kMem, T(1536 * mb, 1536 * mb, 0, 512 * mb,
                                         1536 * mb)}},
                               {0}, 0)}},
       .system_reserved = reserved0,
       .expected_error = "[memorymanager] the expected machine state is "
                         "different from the real one",
       .machine_info = {MachineNode(0, 2 * gb, 1)}},
      {.description = "should fail when machine state has wrong size of "
                      "system reserved memory",
       .machine_state =
           {{0, N({{kMem, T(1536 * mb, 1536 * mb, 0, 1024, 2 * gb)}}, {0}, 0)}},
       .system_reserved = reserved0,
       .expected_error = "[memorymanager] the expected machine state is "
                         "different from the real one",
       .machine_info = {MachineNode(0, 2 * gb, 1)}},
      {.description = "should fail when machine state reserved memory is "
                      "different from the memory of all containers memory "
                      "assignments",
       .assignments = {{"pod", {{"container1", {B({0}, kMem, 512 * mb)}}}}},
       .machine_state = {{0, N({{kMem,
                                 T(1536 * mb, 1536 * mb, 0, 512 * mb, 2 * gb)}},
                               {0}, 1)}},
       .system_reserved = reserved0,
       .expected_error = "[memorymanager] the expected machine state is "
                         "different from the real one",
       .machine_info = {MachineNode(0, 2 * gb, 1)}},
      {.description =
           "should fail when machine state has wrong size of hugepages",
       .machine_state = {{0, N({{kMem,
                                 T(1536 * mb, 1536 * mb, 0, 512 * mb, 2 * gb)},
                                {kHp1g, T(gb, gb, 0, 0, gb)}},
                               {0}, 0)}},
       .system_reserved = reserved0,
       .expected_error = "[memorymanager] the expected machine state is "
                         "different from the real one",
       .machine_info = {MachineNode(0, 2 * gb, 2)}},
      {.description = "should fail when machine state has wrong size of "
                      "system reserved hugepages",
       .machine_state = {{0, N({{kMem,
                                 T(1536 * mb, 1536 * mb, 0, 512 * mb, 2 * gb)},
                                {kHp1g, T(gb, gb, 0, gb, 2 * gb)}},
                               {0}, 0)}},
       .system_reserved = reserved0,
       .expected_error = "[memorymanager] the expected machine state is "
                         "different from the real one",
       .machine_info = {MachineNode(0, 2 * gb, 2)}},
      {.description = "should fail when the hugepages reserved machine state "
                      "is different from the hugepages of all containers "
                      "memory assignments",
       .assignments = {{"pod1", {{"container1", {B({0}, kHp1g, gb)}}}},
                       {"pod2", {{"container2", {B({0}, kHp1g, gb)}}}}},
       .machine_state = {{0, N({{kMem,
                                 T(1536 * mb, 1536 * mb, 0, 512 * mb, 2 * gb)},
                                {kHp1g, T(4 * gb, gb, 3 * gb, 0, 4 * gb)}},
                               {0}, 2)}},
       .system_reserved = reserved0,
       .expected_error = "[memorymanager] the expected machine state is "
                         "different from the real one",
       .machine_info = {MachineNode(0, 2 * gb, 4)}},
      {.description = "should fail when machine state does not have NUMA "
                      "node that used under the memory assignment",
       .assignments = {{"pod1", {{"container1", {B({1}, kMem, gb)}}}}},
       .machine_state = {{0, N({{kMem,
                                 T(1536 * mb, 1536 * mb, 0, 512 * mb, 2 * gb)},
                                {kHp1g, T(gb, gb, 0, 0, gb)}},
                               {0}, 0)}},
       .system_reserved = reserved0,
       .expected_error = "[memorymanager] (pod: pod1, container: container1) "
                         "the memory assignment uses the NUMA that does not "
                         "exist",
       .machine_info = {MachineNode(0, 2 * gb, 1)}},
      {.description = "should fail when machine state does not have resource "
                      "that used under the memory assignment",
       .assignments =
           {{"pod1", {{"container1", {B({0}, kMem, gb), B({0}, kHp2m, gb)}}}}},
       .machine_state = {{0, N({{kMem,
                                 T(1536 * mb, 1536 * mb, 0, 512 * mb, 2 * gb)},
                                {kHp1g, T(gb, gb, 0, 0, gb)}},
                               {0}, 2)}},
       .system_reserved = reserved0,
       .expected_error = "[memorymanager] (pod: pod1, container: container1) "
                         "the memory assignment uses memory resource that "
                         "does not exist",
       .machine_info = {MachineNode(0, 2 * gb, 1)}},
      {.description = "should fail when machine state number of assignments "
                      "is different from the expected one",
       .assignments =
           {{"pod1", {{"container1", {B({0}, kMem, gb), B({0}, kHp1g, gb)}}}}},
       .machine_state = {{0, N({{kMem,
                                 T(1536 * mb, 1536 * mb, 0, 512 * mb, 2 * gb)},
                                {kHp1g, T(gb, gb, 0, 0, gb)}},
                               {0}, 1)}},
       .system_reserved = reserved0,
       .expected_error = "[memorymanager] the expected machine state is "
                         "different from the real one",
       .machine_info = {MachineNode(0, 2 * gb, 1)}},
      {.description = "should validate cross NUMA reserved memory vs "
                      "container assignments",
       .assignments = {{"pod1",
                        {{"container1",
                          {B({0, 1}, kMem, 768 * mb), B({0, 1}, kHp1g, gb)}}}},
                       {"pod2",
                        {{"container2",
                          {B({0, 1}, kMem, 256 * mb), B({0, 1}, kHp1g, gb)}}}}},
       .expected_assignments =
           ContainerMemoryAssignments{
               {"pod1",
                {{"container1",
                  {B({0, 1}, kMem, 768 * mb), B({0, 1}, kHp1g, gb)}}}},
               {"pod2",
                {{"container2",
                  {B({0, 1}, kMem, 256 * mb), B({0, 1}, kHp1g, gb)}}}}},
       .machine_state =
           {{0, N({{kMem, T(640 * mb, 0, 640 * mb, 512 * mb, 2176 * mb)},
                   {kHp1g, T(gb, 0, gb, 0, gb)}},
                  {0, 1}, 4)},
            {1, N({{kMem, T(640 * mb, 256 * mb, 384 * mb, 512 * mb, 2176 * mb)},
                   {kHp1g, T(gb, 0, gb, 0, gb)}},
                  {0, 1}, 4)}},
       .expected_machine_state =
           MemoryMachineState{
               {0, N({{kMem, T(640 * mb, 0, 640 * mb, 512 * mb, 2176 * mb)},
                      {kHp1g, T(gb, 0, gb, 0, gb)}},
                     {0, 1}, 4)},
               {1,
                N({{kMem, T(640 * mb, 256 * mb, 384 * mb, 512 * mb, 2176 * mb)},
                   {kHp1g, T(gb, 0, gb, 0, gb)}},
                  {0, 1}, 4)}},
       .system_reserved = {{0, {{kMem, 512 * mb}}}, {1, {{kMem, 512 * mb}}}},
       .machine_info = {MachineNode(0, 2176 * mb, 1),
                        MachineNode(1, 2176 * mb, 1)}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.description);
    auto setup = InitTests(c);
    ASSERT_TRUE(setup.ok()) << setup.status().message();
    const Status status = setup->policy->Start(setup->state);
    EXPECT_EQ(status.message(), c.expected_error);
    if (!status.ok()) continue;
    if (c.expected_assignments) {
      EXPECT_EQ(Normalized(setup->state.assignments),
                Normalized(*c.expected_assignments));
    }
    if (c.expected_machine_state) {
      ExpectMachineState(setup->state.machine, *c.expected_machine_state);
    }
  }
}

TEST(MemoryManagerTest, TestStaticPolicyAllocate) {
  const ReservedMemory reserved0 = {{0, {{kMem, 512 * mb}}}};
  const ReservedMemory reserved012 = {{0, {{kMem, 512 * mb}}},
                                      {1, {{kMem, 512 * mb}}},
                                      {2, {{kMem, 512 * mb}}}};
  const auto three_nodes_one_used = [] {
    return MemoryMachineState{
        {0, N({{kMem, T(gb, 512 * mb, 512 * mb, 512 * mb, 1536 * mb)},
               {kHp1g, T(gb, gb, 0, 0, gb)}},
              {0}, 1)},
        {1, N(Fresh(512 * mb, 1536 * mb), {1}, 0)},
        {2, N(Fresh(512 * mb, 1536 * mb), {2}, 0)}};
  };
  const std::vector<Case> cases = {
      {.description = "should do nothing for non-guaranteed pods",
       .expected_assignments = ContainerMemoryAssignments{},
       .machine_state = {{0, N(Fresh(1536 * mb, 2 * gb), {}, 0)}},
       .expected_machine_state =
           MemoryMachineState{{0, N(Fresh(1536 * mb, 2 * gb), {}, 0)}},
       .system_reserved = reserved0,
       .pod = GetPod("pod1", "container1", false)},
      {.description =
           "should do nothing once container already exists under the state "
           "file",
       .assignments = {{"pod1", {{"container1", {B({0}, kMem, gb)}}}}},
       .expected_assignments =
           ContainerMemoryAssignments{
               {"pod1", {{"container1", {B({0}, kMem, gb)}}}}},
       .machine_state = {{0, N({{kMem, T(1536 * mb, 512 * mb, 1024 * mb,
                                         512 * mb, 2 * gb)},
                                {kHp1g, T(gb, gb, 0, 0, gb)}},
                               {}, 0)}},
       .expected_machine_state =
           MemoryMachineState{{0, N({{kMem, T(1536 * mb, 512 * mb, 1024 * mb,
                                              512 * mb, 2 * gb)},
                                     {kHp1g, T(gb, gb, 0, 0, gb)}},
                                    {}, 0)}},
       .system_reserved = reserved0,
       .pod = GetPod("pod1", "container1")},
      {.description = "should calculate a default topology hint when no NUMA "
                      "affinity was provided by the topology manager hint",
       .expected_assignments =
           ContainerMemoryAssignments{
               {"pod1",
                {{"container1", {B({0}, kMem, gb), B({0}, kHp1g, gb)}}}}},
       .machine_state = {{0, N(Fresh(1536 * mb, 2 * gb), {0}, 0)}},
       .expected_machine_state =
           MemoryMachineState{{0, N({{kMem, T(1536 * mb, 512 * mb, 1024 * mb,
                                              512 * mb, 2 * gb)},
                                     {kHp1g, T(gb, 0, gb, 0, gb)}},
                                    {0}, 2)}},
       .system_reserved = reserved0,
       .pod = GetPod("pod1", "container1")},
      {.description = "should fail when no NUMA affinity was provided under "
                      "the topology manager hint and calculation of the "
                      "default hint failed",
       .assignments =
           {{"pod1", {{"container1", {B({0}, kMem, gb), B({0}, kHp1g, gb)}}}}},
       .machine_state = {{0, N({{kMem, T(1536 * mb, 512 * mb, 1024 * mb,
                                         512 * mb, 2 * gb)},
                                {kHp1g, T(gb, 0, gb, 0, gb)}},
                               {0}, 2)}},
       .system_reserved = reserved0,
       .expected_error = "[memorymanager] failed to get the default NUMA "
                         "affinity, no NUMA nodes with enough memory is "
                         "available",
       .pod = GetPod("pod2", "container2")},
      {.description = "should fail when no NUMA affinity was provided under "
                      "the topology manager preferred hint and default hint "
                      "has preferred false",
       .assignments = {{"pod1", {{"container1", {B({0}, kMem, 512 * mb)}}}}},
       .machine_state = three_nodes_one_used(),
       .system_reserved = reserved012,
       .expected_error =
           "[memorymanager] failed to find the default preferred hint",
       .pod = GetPod("pod2", "container2"),
       .topology_hint = TopologyHint{std::nullopt, true}},
      {.description = "should fail when NUMA affinity provided under the "
                      "topology manager hint did not satisfy container "
                      "requirements and extended hint generation failed",
       .machine_state =
           {{0, N(Fresh(512 * mb, gb), {0}, 0)},
            {1, N({{kMem, T(1536 * mb, 512 * mb, gb, 512 * mb, 2 * gb)},
                   {kHp1g, T(gb, gb, 0, 0, gb)}},
                  {1, 2}, 1)},
            {2, N({{kMem, T(1536 * mb, 512 * mb, gb, 512 * mb, 2 * gb)},
                   {kHp1g, T(gb, gb, 0, 0, gb)}},
                  {1, 2}, 1)}},
       .system_reserved = reserved012,
       .expected_error = "[memorymanager] failed to find NUMA nodes to extend "
                         "the current topology hint",
       .pod = GetPod("pod1", "container1"),
       .topology_hint = TopologyHint{NumaMask::FromBits(1), false}},
      {.description = "should fail when the topology manager provided the "
                      "preferred hint and extended hint has preferred false",
       .assignments = {{"pod1", {{"container1", {B({0}, kMem, 512 * mb)}}}}},
       .machine_state = three_nodes_one_used(),
       .system_reserved = reserved012,
       .expected_error =
           "[memorymanager] failed to find the extended preferred hint",
       .pod = GetPod("pod2", "container2"),
       .topology_hint = TopologyHint{NumaMask::FromBits(2), true}},
      {.description =
           "should succeed to allocate memory from multiple NUMA nodes",
       .expected_assignments =
           ContainerMemoryAssignments{
               {"pod1",
                {{"container1", {B({0, 1}, kMem, gb), B({0, 1}, kHp1g, gb)}}}}},
       .machine_state = {{0, N(Fresh(512 * mb, gb), {0}, 0)},
                         {1, N(Fresh(512 * mb, gb), {1}, 0)},
                         {2, N(Fresh(512 * mb, gb), {2}, 0)},
                         {3, N(Fresh(512 * mb, gb), {3}, 0)}},
       .expected_machine_state =
           MemoryMachineState{
               {0, N({{kMem, T(512 * mb, 0, 512 * mb, 512 * mb, gb)},
                      {kHp1g, T(gb, 0, gb, 0, gb)}},
                     {0, 1}, 2)},
               {1, N({{kMem, T(512 * mb, 0, 512 * mb, 512 * mb, gb)},
                      {kHp1g, T(gb, gb, 0, 0, gb)}},
                     {0, 1}, 2)},
               {2, N(Fresh(512 * mb, gb), {2}, 0)},
               {3, N(Fresh(512 * mb, gb), {3}, 0)}},
       .system_reserved = {{0, {{kMem, 512 * mb}}},
                           {1, {{kMem, 512 * mb}}},
                           {2, {{kMem, 512 * mb}}},
                           {3, {{kMem, 512 * mb}}}},
       .pod = GetPod("pod1", "container1"),
       .topology_hint = TopologyHint{std::nullopt, true}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.description);
    auto setup = InitTests(c);
    ASSERT_TRUE(setup.ok()) << setup.status().message();
    const Status status = setup->policy->Allocate(
        setup->state, c.pod, c.pod.containers[0], c.topology_hint);
    EXPECT_EQ(status.message(), c.expected_error);
    if (!status.ok()) continue;
    if (c.expected_assignments) {
      EXPECT_EQ(Normalized(setup->state.assignments),
                Normalized(*c.expected_assignments));
    }
    if (c.expected_machine_state) {
      ExpectMachineState(setup->state.machine, *c.expected_machine_state);
    }
  }
}

TEST(MemoryManagerTest, TestStaticPolicyAllocateWithInitContainers) {
  struct InitCase {
    std::string description;
    std::vector<uint64_t> init;  // Gi of memory and of 1Gi pages each
    std::vector<uint64_t> apps;
    // Blocks after every container is allocated, by container.
    std::map<std::string, uint64_t> expected_gi;
    uint64_t expected_reserved_gi;
  };
  const std::vector<InitCase> cases = {
      {"should re-use init containers memory, init containers requests 1Gi "
       "and 2Gi, apps containers 3Gi and 4Gi",
       {1, 2},
       {3, 4},
       {{"initContainer1", 0},
        {"initContainer2", 0},
        {"container1", 3},
        {"container2", 4}},
       7},
      {"should re-use init containers memory, init containers requests 4Gi "
       "and 3Gi, apps containers 2Gi and 1Gi",
       {4, 3},
       {2, 1},
       {{"initContainer1", 0},
        {"initContainer2", 1},
        {"container1", 2},
        {"container2", 1}},
       4},
      {"should re-use init containers memory, init containers requests 7Gi "
       "and 4Gi, apps containers 4Gi and 3Gi",
       {7, 4},
       {4, 3},
       {{"initContainer1", 0},
        {"initContainer2", 0},
        {"container1", 4},
        {"container2", 3}},
       7},
      {"should re-use init containers memory, init containers requests 7Gi "
       "and 4Gi, apps containers 5Gi and 2Gi",
       {7, 4},
       {5, 2},
       {{"initContainer1", 0},
        {"initContainer2", 0},
        {"container1", 5},
        {"container2", 2}},
       7},
  };
  for (const InitCase& c : cases) {
    SCOPED_TRACE(c.description);
    std::vector<Container> init, apps;
    for (size_t i = 0; i < c.init.size(); ++i) {
      init.push_back(C("initContainer" + std::to_string(i + 1), c.init[i] * gb,
                       c.init[i] * gb));
    }
    for (size_t i = 0; i < c.apps.size(); ++i) {
      apps.push_back(C("container" + std::to_string(i + 1), c.apps[i] * gb,
                       c.apps[i] * gb));
    }
    const Pod pod = GetPodWithInitContainers("pod1", apps, init);
    auto policy = StaticMemoryPolicy::Create({}, {{0, {{kMem, 512 * mb}}}});
    ASSERT_TRUE(policy.ok());
    // A reusable entry of another pod is dropped by the first Allocate.
    policy->set_reusable_memory({{"pod0", {}}});
    MemoryState state;
    state.machine = {
        {0, N({{kMem, T(7680 * mb, 7680 * mb, 0, 512 * mb, 8 * gb)},
               {kHp1g, T(8 * gb, 8 * gb, 0, 0, 8 * gb)}},
              {0}, 0)}};
    for (const Container& container : init) {
      ASSERT_TRUE(policy->Allocate(state, pod, container, {}).ok());
    }
    for (const Container& container : apps) {
      ASSERT_TRUE(policy->Allocate(state, pod, container, {}).ok());
    }
    EXPECT_FALSE(policy->reusable_memory().contains("pod0"));
    ContainerMemoryAssignments expected;
    for (const auto& [name, size] : c.expected_gi) {
      expected["pod1"][name] = {B({0}, kHp1g, size * gb),
                                B({0}, kMem, size * gb)};
    }
    EXPECT_EQ(Normalized(state.assignments), Normalized(expected));
    const uint64_t reserved = c.expected_reserved_gi * gb;
    ExpectMachineState(
        state.machine,
        {{0, N({{kMem, T(7680 * mb, 7680 * mb - reserved, reserved, 512 * mb,
                         8 * gb)},
                {kHp1g, T(8 * gb, 8 * gb - reserved, reserved, 0, 8 * gb)}},
               {0}, 8)}});
  }
}

TEST(MemoryManagerTest, TestStaticPolicyAllocateWithRestartableInitContainers) {
  const auto sized = [](const std::string& name, uint64_t gib,
                        bool restartable) {
    Container c = C(name, gib * gb, gib * gb);
    c.restartable = restartable;
    return c;
  };
  {
    SCOPED_TRACE(
        "should do nothing once containers already exist under the state "
        "file");
    Container init = sized("initContainer1", 1, true);
    const Pod pod =
        GetPodWithInitContainers("pod1", {C("container1", gb, gb)}, {init});
    auto policy = StaticMemoryPolicy::Create({}, {{0, {{kMem, 512 * mb}}}});
    ASSERT_TRUE(policy.ok());
    MemoryState state;
    state.assignments = {{"pod1",
                          {{"initContainer1", {B({0}, kMem, gb)}},
                           {"container1", {B({0}, kMem, gb)}}}}};
    state.machine = {
        {0, N({{kMem, T(2560 * mb, 512 * mb, 2048 * mb, 512 * mb, 3 * gb)},
               {kHp1g, T(2 * gb, 2 * gb, 0, 0, 2 * gb)}},
              {}, 0)}};
    const MemoryState before = state;
    for (const auto* list : {&pod.init_containers, &pod.containers}) {
      for (const Container& c : *list) {
        ASSERT_TRUE(policy->Allocate(state, pod, c, {}).ok());
      }
    }
    EXPECT_EQ(state.assignments, before.assignments);
    ExpectMachineState(state.machine, before.machine);
  }
  {
    SCOPED_TRACE("should not re-use restartable init containers memory");
    const Pod pod =
        GetPodWithInitContainers("pod1", {C("container1", gb, gb)},
                                 {sized("initContainer1", 1, false),
                                  sized("restartableInitContainer2", 2, true),
                                  sized("initContainer3", 3, false),
                                  sized("restartableInitContainer4", 4, true)});
    auto policy = StaticMemoryPolicy::Create({}, {{0, {{kMem, 512 * mb}}}});
    ASSERT_TRUE(policy.ok());
    MemoryState state;
    state.machine = {{0, N({{kMem, T(7 * gb, 7 * gb, 0, 512 * mb, 7680 * mb)},
                            {kHp1g, T(7 * gb, 7 * gb, 0, 0, 7 * gb)}},
                           {0}, 0)}};
    for (const auto* list : {&pod.init_containers, &pod.containers}) {
      for (const Container& c : *list) {
        ASSERT_TRUE(policy->Allocate(state, pod, c, {}).ok()) << c.name;
      }
    }
    ContainerMemoryAssignments expected;
    for (const auto& [name, size] :
         std::map<std::string, uint64_t>{{"initContainer1", 0},
                                         {"restartableInitContainer2", 2},
                                         {"initContainer3", 0},
                                         {"restartableInitContainer4", 4},
                                         {"container1", 1}}) {
      expected["pod1"][name] = {B({0}, kMem, size * gb),
                                B({0}, kHp1g, size * gb)};
    }
    EXPECT_EQ(Normalized(state.assignments), Normalized(expected));
    ExpectMachineState(
        state.machine,
        {{0, N({{kMem, T(7 * gb, 0, 7 * gb, 512 * mb, 7680 * mb)},
                {kHp1g, T(7 * gb, 0, 7 * gb, 0, 7 * gb)}},
               {0}, 10)}});
  }
}

TEST(MemoryManagerTest, TestStaticPolicyRemoveContainer) {
  const std::vector<Case> cases = {
      {.description = "should do nothing when the container does not exist "
                      "under the state",
       .expected_assignments = ContainerMemoryAssignments{},
       .machine_state = {{0, N(Fresh(1536 * mb, 2 * gb), {0}, 0)}},
       .expected_machine_state =
           MemoryMachineState{{0, N(Fresh(1536 * mb, 2 * gb), {0}, 0)}},
       .system_reserved = {{0, {{kMem, 512 * mb}}}}},
      {.description = "should delete the container assignment and update the "
                      "machine state",
       .assignments =
           {{"pod1", {{"container1", {B({0}, kMem, gb), B({0}, kHp1g, gb)}}}}},
       .expected_assignments = ContainerMemoryAssignments{},
       .machine_state = {{0, N({{kMem,
                                 T(1536 * mb, 512 * mb, gb, 512 * mb, 2 * gb)},
                                {kHp1g, T(gb, 0, gb, 0, gb)}},
                               {0}, 2)}},
       .expected_machine_state =
           MemoryMachineState{{0, N(Fresh(1536 * mb, 2 * gb), {0}, 0)}},
       .system_reserved = {{0, {{kMem, 512 * mb}}}}},
      {.description = "should delete the cross NUMA container assignment and "
                      "update the machine state",
       .assignments = {{"pod1",
                        {{"container1",
                          {B({0, 1}, kMem, gb), B({0, 1}, kHp1g, gb)}}}}},
       .expected_assignments = ContainerMemoryAssignments{},
       .machine_state = {{0, N({{kMem, T(512 * mb, 0, 512 * mb, 512 * mb, gb)},
                                {kHp1g, T(gb, 0, gb, 0, gb)}},
                               {0, 1}, 2)},
                         {1, N({{kMem, T(512 * mb, 0, 512 * mb, 512 * mb, gb)},
                                {kHp1g, T(gb, gb, 0, 0, gb)}},
                               {0, 1}, 2)}},
       .expected_machine_state =
           MemoryMachineState{{0, N(Fresh(512 * mb, gb), {0}, 0)},
                              {1, N(Fresh(512 * mb, gb), {1}, 0)}},
       .system_reserved = {{0, {{kMem, 512 * mb}}}, {1, {{kMem, 512 * mb}}}}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.description);
    auto setup = InitTests(c);
    ASSERT_TRUE(setup.ok());
    setup->policy->RemoveContainer(setup->state, "pod1", "container1");
    EXPECT_EQ(setup->state.assignments, *c.expected_assignments);
    ExpectMachineState(setup->state.machine, *c.expected_machine_state);
  }
}

TEST(MemoryManagerTest, TestStaticPolicyGetTopologyHints) {
  const ReservedMemory reserved0 = {{0, {{kMem, 512 * mb}}}};
  Pod pod2_16m = GetPod("pod2", "container2");
  pod2_16m.containers[0] = C("container2", gb, 16 * mb, kHp2m);
  const auto hints = [](std::vector<TopologyHint> list,
                        const std::string& hugepages = "hugepages-1Gi") {
    return ProviderHints{{kMemoryResource, list}, {hugepages, list}};
  };
  const auto mask = [](std::vector<int> ids) {
    return *NumaMask::FromIds(ids);
  };
  const std::vector<Case> cases = {
      {.description = "should not provide topology hints for non-guaranteed "
                      "pods",
       .system_reserved = reserved0,
       .pod = GetPod("pod1", "container1", false)},
      {.description = "should provide topology hints based on the existent "
                      "memory assignment",
       .assignments =
           {{"pod1", {{"container1", {B({0}, kMem, gb), B({0}, kHp1g, gb)}}}}},
       .system_reserved = reserved0,
       .pod = GetPod("pod1", "container1"),
       .expected_hints = hints({{mask({0}), true}})},
      {.description = "should calculate new topology hints, when the "
                      "container does not exist under assignments",
       .assignments = {{"pod1",
                        {{"container1",
                          {B({0, 1}, kMem, 2 * gb),
                           B({0, 1}, kHp1g, 2 * gb)}}}}},
       .machine_state =
           {{0, N({{kMem, T(1536 * mb, 0, 1536 * mb, 512 * mb, 2 * gb)},
                   {kHp1g, T(gb, 0, gb, 0, gb)}},
                  {0, 1}, 2)},
            {1, N({{kMem, T(1536 * mb, gb, 512 * mb, 512 * mb, 2 * gb)},
                   {kHp1g, T(gb, 0, gb, 0, gb)}},
                  {0, 1}, 2)},
            {2, N(Fresh(1536 * mb, 2 * gb), {2}, 0)},
            {3, N(Fresh(1536 * mb, 2 * gb), {3}, 0)}},
       .system_reserved = {{0, {{kMem, 512 * mb}}},
                           {1, {{kMem, 512 * mb}}},
                           {2, {{kMem, 512 * mb}}},
                           {3, {{kMem, 512 * mb}}}},
       .pod = GetPod("pod2", "container2"),
       .expected_hints = hints(
           {{mask({2}), true}, {mask({3}), true}, {mask({2, 3}), false}})},
      {.description = "should fail when number of existing memory assignment "
                      "resources are different from resources requested by "
                      "container",
       .assignments = {{"pod1", {{"container1", {B({0}, kMem, gb)}}}}},
       .system_reserved = reserved0,
       .pod = GetPod("pod1", "container1")},
      {.description = "should fail when existing memory assignment resources "
                      "are different from resources requested by container",
       .assignments =
           {{"pod1", {{"container1", {B({0}, kMem, gb), B({0}, kHp2m, gb)}}}}},
       .system_reserved = reserved0,
       .pod = GetPod("pod1", "container1")},
      {.description = "should fail when existing memory assignment size is "
                      "different from one requested by the container",
       .assignments = {{"pod1",
                        {{"container1",
                          {B({0}, kMem, 512 * mb), B({0}, kHp1g, gb)}}}}},
       .system_reserved = reserved0,
       .pod = GetPod("pod1", "container1")},
      {.description = "should not return preferred hints with multiple NUMA "
                      "nodes for the pod with resources satisfied by a "
                      "single NUMA node",
       .assignments = {{"pod1",
                        {{"container1",
                          {B({0, 1}, kMem, 2 * gb),
                           B({0, 1}, kHp2m, 24 * mb)}}}}},
       .machine_state =
           {{0, N({{kMem, T(1536 * mb, 0, 1536 * mb, 512 * mb, 2 * gb)},
                   {kHp2m, T(20 * mb, 0, 20 * mb, 0, 20 * mb)}},
                  {0, 1}, 2)},
            {1, N({{kMem, T(1536 * mb, gb, 512 * mb, 512 * mb, 2 * gb)},
                   {kHp2m, T(20 * mb, 16 * mb, 4 * mb, 0, 20 * mb)}},
                  {0, 1}, 2)}},
       .system_reserved = {{0, {{kMem, 512 * mb}}}, {1, {{kMem, 512 * mb}}}},
       .pod = pod2_16m,
       .expected_hints = hints({{mask({0, 1}), false}}, "hugepages-2Mi")},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.description);
    auto setup = InitTests(c);
    ASSERT_TRUE(setup.ok());
    const ProviderHints got = setup->policy->GetTopologyHints(
        setup->state, c.pod, c.pod.containers[0]);
    EXPECT_EQ(HintsText(got), HintsText(c.expected_hints));
  }
}

TEST(MemoryManagerTest, Test_getPodRequestedResources) {
  // (init containers, app containers): memory and 1Gi pages of each, Gi.
  struct Sized {
    const char* name;
    uint64_t memory, hugepages;
    bool restartable;
  };
  struct PodCase {
    std::string description;
    std::vector<Sized> init, apps;
    uint64_t memory, hugepages;
  };
  const std::vector<PodCase> cases = {
      {"maximum resources of init containers > total resources of "
       "containers",
       {{"initContainer1", 1, 1, false}, {"initContainer2", 4, 4, false}},
       {{"container1", 1, 1, false}, {"container2", 2, 2, false}},
       4,
       4},
      {"maximum resources of init containers < total resources of "
       "containers",
       {{"initContainer1", 1, 1, false}, {"initContainer2", 3, 3, false}},
       {{"container1", 2, 2, false}, {"container2", 3, 3, false}},
       5,
       5},
      {"calculate different resources independently",
       {{"initContainer1", 1, 1, false}, {"initContainer2", 3, 4, false}},
       {{"container1", 2, 1, false}, {"container2", 3, 2, false}},
       5,
       4},
      {"maximum resources of init containers > total resources of long "
       "running containers, including restartable init containers",
       {{"restartableInit1", 2, 2, true}, {"initContainer2", 4, 4, false}},
       {{"container1", 1, 1, false}, {"container2", 2, 2, false}},
       6,
       6},
      {"maximum resources of init containers < total resources of long "
       "running containers, including restartable init containers",
       {{"restartableInit1", 2, 2, true}, {"initContainer2", 4, 4, false}},
       {{"container1", 2, 2, false}, {"container2", 3, 3, false}},
       7,
       7},
  };
  const auto container = [](const Sized& c) {
    Container out = C(c.name, c.memory * gb, c.hugepages * gb);
    out.limits.erase("cpu");
    out.restartable = c.restartable;
    return out;
  };
  for (const PodCase& c : cases) {
    SCOPED_TRACE(c.description);
    Pod pod;
    for (const Sized& i : c.init) pod.init_containers.push_back(container(i));
    for (const Sized& a : c.apps) pod.containers.push_back(container(a));
    EXPECT_EQ(PodRequestedMemory(pod),
              (std::map<std::string, uint64_t>{{kHp1g, c.hugepages * gb},
                                               {kMem, c.memory * gb}}));
  }
}

// Beyond the table: each regular init container counts with the sidecars
// started before it only.
TEST(MemoryManagerTest, PodRequestsCountTheSidecarsStartedBefore) {
  const auto container = [](const std::string& name, uint64_t memory,
                            bool restartable = false) {
    Container c;
    c.name = name;
    c.limits = {{kMem, static_cast<int64_t>(memory)}};
    c.restartable = restartable;
    return c;
  };
  struct PodCase {
    std::string description;
    std::vector<Container> init;
    std::vector<Container> apps;
    uint64_t expected;
  };
  const std::vector<PodCase> cases = {
      {"only app containers",
       {},
       {container("a", gb), container("b", 2 * gb)},
       3 * gb},
      {"only init containers", {container("i", 4 * gb)}, {}, 0},
      {"init containers larger than app containers",
       {container("i1", 4 * gb), container("i2", 2 * gb)},
       {container("a", gb)},
       4 * gb},
      {"app containers larger than init containers",
       {container("i1", gb)},
       {container("a", 2 * gb), container("b", 2 * gb)},
       4 * gb},
      {"restartable init containers add to app containers",
       {container("s", gb, true)},
       {container("a", gb)},
       2 * gb},
      {"a regular init container after a sidecar counts with it",
       {container("s", gb, true), container("i", 3 * gb)},
       {container("a", gb)},
       4 * gb},
      {"a regular init container before a sidecar does not count it",
       {container("i", 3 * gb), container("s", gb, true)},
       {container("a", gb)},
       3 * gb},
  };
  for (const PodCase& c : cases) {
    SCOPED_TRACE(c.description);
    Pod pod;
    pod.init_containers = c.init;
    pod.containers = c.apps;
    const auto requested = PodRequestedMemory(pod);
    if (c.apps.empty()) {
      EXPECT_TRUE(requested.empty());
    } else {
      EXPECT_EQ(requested.at(kMem), c.expected);
    }
  }
}

// validation_reserved_memory_test.go's TestValidateReservedMemoryConfiguration,
// with the function's own words ("invalid configuration: ..."), and
// several errors joined as the kubelet's aggregate error joins them (each
// message once).
TEST(MemoryManagerTest, TestValidateReservedMemoryConfiguration) {
  struct ConfigurationCase {
    std::string description;
    std::vector<MemoryReservation> reserved;
    std::string expected_error;
  };
  const std::vector<ConfigurationCase> cases = {
      {"The kubelet configuration does not have reserved memory parameter",
       {},
       ""},
      {"The kubelet configuration has valid reserved memory parameter",
       {{0, {{kMem, 128}}}},
       ""},
      {"The reserved memory has duplications for the NUMA node and limit type",
       {{0, {{kMem, 128}}}, {0, {{kMem, 64}}}},
       "invalid configuration: the reserved memory has a duplicate value for "
       "NUMA node 0 and resource \"memory\""},
      {"The reserved memory has unsupported limit type",
       {{0, {{"blabla", 128}}}},
       "invalid configuration: the limit type \"blabla\" for NUMA node 0 is "
       "not supported, only [memory hugepages-<HugePageSize>] is accepted"},
      {"The reserved memory has limit type with zero value",
       {{0, {{kMem, 0}}}},
       "invalid configuration: reserved memory may not be zero for NUMA node "
       "0 and resource \"memory\""},
      {"Two errors are aggregated",
       {{1, {{kMem, 0}}}, {1, {{kMem, 0}}}},
       "[invalid configuration: reserved memory may not be zero for NUMA node "
       "1 and resource \"memory\", invalid configuration: the reserved "
       "memory has a duplicate value for NUMA node 1 and resource "
       "\"memory\"]"},
  };
  for (const ConfigurationCase& c : cases) {
    const Status status = ValidateReservedMemoryConfiguration(c.reserved);
    if (c.expected_error.empty()) {
      EXPECT_THAT(status, IsOk()) << c.description;
    } else {
      EXPECT_THAT(status,
                  StatusIs(StatusCode::kInvalidArgument, c.expected_error))
          << c.description;
    }
  }
  // Checked whatever the policy, before it is chosen.
  MemoryManager::Options options;
  options.reserved_memory = {{0, {{kMem, 0}}}};
  EXPECT_THAT(
      MemoryManager::Create(options, {MachineNode(0, 2 * gb, 0)}, nullptr)
          .status(),
      StatusIs(StatusCode::kInvalidArgument, HasSubstr("may not be zero")));
}

// memory_manager_test.go's TestValidateReservedMemory.
TEST(MemoryManagerTest, TestValidateReservedMemory) {
  const std::vector<NumaNode> machine = {MachineNode(0, 8 * gb, 0),
                                         MachineNode(1, 8 * gb, 0)};
  struct ReservationCase {
    std::string description;
    std::map<std::string, uint64_t> node_allocatable;
    std::vector<MemoryReservation> reserved;
    std::string expected_error;
  };
  const std::vector<ReservationCase> cases = {
      {"Node Allocatable not set, reserved not set", {}, {}, ""},
      {"Node Allocatable set to zero, reserved set to zero",
       {{kMem, 0}},
       {{0, {{kMem, 0}}}},
       ""},
      {"Node Allocatable not set (equal zero), reserved set",
       {},
       {{0, {{kMem, 12}}}},
       "the total amount \"12\" of type \"memory\" is not equal to the value "
       "\"0\" determined by Node Allocatable feature"},
      {"Node Allocatable set, reserved not set",
       {{kHp2m, 5}},
       {},
       "the total amount \"0\" of type \"hugepages-2Mi\" is not equal to the "
       "value \"5\" determined by Node Allocatable feature"},
      {"Reserved not equal to Node Allocatable",
       {{kMem, 5}},
       {{0, {{kMem, 12}}}},
       "the total amount \"12\" of type \"memory\" is not equal to the value "
       "\"5\" determined by Node Allocatable feature"},
      {"Reserved contains the NUMA node that does not exist under the "
       "machine",
       {{kMem, 17}},
       {{0, {{kMem, 12}}}, {2, {{kMem, 5}}}},
       "the reserved memory configuration references a NUMA node 2 that does "
       "not exist on this machine"},
      {"Reserved total equal to Node Allocatable",
       {{kMem, 17}, {kHp2m, 77}, {kHp1g, 13}},
       {{0, {{kMem, 12}, {kHp2m, 70}, {kHp1g, 13}}},
        {1, {{kMem, 5}, {kHp2m, 7}}}},
       ""},
      {"Reserved total hugapages-2M not equal to Node Allocatable",
       {{kMem, 17}, {kHp2m, 14}, {kHp1g, 13}},
       {{0, {{kMem, 12}, {kHp2m, 70}, {kHp1g, 13}}},
        {1, {{kMem, 5}, {kHp2m, 7}}}},
       "the total amount \"77\" of type \"hugepages-2Mi\" is not equal to the "
       "value \"14\" determined by Node Allocatable feature"},
  };
  for (const ReservationCase& c : cases) {
    SCOPED_TRACE(c.description);
    EXPECT_EQ(ValidateReservedMemory(machine, c.node_allocatable, c.reserved)
                  .message(),
              c.expected_error);
  }
}

// convertReserved: a later entry of the same node and type replaces the
// earlier one; every node of the machine is present.
TEST(MemoryManagerTest, TestConvertPreReserved) {
  const std::vector<NumaNode> machine = {MachineNode(0, 8 * gb, 0),
                                         MachineNode(1, 8 * gb, 0)};
  const ReservedMemory converted = ConvertReservedMemory(
      machine, {{0, {{kMem, gb}}}, {0, {{kMem, 2 * gb}, {kHp2m, 4 * mb}}}});
  EXPECT_EQ(converted,
            (ReservedMemory{{0, {{kMem, 2 * gb}, {kHp2m, 4 * mb}}}, {1, {}}}));
}

// The manager: None gives no hints; Static refuses what the kubelet refuses.
TEST(MemoryManagerTest, ManagerPoliciesAndStartChecks) {
  const std::vector<NumaNode> machine = {MachineNode(0, 8 * gb, 0),
                                         MachineNode(1, 8 * gb, 0)};
  MemoryManager::Options none;
  auto manager = MemoryManager::Create(none, machine, nullptr);
  ASSERT_TRUE(manager.ok());
  EXPECT_FALSE((*manager)->is_static());
  EXPECT_TRUE(
      (*manager)
          ->GetTopologyHints(GetPod("p", "c"), GetPod("p", "c").containers[0])
          .empty());

  MemoryManager::Options bad;
  bad.policy = "static";
  EXPECT_THAT(
      MemoryManager::Create(bad, machine, nullptr).status(),
      StatusIs(StatusCode::kInvalidArgument, "unknown policy: \"static\""));

  MemoryManager::Options unreserved;
  unreserved.policy = kMemoryPolicyStatic;
  EXPECT_THAT(
      MemoryManager::Create(unreserved, machine, nullptr).status().message(),
      HasSubstr("you should specify the system reserved memory"));

  MemoryManager::Options static_ok;
  static_ok.policy = kMemoryPolicyStatic;
  static_ok.reserved_memory = {{0, {{kMem, gb}}}, {1, {{kMem, gb}}}};
  static_ok.node_allocatable_reservation = {{kMem, 2 * gb}};
  auto started = MemoryManager::Create(static_ok, machine, nullptr);
  ASSERT_TRUE(started.ok()) << started.status().message();
  const MemoryState state = (*started)->State();
  EXPECT_EQ(state.machine.at(1).memory.at(kMem).allocatable, 7 * gb);

  static_ok.reserved_memory[1].numa_node = 3;
  EXPECT_THAT(
      MemoryManager::Create(static_ok, machine, nullptr).status().message(),
      HasSubstr("references a NUMA node 3 that does not exist"));
}

// Static, 1 GiB of memory reserved on node 0.
MemoryManager::Options StaticWithOneGiBReserved() {
  MemoryManager::Options options;
  options.policy = kMemoryPolicyStatic;
  options.reserved_memory = {{0, {{kMem, gb}}}};
  options.node_allocatable_reservation = {{kMem, gb}};
  return options;
}

TEST(MemoryManagerTest, RestoreChecksEveryBlockAgainstTheMachine) {
  const std::vector<NumaNode> machine = {MachineNode(0, 8 * gb, 2),
                                         MachineNode(1, 8 * gb, 2)};
  MemoryManager::Options options = StaticWithOneGiBReserved();
  const auto fresh = [&] {
    return *MemoryManager::Create(options, machine, nullptr);
  };
  // One container's blocks, restored on a fresh manager with the machine
  // recorded as this one (an empty record).
  const auto restore = [&](const std::vector<MemoryBlock>& blocks) {
    MemoryState recorded;
    recorded.assignments["v"]["c"] = blocks;
    return fresh()->Restore(kMemoryPolicyStatic, recorded).message();
  };
  auto manager = fresh();
  MemoryState recorded;
  recorded.machine = manager->Baseline();
  recorded.assignments["u"]["c"] = {B({0, 1}, kMem, 10 * gb),
                                    B({0, 1}, kHp1g, gb)};
  ASSERT_TRUE(manager->Restore(kMemoryPolicyStatic, recorded).ok());
  EXPECT_EQ(manager->ContainerBlocks("u", "c").size(), 2u);
  const MemoryState state = manager->State();
  EXPECT_EQ(state.machine.at(0).cells, (std::vector<int>{0, 1}));
  EXPECT_EQ(state.machine.at(0).memory.at(kMem).free, 0u);
  EXPECT_EQ(state.machine.at(1).memory.at(kMem).reserved, 5 * gb);
  EXPECT_THAT(manager->Restore(kMemoryPolicyStatic, recorded).message(),
              HasSubstr("already holds memory"));
  EXPECT_THAT(restore({B({4}, kMem, gb)}),
              HasSubstr("(pod: v, container: c) the memory assignment uses "
                        "the NUMA that does not exist"));
  EXPECT_THAT(restore({B({0}, kHp2m, gb)}),
              HasSubstr("(pod: v, container: c) the memory assignment uses "
                        "memory resource that does not exist"));
  EXPECT_THAT(restore({B({1}, kMem, 9 * gb)}),
              HasSubstr("do not fit what is free there"));
  EXPECT_THAT(restore({B({1, 1}, kMem, mb)}),
              HasSubstr("not a set in increasing order"));
  EXPECT_THAT(restore({B({}, kMem, mb)}),
              HasSubstr("not a set in increasing order"));
  EXPECT_THAT(fresh()->Restore(kMemoryPolicyNone, {}).message(),
              HasSubstr("configured policy \"Static\" differs from state "
                        "checkpoint policy \"None\""));
  manager->RemovePod("u");
  EXPECT_EQ(manager->State().machine, [&] {
    MemoryState empty;
    (void)StaticMemoryPolicy::Create(
        machine, ConvertReservedMemory(machine, options.reserved_memory))
        ->Start(empty);
    return empty.machine;
  }());
}

// The restart rule is validateState's, with the opt-in drift: a record of
// another machine is refused naming the first difference; within the
// tolerance it is kept and the drift said.
TEST(MemoryManagerTest, RestoreRunsValidateStateWithTheDriftTolerance) {
  const std::vector<NumaNode> machine = {MachineNode(0, 8 * gb, 0),
                                         MachineNode(1, 8 * gb, 0)};
  MemoryManager::Options options = StaticWithOneGiBReserved();
  MemoryState recorded;
  recorded.machine =
      (*MemoryManager::Create(options, machine, nullptr))->Baseline();
  recorded.machine.at(1).memory.at(kMem).total += 4 * mb;
  recorded.machine.at(1).memory.at(kMem).allocatable += 4 * mb;
  recorded.assignments["u"]["c"] = {B({1}, kMem, gb)};
  EXPECT_THAT(
      (*MemoryManager::Create(options, machine, nullptr))
          ->Restore(kMemoryPolicyStatic, recorded),
      StatusIs(StatusCode::kFailedPrecondition,
               HasSubstr("[memorymanager] the expected machine state is "
                         "different from the real one: node 1 memory total")));
  options.drift_tolerance = 8 * mb;
  auto tolerant = *MemoryManager::Create(options, machine, nullptr);
  std::string drift;
  ASSERT_THAT(tolerant->Restore(kMemoryPolicyStatic, recorded, &drift), IsOk());
  EXPECT_THAT(drift, HasSubstr("node 1 memory total moved 4194304 bytes"));
  EXPECT_EQ(tolerant->State().machine.at(1).memory.at(kMem).total, 8 * gb);
  EXPECT_EQ(tolerant->ContainerBlocks("u", "c"),
            (std::vector<MemoryBlock>{B({1}, kMem, gb)}));
}

}  // namespace
}  // namespace topology::manager

namespace topology::manager {
namespace {

// calculateHints as upstream writes it, line for line: the oracle of the
// policy's faster form.
std::map<std::string, std::vector<TopologyHint>> ReferenceCalculateHints(
    const MemoryMachineState& machine,
    const std::map<std::string, uint64_t>& requests) {
  std::vector<int> ids;
  for (const auto& [id, node] : machine) ids.push_back(id);
  int min_affinity_size = static_cast<int>(ids.size());
  std::map<std::string, std::vector<TopologyHint>> hints;
  IterateMasks(ids, [&](NumaMask mask) {
    const std::vector<int> bits = mask.Ids();
    const bool single = bits.size() == 1;
    std::map<std::string, uint64_t> free, allocatable;
    for (int id : bits) {
      for (const auto& [type, size] : requests) {
        const auto& memory = machine.at(id).memory;
        const auto it = memory.find(type);
        free[type] += it == memory.end() ? 0 : it->second.free;
        allocatable[type] += it == memory.end() ? 0 : it->second.allocatable;
      }
    }
    for (const auto& [type, size] : requests) {
      if (allocatable[type] < size) return;
    }
    if (mask.Count() < min_affinity_size) min_affinity_size = mask.Count();
    if (single && machine.at(bits[0]).cells.size() > 1) return;
    for (int id : bits) {
      const MemoryNodeState& node = machine.at(id);
      if (!single && node.assignments > 0) {
        if (node.cells.size() == 1) return;
        std::vector<int> cells = node.cells;
        std::sort(cells.begin(), cells.end());
        if (cells != bits) return;
      }
    }
    for (const auto& [type, size] : requests) {
      if (free[type] < size) return;
    }
    for (const auto& [type, size] : requests) {
      hints[type].push_back(TopologyHint{mask, false});
    }
  });
  for (auto& [type, list] : hints) {
    for (TopologyHint& hint : list) {
      hint.preferred = hint.affinity->Count() == min_affinity_size;
    }
  }
  return hints;
}

// Random machines (1 to 10 nodes, some in groups, some with single-node
// allocations), random requests of one to three types: the policy's hints
// equal the line-for-line port's, 3,000 seeded cases.
TEST(MemoryManagerTest, HintsEqualTheLineForLinePortOnRandomMachines) {
  std::mt19937_64 random(20261128);
  const std::vector<std::string> types = {kMem, kHp1g, kHp2m};
  for (int round = 0; round < 3000; ++round) {
    const int nodes = 1 + static_cast<int>(random() % 10);
    MemoryMachineState machine;
    for (int id = 0; id < nodes; ++id) {
      MemoryNodeState& node = machine[id];
      for (const std::string& type : types) {
        if (type != kMem && random() % 3 == 0) continue;
        const uint64_t allocatable = (random() % 9) * gb;
        const uint64_t free =
            allocatable == 0 ? 0 : random() % (allocatable + 1);
        node.memory[type] =
            T(allocatable, free, allocatable - free, 0, allocatable);
      }
      node.cells = {id};
      node.assignments =
          random() % 4 == 0 ? 1 + static_cast<int>(random() % 3) : 0;
    }
    // A group or two of neighbouring nodes.
    for (int id = 0; id + 1 < nodes; ++id) {
      if (random() % 4 != 0) continue;
      const int size = 2 + static_cast<int>(random() % 2);
      std::vector<int> group;
      for (int g = id; g < std::min(nodes, id + size); ++g) group.push_back(g);
      for (int g : group) {
        machine[g].cells = group;
        machine[g].assignments = std::max(machine[g].assignments, 1);
      }
      id += size;
    }
    std::map<std::string, uint64_t> requests;
    for (const std::string& type : types) {
      if (type == kMem || random() % 2 == 0) {
        requests[type] =
            (random() % (static_cast<uint64_t>(nodes) * 5)) * gb / 2;
      }
    }
    auto policy = StaticMemoryPolicy::Create({}, {{0, {{kMem, mb}}}});
    ASSERT_TRUE(policy.ok());
    const auto fast = policy->CalculateHints(machine, "pod", requests);
    const auto reference = ReferenceCalculateHints(machine, requests);
    ASSERT_EQ(fast, reference)
        << "round " << round << ", " << nodes << " nodes";
  }
}

}  // namespace
}  // namespace topology::manager

#include "hint_merger.h"

namespace topology::manager {
namespace {

// Compact hints against the exhaustive ones on machines of up to 16 nodes
// built by real allocations and releases (groups, single-node allocations,
// init containers): the family expands to calculateHints' list, merging it
// beside a device list gives the answer the explicit lists give (fast
// engine on both, the reference engine on the explicit ones), and Allocate
// over the compact form pins what it pins over the exhaustive one.
TEST(MemoryManagerTest, CompactHintsEqualTheExhaustiveOnRandomSequences) {
  std::mt19937_64 random(1769);
  for (int round = 0; round < 330; ++round) {
    // 2 to 12 nodes; the last rounds 13 to 16.
    const int nodes = round < 300 ? 2 + static_cast<int>(random() % 11)
                                  : 13 + static_cast<int>(random() % 4);
    std::vector<NumaNode> machine;
    ReservedMemory reserved;
    for (int id = 0; id < nodes; ++id) {
      machine.push_back(MachineNode(id, (4 + random() % 8) * gb, random() % 4));
      reserved[id][kMem] = 512 * mb;
    }
    auto exhaustive = *StaticMemoryPolicy::Create(machine, reserved);
    exhaustive.set_exhaustive_limit(16);
    auto compact = exhaustive;
    compact.set_exhaustive_limit(0);
    MemoryState a, b;
    ASSERT_TRUE(exhaustive.Start(a).ok());
    ASSERT_TRUE(compact.Start(b).ok());
    std::vector<int> ids;
    for (int id = 0; id < nodes; ++id) ids.push_back(id);
    auto numa = *NumaInfo::Create(ids, std::nullopt);
    internal::HintMerger merger(numa, false);
    std::vector<std::string> pods;
    for (int step = 0; step < 12; ++step) {
      SCOPED_TRACE("round " + std::to_string(round) + " step " +
                   std::to_string(step));
      if (!pods.empty() && random() % 4 == 0) {
        const size_t victim = random() % pods.size();
        exhaustive.RemoveContainer(a, pods[victim], "c");
        compact.RemoveContainer(b, pods[victim], "c");
        pods.erase(pods.begin() + static_cast<std::ptrdiff_t>(victim));
        ASSERT_EQ(a.machine, b.machine);
        continue;
      }
      Pod pod;
      pod.uid = "p" + std::to_string(step);
      pod.guaranteed = true;
      Container c;
      c.name = "c";
      c.limits[kMem] = static_cast<int64_t>((1 + random() % 12) * gb);
      if (random() % 2 == 0) {
        c.limits[kHp1g] = static_cast<int64_t>((random() % 3) * gb);
      }
      pod.containers = {c};
      const auto requests = ContainerRequestedMemory(c);
      // 1. The family expands to the list.
      const auto list = exhaustive.CalculateHints(a.machine, pod.uid, requests);
      const auto family = compact.CompactHints(b.machine, pod.uid, requests);
      ASSERT_EQ(list.empty(), !family.has_value());
      if (family) {
        ASSERT_EQ(family->Expand(), list.at(kMem));
      }
      // 2. Merged beside a device list, under each way of merging.
      const ProviderHints explicit_hints =
          exhaustive.GetTopologyHints(a, pod, c);
      const ProviderHints compact_hints = compact.GetTopologyHints(b, pod, c);
      std::vector<TopologyHint> device;
      for (int k = 0; k < 3; ++k) {
        const uint64_t bits = random() & ((uint64_t{1} << nodes) - 1);
        if (bits != 0) {
          device.push_back({NumaMask::FromBits(bits), random() % 2 == 0});
        }
      }
      if (device.empty()) device.push_back({NumaMask::FromBits(1), true});
      const ProviderHints devices = {{"example.com/gpu", device}};
      const auto lists_e =
          internal::FlattenProviderHints({devices, explicit_hints});
      const auto lists_c =
          internal::FlattenProviderHints({devices, compact_hints});
      // The reference engine walks every permutation: on the smaller
      // machines only.
      const TopologyHint reference =
          nodes <= 8 ? merger.Merge(lists_e, MergeEngine::kReference, nullptr)
                     : merger.Merge(lists_e, MergeEngine::kFast, nullptr);
      EXPECT_EQ(merger.Merge(lists_e, MergeEngine::kFast, nullptr), reference);
      EXPECT_EQ(merger.Merge(lists_c, MergeEngine::kFast, nullptr), reference);
      EXPECT_EQ(merger.Merge(internal::FilterSingleNumaNodeHints(lists_c),
                             MergeEngine::kFast, nullptr),
                merger.Merge(internal::FilterSingleNumaNodeHints(lists_e),
                             MergeEngine::kReference, nullptr));
      // 3. Allocate with no affinity, or the merged one.
      const TopologyHint affinity =
          random() % 2 == 0 ? TopologyHint{} : reference;
      const Status sa = exhaustive.Allocate(a, pod, c, affinity);
      const Status sb = compact.Allocate(b, pod, c, affinity);
      ASSERT_EQ(sa.message(), sb.message());
      ASSERT_EQ(a.machine, b.machine);
      ASSERT_EQ(a.assignments, b.assignments);
      if (sa.ok()) pods.push_back(pod.uid);
    }
  }
}

// Pods admitted, released and undone in random order, uids used again as
// the host's serve uses them (the kubelet never does): after every step the
// machine state is the one validateState rebuilds from the assignments, so
// no memory is pinned twice nor freed twice. The memory an init container
// leaves for reuse dies with its pod: a pod admitted again under the same
// uid may not count it.
TEST(MemoryManagerTest, ReleasesAndUndosNeverPinMemoryTwice) {
  std::mt19937_64 random(5132);
  for (int round = 0; round < 60; ++round) {
    const int nodes = 1 + static_cast<int>(random() % 3);
    std::vector<NumaNode> machine;
    MemoryManager::Options options;
    options.policy = kMemoryPolicyStatic;
    for (int id = 0; id < nodes; ++id) {
      machine.push_back(MachineNode(id, 8 * gb, random() % 3));
      options.reserved_memory.push_back({id, {{kMem, 512 * mb}}});
    }
    options.node_allocatable_reservation = {
        {kMem, static_cast<uint64_t>(nodes) * 512 * mb}};
    auto manager = MemoryManager::Create(options, machine, nullptr);
    ASSERT_TRUE(manager.ok()) << manager.status().message();
    ReservedMemory reserved;
    for (int id = 0; id < nodes; ++id) reserved[id][kMem] = 512 * mb;
    const auto judge = *StaticMemoryPolicy::Create(machine, reserved);
    std::set<std::string> admitted;
    for (int step = 0; step < 40; ++step) {
      SCOPED_TRACE("round " + std::to_string(round) + " step " +
                   std::to_string(step));
      const std::string uid = "p" + std::to_string(random() % 4);
      if (admitted.contains(uid) && random() % 2 == 0) {
        (*manager)->RemovePod(uid);
        admitted.erase(uid);
      } else if (!admitted.contains(uid)) {
        Pod pod;
        pod.uid = uid;
        pod.guaranteed = true;
        const auto memory = [&] { return (1 + random() % 10) * gb; };
        const auto pages = [&] { return (random() % 2) * gb; };
        if (random() % 2 == 0) {
          pod.init_containers = {C("init", memory(), pages())};
        }
        pod.containers = {C("app", memory(), pages())};
        if (random() % 3 == 0) {
          pod.containers.push_back(C("side", memory(), 0));
        }
        bool ok = true;
        for (const auto* list : {&pod.init_containers, &pod.containers}) {
          for (const Container& c : *list) {
            if (ok) ok = (*manager)->Allocate(pod, c).ok();
          }
        }
        // A refusal, or an admission another manager refused: undone.
        if (ok && random() % 5 != 0) {
          admitted.insert(uid);
        } else {
          (*manager)->RemovePod(uid);
        }
      }
      MemoryState state = (*manager)->State();
      ASSERT_THAT(judge.Start(state), IsOk());
      for (const auto& [id, node] : state.machine) {
        for (const auto& [type, table] : node.memory) {
          ASSERT_LE(table.reserved, table.allocatable)
              << "node " << id << " " << type;
        }
      }
    }
  }
}

// The kubelet-shaped case of the sequence above: an init container's memory
// a released pod left for reuse is not counted for the next pod of that uid.
TEST(MemoryManagerTest, ReusableInitMemoryDiesWithItsPod) {
  MemoryManager::Options options;
  options.policy = kMemoryPolicyStatic;
  options.reserved_memory = {{0, {{kMem, 1 * gb}}}};
  options.node_allocatable_reservation = {{kMem, 1 * gb}};
  auto manager =
      MemoryManager::Create(options, {MachineNode(0, 8 * gb, 0)}, nullptr);
  ASSERT_TRUE(manager.ok());
  Pod first;
  first.uid = "c";
  first.guaranteed = true;
  first.init_containers = {C("init", 6 * gb, 0)};
  first.containers = {C("app", 1 * gb, 0)};
  ASSERT_THAT((*manager)->Allocate(first, first.init_containers[0]), IsOk());
  ASSERT_THAT((*manager)->Allocate(first, first.containers[0]), IsOk());
  (*manager)->RemovePod("c");
  Pod again;
  again.uid = "c";
  again.guaranteed = true;
  again.containers = {C("app", 6 * gb, 0)};
  ASSERT_THAT((*manager)->Allocate(again, again.containers[0]), IsOk());
  EXPECT_EQ((*manager)->State().machine.at(0).memory.at(kMem).free, 1 * gb);
  // A second pod of 6Gi no longer fits the 1Gi left.
  Pod other;
  other.uid = "d";
  other.guaranteed = true;
  other.containers = {C("app", 6 * gb, 0)};
  EXPECT_FALSE((*manager)->Allocate(other, other.containers[0]).ok());
}

}  // namespace
}  // namespace topology::manager
