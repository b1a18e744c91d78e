#include "topology/device_selection.h"

#include <algorithm>
#include <climits>
#include <cstdio>
#include <deque>
#include <functional>
#include <limits>
#include <map>
#include <memory_resource>
#include <set>
#include <string>
#include <unordered_map>

#include "topology/sorted_search.h"

namespace topology {
namespace {

constexpr int64_t kInfinity = LLONG_MAX / 4;
// The first block of a selection's arena; later ones grow geometrically.
constexpr size_t kArenaChunk = size_t{64} << 10;

// Lexicographic objective: summed pair cost, then the fragmentation penalty
// (free devices left behind in every group that was touched).
struct Score {
  int64_t cost = kInfinity;
  int64_t penalty = 0;
  bool feasible() const { return cost < kInfinity; }
  friend bool operator<(const Score& a, const Score& b) {
    return a.cost != b.cost ? a.cost < b.cost : a.penalty < b.penalty;
  }
};

// A group of the cost tree: any two devices whose deepest common group is
// this one cost `weight`.
// Its vectors live in the tree's arena: a tree of thousands of devices is
// built and dropped per selection, and one heap allocation per vector was
// most of the time spent on it.
struct TreeNode {
  explicit TreeNode(std::pmr::memory_resource* arena)
      : children(arena), best(arena), choice(arena) {}
  int weight = 0;
  std::pmr::vector<int> children;
  int device = -1;  // leaves: index into Topology::pci_devices()
  bool forced = false;
  // Children that are leaves, and forced ones among them (counted as they
  // are linked, so that a pool of devices is known without visiting them).
  int leaf_children = 0;
  int forced_children = 0;
  bool leaf_pool = false;  // every child is a device: solved in closed form
  int available = 0;
  std::pmr::vector<Score> best;  // best[j]: j devices from here
  std::pmr::vector<std::pmr::vector<int>>
      choice;  // per child: count given at each j
};

class CostTree {
 public:
  explicit CostTree(int size) : size_(size) {}

  void Reserve(size_t nodes) { nodes_.reserve(nodes); }

  // For the tables that build the tree: allocations freed with it.
  std::pmr::memory_resource* arena() { return &arena_; }

  int Add(int weight) {
    nodes_.emplace_back(&arena_);
    nodes_.back().weight = weight;
    return static_cast<int>(nodes_.size()) - 1;
  }
  int AddLeaf(int device, bool forced) {
    const int id = Add(0);
    nodes_[static_cast<size_t>(id)].device = device;
    nodes_[static_cast<size_t>(id)].forced = forced;
    return id;
  }
  void Link(int parent, int child) {
    TreeNode& node = nodes_[static_cast<size_t>(parent)];
    node.children.push_back(child);
    const TreeNode& linked = nodes_[static_cast<size_t>(child)];
    if (linked.device >= 0) {
      ++node.leaf_children;
      if (linked.forced) ++node.forced_children;
    }
  }
  TreeNode& at(int id) { return nodes_[static_cast<size_t>(id)]; }

  // Fills best[] bottom-up below `id`. A node's table has
  // min(available, size) + 1 entries: a pool of 8 VFs costs 9 entries, not
  // one per device requested.
  void Solve(int id, size_t depth = 0) {
    if (at(id).device >= 0) {
      TreeNode& leaf = at(id);
      leaf.available = 1;
      leaf.best.assign(2, Score{});
      if (!leaf.forced) leaf.best[0] = Score{0, 0};
      leaf.best[1] = Score{0, 0};
      return;
    }
    // A group with one member adds no pair: look through it.
    if (static_cast<size_t>(at(id).leaf_children) != at(id).children.size()) {
      for (int& child : at(id).children) {
        if (at(child).device >= 0) continue;
        while (at(child).device < 0 && at(child).children.size() == 1) {
          child = at(child).children[0];
        }
        if (at(child).device >= 0) {
          ++at(id).leaf_children;
          if (at(child).forced) ++at(id).forced_children;
        }
      }
    }
    TreeNode& node = at(id);
    if (static_cast<size_t>(node.leaf_children) == node.children.size()) {
      // j devices of one group cost C(j,2) * weight whichever they are.
      node.leaf_pool = true;
      const int forced = node.forced_children;
      node.available = static_cast<int>(node.children.size());
      node.best.assign(static_cast<size_t>(std::min(node.available, size_)) + 1,
                       Score{});
      for (int j = forced; j <= std::min(node.available, size_); ++j) {
        node.best[static_cast<size_t>(j)] =
            Score{static_cast<int64_t>(j) * (j - 1) / 2 * node.weight,
                  j > 0 ? node.available - j : 0};
      }
      return;
    }
    // The running table and the next one: buffers of this depth, reused
    // by every node at it (a child's Solve uses the next depth's).
    if (scratch_.size() < depth + 1) scratch_.resize(depth + 1);
    std::vector<Score>& acc = scratch_[depth].first;
    std::vector<Score>& next = scratch_[depth].second;
    acc.assign(1, Score{0, 0});
    node.choice.clear();
    // One table per child, reserved so that `pick` below stays in place.
    node.choice.reserve(node.children.size());
    int reach = 0;
    for (size_t c = 0; c < at(id).children.size(); ++c) {
      const int child_id = at(id).children[c];
      Solve(child_id, depth + 1);
      const TreeNode& child = at(child_id);
      at(id).available += child.available;
      const int child_reach = std::min(child.available, size_);
      const int next_reach = std::min(reach + child_reach, size_);
      next.assign(static_cast<size_t>(next_reach) + 1, Score{});
      std::pmr::vector<int>& pick =
          at(id).choice.emplace_back(static_cast<size_t>(next_reach) + 1, 0);
      for (int j = 0; j <= next_reach; ++j) {
        for (int b = std::max(0, j - reach); b <= std::min(j, child_reach);
             ++b) {
          const Score& left = acc[static_cast<size_t>(j - b)];
          const Score& right = child.best[static_cast<size_t>(b)];
          if (!left.feasible() || !right.feasible()) continue;
          const Score candidate{
              left.cost + right.cost +
                  static_cast<int64_t>(j - b) * b * at(id).weight,
              left.penalty + right.penalty};
          // Strictly better only: on ties the earlier children (lower
          // addresses) keep the devices.
          if (candidate < next[static_cast<size_t>(j)]) {
            next[static_cast<size_t>(j)] = candidate;
            pick[static_cast<size_t>(j)] = b;
          }
        }
      }
      reach = next_reach;
      acc.swap(next);
    }
    // Touching a group leaves its other free devices fragmented.
    TreeNode& done = at(id);
    for (int j = 1; j <= reach; ++j) {
      Score& s = acc[static_cast<size_t>(j)];
      if (s.feasible()) s.penalty += done.available - j;
    }
    done.best.assign(acc.begin(), acc.end());
  }

  // best[j] of a solved node; infeasible beyond its table.
  const Score& Best(int id, int j) const {
    static const Score kNone{};
    const TreeNode& node = nodes_[static_cast<size_t>(id)];
    return j >= 0 && static_cast<size_t>(j) < node.best.size()
               ? node.best[static_cast<size_t>(j)]
               : kNone;
  }

  // Interchangeable devices for the runner-up: a class id per device leaf,
  // equal for two leaves when removing either leaves isomorphic trees (the
  // same shape, weights and must-include marks along both paths to
  // `root`). Call before Solve(), which rewires single-child chains.
  void ClassifyLeaves(int root, std::map<int, int>* class_of_device) {
    if (shape_.empty()) {
      // Shapes bottom-up (children are added after their parents), once
      // for the whole tree.
      std::map<std::vector<int64_t>, int> intern;
      shape_.assign(nodes_.size(), -1);
      for (size_t i = nodes_.size(); i-- > 0;) {
        const TreeNode& node = nodes_[i];
        std::vector<int64_t> key{node.weight, node.device >= 0 ? 1 : 0,
                                 node.forced ? 1 : 0};
        std::vector<int64_t> children;
        for (int c : node.children) {
          children.push_back(shape_[static_cast<size_t>(c)]);
        }
        std::sort(children.begin(), children.end());
        key.insert(key.end(), children.begin(), children.end());
        shape_[i] =
            intern.emplace(std::move(key), static_cast<int>(intern.size()))
                .first->second;
      }
    }
    const std::vector<int>& shape = shape_;
    // Paths: the shapes from each leaf up to the root.
    std::vector<int> path;
    const std::function<void(int)> walk = [&](int id) {
      path.push_back(shape[static_cast<size_t>(id)]);
      const TreeNode& node = nodes_[static_cast<size_t>(id)];
      if (node.device >= 0) {
        std::vector<int> key(path.rbegin(), path.rend());
        key.push_back(root);
        (*class_of_device)[node.device] =
            classes_.emplace(std::move(key), static_cast<int>(classes_.size()))
                .first->second;
      }
      for (int c : node.children) walk(c);
      path.pop_back();
    };
    walk(root);
  }

  // Collects the devices of the optimum with `count` devices below `id`.
  void Collect(int id, int count, std::vector<int>* out) {
    TreeNode& node = at(id);
    if (node.device >= 0) {
      if (count == 1) out->push_back(node.device);
      return;
    }
    if (node.leaf_pool) {
      // Must-include devices first, then the lowest addresses.
      for (int c : node.children) {
        if (at(c).forced) {
          out->push_back(at(c).device);
          --count;
        }
      }
      for (int c : node.children) {
        if (count == 0) break;
        if (!at(c).forced) {
          out->push_back(at(c).device);
          --count;
        }
      }
      return;
    }
    for (size_t c = node.children.size(); c-- > 0;) {
      const int b = node.choice[c][static_cast<size_t>(count)];
      Collect(node.children[c], b, out);
      count -= b;
    }
  }

 private:
  int size_;
  // Declared first: destroyed after everything allocated from it.
  std::pmr::monotonic_buffer_resource arena_{kArenaChunk};
  std::vector<TreeNode> nodes_;
  // Solve(): per depth; a deque, so that growing it for a deeper level
  // leaves the shallower levels' buffers in place.
  std::deque<std::pair<std::vector<Score>, std::vector<Score>>> scratch_;
  std::vector<int> shape_;                   // ClassifyLeaves()
  std::map<std::vector<int>, int> classes_;  // ClassifyLeaves()
};

// One NUMA group at the root: its tree and its table.
struct Group {
  std::vector<int> numa_nodes;
  int root = -1;
  int must = 0;
};

// Tree nodes below a host bridge, keyed by (parent node, address of the hop
// or board) so that no path strings are built per device. Devices come in
// address order, so neighbours mostly share their nodes: the table remembers
// its last answer before hashing.
class NodeTable {
 public:
  explicit NodeTable(std::pmr::memory_resource* arena) : nodes_(arena) {}

  // The node for `key`: made the first time as a child of `parent` with
  // `weight`.
  int Get(uint64_t key, CostTree& tree, int parent, int weight) {
    if (last_node_ >= 0 && last_key_ == key) return last_node_;
    auto it = nodes_.find(key);
    if (it == nodes_.end()) {
      const int node = tree.Add(weight);
      tree.Link(parent, node);
      it = nodes_.emplace(key, node).first;
    }
    last_key_ = key;
    last_node_ = it->second;
    return last_node_;
  }

 private:
  std::pmr::unordered_map<uint64_t, int> nodes_;
  uint64_t last_key_ = 0;
  int last_node_ = -1;
};

}  // namespace

DeviceSelector::DeviceSelector(const CostModel& model) : model_(model) {}

StatusOr<Selection> DeviceSelector::Select(
    const SelectionRequest& request) const {
  const Topology& topology = model_.topology();
  const auto& devices = topology.pci_devices();
  // (address, index into the topology's devices), sorted by address, then
  // found in one walk along the topology's devices (sorted too).
  std::vector<std::pair<PciAddress, int>> available_index;
  available_index.reserve(request.available.size());
  for (const PciAddress& a : request.available) {
    available_index.emplace_back(a, -1);
  }
  // Callers usually offer devices in address order (the kubelet sorts).
  if (!std::is_sorted(available_index.begin(), available_index.end())) {
    std::sort(available_index.begin(), available_index.end());
  }
  {
    // Along the model's compact copy of the addresses: the devices
    // themselves are large, and a walk over them misses the cache per step.
    const std::vector<PciAddress>& addresses = model_.Addresses();
    auto d = addresses.begin();
    for (auto& [address, index] : available_index) {
      d = GallopLowerBound(d, addresses.end(), address, std::less<>());
      if (d == addresses.end() || *d != address) {
        return NotFoundError("available device " + address.ToString() +
                             " is not in " + topology.source());
      }
      index = static_cast<int>(d - addresses.begin());
    }
  }
  for (size_t i = 1; i < available_index.size(); ++i) {
    if (available_index[i].first == available_index[i - 1].first) {
      return InvalidArgumentError("available device " +
                                  available_index[i].first.ToString() +
                                  " is listed twice");
    }
  }
  const auto is_available = [&](const PciAddress& a) {
    return std::binary_search(
        available_index.begin(), available_index.end(), std::make_pair(a, -1),
        [](const auto& x, const auto& y) { return x.first < y.first; });
  };
  std::set<PciAddress> must;
  for (const PciAddress& a : request.must_include) {
    if (!is_available(a)) {
      return InvalidArgumentError("must-include device " + a.ToString() +
                                  " is not available");
    }
    if (!must.insert(a).second) {
      return InvalidArgumentError("must-include device " + a.ToString() +
                                  " is listed twice");
    }
  }
  const int k = request.size;
  if (k < 1) {
    return InvalidArgumentError("size " + std::to_string(k) +
                                " must be at least 1");
  }
  if (k > static_cast<int>(available_index.size())) {
    return InvalidArgumentError("size " + std::to_string(k) + " exceeds the " +
                                std::to_string(available_index.size()) +
                                " available devices");
  }
  if (k < static_cast<int>(must.size())) {
    return InvalidArgumentError(
        "size " + std::to_string(k) + " is less than the " +
        std::to_string(must.size()) + " must-include devices");
  }

  // Build the cost tree: NUMA group > host bridge > hops > direct pool >
  // board > function.
  CostTree tree(k);
  tree.Reserve(available_index.size() * 2 + 64);
  std::map<std::vector<int>, Group> groups;
  // Host bridges by the model's dense id; devices with no known host bridge
  // stand alone, by board.
  std::vector<int> bridge_nodes(model_.HostBridgeCount(), -1);
  std::pmr::unordered_map<uint64_t, int> unknown_bridge_nodes(tree.arena());
  const auto key = [](int parent, uint64_t what) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(parent)) << 40) ^ what;
  };
  const auto address_key = [](const PciAddress& a) {
    return (uint64_t{a.domain} << 16) | (uint64_t{a.bus} << 8) |
           (uint64_t{a.device} << 3) | a.function;
  };
  NodeTable hop_nodes(tree.arena());
  NodeTable pool_nodes(tree.arena());
  NodeTable slot_nodes(tree.arena());
  // The node below the hops of the previous device: the next one on the
  // same path (the next VF of a PF, the next function of a board) hangs
  // below it too.
  int last_path = -1;
  int last_bridge = -1;
  int last_parent = -1;
  for (const auto& [address, index] : available_index) {
    const PciDevice& d = devices[static_cast<size_t>(index)];
    PciAddress board_address = address;
    board_address.function = 0;
    const int bridge_id = model_.HostBridgeId(static_cast<size_t>(index));
    int* bridge_node =
        bridge_id < 0
            ? &unknown_bridge_nodes.try_emplace(address_key(board_address), -1)
                   .first->second
            : &bridge_nodes[static_cast<size_t>(bridge_id)];
    if (*bridge_node < 0) {
      // A host bridge sits in one group: the affinity of its first device.
      Group& group = groups[d.numa_nodes];
      if (group.root < 0) {
        group.numa_nodes = d.numa_nodes;
        group.root =
            tree.Add(model_.AcrossHostBridges(d.numa_nodes, d.numa_nodes).cost);
      }
      const int node = tree.Add(CostModel::kSameHostBridgeCost);
      tree.Link(group.root, node);
      *bridge_node = node;
    }
    const int bridge = *bridge_node;
    const int path = model_.PathId(static_cast<size_t>(index));
    int parent = bridge;
    if (path == last_path && bridge == last_bridge) {
      parent = last_parent;
    } else {
      for (const PciAddress& hop :
           model_.PathHops(static_cast<size_t>(index))) {
        parent = hop_nodes.Get(key(parent, address_key(hop)), tree, parent,
                               CostModel::kMultipleSwitchesCost);
      }
      if (parent != bridge) {
        // Devices directly below the same hop are one switch apart.
        parent = pool_nodes.Get(key(parent, 0), tree, parent,
                                CostModel::kSameSwitchCost);
      }
      last_path = path;
      last_bridge = bridge;
      last_parent = parent;
    }
    const int board = slot_nodes.Get(key(parent, address_key(board_address)),
                                     tree, parent, CostModel::kSameBoardCost);
    tree.Link(board,
              tree.AddLeaf(index, !must.empty() && must.count(address) != 0));
  }
  std::vector<Group*> order;
  std::map<int, int> class_of_device;
  for (auto& [numa_key, group] : groups) {
    (void)numa_key;
    if (request.explain) tree.ClassifyLeaves(group.root, &class_of_device);
    tree.Solve(group.root);
    order.push_back(&group);
  }
  // Must-include devices per group: the smallest feasible count.
  for (Group* g : order) {
    while (g->must <= k && !tree.Best(g->root, g->must).feasible()) {
      ++g->must;
    }
  }

  // Root: how many devices each group gives. Exhaustive search with
  // pruning; a step budget guards against dozens of groups.
  const size_t groups_count = order.size();
  std::vector<std::vector<int64_t>> cross(
      groups_count, std::vector<int64_t>(groups_count, 0));
  for (size_t a = 0; a < groups_count; ++a) {
    for (size_t b = 0; b < groups_count; ++b) {
      cross[a][b] = a == b ? 0
                           : model_
                                 .AcrossHostBridges(order[a]->numa_nodes,
                                                    order[b]->numa_nodes)
                                 .cost;
    }
  }
  std::vector<int> suffix_available(groups_count + 1, 0);
  std::vector<int> suffix_must(groups_count + 1, 0);
  for (size_t g = groups_count; g-- > 0;) {
    suffix_available[g] = suffix_available[g + 1] +
                          std::min(tree.at(order[g]->root).available, k);
    suffix_must[g] = suffix_must[g + 1] + order[g]->must;
  }
  Score best;
  std::vector<int> best_counts;
  std::vector<int> counts(groups_count, 0);
  int64_t budget = request.group_search_budget;
  bool exhausted = false;
  const std::function<void(size_t, int, Score)> search = [&](size_t g, int left,
                                                             Score so_far) {
    if (--budget < 0) {
      exhausted = true;
      return;
    }
    if (best.feasible() && !(so_far < best)) return;
    if (g == groups_count) {
      if (left == 0) {
        best = so_far;
        best_counts = counts;
      }
      return;
    }
    if (left > suffix_available[g] || left < suffix_must[g]) return;
    const TreeNode& root = tree.at(order[g]->root);
    const int high = std::min({left, root.available, k});
    // The last group must take what is left; nothing else can end at zero.
    const int low = g + 1 == groups_count ? left : order[g]->must;
    // Larger shares first: single-group answers come early and prune well.
    for (int x = high; x >= low; --x) {
      const Score& own = tree.Best(order[g]->root, x);
      if (!own.feasible()) continue;
      int64_t add = own.cost;
      for (size_t h = 0; h < g; ++h)
        add += static_cast<int64_t>(counts[h]) * x * cross[g][h];
      counts[g] = x;
      search(g + 1, left - x,
             Score{so_far.cost + add, so_far.penalty + own.penalty});
      counts[g] = 0;
      if (exhausted) return;
    }
  };
  search(0, k, Score{0, 0});
  bool exact = !exhausted;
  if (exhausted) {
    // Greedy from the must-include counts, then single-device moves between
    // groups while they lower the score.
    const auto score_of = [&](const std::vector<int>& c) {
      Score s{0, 0};
      for (size_t g = 0; g < groups_count; ++g) {
        const Score& own = tree.Best(order[g]->root, c[g]);
        if (!own.feasible()) return Score{};
        s.cost += own.cost;
        s.penalty += own.penalty;
        for (size_t h = 0; h < g; ++h)
          s.cost += static_cast<int64_t>(c[g]) * c[h] * cross[g][h];
      }
      return s;
    };
    const auto capacity = [&](size_t g) {
      return std::min(tree.at(order[g]->root).available, k);
    };
    // Fills the remaining units one at a time where they add least.
    const auto fill = [&](std::vector<int>& c, int placed) {
      while (placed < k) {
        Score step_best;
        size_t step_group = groups_count;
        for (size_t g = 0; g < groups_count; ++g) {
          if (c[g] >= capacity(g)) continue;
          ++c[g];
          const Score s = score_of(c);
          --c[g];
          if (s < step_best) {
            step_best = s;
            step_group = g;
          }
        }
        if (step_group == groups_count) return false;
        ++c[step_group];
        ++placed;
      }
      return true;
    };
    // Moves of any number of units between two groups while they help.
    const auto improve = [&](std::vector<int>& c) {
      Score current = score_of(c);
      bool improved = true;
      while (improved) {
        improved = false;
        for (size_t from = 0; from < groups_count; ++from) {
          for (size_t to = 0; to < groups_count; ++to) {
            if (to == from) continue;
            const int most =
                std::min(c[from] - order[from]->must, capacity(to) - c[to]);
            for (int t = 1; t <= most; ++t) {
              c[from] -= t;
              c[to] += t;
              const Score s = score_of(c);
              if (s < current) {
                current = s;
                improved = true;
                break;
              }
              c[from] += t;
              c[to] -= t;
            }
          }
        }
      }
    };
    // Multi-start: each group in turn takes as much as it can first.
    for (size_t seed = 0; seed <= groups_count; ++seed) {
      std::vector<int> c(groups_count);
      int placed = 0;
      for (size_t g = 0; g < groups_count; ++g)
        placed += (c[g] = order[g]->must);
      if (seed < groups_count) {
        const int extra = std::min(capacity(seed) - c[seed], k - placed);
        c[seed] += extra;
        placed += extra;
      }
      if (!fill(c, placed)) continue;
      improve(c);
      const Score s = score_of(c);
      if (s < best) {
        best = s;
        best_counts = c;
      }
    }
  }
  if (!best.feasible()) {
    return InternalError("no selection found for " + std::to_string(k) +
                         " devices");
  }

  std::vector<int> chosen;
  for (size_t g = 0; g < groups_count; ++g) {
    tree.Collect(order[g]->root, best_counts[g], &chosen);
  }
  Selection selection;
  selection.exact = exact;
  std::set<int> nodes;
  for (int index : chosen) {
    selection.devices.push_back(devices[static_cast<size_t>(index)].address);
    for (int n : devices[static_cast<size_t>(index)].numa_nodes)
      nodes.insert(n);
  }
  std::sort(selection.devices.begin(), selection.devices.end());
  selection.numa_nodes.assign(nodes.begin(), nodes.end());
  // The tree prices every pair exactly as CostModel::BetweenIndexes does
  // (the brute-force tests compare the two), so the optimum's score is the
  // set's summed pairwise cost: O(k) instead of k^2 / 2 model calls.
  selection.cost = static_cast<int>(
      std::min<int64_t>(best.cost, std::numeric_limits<int>::max()));
  int unknown = 0;
  for (int index : chosen) {
    if (devices[static_cast<size_t>(index)].numa_nodes.empty()) ++unknown;
  }

  if (request.explain) {
    // The best set that drops one of the chosen (non-forced) devices.
    // Interchangeable devices give the same answer: one re-solve per class,
    // with its lowest address (the one a device-by-device scan would keep).
    std::set<int> classes_tried;
    for (const PciAddress& dropped : selection.devices) {
      if (must.count(dropped)) continue;
      const PciDevice* d = topology.FindDevice(dropped);
      const auto cls =
          class_of_device.find(static_cast<int>(d - devices.data()));
      if (cls != class_of_device.end() &&
          !classes_tried.insert(cls->second).second) {
        continue;
      }
      SelectionRequest other = request;
      other.explain = false;
      other.available.erase(
          std::remove(other.available.begin(), other.available.end(), dropped),
          other.available.end());
      if (static_cast<int>(other.available.size()) < k) continue;
      auto alternative = Select(other);
      if (!alternative.ok()) continue;
      if (selection.runner_up_cost < 0 ||
          alternative->cost < selection.runner_up_cost) {
        selection.runner_up = alternative->devices;
        selection.runner_up_cost = alternative->cost;
      }
    }
    std::string why = "chose " + std::to_string(k) + " of " +
                      std::to_string(available_index.size()) +
                      " available devices at summed pairwise cost " +
                      std::to_string(selection.cost);
    if (selection.runner_up_cost >= 0) {
      why += "; the best set without one of them costs " +
             std::to_string(selection.runner_up_cost) + " (+" +
             std::to_string(selection.runner_up_cost - selection.cost) + ")";
    } else {
      why += "; no other set is possible";
    }
    if (unknown > 0) {
      why += "; " + std::to_string(unknown) +
             " chosen device(s) have unknown NUMA locality, so their costs are "
             "assumed";
    }
    if (!exact) why += "; searched heuristically (too many NUMA groups)";
    selection.explanation = why;
  }
  return selection;
}

}  // namespace topology
