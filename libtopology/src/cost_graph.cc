#include "topology/cost_graph.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <random>
#include <set>

namespace topology {
namespace {

// A compound node: interchangeable instances of one resource type.
struct Compound {
  int resource = 0;
  std::vector<int> members;  // indexes into the flat instance list
  int capacity = 0;          // units (a CPU entry stands for several)
};

// The graph the solvers work on: compound nodes with capacities, and the
// cost of a pair of units from compounds c and d (the diagonal is the cost
// of two units of the same compound).
struct Graph {
  std::vector<Compound> compounds;
  std::vector<std::vector<int64_t>> w;
  std::vector<int> need;  // per resource

  int64_t Cost(const std::vector<int>& x) const {
    int64_t total = 0;
    for (size_t c = 0; c < x.size(); ++c) {
      total += static_cast<int64_t>(x[c]) * (x[c] - 1) / 2 * w[c][c];
      for (size_t d = c + 1; d < x.size(); ++d) {
        total += static_cast<int64_t>(x[c]) * x[d] * w[c][d];
      }
    }
    return total;
  }
  int capacity(size_t c) const { return compounds[c].capacity; }
};

// Marginal cost of one more unit of each compound given counts x.
std::vector<int64_t> Marginals(const Graph& g, const std::vector<int>& x) {
  std::vector<int64_t> m(x.size(), 0);
  for (size_t c = 0; c < x.size(); ++c) {
    for (size_t d = 0; d < x.size(); ++d) m[c] += x[d] * g.w[c][d];
  }
  return m;
}

// Multi-start greedy walk: from each compound as a seed, add the unit with
// the smallest marginal cost until every resource is served.
std::vector<int> Greedy(const Graph& g) {
  const size_t n = g.compounds.size();
  std::vector<int> best;
  int64_t best_cost = 0;
  const size_t seeds = std::min<size_t>(n, 64);
  for (size_t seed = 0; seed < seeds; ++seed) {
    std::vector<int> x(n, 0);
    std::vector<int> need = g.need;
    std::vector<int64_t> marginal(n, 0);
    const auto add = [&](size_t c) {
      ++x[c];
      --need[static_cast<size_t>(g.compounds[c].resource)];
      for (size_t d = 0; d < n; ++d) marginal[d] += g.w[d][c];
    };
    add(seed);
    while (true) {
      size_t pick = n;
      for (size_t c = 0; c < n; ++c) {
        if (need[static_cast<size_t>(g.compounds[c].resource)] <= 0) continue;
        if (x[c] >= g.capacity(c)) continue;
        if (pick == n || marginal[c] < marginal[pick]) pick = c;
      }
      if (pick == n) break;
      add(pick);
    }
    if (std::any_of(need.begin(), need.end(), [](int k) { return k != 0; }))
      continue;
    const int64_t cost = g.Cost(x);
    if (best.empty() || cost < best_cost) {
      best = x;
      best_cost = cost;
    }
  }
  return best;
}

// Simulated annealing over single-unit moves inside one resource type.
std::vector<int> Anneal(const Graph& g, std::vector<int> x, uint64_t seed,
                        int steps) {
  const size_t n = g.compounds.size();
  std::vector<std::vector<size_t>> by_resource(g.need.size());
  for (size_t c = 0; c < n; ++c) {
    by_resource[static_cast<size_t>(g.compounds[c].resource)].push_back(c);
  }
  std::vector<size_t> movable;
  for (size_t r = 0; r < by_resource.size(); ++r) {
    if (by_resource[r].size() > 1) movable.push_back(r);
  }
  if (movable.empty() || steps <= 0) return x;
  // Start hot enough to accept typical uphill moves: the mean pair cost.
  double mean = 0;
  for (size_t c = 0; c < n; ++c) {
    for (size_t d = 0; d < n; ++d) mean += static_cast<double>(g.w[c][d]);
  }
  mean /= static_cast<double>(n * n);
  const double start = std::max(1.0, mean);
  const double end = 0.05;
  std::mt19937_64 rng(seed);
  std::vector<int64_t> marginal = Marginals(g, x);
  int64_t cost = g.Cost(x);
  std::vector<int> best = x;
  int64_t best_cost = cost;
  for (int step = 0; step < steps; ++step) {
    const double temperature =
        start * std::pow(end / start, static_cast<double>(step) / steps);
    const auto& members = by_resource[movable[rng() % movable.size()]];
    const size_t a = members[rng() % members.size()];
    const size_t b = members[rng() % members.size()];
    if (a == b || x[a] == 0 || x[b] >= g.capacity(b)) continue;
    const int64_t delta = (marginal[b] - g.w[b][a]) - (marginal[a] - g.w[a][a]);
    if (delta > 0) {
      const double p = std::exp(-static_cast<double>(delta) / temperature);
      if (std::uniform_real_distribution<double>(0, 1)(rng) >= p) continue;
    }
    --x[a];
    ++x[b];
    cost += delta;
    for (size_t c = 0; c < n; ++c) marginal[c] += g.w[c][b] - g.w[c][a];
    if (cost < best_cost) {
      best_cost = cost;
      best = x;
    }
  }
  return best;
}

// Branch and bound over the compounds of each resource in turn; `incumbent`
// seeds the bound. Returns false when the step budget runs out.
bool Exact(const Graph& g, std::vector<int>* incumbent) {
  const size_t n = g.compounds.size();
  std::vector<size_t> order(n);
  for (size_t c = 0; c < n; ++c) order[c] = c;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return g.compounds[a].resource < g.compounds[b].resource;
  });
  // Units still available after position i for each resource.
  std::vector<std::vector<int>> left_after(n + 1,
                                           std::vector<int>(g.need.size(), 0));
  for (size_t i = n; i-- > 0;) {
    left_after[i] = left_after[i + 1];
    left_after[i][static_cast<size_t>(g.compounds[order[i]].resource)] +=
        g.capacity(order[i]);
  }
  int64_t best_cost = g.Cost(*incumbent);
  std::vector<int> x(n, 0);
  std::vector<int> need = g.need;
  int64_t budget = 2'000'000;
  bool exhausted = false;
  const std::function<void(size_t, int64_t)> search = [&](size_t i,
                                                          int64_t cost) {
    if (--budget < 0) {
      exhausted = true;
      return;
    }
    if (cost >= best_cost) return;
    if (i == n) {
      best_cost = cost;
      *incumbent = x;
      return;
    }
    const size_t c = order[i];
    const auto r = static_cast<size_t>(g.compounds[c].resource);
    // What the later compounds of this resource can still give.
    const int later = left_after[i + 1][r];
    const int high = std::min(need[r], g.capacity(c));
    const int low = std::max(0, need[r] - later);
    for (int k = high; k >= low; --k) {
      int64_t add = static_cast<int64_t>(k) * (k - 1) / 2 * g.w[c][c];
      for (size_t j = 0; j < i; ++j)
        add += static_cast<int64_t>(k) * x[order[j]] * g.w[c][order[j]];
      x[c] = k;
      need[r] -= k;
      search(i + 1, cost + add);
      need[r] += k;
      x[c] = 0;
      if (exhausted) return;
    }
  };
  search(0, 0);
  return !exhausted;
}

}  // namespace

std::string GraphInstance::ToString() const {
  return device ? device->ToString() : "numa:" + std::to_string(numa_node);
}

CostGraphSelector::CostGraphSelector(const CostModel& model) : model_(model) {}

StatusOr<GraphSelection> CostGraphSelector::Select(
    const GraphRequest& request) const {
  const Topology& topology = model_.topology();
  if (request.resources.empty()) {
    return InvalidArgumentError("no resources requested");
  }
  // The flat instance list.
  struct Flat {
    int resource;
    GraphInstance instance;
    int device = -1;  // index into the topology's devices
    int units = 1;    // CPU units of one node are one entry
  };
  std::vector<Flat> flat;
  std::set<std::string> names;
  std::set<PciAddress> devices_seen;
  Graph g;
  for (size_t r = 0; r < request.resources.size(); ++r) {
    const ResourceRequest& res = request.resources[r];
    if (!names.insert(res.name).second) {
      return InvalidArgumentError("resource \"" + res.name +
                                  "\" is requested twice");
    }
    if (res.count < 1 || res.count > static_cast<int>(res.pool.size())) {
      return InvalidArgumentError(
          "resource \"" + res.name + "\": count " + std::to_string(res.count) +
          " must be 1 to " + std::to_string(res.pool.size()) + " (its pool)");
    }
    g.need.push_back(res.count);
    std::map<int, size_t> node_entry;  // CPU units of this resource by node
    for (const GraphInstance& instance : res.pool) {
      Flat f{static_cast<int>(r), instance, -1, 1};
      if (instance.device) {
        const PciDevice* d = topology.FindDevice(*instance.device);
        if (d == nullptr) {
          return NotFoundError("resource \"" + res.name + "\": device " +
                               instance.device->ToString() + " is not in " +
                               topology.source());
        }
        if (!devices_seen.insert(*instance.device).second) {
          return InvalidArgumentError("device " + instance.device->ToString() +
                                      " is listed twice");
        }
        f.device = static_cast<int>(d - topology.pci_devices().data());
      } else if (topology.FindNumaNode(instance.numa_node) == nullptr) {
        return InvalidArgumentError("resource \"" + res.name +
                                    "\": no NUMA node " +
                                    std::to_string(instance.numa_node));
      } else if (auto it = node_entry.find(instance.numa_node);
                 it != node_entry.end()) {
        ++flat[it->second].units;
        continue;
      } else {
        node_entry[instance.numa_node] = flat.size();
      }
      flat.push_back(f);
    }
  }
  std::map<std::pair<PciAddress, PciAddress>, int> extra;
  for (const ExtraCost& e : request.extra_costs) {
    extra[std::minmax(e.a, e.b)] += e.cost;
  }
  // Pair costs of the flat instances.
  const size_t n = flat.size();
  std::vector<std::vector<int64_t>> pair(n, std::vector<int64_t>(n, 0));
  for (size_t i = 0; i < n; ++i) {
    for (size_t j = i + 1; j < n; ++j) {
      const Flat& a = flat[i];
      const Flat& b = flat[j];
      int64_t cost = 0;
      if (a.device >= 0 && b.device >= 0) {
        cost = model_
                   .BetweenIndexes(static_cast<size_t>(a.device),
                                   static_cast<size_t>(b.device))
                   .cost;
        if (auto it =
                extra.find(std::minmax(*a.instance.device, *b.instance.device));
            it != extra.end()) {
          cost = std::max<int64_t>(0, cost + it->second);
        }
      } else if (a.device >= 0) {
        cost = model_.DeviceToNode(*a.instance.device, b.instance.numa_node)
                   .value_or(0);
      } else if (b.device >= 0) {
        cost = model_.DeviceToNode(*b.instance.device, a.instance.numa_node)
                   .value_or(0);
      } else {
        cost = model_.NodeToNode(a.instance.numa_node, b.instance.numa_node)
                   .value_or(0);
      }
      pair[i][j] = pair[j][i] = cost;
    }
  }
  // Compound nodes: instances of one resource with the same cost to every
  // other instance. Candidates share a location key (resource, NUMA
  // affinity, host bridge, hops); membership is then verified against the
  // compound's first member, so extra costs or any other difference split
  // them. CPU entries are compounds of their own, one per node.
  const auto location_key = [&](const Flat& f) {
    std::string key = std::to_string(f.resource) + "|";
    if (f.device < 0)
      return key + "numa" + std::to_string(f.instance.numa_node);
    const PciDevice& d = topology.pci_devices()[static_cast<size_t>(f.device)];
    for (int node : d.numa_nodes) key += std::to_string(node) + ",";
    key += "|" + d.host_bridge + "|";
    for (const PciAddress& hop :
         model_.PathHops(static_cast<size_t>(f.device))) {
      key += hop.ToString() + "/";
    }
    return key;
  };
  std::map<std::string, std::vector<size_t>> by_key;
  for (size_t i = 0; i < n; ++i) {
    int joined = -1;
    auto& candidates = by_key[location_key(flat[i])];
    if (flat[i].device >= 0) {
      for (size_t c : candidates) {
        Compound& compound = g.compounds[c];
        const auto rep = static_cast<size_t>(compound.members[0]);
        bool same = true;
        for (size_t k = 0; k < n && same; ++k) {
          if (k == i || k == rep) continue;
          same = pair[i][k] == pair[rep][k];
        }
        // Every pair inside a compound must cost the same.
        if (same && compound.members.size() > 1) {
          same = pair[i][rep] ==
                 pair[rep][static_cast<size_t>(compound.members[1])];
        }
        if (same) {
          compound.members.push_back(static_cast<int>(i));
          ++compound.capacity;
          joined = static_cast<int>(c);
          break;
        }
      }
    }
    if (joined < 0) {
      candidates.push_back(g.compounds.size());
      g.compounds.push_back(
          Compound{flat[i].resource, {static_cast<int>(i)}, flat[i].units});
    }
  }
  const size_t c_count = g.compounds.size();
  g.w.assign(c_count, std::vector<int64_t>(c_count, 0));
  for (size_t c = 0; c < c_count; ++c) {
    const auto& mc = g.compounds[c].members;
    // Two units of one compound: its members' pair cost (CPU units of one
    // node cost nothing to each other).
    g.w[c][c] =
        mc.size() > 1
            ? pair[static_cast<size_t>(mc[0])][static_cast<size_t>(mc[1])]
            : 0;
    for (size_t d = 0; d < c_count; ++d) {
      if (d != c) {
        g.w[c][d] = pair[static_cast<size_t>(mc[0])]
                        [static_cast<size_t>(g.compounds[d].members[0])];
      }
    }
  }

  std::vector<int> x = Greedy(g);
  if (x.empty()) return InternalError("the greedy walk found no selection");
  const int64_t greedy_cost = g.Cost(x);
  std::string method = "greedy";
  if (request.solver == GraphSolver::kAnnealing) {
    x = Anneal(g, x, request.seed, request.annealing_steps);
    method = "greedy then simulated annealing";
  } else if (request.solver == GraphSolver::kExact) {
    x = Anneal(g, x, request.seed, request.annealing_steps);  // a good bound
    if (!Exact(g, &x)) {
      return ResourceExhaustedError("the exact search over " +
                                    std::to_string(c_count) +
                                    " compound nodes exceeded its budget");
    }
    method = "exact branch and bound";
  }

  GraphSelection out;
  out.cost = g.Cost(x);
  // The best rejected neighbour: one unit moved between compounds of a type.
  {
    const std::vector<int64_t> marginal = Marginals(g, x);
    int64_t best_delta = 0;
    size_t from = c_count;
    size_t to = c_count;
    for (size_t a = 0; a < c_count; ++a) {
      if (x[a] == 0) continue;
      for (size_t b = 0; b < c_count; ++b) {
        if (b == a || g.compounds[b].resource != g.compounds[a].resource ||
            x[b] >= g.capacity(b)) {
          continue;
        }
        const int64_t delta =
            (marginal[b] - g.w[b][a]) - (marginal[a] - g.w[a][a]);
        if (from == c_count || delta < best_delta) {
          best_delta = delta;
          from = a;
          to = b;
        }
      }
    }
    if (from < c_count) {
      out.runner_up_cost = out.cost + best_delta;
      const auto name_of = [&](size_t c, int unit) {
        const Compound& compound = g.compounds[c];
        const size_t member =
            compound.members.size() == 1 ? 0 : static_cast<size_t>(unit);
        return flat[static_cast<size_t>(compound.members[member])]
            .instance.ToString();
      };
      out.runner_up =
          request.resources[static_cast<size_t>(g.compounds[from].resource)]
              .name +
          ": " + name_of(to, x[to]) + " instead of " +
          name_of(from, x[from] - 1);
    }
  }
  out.greedy_cost = greedy_cost;
  std::set<int> nodes;
  int unknown = 0;
  for (size_t c = 0; c < c_count; ++c) {
    const Compound& compound = g.compounds[c];
    auto& chosen =
        out.selection[request.resources[static_cast<size_t>(compound.resource)]
                          .name];
    for (int k = 0; k < x[c]; ++k) {
      const size_t member =
          compound.members.size() == 1 ? 0 : static_cast<size_t>(k);
      const Flat& f = flat[static_cast<size_t>(compound.members[member])];
      chosen.push_back(f.instance);
      if (f.device >= 0) {
        const auto& affinity =
            topology.pci_devices()[static_cast<size_t>(f.device)].numa_nodes;
        if (affinity.empty()) ++unknown;
        nodes.insert(affinity.begin(), affinity.end());
      } else {
        nodes.insert(f.instance.numa_node);
      }
    }
  }
  for (auto& [name, instances] : out.selection) {
    std::sort(instances.begin(), instances.end(),
              [](const GraphInstance& a, const GraphInstance& b) {
                if (a.device.has_value() != b.device.has_value())
                  return a.device.has_value();
                return a.device ? *a.device < *b.device
                                : a.numa_node < b.numa_node;
              });
  }
  out.numa_nodes.assign(nodes.begin(), nodes.end());
  out.explanation = method + ": summed pairwise cost " +
                    std::to_string(out.cost) + " (greedy walk " +
                    std::to_string(greedy_cost) + ") over " +
                    std::to_string(c_count) + " compound nodes from " +
                    std::to_string(n) + " locations";
  if (out.runner_up_cost >= 0) {
    out.explanation += "; the best alternative (" + out.runner_up + ") costs " +
                       std::to_string(out.runner_up_cost);
  }
  if (unknown > 0) {
    out.explanation += "; " + std::to_string(unknown) +
                       " chosen device(s) have unknown NUMA locality, so their "
                       "costs are assumed";
  }
  return out;
}

}  // namespace topology
