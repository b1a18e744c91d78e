// Our Topology Manager and CPU manager against the kubelet's own code.
//
// The oracle (tests/manager/oracle, a Go program built on the pinned
// k8s.io/kubernetes) runs the kubelet's topologymanager and static CPU
// manager policy; this test runs the same cases through libtopology's
// managers and compares every admission: admitted or not, the reason and
// message, each container's exclusive CPUs, each container's stored NUMA
// affinity and the shared pool. Where the kubelet's answer depends on Go's
// map order, the oracle answers every outcome it finds in its samples; ours
// must be one of them, and that one is committed so both follow one
// sequence.
//
// Cases: those kept in tests/manager/oracle/cases (each a difference once
// found, or a machine worth keeping), and generated ones: random machines
// (sockets, sub-NUMA nodes, CPU-less nodes, SMT, CPU numberings, SLIT) and
// sequences of admissions and releases of pods with init, sidecar and app
// containers in every QoS class. TOPOLOGY_ORACLE_CASES sets how many
// (2,000 by default; the "long" label runs 100,000), TOPOLOGY_ORACLE_SEED
// the first seed. A failing case is written out in the kept cases' format.
#include "kubelet_oracle.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "topology/cpu_set.h"
#include "topology/discovery.h"
#include "topology/manager/cpu_manager.h"
#include "topology/manager/memory_manager.h"
#include "topology/manager/numa_info.h"
#include "topology/manager/pod.h"
#include "topology/manager/topology_manager.h"
#include "topology/testing/machines.h"
#include "topology/topology.h"

#include "build_paths.h"
#include "cpu_assignment.h"
#include "temp_dir.h"

namespace topology::manager {
namespace {

using nlohmann::json;
using oracle::Oracle;
using oracle::OurNode;

// --- Generated cases -----------------------------------------------------

size_t Index(int i) { return static_cast<size_t>(i); }

// What a generated case dwells on: anything; CPUs distributed over many
// NUMA nodes (distribute-cpus-across-numa on 8 nodes, requests that need 4
// or more of them: the kubelet's combinations of 4 nodes and more); or
// machines of more than 8 NUMA nodes, which the kubelet takes only with
// max-allowable-numa-nodes (the CPU manager the one hint provider, so that
// the kubelet's exhaustive merge stays quick).
enum class Focus { kAny, kDistributed, kManyNodes };

json GenerateMachine(std::mt19937_64& rng, Focus focus) {
  const auto pick = [&](int lo, int hi) {
    return std::uniform_int_distribution<int>(lo, hi)(rng);
  };
  const bool many = focus == Focus::kManyNodes;
  // Neither CPU-less nodes nor devices on the focused machines.
  const bool distributed = focus == Focus::kDistributed || many;
  int sockets =
      distributed ? 4 : std::vector<int>{1, 1, 2, 2, 2, 4}[Index(pick(0, 5))];
  int nodes_per_socket = distributed || pick(0, 3) == 0 ? 2 : 1;  // sub-NUMA
  int cores_per_node = distributed ? pick(1, 3) : pick(1, 8);
  if (many) {  // 9 to 12 nodes, one or two a socket
    nodes_per_socket = pick(1, 2);
    sockets = nodes_per_socket == 2 ? pick(5, 6) : pick(9, 12);
    cores_per_node = pick(1, 2);
  }
  const int threads = pick(0, 2) == 0 ? 1 : 2;
  const bool split_numbering = pick(0, 1) == 1;  // siblings n cores apart
  const int cpu_nodes = sockets * nodes_per_socket;
  const int total_cores = cpu_nodes * cores_per_node;
  const int cpuless = !distributed && pick(0, 4) == 0 ? pick(1, 2) : 0;
  const int nodes = cpu_nodes + cpuless;
  json machine = {{"nodes", json::array()}, {"cpus", json::array()}};
  const auto socket_of = [&](int node) {
    return node < cpu_nodes ? node / nodes_per_socket : node - cpu_nodes;
  };
  // Uncore caches (L3 groups) as cadvisor gives them: none; groups of a
  // node's cores; or, with two nodes a socket, one for both nodes. An L3
  // of exactly one node's threads is a node cache to cadvisor, not an
  // uncore cache: not generated (discovery's tests hold that rule).
  const int uncore_roll = pick(0, 3);
  int cores_per_uncore = 0;  // 0: none
  if (uncore_roll == 1 && cores_per_node >= 2) {
    cores_per_uncore = pick(1, cores_per_node - 1);
  } else if (uncore_roll == 2 && nodes_per_socket == 2) {
    cores_per_uncore = 2 * cores_per_node;
  }
  const bool hugepages = pick(0, 1) == 0;
  for (int n = 0; n < nodes; ++n) {
    std::vector<int> row;
    for (int m = 0; m < nodes; ++m) {
      if (n == m) {
        row.push_back(10);
      } else if (socket_of(n) % sockets == socket_of(m) % sockets) {
        row.push_back(n < cpu_nodes && m < cpu_nodes ? 12 : 17);
      } else {
        row.push_back(std::vector<int>{20, 21, 32}[Index((n + m) % 3)]);
      }
    }
    const int gib = pick(2, 16);
    json node = {
        {"id", n}, {"distances", row}, {"memory", uint64_t(gib) << 30}};
    // As sysfs and cadvisor show them: every node lists every page size
    // the machine has, with no pages where none are set aside. At most
    // half the node's memory is huge pages, and at most 1 GiB is reserved
    // (GenerateKubelet): what is left is never negative (the kept case
    // memory-left-negative.json shows why that matters).
    if (hugepages) {
      node["hugepages"] = {
          {{"pageSize", uint64_t{2} << 20}, {"count", pick(0, 4) * gib * 64}}};
    }
    machine["nodes"].push_back(node);
  }
  for (int core = 0; core < total_cores; ++core) {
    const int node = core / cores_per_node;
    const int socket = node / nodes_per_socket;
    const int core_in_socket = core % (cores_per_node * nodes_per_socket);
    int uncore = -1;
    if (cores_per_uncore > 2 * cores_per_node - 1) {
      uncore = socket;
    } else if (cores_per_uncore > 0) {
      const int groups_per_node =
          (cores_per_node + cores_per_uncore - 1) / cores_per_uncore;
      uncore =
          node * groups_per_node + (core % cores_per_node) / cores_per_uncore;
    }
    for (int t = 0; t < threads; ++t) {
      const int id =
          split_numbering ? core + t * total_cores : core * threads + t;
      machine["cpus"].push_back({{"id", id},
                                 {"socket", socket},
                                 {"core", core_in_socket},
                                 {"node", node},
                                 {"uncore", uncore}});
    }
  }
  // Device plugin resources on one machine in three: GPUs and NICs on the
  // CPU nodes, one in eight on two nodes, one in eight without topology.
  if (!distributed && pick(0, 2) == 0) {
    machine["devices"] = json::array();
    for (const char* resource : {"example.com/gpu", "example.com/nic"}) {
      const int count = pick(0, 8);
      for (int i = 0; i < count; ++i) {
        std::vector<int> on;
        const int roll = pick(0, 7);
        if (roll != 0) on.push_back(pick(0, cpu_nodes - 1));
        if (roll == 1 && cpu_nodes > 1) {
          const int other = pick(0, cpu_nodes - 1);
          if (other != on.front()) on.push_back(other);
          std::sort(on.begin(), on.end());
        }
        machine["devices"].push_back(
            {{"resource", resource},
             {"id", std::string(resource).substr(12) + "-" + std::to_string(i)},
             {"nodes", on}});
      }
    }
  }
  return machine;
}

json GenerateKubelet(std::mt19937_64& rng, const json& machine, Focus focus) {
  const auto pick = [&](int lo, int hi) {
    return std::uniform_int_distribution<int>(lo, hi)(rng);
  };
  if (focus == Focus::kManyNodes) {
    static const std::vector<std::string> kPolicies = {
        "none", "best-effort", "restricted", "single-numa-node"};
    const int nodes = static_cast<int>(machine.at("nodes").size());
    json kubelet = {
        {"topologyManagerPolicy", kPolicies[Index(pick(0, 3))]},
        {"topologyManagerScope", pick(0, 2) == 0 ? "pod" : "container"},
        {"topologyManagerPolicyOptions", json::object()},
        {"cpuManagerPolicy", pick(0, 5) == 0 ? "none" : "static"},
        {"cpuManagerPolicyOptions", json::object()},
        {"reservedCPUs", {0}}};
    // max-allowable-numa-nodes: the node count, more, one too few (refused
    // at start) or none (refused: more than 8 nodes).
    json& options = kubelet["topologyManagerPolicyOptions"];
    const int roll = pick(0, 5);
    if (roll <= 1) {
      options["max-allowable-numa-nodes"] = std::to_string(nodes);
    } else if (roll <= 3) {
      options["max-allowable-numa-nodes"] = std::to_string(pick(nodes, 16));
    } else if (roll == 4) {
      options["max-allowable-numa-nodes"] = std::to_string(nodes - 1);
    }
    if (pick(0, 2) == 0) options["prefer-closest-numa-nodes"] = "true";
    if (kubelet["cpuManagerPolicy"] == "static" && pick(0, 2) == 0) {
      kubelet["cpuManagerPolicyOptions"]["full-pcpus-only"] = "true";
    }
    return kubelet;
  }
  if (focus == Focus::kDistributed) {
    json kubelet = {
        {"topologyManagerPolicy", pick(0, 1) == 0 ? "none" : "best-effort"},
        {"topologyManagerScope", "container"},
        {"topologyManagerPolicyOptions", json::object()},
        {"cpuManagerPolicy", "static"},
        {"cpuManagerPolicyOptions", {{"distribute-cpus-across-numa", "true"}}},
        {"reservedCPUs", {pick(0, 1)}}};
    if (pick(0, 1) == 0) {
      kubelet["cpuManagerPolicyOptions"]["full-pcpus-only"] = "true";
    }
    if (pick(0, 2) == 0) {
      kubelet["cpuManagerPolicyOptions"]["align-by-socket"] = "true";
      kubelet["featureGates"] = {{"CPUManagerPolicyAlphaOptions", true}};
    }
    return kubelet;
  }
  static const std::vector<std::string> kPolicies = {
      "none", "best-effort", "restricted", "single-numa-node"};
  json kubelet = {
      {"topologyManagerPolicy", kPolicies[Index(pick(0, 3))]},
      {"topologyManagerScope", pick(0, 2) == 0 ? "pod" : "container"},
      {"topologyManagerPolicyOptions", json::object()},
      {"cpuManagerPolicy", pick(0, 7) == 0 ? "none" : "static"},
      {"cpuManagerPolicyOptions", json::object()},
  };
  if (pick(0, 2) == 0) {
    kubelet["topologyManagerPolicyOptions"]["prefer-closest-numa-nodes"] =
        "true";
  }
  if (kubelet["cpuManagerPolicy"] == "static") {
    if (pick(0, 2) == 0) {
      kubelet["cpuManagerPolicyOptions"]["full-pcpus-only"] = "true";
    }
    if (pick(0, 3) == 0) {
      kubelet["cpuManagerPolicyOptions"]["strict-cpu-reservation"] = "true";
    }
    // The options that shape the choice of CPUs, alone or together (some
    // pairs the kubelet refuses: both sides must refuse alike); the alpha
    // ones with their gate, but for one case in ten with a single one.
    json& options = kubelet["cpuManagerPolicyOptions"];
    if (pick(0, 3) == 0) options["distribute-cpus-across-numa"] = "true";
    if (pick(0, 5) == 0) options["align-by-socket"] = "true";
    if (pick(0, 7) == 0) options["distribute-cpus-across-cores"] = "true";
    if (pick(0, 3) == 0) options["prefer-align-cpus-by-uncorecache"] = "true";
    const int alpha =
        static_cast<int>(options.contains("align-by-socket")) +
        static_cast<int>(options.contains("distribute-cpus-across-cores"));
    if (alpha > 0 && (alpha > 1 || pick(0, 9) != 0)) {
      kubelet["featureGates"] = {{"CPUManagerPolicyAlphaOptions", true}};
    }
  }
  // One or two reserved CPUs (the static policy needs some), often CPU 0
  // and its sibling, sometimes elsewhere.
  std::vector<int> ids;
  for (const json& c : machine.at("cpus")) ids.push_back(c.at("id"));
  std::sort(ids.begin(), ids.end());
  std::vector<int> reserved;
  if (pick(0, 2) != 0) {
    reserved.push_back(ids.front());
  } else {
    reserved.push_back(ids[Index(pick(0, static_cast<int>(ids.size()) - 1))]);
  }
  if (pick(0, 3) == 0 && ids.size() > 2) {
    reserved.push_back(ids[Index(pick(0, static_cast<int>(ids.size()) - 1))]);
  }
  std::sort(reserved.begin(), reserved.end());
  reserved.erase(std::unique(reserved.begin(), reserved.end()), reserved.end());
  kubelet["reservedCPUs"] = reserved;
  // The Static Memory Manager in two cases of five: some memory reserved on
  // each node (or on node 0 only), adding up to Node Allocatable's
  // reservation, which one case in twenty misses.
  if (pick(0, 4) < 2) {
    kubelet["memoryManagerPolicy"] = "Static";
    uint64_t total = 0;
    kubelet["reservedMemory"] = json::array();
    const bool every_node = pick(0, 2) != 0;
    for (const json& node : machine.at("nodes")) {
      if (!every_node && node.at("id") != 0) continue;
      const uint64_t bytes = uint64_t(pick(1, 8)) * (128 << 20);
      total += bytes;
      kubelet["reservedMemory"].push_back(
          {{"numaNode", node.at("id")}, {"limits", {{"memory", bytes}}}});
    }
    if (pick(0, 19) == 0) total += 1 << 20;
    kubelet["nodeAllocatableReservation"] = {{"memory", total}};
  }
  return kubelet;
}

// A pod asks huge pages only of a machine that has the page size: the
// kubelet's resource fit refuses it before the managers otherwise (and the
// Memory Manager would meet a type its machine state lacks).
json GeneratePod(std::mt19937_64& rng, const std::string& uid, int cpus,
                 bool hugepages, const std::vector<std::string>& resources,
                 Focus focus) {
  const auto pick = [&](int lo, int hi) {
    return std::uniform_int_distribution<int>(lo, hi)(rng);
  };
  const int qos_roll = pick(0, 9);
  const std::string qos = qos_roll < 7   ? "guaranteed"
                          : qos_roll < 9 ? "burstable"
                                         : "besteffort";
  const int max_request = std::max(1, cpus / 2);
  const auto container = [&](const std::string& name, bool restartable) {
    int64_t milli = 1000 * (focus == Focus::kDistributed
                                ? pick(std::max(1, cpus / 8), max_request)
                                : pick(1, std::min(max_request, 6)));
    if (pick(0, 7) == 0) milli = 500 * pick(1, 5);  // not whole CPUs
    json c = {{"name", name}, {"cpuMilli", milli}};
    if (pick(0, 1) == 0) c["memory"] = int64_t(pick(1, 48)) * (128 << 20);
    if (hugepages && pick(0, 5) == 0) {
      c["hugepages2Mi"] = int64_t(pick(1, 256)) * (2 << 20);
    }
    if (restartable) c["restartable"] = true;
    for (const std::string& resource : resources) {
      if (pick(0, 2) == 0) c["devices"][resource] = pick(1, 2);
    }
    return c;
  };
  json pod = {{"uid", uid},
              {"qos", qos},
              {"init", json::array()},
              {"containers", json::array()}};
  const int inits = pick(0, 4) == 0 ? pick(1, 2) : 0;
  for (int i = 0; i < inits; ++i) {
    pod["init"].push_back(
        container("init-" + std::to_string(i), pick(0, 2) == 0));
  }
  const int apps = pick(1, 3);
  for (int i = 0; i < apps; ++i) {
    pod["containers"].push_back(container("app-" + std::to_string(i), false));
  }
  return pod;
}

json GenerateCase(uint64_t seed, Focus focus = Focus::kAny) {
  std::mt19937_64 rng(seed);
  const auto pick = [&](int lo, int hi) {
    return std::uniform_int_distribution<int>(lo, hi)(rng);
  };
  json c;
  c["name"] = std::string(focus == Focus::kDistributed ? "distributed-"
                          : focus == Focus::kManyNodes ? "many-nodes-"
                                                       : "generated-") +
              std::to_string(seed);
  c["machine"] = GenerateMachine(rng, focus);
  c["kubelet"] = GenerateKubelet(rng, c["machine"], focus);
  // One case in four gives the reservation as the kubelet's count
  // (kubeReserved + systemReserved cpu), the policy choosing the CPUs;
  // decided by the seed, so that every case draws as before.
  json& kubelet = c["kubelet"];
  if (seed % 4 == 3 && kubelet.at("cpuManagerPolicy") == "static") {
    kubelet["reservedCPUCount"] = kubelet.at("reservedCPUs").size();
    kubelet.erase("reservedCPUs");
  }
  const int cpus = static_cast<int>(c["machine"]["cpus"].size());
  const bool hugepages = c["machine"]["nodes"][0].contains("hugepages");
  std::set<std::string> offered;
  for (const json& d : c["machine"].value("devices", json::array())) {
    offered.insert(d.at("resource").get<std::string>());
  }
  const std::vector<std::string> resources(offered.begin(), offered.end());
  std::vector<std::string> live;
  int next = 0;
  const int steps = pick(4, 14);
  for (int s = 0; s < steps; ++s) {
    if (!live.empty() && pick(0, 3) == 0) {
      const int i = pick(0, static_cast<int>(live.size()) - 1);
      c["steps"].push_back({{"release", live[Index(i)]}});
      live.erase(live.begin() + i);
    } else {
      const std::string uid = "pod-" + std::to_string(next++);
      c["steps"].push_back({{"admit", GeneratePod(rng, uid, cpus, hugepages,
                                                  resources, focus)}});
      live.push_back(uid);
    }
  }
  return c;
}

// --- The comparison ------------------------------------------------------

// Field by field, what differs between ours and the kubelet's.
std::string Diff(const json& ours, const json& theirs) {
  std::string out;
  for (const auto& [key, value] : theirs.items()) {
    const json mine = ours.contains(key) ? ours.at(key) : json();
    if (mine != value) {
      out += "    " + key + ": ours " + mine.dump() + ", kubelet " +
             value.dump() + "\n";
    }
  }
  return out;
}

// What the cases covered, so that a run that compared nothing fails.
struct Coverage {
  int cases = 0;
  int admissions = 0;
  int refusals = 0;
  int exclusive = 0;        // admissions that pinned CPUs
  int devices = 0;          // admissions that were given devices
  int several_answers = 0;  // ours was not the kubelet's first answer,
                            // and the kubelet had several
};

// Runs one case; an empty string when every step agrees, else what
// differed, step by step. `ours_kubelet`, when given, is the configuration
// our side runs with instead of the case's (to show a difference is seen).
std::string RunCase(Oracle& oracle, const json& c, Coverage& coverage,
                    const json* ours_kubelet = nullptr) {
  ++coverage.cases;
  json start = {{"op", "start"},
                {"machine", c.at("machine")},
                {"kubelet", c.at("kubelet")}};
  const json started = oracle.Ask(start);
  OurNode ours;
  const std::optional<std::string> refused = ours.Start(
      c.at("machine"), ours_kubelet ? *ours_kubelet : c.at("kubelet"));
  const bool kubelet_ok = started.value("ok", false);
  if (kubelet_ok != !refused.has_value()) {
    return "start: the kubelet " +
           (kubelet_ok ? std::string("accepts the configuration")
                       : "refuses it: " + started.value("error", "")) +
           "; ours " +
           (refused ? "refuses it: " + *refused : std::string("accepts it")) +
           "\n";
  }
  if (!kubelet_ok) return "";  // both refuse: nothing to admit
  int index = 0;
  for (const json& step : c.value("steps", json::array())) {
    ++index;
    if (step.contains("release")) {
      const std::string uid = step.at("release");
      ours.Release(uid);
      const json released = oracle.Ask({{"op", "release"}, {"uid", uid}});
      if (!released.value("ok", false)) {
        return "step " + std::to_string(index) +
               ": the oracle failed: " + released.dump() + "\n";
      }
      continue;
    }
    const json& pod = step.at("admit");
    const json mine = ours.Admit(pod);
    int match = -1;
    json outcomes;
    // One sample first (the kubelet's merge is most of the run's time);
    // 64 before a difference is called one.
    for (const int samples : {1, 64}) {
      const json answer =
          oracle.Ask({{"op", "admit"}, {"pod", pod}, {"samples", samples}});
      if (!answer.value("ok", false)) {
        return "step " + std::to_string(index) +
               ": the oracle failed: " + answer.dump() + "\n";
      }
      outcomes = answer.at("outcomes");
      for (size_t i = 0; i < outcomes.size(); ++i) {
        if (outcomes[i] == mine) match = static_cast<int>(i);
      }
      if (match >= 0) break;
    }
    ++coverage.admissions;
    if (!mine.at("admit").get<bool>()) ++coverage.refusals;
    if (!mine.at("cpus").empty()) ++coverage.exclusive;
    if (!mine.at("devices").empty()) ++coverage.devices;
    if (outcomes.size() > 1) ++coverage.several_answers;
    if (match < 0) {
      std::string out =
          "step " + std::to_string(index) + ": admit " + pod.dump() + "\n";
      for (const json& theirs : outcomes) {
        out += "  differs from the kubelet's outcome " + theirs.dump() + ":\n" +
               Diff(mine, theirs);
      }
      return out;
    }
    const json committed = oracle.Ask({{"op", "commit"}, {"index", match}});
    if (!committed.value("ok", false)) {
      return "step " + std::to_string(index) +
             ": the oracle failed: " + committed.dump() + "\n";
    }
  }
  return "";
}

class KubeletOracleTest : public ::testing::Test {
 protected:
  void SetUp() override {
    oracle_ = std::make_unique<Oracle>(
        topology::testing::ProgramPath("kubelet-oracle"));
    ASSERT_TRUE(oracle_->running());
  }

  // Runs `c`; on a difference, fails naming the case and writes it where
  // it can be kept (tests/manager/oracle/cases takes it as it is). True
  // when it agrees.
  bool Check(const json& c) {
    const std::string diff = RunCase(*oracle_, c, coverage_);
    if (diff.empty()) return true;
    const std::filesystem::path kept =
        std::filesystem::temp_directory_path() /
        (c.at("name").get<std::string>() + ".json");
    std::ofstream(kept) << c.dump(1) << "\n";
    ADD_FAILURE() << "case " << c.at("name").get<std::string>()
                  << " differs from the kubelet (case written to "
                  << kept.string() << "):\n"
                  << diff;
    return false;
  }

  void TearDown() override {
    std::printf(
        "%d cases, %d admissions compared: %d refused, %d with exclusive "
        "CPUs, %d with devices, %d where ours was another of the kubelet's "
        "several answers\n",
        coverage_.cases, coverage_.admissions, coverage_.refusals,
        coverage_.exclusive, coverage_.devices, coverage_.several_answers);
  }

  std::unique_ptr<Oracle> oracle_;
  Coverage coverage_;
};

json ReadCase(const std::filesystem::path& file) {
  std::ifstream in(file);
  return json::parse(in, nullptr, false);
}

// The comparison can fail: our side reserving another CPU than the
// kubelet's is seen at the first pinned admission.
TEST_F(KubeletOracleTest, ADifferenceIsReported) {
  const json c =
      ReadCase(std::filesystem::path(topology::testing::SourceDir()) /
               "tests/manager/oracle/cases/"
               "half-used-core-is-filled-first.json");
  ASSERT_FALSE(c.is_discarded());
  json other = c.at("kubelet");
  other["reservedCPUs"] = {1};
  const std::string diff = RunCase(*oracle_, c, coverage_, &other);
  EXPECT_NE(diff.find("step 1: admit"), std::string::npos) << diff;
  EXPECT_NE(diff.find(R"(cpus: ours {"c":"5"}, kubelet {"c":"4"})"),
            std::string::npos)
      << diff;
}

// A kept case may say where we differ from the kubelet on purpose:
// "differs": {"step": N, "why": "..."}. The difference must then be seen
// at that step (a kubelet that changed is noticed), and nowhere before.
TEST_F(KubeletOracleTest, KeptCasesAgree) {
  const std::filesystem::path dir =
      std::filesystem::path(topology::testing::SourceDir()) /
      "tests/manager/oracle/cases";
  std::vector<std::filesystem::path> files;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (entry.path().extension() == ".json") files.push_back(entry.path());
  }
  std::sort(files.begin(), files.end());
  ASSERT_FALSE(files.empty()) << dir;
  for (const auto& file : files) {
    const json c = ReadCase(file);
    ASSERT_FALSE(c.is_discarded()) << file;
    SCOPED_TRACE(file.string());
    if (c.contains("differs")) {
      const std::string diff = RunCase(*oracle_, c, coverage_);
      const std::string step =
          "step " + std::to_string(c["differs"].at("step").get<int>()) + ":";
      EXPECT_EQ(diff.rfind(step, 0), 0u)
          << "expected a difference at " << step << " ("
          << c["differs"].at("why").get<std::string>() << "), got:\n"
          << diff;
      continue;
    }
    (void)Check(c);
  }
}

TEST_F(KubeletOracleTest, GeneratedCasesAgree) {
  const char* count_env = std::getenv("TOPOLOGY_ORACLE_CASES");
  const char* seed_env = std::getenv("TOPOLOGY_ORACLE_SEED");
  const int count = count_env != nullptr ? std::atoi(count_env) : 2000;
  const uint64_t first =
      seed_env != nullptr ? std::strtoull(seed_env, nullptr, 10) : 1;
  int failures = 0;
  for (int i = 0; i < count && failures < 5; ++i) {
    if (!Check(GenerateCase(first + static_cast<uint64_t>(i)))) ++failures;
  }
  // Not a vacuous run: most admissions pin CPUs, some are refused, and the
  // kubelet's several answers are met.
  EXPECT_GT(coverage_.exclusive, coverage_.admissions / 5);
  EXPECT_GT(coverage_.devices, coverage_.admissions / 20);
  EXPECT_GT(coverage_.refusals, 0);
}

// distribute-cpus-across-numa over 4 to 8 of 8 nodes, where the kubelet's
// combinations share storage (GoIntSlice in cpu_assignment.cc).
TEST_F(KubeletOracleTest, DistributedCasesAgree) {
  const char* count_env = std::getenv("TOPOLOGY_ORACLE_DISTRIBUTED_CASES");
  const int count = count_env != nullptr ? std::atoi(count_env) : 300;
  int failures = 0;
  for (int i = 0; i < count && failures < 5; ++i) {
    if (!Check(
            GenerateCase(static_cast<uint64_t>(i) + 1, Focus::kDistributed))) {
      ++failures;
    }
  }
  EXPECT_GT(coverage_.exclusive, coverage_.admissions / 5);
}

// Machines of 9 to 12 NUMA nodes with max-allowable-numa-nodes, too
// small or absent (both refused at start alike), every Topology Manager
// policy and scope: the kubelet's exhaustive merge is the judge of ours.
TEST_F(KubeletOracleTest, ManyNodeCasesAgree) {
  const char* count_env = std::getenv("TOPOLOGY_ORACLE_MANY_NODE_CASES");
  const int count = count_env != nullptr ? std::atoi(count_env) : 100;
  int failures = 0;
  for (int i = 0; i < count && failures < 5; ++i) {
    if (!Check(GenerateCase(static_cast<uint64_t>(i) + 1, Focus::kManyNodes))) {
      ++failures;
    }
  }
  EXPECT_GT(coverage_.exclusive, coverage_.admissions / 5);
  EXPECT_GT(coverage_.refusals, 0);
}

// The kubelet's view of each test machine: cadvisor's reading of sysfs
// (sysinfo.GetNodesInfo: an L3 cache serving exactly a NUMA node's threads
// is the node's, any other is an uncore cache) and topology.Discover, run
// by the oracle in a mount namespace where the machine's tree is
// /sys/devices/system, against DiscoverCpuTopology over our discovery of
// the same tree: each CPU's core, socket, NUMA node and uncore cache, and
// the counts.
TEST(KubeletDiscoveryTest, EveryTestMachineAsCadvisorAndTheKubeletSeeIt) {
  int machines = 0;
  int uncore_machines = 0;
  for (const std::string& name : topology::testing::MachineNames()) {
    // Its CPUs are the dual-socket machines'; its 4,096 PCI functions take
    // most of a minute to write and read.
    if (name == "sriov-4096") continue;
    SCOPED_TRACE(name);
    topology::testing::TempDir dir;
    ASSERT_TRUE(topology::testing::WriteMachine(name, dir.path()));
    DiscoveryOptions options;
    options.host_root = dir.path();
    auto machine = Discover(options);
    ASSERT_TRUE(machine.ok()) << machine.status().message();
    const CpuTopologyView ours = DiscoverCpuTopology(*machine);
    Oracle oracle({"/usr/bin/unshare", "--mount", "--propagation", "private",
                   "--", "/bin/sh", "-c",
                   "mount --bind \"$0/sys/devices/system\" /sys/devices/system "
                   "&& exec \"$1\"",
                   dir.path().string(),
                   topology::testing::ProgramPath("kubelet-oracle")});
    const json answer = oracle.Ask({{"op", "discover"}});
    ASSERT_TRUE(answer.value("ok", false)) << answer.dump();
    const json& theirs = answer.at("topology");
    EXPECT_EQ(theirs.at("numCPUs"), ours.num_cpus);
    EXPECT_EQ(theirs.at("numCores"), ours.num_cores);
    EXPECT_EQ(theirs.at("numSockets"), ours.num_sockets);
    EXPECT_EQ(theirs.at("numNUMANodes"), ours.num_numa_nodes);
    EXPECT_EQ(theirs.at("numUncoreCache"), ours.num_uncore_caches);
    ASSERT_EQ(theirs.at("cpus").size(), ours.cpus.size());
    bool uncore_apart_from_socket = false;
    for (const json& cpu : theirs.at("cpus")) {
      const int id = cpu.at("id");
      ASSERT_TRUE(ours.cpus.count(id)) << "CPU " << id;
      const CpuDetail& detail = ours.cpus.at(id);
      EXPECT_EQ(cpu.at("core"), detail.core) << "CPU " << id;
      EXPECT_EQ(cpu.at("socket"), detail.socket) << "CPU " << id;
      EXPECT_EQ(cpu.at("node"), detail.numa_node) << "CPU " << id;
      EXPECT_EQ(cpu.at("uncore"), detail.uncore) << "CPU " << id;
      if (detail.uncore != detail.socket) uncore_apart_from_socket = true;
    }
    ++machines;
    if (uncore_apart_from_socket) ++uncore_machines;
  }
  // Not vacuous: every machine, and some name uncore caches of their own.
  EXPECT_GE(machines, 7);
  EXPECT_GE(uncore_machines, 1);
}

}  // namespace
}  // namespace topology::manager
