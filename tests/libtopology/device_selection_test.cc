#include "topology/device_selection.h"

#include <algorithm>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "topology/discovery.h"

#include "machine_fixture.h"
#include "random_numa.h"
#include "real_machines.h"
#include "seeded_random.h"
#include "status_matchers.h"
#include "synthetic_machines.h"
#include "temp_dir.h"

namespace topology {
namespace {

using ::testing::ElementsAreArray;
using ::testing::HasSubstr;
using testing::StatusIs;

PciAddress A(const char* text) { return *PciAddress::Parse(text); }

std::vector<PciAddress> Addresses(std::initializer_list<const char*> texts) {
  std::vector<PciAddress> out;
  for (const char* t : texts) out.push_back(A(t));
  return out;
}

std::vector<PciAddress> WithClass(const Topology& t, uint32_t class_prefix16,
                                  uint16_t vendor) {
  std::vector<PciAddress> out;
  for (const PciDevice& d : t.pci_devices()) {
    if ((d.class_code >> 8) == class_prefix16 && d.vendor_id == vendor) {
      out.push_back(d.address);
    }
  }
  return out;
}

// ---------------------------------------------------------------------------
// Random topologies for the brute-force property test.

class TopologyGenerator : public testing::SeededRandom {
 public:
  using SeededRandom::SeededRandom;

  Topology Make() {
    Topology::Parts parts;
    const int nodes = testing::AddRandomNumaNodes(*this, 1, 4, 40, &parts);
    const int bridges = Uniform(1, 4);
    int bus = 1;
    for (int hb = 0; hb < bridges; ++hb) {
      char host[16];
      std::snprintf(host, sizeof(host), "pci0000:%02x", bus);
      std::vector<int> numa;
      if (!Chance(10)) numa.push_back(Uniform(0, nodes - 1));
      // Up to three chains of hops below the host bridge.
      const int chains = Uniform(1, 3);
      for (int c = 0; c < chains; ++c) {
        std::vector<PciAddress> hops_root_first;
        std::vector<bool> switches;
        const int depth = Uniform(0, 3);
        for (int h = 0; h < depth; ++h) {
          PciAddress hop;
          hop.bus = static_cast<uint8_t>(bus++);
          hops_root_first.push_back(hop);
          switches.push_back(Chance(50));
        }
        const int slots = Uniform(1, 3);
        for (int s = 0; s < slots; ++s) {
          const int functions = Chance(25) ? 2 : 1;
          const auto slot_bus = static_cast<uint8_t>(bus++);
          // Functions of one device share its place (a recording may lack
          // the path of a whole device, never of one function).
          const bool path_unknown = Chance(5);
          for (int f = 0; f < functions; ++f) {
            PciDevice d;
            d.address.bus = slot_bus;
            d.address.function = static_cast<uint8_t>(f);
            d.class_code = 0x030200;
            d.host_bridge = path_unknown ? "" : host;
            if (!path_unknown) {
              d.upstream_bridges.assign(hops_root_first.rbegin(),
                                        hops_root_first.rend());
              d.upstream_is_switch.assign(switches.rbegin(), switches.rend());
            }
            d.numa_nodes = numa;
            d.numa_source =
                numa.empty() ? NumaSource::kUnknown : NumaSource::kSysfs;
            parts.pci_devices.push_back(d);
          }
        }
      }
      bus = (bus + 8) & 0xff;
    }
    return Topology(std::move(parts));
  }
};

std::string Describe(const Topology& topology, const CostModel& model,
                     const std::vector<size_t>& indexes, const Selection& got) {
  std::string out;
  for (size_t i : indexes) {
    const PciDevice& d = topology.pci_devices()[i];
    out += d.address.ToString() + " host=" + d.host_bridge + " numa=" +
           (d.numa_nodes.empty() ? std::string("?")
                                 : std::to_string(d.numa_nodes[0])) +
           " hops=";
    for (const PciAddress& h : model.PathHops(i)) out += h.ToString() + ",";
    out += "\n";
  }
  out += "chosen:";
  for (const PciAddress& a : got.devices) out += " " + a.ToString();
  return out;
}

int BruteForce(const CostModel& model, const std::vector<size_t>& available,
               const std::vector<size_t>& must, int k) {
  int best = -1;
  const size_t n = available.size();
  for (uint32_t bits = 0; bits < (1U << n); ++bits) {
    if (std::popcount(bits) != k) continue;
    std::vector<size_t> chosen;
    for (size_t i = 0; i < n; ++i) {
      if ((bits >> i) & 1U) chosen.push_back(available[i]);
    }
    bool has_must = true;
    for (size_t m : must) {
      if (std::find(chosen.begin(), chosen.end(), m) == chosen.end())
        has_must = false;
    }
    if (!has_must) continue;
    int cost = 0;
    for (size_t a = 0; a < chosen.size(); ++a) {
      for (size_t b = a + 1; b < chosen.size(); ++b) {
        cost += model.BetweenIndexes(chosen[a], chosen[b]).cost;
      }
    }
    if (best < 0 || cost < best) best = cost;
  }
  return best;
}

TEST(DeviceSelectionTest, OptimalOnRandomInstancesAgainstBruteForce) {
  TopologyGenerator gen(2024);
  int instances = 0;
  while (instances < 5000) {
    const Topology topology = gen.Make();
    const CostModel model(topology);
    const DeviceSelector selector(model);
    const size_t total = topology.pci_devices().size();
    if (total == 0) continue;
    std::vector<size_t> indexes(total);
    for (size_t i = 0; i < total; ++i) indexes[i] = i;
    std::shuffle(indexes.begin(), indexes.end(), gen.engine());
    indexes.resize(
        std::min<size_t>(total, static_cast<size_t>(gen.Uniform(1, 14))));
    const int k = gen.Uniform(1, static_cast<int>(indexes.size()));
    std::vector<size_t> must;
    for (size_t i = 0; i < indexes.size() && static_cast<int>(must.size()) < k;
         ++i) {
      if (gen.Chance(15)) must.push_back(indexes[i]);
    }
    SelectionRequest request;
    request.size = k;
    for (size_t i : indexes)
      request.available.push_back(topology.pci_devices()[i].address);
    for (size_t i : must)
      request.must_include.push_back(topology.pci_devices()[i].address);
    auto selection = selector.Select(request);
    ASSERT_TRUE(selection.ok()) << selection.status().ToString();
    // Exactly k distinct available devices, must-include among them.
    ASSERT_EQ(static_cast<int>(selection->devices.size()), k);
    std::set<PciAddress> unique(selection->devices.begin(),
                                selection->devices.end());
    ASSERT_EQ(unique.size(), selection->devices.size());
    for (const PciAddress& a : selection->devices) {
      ASSERT_NE(
          std::find(request.available.begin(), request.available.end(), a),
          request.available.end());
    }
    for (const PciAddress& m : request.must_include)
      ASSERT_TRUE(unique.count(m));
    ASSERT_TRUE(selection->exact);
    ASSERT_EQ(selection->cost, BruteForce(model, indexes, must, k))
        << "instance " << instances << ", k " << k << ", " << must.size()
        << " must-include\n"
        << Describe(topology, model, indexes, *selection);
    ++instances;
  }
}

// The runner-up is re-solved once per class of interchangeable devices;
// it must equal the device-by-device scan (drop each chosen device, solve
// again, keep the first strictly cheaper answer).
TEST(DeviceSelectionTest, RunnerUpEqualsTheDeviceByDeviceScan) {
  TopologyGenerator gen(4711);
  for (int instance = 0; instance < 1500; ++instance) {
    const Topology topology = gen.Make();
    const CostModel model(topology);
    const DeviceSelector selector(model);
    const size_t total = topology.pci_devices().size();
    if (total < 2) continue;
    SelectionRequest request;
    for (const PciDevice& d : topology.pci_devices()) {
      if (gen.Chance(80)) request.available.push_back(d.address);
    }
    if (request.available.size() < 2) continue;
    request.size =
        gen.Uniform(1, static_cast<int>(request.available.size()) - 1);
    if (gen.Chance(20)) request.must_include.push_back(request.available[0]);
    request.explain = true;
    auto got = selector.Select(request);
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    std::vector<PciAddress> want_set;
    int want_cost = -1;
    for (const PciAddress& dropped : got->devices) {
      if (std::find(request.must_include.begin(), request.must_include.end(),
                    dropped) != request.must_include.end()) {
        continue;
      }
      SelectionRequest other = request;
      other.explain = false;
      std::erase(other.available, dropped);
      if (static_cast<int>(other.available.size()) < request.size) continue;
      auto alternative = selector.Select(other);
      if (!alternative.ok()) continue;
      if (want_cost < 0 || alternative->cost < want_cost) {
        want_cost = alternative->cost;
        want_set = alternative->devices;
      }
    }
    ASSERT_EQ(got->runner_up_cost, want_cost) << "instance " << instance;
    ASSERT_EQ(got->runner_up, want_set) << "instance " << instance;
  }
}

// The heuristic used past the group-search budget, measured against the
// exact answer on instances with many NUMA groups.
TEST(DeviceSelectionTest, HeuristicGapIsMeasuredAndSmall) {
  TopologyGenerator gen(77);
  double gap_sum = 0;
  int instances = 0;
  int optimal = 0;
  while (instances < 2000) {
    const Topology topology = gen.Make();
    const CostModel model(topology);
    const DeviceSelector selector(model);
    SelectionRequest request;
    for (const PciDevice& d : topology.pci_devices())
      request.available.push_back(d.address);
    if (request.available.size() < 2) continue;
    request.size = gen.Uniform(2, static_cast<int>(request.available.size()));
    auto exact = selector.Select(request);
    request.group_search_budget = 0;
    auto heuristic = selector.Select(request);
    ASSERT_TRUE(exact.ok() && heuristic.ok());
    ASSERT_TRUE(exact->exact);
    ASSERT_FALSE(heuristic->exact);
    ASSERT_EQ(heuristic->devices.size(), exact->devices.size());
    ASSERT_GE(heuristic->cost, exact->cost);
    gap_sum += exact->cost == 0
                   ? 0.0
                   : static_cast<double>(heuristic->cost - exact->cost) /
                         static_cast<double>(exact->cost);
    optimal += heuristic->cost == exact->cost ? 1 : 0;
    ++instances;
  }
  const double mean_gap = gap_sum / instances;
  std::printf(
      "selection heuristic: %d instances, optimal in %d, mean gap %.3f%%\n",
      instances, optimal, mean_gap * 100);
  RecordProperty("mean_gap_percent", std::to_string(mean_gap * 100));
  EXPECT_LE(mean_gap, 0.02);
}

// ---------------------------------------------------------------------------

class SelectionOnMachineTest : public testing::DualSocketMachineTest {
 protected:
  static StatusOr<Selection> Pick(std::vector<PciAddress> available, int k,
                                  std::vector<PciAddress> must = {},
                                  bool explain = false) {
    SelectionRequest request{std::move(available), std::move(must), k, explain};
    return DeviceSelector(*model_).Select(request);
  }
  static std::vector<PciAddress> Gpus() {
    return WithClass(*topology_, 0x0302, 0x10de);
  }
};

TEST_F(SelectionOnMachineTest, PairsShareASwitchFourShareANode) {
  EXPECT_THAT(Pick(Gpus(), 2)->devices,
              ElementsAreArray(Addresses({"0000:1a:00.0", "0000:1b:00.0"})));
  EXPECT_THAT(Pick(Gpus(), 4)->devices,
              ElementsAreArray(Addresses({"0000:1a:00.0", "0000:1b:00.0",
                                          "0000:3d:00.0", "0000:3e:00.0"})));
  const auto four = Pick(Gpus(), 4);
  EXPECT_EQ(four->numa_nodes, std::vector<int>{0});
  EXPECT_EQ(four->cost, 20 + 20 + 4 * 50);
}

TEST_F(SelectionOnMachineTest, FragmentationAwareTieBreak) {
  // Switch 0x18 has one free GPU left, switch 0x3b two: a single GPU comes
  // from the nearly used switch so that a full pair stays free.
  std::vector<PciAddress> free = Gpus();
  free.erase(free.begin());  // 1a in use
  EXPECT_THAT(Pick(free, 1)->devices,
              ElementsAreArray(Addresses({"0000:1b:00.0"})));
}

TEST_F(SelectionOnMachineTest, MustIncludeIsHonouredAndCheapestAroundIt) {
  const auto picked = Pick(Gpus(), 2, Addresses({"0000:9b:00.0"}));
  EXPECT_THAT(picked->devices,
              ElementsAreArray(Addresses({"0000:9a:00.0", "0000:9b:00.0"})));
}

TEST_F(SelectionOnMachineTest, ExplanationNamesTheRunnerUp) {
  const auto picked = Pick(Gpus(), 2, {}, true);
  ASSERT_TRUE(picked.ok());
  EXPECT_EQ(picked->runner_up_cost, 20);  // another same-switch pair
  EXPECT_THAT(picked->explanation, HasSubstr("summed pairwise cost 20"));
}

TEST_F(SelectionOnMachineTest, InconsistentInputIsRefused) {
  const auto gpus = Gpus();
  EXPECT_THAT(Pick(gpus, 0),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("size 0")));
  EXPECT_THAT(Pick(gpus, 9),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("exceeds")));
  EXPECT_THAT(
      Pick({gpus[0], gpus[0]}, 1),
      StatusIs(StatusCode::kInvalidArgument, HasSubstr("listed twice")));
  EXPECT_THAT(
      Pick({gpus[0]}, 1, {gpus[1]}),
      StatusIs(StatusCode::kInvalidArgument, HasSubstr("not available")));
  EXPECT_THAT(Pick(gpus, 1, {gpus[0], gpus[1]}),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("less than")));
  EXPECT_THAT(Pick({A("0000:ee:00.0")}, 1),
              StatusIs(StatusCode::kNotFound, HasSubstr("0000:ee:00.0")));
  // Unknown among known ones, before, between and after them, in any
  // order: named.
  for (const char* unknown : {"0000:00:00.7", "0000:3b:00.7", "0000:ff:1f.7"}) {
    EXPECT_THAT(Pick({gpus[7], A(unknown), gpus[0], gpus[3]}, 1),
                StatusIs(StatusCode::kNotFound, HasSubstr(unknown)));
  }
  // The same devices in any order choose the same.
  const auto forward = Pick({gpus[0], gpus[1], gpus[6], gpus[7]}, 2);
  const auto backward = Pick({gpus[7], gpus[6], gpus[1], gpus[0]}, 2);
  ASSERT_TRUE(forward.ok() && backward.ok());
  EXPECT_EQ(forward->devices, backward->devices);
}

// ---------------------------------------------------------------------------
// The recordings with PCIe switches.

TEST(SelectionOnRecordingsTest, SupermicroVectorEnginesStayOnOneSwitch) {
  const auto root = testing::UnpackRealMachine("32intel64-2p8co2t+8ve.tar.bz2");
  ASSERT_TRUE(root) << "tests/data/real-machines: recording missing";
  DiscoveryOptions options;
  options.host_root = *root;
  const Topology topology = *Discover(options);
  const CostModel model(topology);
  const DeviceSelector selector(model);
  const std::vector<PciAddress> ves = WithClass(topology, 0x0b40, 0x1bcf);
  ASSERT_EQ(ves.size(), 8u);
  const auto pick = [&](int k) {
    return selector.Select(SelectionRequest{ves, {}, k, false})->devices;
  };
  EXPECT_THAT(pick(2),
              ElementsAreArray(Addresses({"0000:1b:00.0", "0000:1c:00.0"})));
  EXPECT_THAT(pick(4),
              ElementsAreArray(Addresses({"0000:1b:00.0", "0000:1c:00.0",
                                          "0000:1d:00.0", "0000:1e:00.0"})));
  EXPECT_THAT(pick(8), ElementsAreArray(ves));  // all on node 0
}

TEST(SelectionOnRecordingsTest, Dgx2GpusStayOnASwitchThenASocket) {
  const auto dir = testing::RealMachinesDir();
  ASSERT_TRUE(dir) << "tests/data/real-machines missing";
  const Topology topology = *LoadHwlocXml(*dir / "nvidiaDGX2.xml");
  const CostModel model(topology);
  const DeviceSelector selector(model);
  const std::vector<PciAddress> gpus = WithClass(topology, 0x0302, 0x10de);
  ASSERT_EQ(gpus.size(), 16u);
  const auto pick = [&](int k) {
    return *selector.Select(SelectionRequest{gpus, {}, k, false});
  };
  EXPECT_THAT(pick(2).devices,
              ElementsAreArray(Addresses({"0000:34:00.0", "0000:36:00.0"})));
  EXPECT_THAT(pick(4).devices,
              ElementsAreArray(Addresses({"0000:34:00.0", "0000:36:00.0",
                                          "0000:39:00.0", "0000:3b:00.0"})));
  const Selection eight = pick(8);
  EXPECT_THAT(
      eight.devices,
      ElementsAreArray(Addresses(
          {"0000:34:00.0", "0000:36:00.0", "0000:39:00.0", "0000:3b:00.0",
           "0000:57:00.0", "0000:59:00.0", "0000:5c:00.0", "0000:5e:00.0"})));
  EXPECT_EQ(eight.numa_nodes, std::vector<int>{0});
  // Starting from a GPU on socket 1, the pair stays below its switch.
  const Selection with_be = *selector.Select(
      SelectionRequest{gpus, Addresses({"0000:be:00.0"}), 2, false});
  EXPECT_THAT(with_be.devices,
              ElementsAreArray(Addresses({"0000:bc:00.0", "0000:be:00.0"})));
}

}  // namespace
}  // namespace topology
