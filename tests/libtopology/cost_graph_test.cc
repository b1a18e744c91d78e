#include "topology/cost_graph.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "machine_fixture.h"
#include "random_numa.h"
#include "seeded_random.h"
#include "status_matchers.h"

namespace topology {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using testing::StatusIs;

GraphInstance Dev(const char* address) {
  return GraphInstance{*PciAddress::Parse(address), -1};
}
GraphInstance Cpu(int node) { return GraphInstance{std::nullopt, node}; }

std::vector<std::string> Names(const std::vector<GraphInstance>& instances) {
  std::vector<std::string> out;
  out.reserve(instances.size());
  for (const GraphInstance& i : instances) out.push_back(i.ToString());
  return out;
}

class CostGraphTest : public testing::DualSocketMachineTest {
 protected:
  static std::vector<GraphInstance> Pool(uint32_t class_code) {
    std::vector<GraphInstance> pool;
    for (const PciDevice& d : topology_->pci_devices()) {
      if (d.class_code == class_code)
        pool.push_back(GraphInstance{d.address, -1});
    }
    return pool;
  }
  static std::vector<GraphInstance> Cpus() {
    std::vector<GraphInstance> pool;
    for (int node = 0; node < 2; ++node) {
      for (int k = 0; k < 16; ++k) pool.push_back(Cpu(node));
    }
    return pool;
  }
  static StatusOr<GraphSelection> Run(const GraphRequest& request) {
    return CostGraphSelector(*model_).Select(request);
  }
};

TEST_F(CostGraphTest, GpusAndNicShareASwitchCpusTheirNode) {
  GraphRequest request;
  request.resources = {{"gpu", 2, Pool(0x030200)},
                       {"nic", 1, Pool(0x020000)},
                       {"cpu", 4, Cpus()}};
  for (GraphSolver solver :
       {GraphSolver::kGreedy, GraphSolver::kAnnealing, GraphSolver::kExact}) {
    request.solver = solver;
    auto got = Run(request);
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    EXPECT_THAT(Names(got->selection["gpu"]),
                ElementsAre("0000:1a:00.0", "0000:1b:00.0"));
    EXPECT_THAT(Names(got->selection["nic"]), ElementsAre("0000:1c:00.0"));
    EXPECT_THAT(Names(got->selection["cpu"]),
                ElementsAre("numa:0", "numa:0", "numa:0", "numa:0"));
    // 3 PIX pairs among the devices; CPUs are local (0) to them and each other.
    EXPECT_EQ(got->cost, 3 * 20);
    EXPECT_EQ(got->numa_nodes, std::vector<int>{0});
    // The nearest alternative swaps a GPU for 0000:3d:00.0 (+2 x NODE - PIX
    // ... ) and costs more.
    EXPECT_GT(got->runner_up_cost, got->cost);
    EXPECT_THAT(got->explanation, HasSubstr("the best alternative"));
  }
}

TEST_F(CostGraphTest, ExtraCostsFromThePluginChangeTheAnswer) {
  GraphRequest request;
  request.resources = {{"gpu", 2, Pool(0x030200)}};
  // An NVLink bridge between two GPUs behind different host bridges.
  request.extra_costs = {{*PciAddress::Parse("0000:1a:00.0"),
                          *PciAddress::Parse("0000:3d:00.0"), -45}};
  auto got = Run(request);
  ASSERT_TRUE(got.ok());
  EXPECT_THAT(Names(got->selection["gpu"]),
              ElementsAre("0000:1a:00.0", "0000:3d:00.0"));
  EXPECT_EQ(got->cost, 5);
}

TEST_F(CostGraphTest, SameSeedSameAnswer) {
  GraphRequest request;
  request.resources = {{"gpu", 3, Pool(0x030200)}, {"nic", 2, Pool(0x020000)}};
  request.seed = 42;
  auto a = Run(request);
  auto b = Run(request);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->selection, b->selection);
  EXPECT_EQ(a->cost, b->cost);
  EXPECT_THAT(a->explanation, HasSubstr("simulated annealing"));
}

TEST_F(CostGraphTest, BadRequestsNameTheProblem) {
  GraphRequest request;
  EXPECT_THAT(Run(request), StatusIs(StatusCode::kInvalidArgument,
                                     HasSubstr("no resources")));
  request.resources = {{"gpu", 9, Pool(0x030200)}};
  EXPECT_THAT(Run(request), StatusIs(StatusCode::kInvalidArgument,
                                     HasSubstr("\"gpu\": count 9")));
  request.resources = {{"gpu", 1, Pool(0x030200)}, {"gpu", 1, Pool(0x020000)}};
  EXPECT_THAT(Run(request),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("twice")));
  request.resources = {{"gpu", 1, {Dev("0000:1a:00.0"), Dev("0000:1a:00.0")}}};
  EXPECT_THAT(Run(request), StatusIs(StatusCode::kInvalidArgument,
                                     HasSubstr("listed twice")));
  request.resources = {{"gpu", 1, {Dev("0000:77:00.0")}}};
  EXPECT_THAT(Run(request),
              StatusIs(StatusCode::kNotFound, HasSubstr("0000:77:00.0")));
  request.resources = {{"cpu", 1, {Cpu(5)}}};
  EXPECT_THAT(Run(request),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("NUMA node 5")));
}

// ---------------------------------------------------------------------------
// Quality against the exact optimum on seeded generated instances: 2 to 4
// resource types with up to 64 instances each.

Topology RandomMachine(testing::SeededRandom& rng, int* type_count) {
  Topology::Parts parts;
  const int nodes = testing::AddRandomNumaNodes(rng, 2, 4, 32, &parts);
  *type_count = rng.Uniform(2, 4);
  int bus = 1;
  const int bridges = rng.Uniform(2, 8);
  for (int hb = 0; hb < bridges; ++hb) {
    const int node = rng.Uniform(0, nodes - 1);
    const int switches = rng.Uniform(1, 4);
    for (int s = 0; s < switches; ++s) {
      PciAddress root_port;
      root_port.bus = static_cast<uint8_t>(bus++);
      PciAddress usp;
      usp.bus = static_cast<uint8_t>(bus++);
      const int per_switch = rng.Uniform(1, 16);
      for (int k = 0; k < per_switch && bus < 250; ++k) {
        PciDevice d;
        d.address.bus = static_cast<uint8_t>(bus++);
        d.address.domain = static_cast<uint32_t>(hb);
        // The type of device: encoded in the class code's low byte.
        d.class_code =
            0x120000U | static_cast<uint32_t>(rng.Uniform(0, *type_count - 1));
        d.host_bridge = "pci" + std::to_string(hb);
        PciAddress dsp;
        dsp.bus = usp.bus;
        dsp.device = static_cast<uint8_t>(k % 32);
        d.upstream_bridges = {dsp, usp, root_port};
        d.upstream_is_switch = {false, true, false};
        d.numa_nodes = {node};
        parts.pci_devices.push_back(d);
      }
    }
  }
  return Topology(std::move(parts));
}

TEST(CostGraphQualityTest, AnnealingIsNearTheOptimumAndNeverWorseThanGreedy) {
  testing::SeededRandom rng(
      static_cast<uint64_t>(testing::EnvOr("TOPOLOGY_GRAPH_SEED", 3)));
  const int64_t wanted = testing::EnvOr("TOPOLOGY_GRAPH_CASES", 100);
  double gap_sum = 0;
  double greedy_gap_sum = 0;
  int64_t improved = 0;
  int64_t solved = 0;
  int64_t attempts = 0;
  while (solved < wanted && attempts < wanted * 3) {
    ++attempts;
    int types = 0;
    const Topology topology = RandomMachine(rng, &types);
    const CostModel model(topology);
    GraphRequest request;
    for (int t = 0; t < types; ++t) {
      ResourceRequest r;
      r.name = "type" + std::to_string(t);
      for (const PciDevice& d : topology.pci_devices()) {
        if (static_cast<int>(d.class_code & 0xff) == t && r.pool.size() < 64) {
          r.pool.push_back(GraphInstance{d.address, -1});
        }
      }
      if (r.pool.empty()) continue;
      r.count =
          rng.Uniform(1, std::min<int>(4, static_cast<int>(r.pool.size())));
      request.resources.push_back(r);
    }
    if (request.resources.size() < 2) continue;
    // Plugin-supplied links (NVLink-like) make the costs rugged: some pairs
    // much cheaper, some dearer than the PCIe path says.
    const auto& all = topology.pci_devices();
    const int links = rng.Uniform(0, 40);
    for (int l = 0; l < links && all.size() > 1; ++l) {
      const auto a =
          static_cast<size_t>(rng.Uniform(0, static_cast<int>(all.size()) - 1));
      const auto b =
          static_cast<size_t>(rng.Uniform(0, static_cast<int>(all.size()) - 1));
      if (a != b) {
        request.extra_costs.push_back(
            {all[a].address, all[b].address, rng.Uniform(-60, 20)});
      }
    }
    request.seed = static_cast<uint64_t>(attempts);
    const CostGraphSelector selector(model);
    request.solver = GraphSolver::kAnnealing;
    auto annealed = selector.Select(request);
    ASSERT_TRUE(annealed.ok()) << annealed.status().ToString();
    request.solver = GraphSolver::kExact;
    auto exact = selector.Select(request);
    if (!exact.ok()) {
      ASSERT_EQ(exact.status().code(), StatusCode::kResourceExhausted);
      continue;
    }
    ASSERT_LE(annealed->cost, annealed->greedy_cost);
    ASSERT_GE(annealed->cost, exact->cost);
    for (const auto& r : request.resources) {
      ASSERT_EQ(static_cast<int>(annealed->selection[r.name].size()), r.count);
    }
    const auto gap = [&](int64_t cost) {
      return exact->cost == 0 ? (cost == 0 ? 0.0 : 1.0)
                              : static_cast<double>(cost - exact->cost) /
                                    static_cast<double>(exact->cost);
    };
    gap_sum += gap(annealed->cost);
    greedy_gap_sum += gap(annealed->greedy_cost);
    improved += annealed->cost < annealed->greedy_cost ? 1 : 0;
    ++solved;
  }
  ASSERT_GE(solved, wanted * 2 / 3) << "too few instances solved exactly";
  const double mean_gap = gap_sum / static_cast<double>(solved);
  RecordProperty("mean_gap_percent", std::to_string(mean_gap * 100));
  std::printf(
      "cost-graph quality: %ld instances solved exactly; mean gap to the "
      "optimum: annealing %.3f%%, greedy %.3f%%; annealing improved on greedy "
      "in %ld\n",
      solved, mean_gap * 100,
      greedy_gap_sum / static_cast<double>(solved) * 100, improved);
  EXPECT_LE(mean_gap, 0.02);
}

}  // namespace
}  // namespace topology
