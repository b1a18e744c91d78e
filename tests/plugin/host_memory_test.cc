// The host's Memory Manager against the kubelet's decisions: admission and
// refusal with the kubelet's reasons, the start-up checks of the flags and
// of the checkpoint (validateState), restore after a crash, the views.
#include <atomic>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <thread>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "topology/discovery.h"
#include "topology/testing/sysfs_tree_builder.h"

#include "checkpoint.h"
#include "host_manager.h"
#include "host_start.h"
#include "memory_flags.h"
#include "status_matchers.h"
#include "temp_dir.h"

namespace topology::host {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using topology::testing::IsOk;
using topology::testing::StatusIs;

constexpr uint64_t kGiB = uint64_t{1} << 30;
constexpr uint64_t kMiB = uint64_t{1} << 20;

// Two NUMA nodes of `gib` GiB and two CPUs each, `pages_1g` 1 GiB pages on
// each node.
Topology TwoNodeMachine(const std::filesystem::path& root, uint64_t gib,
                        uint64_t pages_1g = 0) {
  topology::testing::SysfsTreeBuilder b(root);
  b.AddCpu(0, 0, 0, "0");
  b.AddCpu(1, 0, 1, "1");
  b.AddCpu(2, 1, 0, "2");
  b.AddCpu(3, 1, 1, "3");
  b.AddNode(0, "0-1", gib * kGiB);
  b.AddNode(1, "2-3", gib * kGiB);
  if (pages_1g > 0) {
    b.AddHugePages(0, kGiB, pages_1g, pages_1g);
    b.AddHugePages(1, kGiB, pages_1g, pages_1g);
  }
  b.SetDistances({{10, 21}, {21, 10}});
  b.Finish();
  DiscoveryOptions options;
  options.host_root = root;
  auto topology = Discover(options);
  EXPECT_THAT(topology.status(), IsOk());
  return std::move(*topology);
}

manager::Pod MemoryPod(const std::string& name, uint64_t memory,
                       uint64_t hugepages_1g = 0) {
  manager::Pod pod;
  pod.uid = "uid-" + name;
  pod.name = name;
  pod.guaranteed = true;
  manager::Container c;
  c.name = "main";
  c.limits = {{"cpu", 1000}, {"memory", static_cast<int64_t>(memory)}};
  if (hugepages_1g > 0) {
    c.limits["hugepages-1Gi"] = static_cast<int64_t>(hugepages_1g);
  }
  pod.containers = {c};
  return pod;
}

class HostMemoryTest : public ::testing::Test {
 protected:
  // 8 GiB per node, 1 GiB reserved on each: the flags a kubelet would take
  // (kube-reserved 1948Mi + eviction 100Mi = 2 GiB = 2 x 1 GiB reserved).
  HostConfig Config(const std::string& policy) const {
    HostConfig config;
    config.plugin_dir = dir_.path() / "device-plugins";
    config.control_socket.clear();
    config.node_name = "memory-node";
    config.topology.policy = policy;
    MemoryFlags flags;
    flags.policy = manager::kMemoryPolicyStatic;
    flags.reserved_memory = {"0:memory=1Gi", "1:memory=1Gi"};
    flags.kube_reserved = "cpu=500m,memory=1948Mi";
    auto options = MemoryOptions(flags, 16 * kGiB);
    EXPECT_THAT(options.status(), IsOk());
    config.memory = *options;
    return config;
  }

  void Start(HostConfig config, Topology topology) {
    auto host = HostManager::Create(std::move(config), std::move(topology));
    ASSERT_THAT(host.status(), IsOk());
    host_ = std::move(*host);
    ASSERT_THAT(testing::StartHost(*host_), IsOk());
  }

  // A kill: the host goes without its clean stop's compaction; the
  // checkpoint's files stay as they were.
  void Crash() {
    const auto dir = dir_.path() / "device-plugins";
    const auto saved = dir_.path() / "saved";
    std::filesystem::remove_all(saved);
    std::filesystem::create_directories(saved);
    const std::string files[] = {kCheckpointFile,
                                 std::string(kCheckpointFile) + ".journal"};
    for (const std::string& file : files) {
      if (std::filesystem::exists(dir / file)) {
        std::filesystem::copy_file(dir / file, saved / file);
      }
    }
    host_->Stop();
    host_.reset();
    for (const std::string& file : files) {
      std::filesystem::remove(dir / file);
      if (std::filesystem::exists(saved / file)) {
        std::filesystem::copy_file(saved / file, dir / file);
      }
    }
  }

  testing::TempDir root_;
  testing::TempDir dir_;
  std::unique_ptr<HostManager> host_;
};

std::vector<manager::MemoryBlock> MemoryOf(const PodResult& result) {
  return result.containers.empty() ? std::vector<manager::MemoryBlock>{}
                                   : result.containers[0].memory;
}

TEST_F(HostMemoryTest, TenGibAcrossBothNodesUnderRestricted) {
  Start(Config(manager::kPolicyRestricted), TwoNodeMachine(root_.path(), 8));
  const PodResult big = host_->Admit(MemoryPod("big", 10 * kGiB), false);
  ASSERT_TRUE(big.admitted) << big.reason << ": " << big.message;
  EXPECT_EQ(big.containers[0].numa_nodes, (std::vector<int>{0, 1}));
  EXPECT_THAT(MemoryOf(big),
              ElementsAre(manager::MemoryBlock{{0, 1}, "memory", 10 * kGiB}));
  // status --format json: the podresources ContainerMemory shape.
  const auto status = host_->StatusJson();
  EXPECT_EQ(status["memory_policy"], "Static");
  const auto& memory = status["pods"][0]["containers"][0]["memory"];
  ASSERT_EQ(memory.size(), 1u);
  EXPECT_EQ(memory[0]["type"], "memory");
  EXPECT_EQ(memory[0]["size"], 10 * kGiB);
  EXPECT_EQ(memory[0]["numa_nodes"], nlohmann::json::array({0, 1}));
  // NodeResourceTopology: node 0 gave all its 7 GiB, node 1 three of seven.
  const auto nrt = host_->NodeResourceTopology();
  const auto zone_memory = [&](size_t zone) {
    for (const auto& r : nrt["zones"][zone]["resources"]) {
      if (r["name"] == "memory") return r;
    }
    return nlohmann::json();
  };
  EXPECT_EQ(zone_memory(0)["capacity"], std::to_string(8 * kGiB));
  EXPECT_EQ(zone_memory(0)["allocatable"], std::to_string(7 * kGiB));
  EXPECT_EQ(zone_memory(0)["available"], "0");
  EXPECT_EQ(zone_memory(1)["available"], std::to_string(4 * kGiB));
  // Released, everything is free again.
  ASSERT_THAT(host_->Release("big"), IsOk());
  const auto after = host_->NodeResourceTopology();
  for (const auto& r : after["zones"][1]["resources"]) {
    if (r["name"] == "memory") {
      EXPECT_EQ(r["available"], std::to_string(7 * kGiB));
    }
  }
}

TEST_F(HostMemoryTest, TenGibRefusedUnderSingleNumaNode) {
  Start(Config(manager::kPolicySingleNumaNode),
        TwoNodeMachine(root_.path(), 8));
  const PodResult big = host_->Admit(MemoryPod("big", 10 * kGiB), true);
  EXPECT_FALSE(big.admitted);
  EXPECT_EQ(big.reason, "TopologyAffinityError");
  // Nothing pinned.
  EXPECT_THAT(host_->StatusJson()["pods"], IsEmpty());
  const PodResult small = host_->Admit(MemoryPod("small", 6 * kGiB), false);
  ASSERT_TRUE(small.admitted);
  EXPECT_EQ(small.containers[0].numa_nodes, (std::vector<int>{0}));
}

// The kubelet's famous refusal (k/k #120733): the Topology Manager admits,
// the memory manager's Allocate refuses a cross-node allocation over a node
// that holds a single-node one.
TEST_F(HostMemoryTest, CrossNodeOverASingleNodeAllocationIsUnexpected) {
  Start(Config(manager::kPolicyBestEffort), TwoNodeMachine(root_.path(), 8));
  const PodResult small = host_->Admit(MemoryPod("small", 2 * kGiB), false);
  ASSERT_TRUE(small.admitted);
  EXPECT_THAT(MemoryOf(small),
              ElementsAre(manager::MemoryBlock{{0}, "memory", 2 * kGiB}));
  const PodResult big = host_->Admit(MemoryPod("big", 10 * kGiB), true);
  EXPECT_FALSE(big.admitted);
  EXPECT_EQ(big.reason, "UnexpectedAdmissionError");
  EXPECT_EQ(big.message,
            "Allocate failed due to [memorymanager] preferred hint violates "
            "NUMA node allocation, which is unexpected");
  // --explain names the allocation in the way.
  ASSERT_FALSE(big.explanation.empty());
  const std::string memory = big.explanation[0]["memory"].dump();
  EXPECT_THAT(memory, HasSubstr("node 0 holds a single-node allocation of pod "
                                "default/small (main); a cross-node "
                                "allocation [0,1] may not include it"));
  EXPECT_THAT(memory, HasSubstr("container main asks for memory 10Gi"));
  EXPECT_THAT(memory, HasSubstr("no set of NUMA nodes can hold it now"));
  // The refused pod left nothing behind: a 5 GiB pod still fits node 0.
  const PodResult five = host_->Admit(MemoryPod("five", 5 * kGiB), false);
  ASSERT_TRUE(five.admitted);
  EXPECT_THAT(MemoryOf(five),
              ElementsAre(manager::MemoryBlock{{0}, "memory", 5 * kGiB}));
}

// The memory explanation gives every size in one unit, the largest that
// holds each exactly: 6656Mi free beside a request of 10240Mi, never beside
// "10Gi".
TEST_F(HostMemoryTest, TheExplanationGivesSizesInOneUnit) {
  Start(Config(manager::kPolicySingleNumaNode),
        TwoNodeMachine(root_.path(), 8));
  ASSERT_TRUE(host_->Admit(MemoryPod("half", 512 * kMiB), false).admitted);
  const PodResult big = host_->Admit(MemoryPod("big", 10 * kGiB), true);
  ASSERT_FALSE(big.admitted);
  ASSERT_FALSE(big.explanation.empty());
  const std::string memory = big.explanation[0]["memory"].dump();
  EXPECT_THAT(memory, HasSubstr("container main asks for memory 10240Mi"));
  EXPECT_THAT(memory, HasSubstr("memory 6656Mi free of 7168Mi"));
  EXPECT_THAT(memory, HasSubstr("memory 7168Mi free of 7168Mi"));
  EXPECT_THAT(memory, ::testing::Not(HasSubstr("Gi")));
}

// The kubelet's numReservedCPUs: kube- plus system-reserved cpu, whole
// CPUs rounded up (math.Ceil of the millicores / 1000).
TEST(ReservedCpuCountTest, KubePlusSystemRoundedUp) {
  const struct {
    std::string kube, system;
    int count;
  } rows[] = {{"", "", 0},
              {"memory=1Gi", "pid=100", 0},
              {"cpu=1", "", 1},
              {"cpu=1500m,memory=1Gi", "cpu=0.4", 2},
              {"cpu=500m", "cpu=500m", 1},
              {"cpu=1m", "", 1},
              {"cpu=2", "cpu=2001m", 5}};
  for (const auto& row : rows) {
    auto count = ReservedCpuCount(row.kube, row.system);
    ASSERT_TRUE(count.ok()) << row.kube << " " << row.system;
    EXPECT_EQ(*count, row.count) << row.kube << " " << row.system;
  }
  EXPECT_THAT(
      ReservedCpuCount("cpu=lots", ""),
      StatusIs(StatusCode::kInvalidArgument, HasSubstr("--kube-reserved")));
  EXPECT_THAT(
      ReservedCpuCount("", "cpu=-1"),
      StatusIs(StatusCode::kInvalidArgument,
               HasSubstr("--system-reserved: \"-1\" is not a CPU quantity")));
  EXPECT_THAT(ReservedCpuCount("gpu=1", ""),
              StatusIs(StatusCode::kInvalidArgument,
                       HasSubstr("unsupported resource name")));
}

TEST_F(HostMemoryTest, StartRefusesWhereTheKubeletRefuses) {
  const Topology machine = TwoNodeMachine(root_.path(), 8);
  const auto create = [&](MemoryFlags flags) -> Status {
    auto options = MemoryOptions(flags, 16 * kGiB);
    if (!options.ok()) return options.status();
    HostConfig config;
    config.plugin_dir = dir_.path() / "device-plugins";
    config.control_socket.clear();
    config.memory = *options;
    return HostManager::Create(config, machine).status();
  };
  MemoryFlags flags;
  flags.policy = manager::kMemoryPolicyStatic;
  // Without reserved memory: the kubelet's default eviction (100Mi) is not
  // matched by any reservation.
  EXPECT_THAT(create(flags),
              StatusIs(StatusCode::kInvalidArgument,
                       HasSubstr("the total amount \"0\" of type \"memory\" "
                                 "is not equal to the value \"100Mi\"")));
  flags.eviction_hard = "nodefs.available<10%";
  EXPECT_THAT(create(flags),
              StatusIs(StatusCode::kInvalidArgument,
                       HasSubstr("you should specify the system reserved "
                                 "memory")));
  // A node the machine lacks.
  flags.eviction_hard.reset();
  flags.reserved_memory = {"3:memory=100Mi"};
  EXPECT_THAT(create(flags),
              StatusIs(StatusCode::kInvalidArgument,
                       HasSubstr("references a NUMA node 3 that does not "
                                 "exist on this machine")));
  // Does not add up: 1Gi reserved, 100Mi + 512Mi by Node Allocatable.
  flags.reserved_memory = {"0:memory=1Gi"};
  flags.system_reserved = "memory=512Mi";
  EXPECT_THAT(create(flags),
              StatusIs(StatusCode::kInvalidArgument,
                       HasSubstr("the total amount \"1Gi\" of type \"memory\" "
                                 "is not equal to the value \"612Mi\"")));
  // Huge pages cannot be kube- or system-reserved: never adds up.
  flags.reserved_memory = {"0:memory=612Mi,hugepages-1Gi=1Gi"};
  EXPECT_THAT(create(flags), StatusIs(StatusCode::kInvalidArgument,
                                      HasSubstr("hugepages-1Gi")));
  // Adds up: accepted, spread over both nodes in two flags or one.
  flags.reserved_memory = {"0:memory=312Mi", "1:memory=300Mi"};
  EXPECT_THAT(create(flags), IsOk());
  flags.reserved_memory = {"0:memory=312Mi;1:memory=300Mi"};
  EXPECT_THAT(create(flags), IsOk());
  // The kubelet's flag spellings and their errors.
  flags.reserved_memory = {"memory=1Gi"};
  EXPECT_THAT(create(flags), StatusIs(StatusCode::kInvalidArgument,
                                      HasSubstr("incorrect format")));
  flags.reserved_memory = {"0:cpu=1"};
  EXPECT_THAT(create(flags), StatusIs(StatusCode::kInvalidArgument,
                                      HasSubstr("unknown type: \"cpu\"")));
  // validation_reserved_memory.go: a node naming a type twice, a zero.
  flags.reserved_memory = {"0:memory=312Mi", "0:memory=300Mi"};
  EXPECT_THAT(create(flags),
              StatusIs(StatusCode::kInvalidArgument,
                       HasSubstr("the reserved memory has a duplicate value "
                                 "for NUMA node 0 and resource \"memory\"")));
  flags.reserved_memory = {"0:memory=612Mi", "1:memory=0"};
  EXPECT_THAT(create(flags),
              StatusIs(StatusCode::kInvalidArgument,
                       HasSubstr("reserved memory may not be zero for NUMA "
                                 "node 1 and resource \"memory\"")));
  // Reservations past 2^64 bytes together, and a NaN percentage: refused,
  // never saturated or cast.
  flags.reserved_memory = {"0:memory=312Mi", "1:memory=300Mi"};
  flags.kube_reserved = "memory=7Ei";
  flags.system_reserved = "memory=7Ei";
  flags.eviction_hard = "memory.available<7Ei";
  EXPECT_THAT(create(flags), StatusIs(StatusCode::kInvalidArgument,
                                      HasSubstr("more than 2^64 bytes")));
  flags.kube_reserved.clear();
  flags.system_reserved = "memory=512Mi";
  for (const char* threshold :
       {"memory.available<nan%", "memory.available<NaN%",
        "memory.available<inf%"}) {
    flags.eviction_hard = threshold;
    EXPECT_THAT(create(flags),
                StatusIs(StatusCode::kInvalidArgument,
                         HasSubstr("is not a percentage from 0% to 100%")))
        << threshold;
  }
  flags.eviction_hard.reset();
  flags.kube_reserved = "gpu=1";
  EXPECT_THAT(create(flags),
              StatusIs(StatusCode::kInvalidArgument,
                       HasSubstr("--kube-reserved: unsupported resource")));
  flags.kube_reserved.clear();
  flags.eviction_hard = "memory.available<1%";
  // 1% of 16 GiB, as a float32 fraction times the capacity.
  EXPECT_THAT(create(flags), StatusIs(StatusCode::kInvalidArgument,
                                      HasSubstr("the value \"")));
  flags.policy = "static";
  EXPECT_THAT(create(flags), StatusIs(StatusCode::kInvalidArgument,
                                      HasSubstr("unknown policy")));
  // A manager refused half-way is destroyed cleanly (it once stopped a
  // registry it did not have yet).
  HostConfig cpu;
  cpu.plugin_dir = dir_.path() / "device-plugins";
  cpu.control_socket.clear();
  cpu.cpu_policy = manager::kCpuPolicyStatic;
  EXPECT_THAT(HostManager::Create(cpu, machine).status(),
              StatusIs(StatusCode::kInvalidArgument,
                       HasSubstr("requires systemreserved.cpu")));
}

TEST_F(HostMemoryTest, RestoreAfterAKillKeepsEveryMemoryAssignment) {
  Start(Config(manager::kPolicyBestEffort),
        TwoNodeMachine(root_.path(), 8, /*pages_1g=*/2));
  ASSERT_TRUE(host_->Admit(MemoryPod("big", 8 * kGiB, kGiB), false).admitted);
  ASSERT_TRUE(host_->Admit(MemoryPod("small", kGiB, kGiB), false).admitted);
  const auto before = host_->StatusJson();
  const auto nrt_before = host_->NodeResourceTopology();
  Crash();
  Start(Config(manager::kPolicyBestEffort),
        TwoNodeMachine(root_.path() / "again", 8, 2));
  EXPECT_EQ(host_->StatusJson()["pods"], before["pods"]);
  EXPECT_EQ(host_->NodeResourceTopology()["zones"], nrt_before["zones"]);
  // Huge pages have their own zone entries.
  bool hugepages = false;
  for (const auto& r : nrt_before["zones"][0]["resources"]) {
    if (r["name"] == "hugepages-1Gi") {
      hugepages = true;
      EXPECT_EQ(r["capacity"], std::to_string(2 * kGiB));
    }
  }
  EXPECT_TRUE(hugepages);
  // The memory is still held: a third pod of 8 GiB does not fit anywhere.
  EXPECT_FALSE(host_->Admit(MemoryPod("third", 8 * kGiB), false).admitted);
}

TEST_F(HostMemoryTest, RestartRefusedWhenTheMachineOrPolicyChanged) {
  Start(Config(manager::kPolicyRestricted), TwoNodeMachine(root_.path(), 8));
  ASSERT_TRUE(host_->Admit(MemoryPod("big", 10 * kGiB), false).admitted);
  Crash();
  // A reboot moved 4 MiB of node 0's memory: validateState refuses.
  const auto drifted = [&](const std::string& name) {
    Topology machine = TwoNodeMachine(root_.path() / name, 8);
    Topology::Parts parts;
    parts.numa_nodes = machine.numa_nodes();
    parts.numa_nodes[0].memory_bytes -= 4 * kMiB;
    parts.cpus = machine.cpus();
    parts.source = machine.source();
    return Topology(std::move(parts));
  };
  {
    auto host =
        HostManager::Create(Config(manager::kPolicyRestricted), drifted("a"));
    ASSERT_THAT(host.status(), IsOk());
    EXPECT_THAT(testing::StartHost(**host),
                StatusIs(StatusCode::kFailedPrecondition,
                         HasSubstr("[memorymanager] the expected machine state "
                                   "is different from the real one: node 0 "
                                   "memory total")));
  }
  // Beyond the kubelet, opt-in: a bounded drift is tolerated and the
  // assignment kept.
  {
    HostConfig config = Config(manager::kPolicyRestricted);
    config.memory.drift_tolerance = 64 * kMiB;
    Start(config, drifted("b"));
    EXPECT_THAT(MemoryOf(host_->Snapshot().pods[0]),
                ElementsAre(manager::MemoryBlock{{0, 1}, "memory", 10 * kGiB}));
    Crash();
  }
  // Another policy with memory pinned: refused with both names.
  {
    HostConfig config = Config(manager::kPolicyRestricted);
    config.memory = {};
    auto host = HostManager::Create(config, drifted("c"));
    ASSERT_THAT(host.status(), IsOk());
    EXPECT_THAT(testing::StartHost(**host),
                StatusIs(StatusCode::kFailedPrecondition,
                         HasSubstr("configured policy \"None\" differs from "
                                   "state checkpoint policy \"Static\"")));
  }
}

// A pod released and admitted again under its uid (as serve re-admits,
// and the kubelet never does) pins its memory once: the memory its first
// init container left for reuse died with the first admission. The same
// through an admission refused and undone.
TEST_F(HostMemoryTest, AdmittedAgainAfterAReleaseOrARefusalPinsOnce) {
  Start(Config(manager::kPolicySingleNumaNode),
        TwoNodeMachine(root_.path(), 8));
  const auto free_on = [&](size_t zone) {
    // Held whole: a range-for over a part of a temporary would outlive it.
    const nlohmann::json nrt = host_->NodeResourceTopology();
    for (const auto& r : nrt["zones"][zone]["resources"]) {
      if (r["name"] == "memory") return r["available"].get<std::string>();
    }
    return std::string();
  };

  manager::Pod first = MemoryPod("c", 1 * kGiB);
  manager::Container init = first.containers[0];
  init.name = "init";
  init.limits["memory"] = static_cast<int64_t>(6 * kGiB);
  first.init_containers = {init};
  ASSERT_TRUE(host_->Admit(first, false).admitted);
  ASSERT_THAT(host_->Release("c"), IsOk());
  const PodResult again = host_->Admit(MemoryPod("c", 6 * kGiB), false);
  ASSERT_TRUE(again.admitted) << again.message;
  const size_t zone =
      static_cast<size_t>(again.containers[0].numa_nodes->front());
  EXPECT_EQ(free_on(zone), std::to_string(1 * kGiB));
  ASSERT_THAT(host_->Release("c"), IsOk());

  // Refused: the init container fits, the app container does not; undone.
  manager::Pod refused = MemoryPod("d", 20 * kGiB);
  refused.init_containers = {init};
  ASSERT_FALSE(host_->Admit(refused, false).admitted);
  const PodResult retried = host_->Admit(MemoryPod("d", 6 * kGiB), false);
  ASSERT_TRUE(retried.admitted) << retried.message;
  EXPECT_EQ(
      free_on(static_cast<size_t>(retried.containers[0].numa_nodes->front())),
      std::to_string(1 * kGiB));
  // What is pinned restarts: validateState agrees with the assignments.
  Crash();
  Start(Config(manager::kPolicySingleNumaNode),
        TwoNodeMachine(root_.path() / "again", 8));
  EXPECT_EQ(host_->StatusJson()["pods"].size(), 1u);
}

// Sizes of 2^63 bytes and more (MemTotal of 2^53 kB a node) are written
// unsigned and read back unsigned: the restart restores, it does not call
// its own journal corrupt.
TEST_F(HostMemoryTest, MemoryPast2To63BytesRestarts) {
  constexpr uint64_t kGibs = uint64_t{1} << 33;  // 2^63 bytes a node
  Start(Config(manager::kPolicyBestEffort),
        TwoNodeMachine(root_.path(), kGibs));
  const PodResult big = host_->Admit(MemoryPod("big", 2 * kGiB), false);
  ASSERT_TRUE(big.admitted) << big.reason << ": " << big.message;
  const auto before = host_->StatusJson()["pods"];
  Crash();
  Start(Config(manager::kPolicyBestEffort),
        TwoNodeMachine(root_.path() / "again", kGibs));
  EXPECT_EQ(host_->StatusJson()["pods"], before);
  EXPECT_TRUE(std::filesystem::exists(dir_.path() / "device-plugins" /
                                      kCheckpointFile));
}

// Every damage to the checkpoint of a node with pinned memory is refused,
// with the kubelet's words and the files left as they were, or survived
// with nothing forgotten: one byte changed at each of many places of the
// journal (the memory and admit records among them), and the snapshot.
TEST_F(HostMemoryTest, DamagedCheckpointIsRefusedOrSurvivedNeverForgotten) {
  Start(Config(manager::kPolicyBestEffort), TwoNodeMachine(root_.path(), 8));
  ASSERT_TRUE(host_->Admit(MemoryPod("a", 2 * kGiB), false).admitted);
  ASSERT_TRUE(host_->Admit(MemoryPod("b", 3 * kGiB), false).admitted);
  const auto pods = host_->StatusJson()["pods"];
  Crash();
  const auto dir = dir_.path() / "device-plugins";
  const auto journal = dir / (std::string(kCheckpointFile) + ".journal");
  const auto read = [](const std::filesystem::path& path) {
    std::ifstream in(path, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
  };
  const std::string good = read(journal);
  const size_t records = good.find_last_of('\n');
  ASSERT_NE(records, std::string::npos);
  std::mt19937_64 random(51u);
  size_t refused = 0;
  for (int round = 0; round < 48; ++round) {
    // Anywhere in the records but their last newline (that one, lost, is a
    // write a crash cut short: never acknowledged, so never a loss).
    const size_t at =
        round < 40 ? random() % records : good.find("\"op\":\"memory\"") + 4;
    std::string damaged = good;
    damaged[at] =
        static_cast<char>(damaged[at] ^ static_cast<char>(1 + random() % 127));
    std::ofstream(journal, std::ios::binary | std::ios::trunc) << damaged;
    auto host = HostManager::Create(Config(manager::kPolicyBestEffort),
                                    TwoNodeMachine(root_.path() / "r", 8));
    ASSERT_THAT(host.status(), IsOk());
    const Status started = testing::StartHost(**host);
    if (!started.ok()) {
      ++refused;
      EXPECT_THAT(started, StatusIs(StatusCode::kFailedPrecondition,
                                    HasSubstr("please drain this node")))
          << "byte " << at;
      EXPECT_EQ(read(journal), damaged) << "byte " << at;
      EXPECT_FALSE(std::filesystem::exists(
          dir / (std::string(kCheckpointFile) + ".corrupt")));
    } else {
      EXPECT_EQ((*host)->StatusJson()["pods"], pods) << "byte " << at;
    }
    (*host)->Stop();
    std::filesystem::remove_all(root_.path() / "r");
  }
  EXPECT_GT(refused, 0u);
  // Records whose checksums are right and whose values no record can hold
  // (a record written by another hand): a negative NUMA node, a size that
  // is a string, 2^64, 1.5. Refused the same way, never read as nothing.
  const auto reframed = [](const std::string& body) {
    uint64_t hash = 14695981039346656037ull;  // FNV-1a 64, as the store
    for (const char c : body) {
      hash = (hash ^ static_cast<unsigned char>(c)) * 1099511628211ull;
    }
    char hex[17];
    std::snprintf(hex, sizeof(hex), "%016llx",
                  static_cast<unsigned long long>(hash));
    return std::string(hex) + " " + body + "\n";
  };
  const size_t line_start = good.find(" {\"op\":\"admit\"");
  ASSERT_NE(line_start, std::string::npos);
  const size_t body_start = line_start + 1;
  const size_t body_end = good.find('\n', body_start);
  const std::string body = good.substr(body_start, body_end - body_start);
  const size_t size_at = body.find("\"size\":");
  ASSERT_NE(size_at, std::string::npos);
  const size_t size_end = body.find_first_of(",}", size_at);
  const size_t nodes_at = body.find("\"numa_nodes\":[", size_at);
  ASSERT_NE(nodes_at, std::string::npos);
  const std::string with_size =
      body.substr(0, size_at) + "\"size\":%s" + body.substr(size_end);
  // Reframed as it is, the record reads back: the checksums are right.
  ASSERT_EQ(good.substr(0, line_start - 16) + reframed(body) +
                good.substr(body_end + 1),
            good);
  std::vector<std::string> bad_bodies;
  for (const char* size : {"\"2Gi\"", "18446744073709551616", "1.5", "-1"}) {
    std::string b = with_size;
    b.replace(b.find("%s"), 2, size);
    bad_bodies.push_back(b);
  }
  std::string negative_node = body;
  negative_node.insert(nodes_at + std::string("\"numa_nodes\":[").size(),
                       "-1,");
  bad_bodies.push_back(negative_node);
  for (const std::string& bad : bad_bodies) {
    std::string damaged = good.substr(0, line_start - 16) + reframed(bad) +
                          good.substr(body_end + 1);
    std::ofstream(journal, std::ios::binary | std::ios::trunc) << damaged;
    auto host = HostManager::Create(Config(manager::kPolicyBestEffort),
                                    TwoNodeMachine(root_.path() / "v", 8));
    ASSERT_THAT(host.status(), IsOk());
    EXPECT_THAT(testing::StartHost(**host),
                StatusIs(StatusCode::kFailedPrecondition,
                         HasSubstr("please drain this node")))
        << bad;
    EXPECT_EQ(read(journal), damaged);
    (*host)->Stop();
    std::filesystem::remove_all(root_.path() / "v");
  }
  // The snapshot damaged (the journal good): refused the same way, twice.
  std::ofstream(journal, std::ios::binary | std::ios::trunc) << good;
  std::ofstream(dir / kCheckpointFile, std::ios::binary | std::ios::trunc)
      << "garbage\n";
  for (int start = 0; start < 2; ++start) {
    auto host = HostManager::Create(Config(manager::kPolicyBestEffort),
                                    TwoNodeMachine(root_.path() / "s", 8));
    ASSERT_THAT(host.status(), IsOk());
    EXPECT_THAT(testing::StartHost(**host),
                StatusIs(StatusCode::kFailedPrecondition,
                         HasSubstr("please drain this node")));
    (*host)->Stop();
    std::filesystem::remove_all(root_.path() / "s");
  }
}

// Twenty clients admitting one pod at once get one answer: the first
// admission's, never "busy" or a refusal without a reason; twenty releasing
// it get one release and nineteen "not found", never UNAVAILABLE.
TEST_F(HostMemoryTest, TwentyClientsOfOnePodGetTheFirstAnswer) {
  Start(Config(manager::kPolicyBestEffort), TwoNodeMachine(root_.path(), 8));
  constexpr int kClients = 20;
  for (int round = 0; round < 3; ++round) {
    std::vector<PodResult> results(kClients);
    {
      std::vector<std::thread> clients;
      for (int i = 0; i < kClients; ++i) {
        clients.emplace_back([&, i] {
          results[static_cast<size_t>(i)] =
              host_->Admit(MemoryPod("same", 2 * kGiB), false);
        });
      }
      for (std::thread& client : clients) client.join();
    }
    for (const PodResult& result : results) {
      ASSERT_TRUE(result.admitted) << result.reason << ": " << result.message;
      EXPECT_EQ(MemoryOf(result), MemoryOf(results[0]));
    }
    EXPECT_EQ(host_->StatusJson()["pods"].size(), 1u);
    std::vector<Status> released(kClients);
    {
      std::vector<std::thread> clients;
      for (int i = 0; i < kClients; ++i) {
        clients.emplace_back([&, i] {
          released[static_cast<size_t>(i)] = host_->Release("same");
        });
      }
      for (std::thread& client : clients) client.join();
    }
    int ok = 0;
    for (const Status& status : released) {
      if (status.ok()) {
        ++ok;
      } else {
        EXPECT_EQ(status.code(), StatusCode::kNotFound) << status.message();
      }
    }
    EXPECT_EQ(ok, 1);
    EXPECT_THAT(host_->StatusJson()["pods"], IsEmpty());
  }
  // Admissions and releases of one pod interleaved: every refusal and
  // every failure says why.
  std::vector<std::thread> clients;
  std::atomic<int> unexplained{0};
  for (int i = 0; i < kClients; ++i) {
    clients.emplace_back([&, i] {
      if (i % 2 == 0) {
        const PodResult r = host_->Admit(MemoryPod("mixed", kGiB), false);
        if (!r.admitted && (r.reason.empty() || r.message.empty())) {
          ++unexplained;
        }
      } else {
        const Status s = host_->Release("mixed");
        if (!s.ok() && s.code() != StatusCode::kNotFound) ++unexplained;
      }
    });
  }
  for (std::thread& client : clients) client.join();
  EXPECT_EQ(unexplained.load(), 0);
}

}  // namespace
}  // namespace topology::host
