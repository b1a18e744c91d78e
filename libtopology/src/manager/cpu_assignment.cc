#include "cpu_assignment.h"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace topology::manager {
namespace {

enum class Level { kNuma, kSocket, kUncore, kCore };

int IdAt(const CpuDetail& cpu, Level level) {
  switch (level) {
    case Level::kNuma:
      return cpu.numa_node;
    case Level::kSocket:
      return cpu.socket;
    case Level::kUncore:
      return cpu.uncore;
    case Level::kCore:
      return cpu.core;
  }
  return 0;
}

// The free CPUs and what has been taken, as upstream's cpuAccumulator keeps
// them. Lists may name a socket (or NUMA node) twice where the machine
// nests them unevenly, as upstream's do; a CPU taken twice then counts
// twice, as there.
class Accumulator {
 public:
  Accumulator(const CpuTopologyView& topology, const CpuSet& available,
              int needed, CpuSorting sorting)
      : topology_(topology),
        needed_(needed),
        sorting_(sorting),
        numa_first_(topology.num_sockets >= topology.num_numa_nodes) {
    for (int id : available.Ids()) {
      if (const auto it = topology.cpus.find(id); it != topology.cpus.end()) {
        free_.emplace(id, it->second);
      }
    }
  }

  bool Satisfied() const { return needed_ < 1; }
  bool Failed() const { return needed_ > static_cast<int>(free_.size()); }
  const CpuSet& result() const { return result_; }
  int needed() const { return needed_; }

  void TakeFullFirstLevel() {
    if (numa_first_) {
      TakeFullNumaNodes();
    } else {
      TakeFullSockets();
    }
  }
  void TakeFullSecondLevel() {
    if (numa_first_) {
      TakeFullSockets();
    } else {
      TakeFullNumaNodes();
    }
  }

  void TakeFullCores() {
    TakeFull(Level::kCore, SortedCores(), topology_.CpusPerCore());
  }

  void TakeRemainingCpus() {
    for (int cpu : SortedCpus()) {
      Take(CpuSet::Of({cpu}));
      if (Satisfied()) return;
    }
  }

  // Upstream's takeUncoreCache: over the uncore caches in the order of the
  // start, whole free ones while the request needs one, then as many of
  // one cache's free cores as the rest needs, if they give exactly that.
  void TakeUncoreCaches() {
    const int per_uncore = topology_.CpusPerUncore();
    for (int uncore : SortedUncoreCaches()) {
      if (needed_ >= per_uncore) TakeFull(Level::kUncore, SortedUncoreCaches());
      if (Satisfied()) return;
      TakePartialUncore(uncore);
      if (Satisfied()) return;
    }
  }

  // The NUMA nodes with a free CPU, in upstream's order.
  std::vector<int> SortedNumaNodes() const {
    return numa_first_ ? Units(Level::kNuma, std::nullopt, 0)
                       : Within(Level::kNuma, Level::kSocket, SortedSockets());
  }
  int FreeInNuma(int node) const { return FreeIn(Level::kNuma, node); }
  CpuSet FreeCpusInNuma(int node) const {
    CpuSet cpus;
    for (const auto& [cpu, detail] : free_) {
      if (detail.numa_node == node) cpus.Add(cpu);
    }
    return cpus;
  }
  // Free CPUs in any of `nodes`, each counted once.
  int FreeInNumas(const std::vector<int>& nodes) const {
    int n = 0;
    for (const auto& [cpu, detail] : free_) {
      n += std::find(nodes.begin(), nodes.end(), detail.numa_node) !=
           nodes.end();
    }
    return n;
  }
  // Upstream's rangeNUMANodesNeededToSatisfy.
  std::pair<int, int> RangeNumaNodesNeeded(int group_size) const {
    std::set<int> nodes, free_nodes;
    for (const auto& [cpu, detail] : topology_.cpus) {
      nodes.insert(detail.numa_node);
    }
    for (const auto& [cpu, detail] : free_) free_nodes.insert(detail.numa_node);
    const int num_nodes = static_cast<int>(nodes.size());
    const int num_cpus = static_cast<int>(topology_.cpus.size());
    const int groups = (num_cpus - 1) / group_size + 1;
    const int groups_per_node = (groups - 1) / num_nodes + 1;
    const int groups_needed = (needed_ - 1) / group_size + 1;
    return {(groups_needed - 1) / groups_per_node + 1,
            std::min(groups_needed, static_cast<int>(free_nodes.size()))};
  }
  // Upstream's AreNUMANodesInSameSocket, over the whole machine.
  bool NumasInOneSocket(const std::vector<int>& nodes) const {
    std::set<int> sockets;
    for (const auto& [cpu, detail] : topology_.cpus) {
      if (std::find(nodes.begin(), nodes.end(), detail.numa_node) !=
          nodes.end()) {
        sockets.insert(detail.socket);
      }
    }
    return sockets.size() <= 1;
  }

  void Take(const CpuSet& cpus) {
    result_ = result_.Union(cpus);
    for (int cpu : cpus.Ids()) free_.erase(cpu);
    needed_ -= cpus.Count();
  }

 private:
  // Free CPUs in the unit `id` of `level`.
  int FreeIn(Level level, int id) const {
    int n = 0;
    for (const auto& [cpu, detail] : free_) n += IdAt(detail, level) == id;
    return n;
  }
  // Every CPU of the machine in the unit.
  CpuSet AllIn(Level level, int id) const {
    CpuSet cpus;
    for (const auto& [cpu, detail] : topology_.cpus) {
      if (IdAt(detail, level) == id) cpus.Add(cpu);
    }
    return cpus;
  }
  // The units of `level` holding a free CPU that lies in unit `within` of
  // `outer` (every one when `outer` is the same level), ascending by free
  // CPUs, then id.
  std::vector<int> Units(Level level, std::optional<Level> outer,
                         int within) const {
    std::set<int> ids;
    for (const auto& [cpu, detail] : free_) {
      if (!outer || IdAt(detail, *outer) == within) {
        ids.insert(IdAt(detail, level));
      }
    }
    std::vector<int> sorted(ids.begin(), ids.end());
    std::map<int, int> count;
    for (int id : sorted) count[id] = FreeIn(level, id);
    std::stable_sort(sorted.begin(), sorted.end(), [&](int a, int b) {
      return count[a] != count[b] ? count[a] < count[b] : a < b;
    });
    return sorted;
  }

  // The units of `level` in each unit of `outers` (of level `outer`), in
  // that order: a unit in two outer units is listed twice, as upstream
  // lists it.
  std::vector<int> Within(Level level, Level outer,
                          const std::vector<int>& outers) const {
    std::vector<int> out;
    for (int id : outers) {
      for (int unit : Units(level, outer, id)) out.push_back(unit);
    }
    return out;
  }
  std::vector<int> SortedSockets() const {
    return numa_first_ ? Within(Level::kSocket, Level::kNuma, SortedNumaNodes())
                       : Units(Level::kSocket, std::nullopt, 0);
  }
  // Each NUMA node's uncore caches with a free CPU, node by node.
  std::vector<int> SortedUncoreCaches() const {
    return Within(Level::kUncore, Level::kNuma, SortedNumaNodes());
  }
  std::vector<int> SortedCores() const {
    return numa_first_ ? Within(Level::kCore, Level::kSocket, SortedSockets())
                       : Within(Level::kCore, Level::kNuma, SortedNumaNodes());
  }
  // Packed: core by core (in SortedCores' order), each core's CPUs by id.
  // Spread: socket by socket, each socket's CPUs by id.
  std::vector<int> SortedCpus() const {
    const bool packed = sorting_ == CpuSorting::kPacked;
    std::vector<int> out;
    for (int unit : packed ? SortedCores() : SortedSockets()) {
      for (const auto& [cpu, detail] : free_) {
        if (IdAt(detail, packed ? Level::kCore : Level::kSocket) == unit) {
          out.push_back(cpu);
        }
      }
    }
    return out;
  }

  // The units of `sorted` all of whose CPUs are free: a NUMA node's and
  // an uncore cache's count is its own, a socket's and a core's the
  // machine's average (`average`), as upstream compares them.
  std::vector<int> FreeUnits(Level level, const std::vector<int>& sorted,
                             int average) const {
    std::vector<int> out;
    for (int id : sorted) {
      const int whole = level == Level::kNuma || level == Level::kUncore
                            ? AllIn(level, id).Count()
                            : average;
      if (FreeIn(level, id) == whole) out.push_back(id);
    }
    return out;
  }

  void TakeFullNumaNodes() { TakeFull(Level::kNuma, SortedNumaNodes()); }
  void TakeFullSockets() {
    TakeFull(Level::kSocket, SortedSockets(), topology_.CpusPerSocket());
  }
  // Every unit of `sorted` that is all free (FreeUnits) and that the
  // request still needs whole, in that order.
  void TakeFull(Level level, const std::vector<int>& sorted, int average = 0) {
    for (int id : FreeUnits(level, sorted, average)) {
      const CpuSet cpus = AllIn(level, id);
      if (needed_ < cpus.Count()) continue;
      Take(cpus);
    }
  }

  // Upstream's takePartialUncore: the cache's first free cores (by id),
  // as many as the rest needs in whole cores; for an odd rest on an SMT
  // machine the highest of their free CPUs is left; taken only if that is
  // exactly the rest.
  void TakePartialUncore(int uncore) {
    const int per_core = topology_.CpusPerCore();
    if (per_core <= 0) return;
    const int cores_needed = (needed_ + per_core - 1) / per_core;
    std::set<int> cores;
    for (const auto& [cpu, detail] : free_) {
      if (detail.uncore == uncore) cores.insert(detail.core);
    }
    while (static_cast<int>(cores.size()) > cores_needed) {
      cores.erase(std::prev(cores.end()));
    }
    std::vector<int> cpus;
    for (const auto& [cpu, detail] : free_) {
      if (cores.count(detail.core)) cpus.push_back(cpu);
    }
    if (needed_ % 2 != 0 && per_core > 1 &&
        static_cast<int>(cpus.size()) > needed_) {
      cpus.pop_back();
    }
    if (static_cast<int>(cpus.size()) == needed_) Take(CpuSet::Of(cpus));
  }

  const CpuTopologyView& topology_;
  std::map<int, CpuDetail> free_;
  int needed_;
  const CpuSorting sorting_;
  const bool numa_first_;
  CpuSet result_;
};

Status NotEnough(int count, const CpuSet& available) {
  return ResourceExhaustedError(
      "not enough cpus available to satisfy request: requested=" +
      std::to_string(count) +
      ", available=" + std::to_string(available.Count()));
}

// A Go []int built by append, as upstream's iterateCombinations builds its
// combinations: while a slice has room, appending writes into the storage
// it shares with its siblings. A combination the caller keeps is read
// later, after later combinations may have overwritten its tail, and the
// kubelet allocates from what it then reads; so do we.
class GoIntSlice {
 public:
  GoIntSlice() = default;
  GoIntSlice Append(int value) const {
    if (len_ < cap_) {
      (*data_)[len_] = value;
      return GoIntSlice(data_, len_ + 1, cap_);
    }
    // Go's growth for a small slice: to 1, then doubling (each a size
    // class of 8-byte elements below 256).
    const size_t cap = cap_ == 0 ? 1 : cap_ * 2;
    auto data = std::make_shared<std::vector<int>>(cap);
    if (data_) std::copy_n(data_->begin(), len_, data->begin());
    (*data)[len_] = value;
    return GoIntSlice(std::move(data), len_ + 1, cap);
  }
  std::vector<int> Values() const {
    return data_ ? std::vector<int>(
                       data_->begin(),
                       data_->begin() + static_cast<std::ptrdiff_t>(len_))
                 : std::vector<int>();
  }

 private:
  GoIntSlice(std::shared_ptr<std::vector<int>> data, size_t len, size_t cap)
      : data_(std::move(data)), len_(len), cap_(cap) {}
  std::shared_ptr<std::vector<int>> data_;
  size_t len_ = 0;
  size_t cap_ = 0;
};

enum class Loop { kContinue, kBreak };

// Upstream's iterateCombinations: every k-subset of `n` in order.
void IterateCombinations(const std::vector<int>& n, int k,
                         const std::function<Loop(const GoIntSlice&)>& f) {
  if (k < 1) return;
  const int size = static_cast<int>(n.size());
  std::function<Loop(int, int, const GoIntSlice&)> helper =
      [&](int left, int start, const GoIntSlice& accum) {
        if (left == 0) return f(accum);
        for (int i = start; i <= size - left; ++i) {
          if (helper(left - 1, i + 1,
                     accum.Append(n[static_cast<size_t>(i)])) == Loop::kBreak) {
            return Loop::kBreak;
          }
        }
        return Loop::kContinue;
      };
  helper(k, 0, GoIntSlice());
}

// Upstream's standardDeviation, its mean and result rounded to 1/1000.
double StandardDeviation(const std::map<int, int>& values) {
  double sum = 0;
  for (const auto& [key, x] : values) sum += static_cast<double>(x);
  const double n = static_cast<double>(values.size());
  const double mean = std::round(sum / n * 1000) / 1000;
  double squares = 0;
  for (const auto& [key, x] : values) {
    squares +=
        (static_cast<double>(x) - mean) * (static_cast<double>(x) - mean);
  }
  return std::round(std::sqrt(squares / n) * 1000) / 1000;
}

}  // namespace

StatusOr<CpuSet> TakeByTopologyNumaPacked(const CpuTopologyView& topology,
                                          const CpuSet& available, int count,
                                          TakeOptions options) {
  const CpuSorting sorting = options.sorting;
  Accumulator acc(topology, available, count, sorting);
  if (acc.Satisfied()) return acc.result();
  if (acc.Failed()) return NotEnough(count, available);
  acc.TakeFullFirstLevel();
  if (acc.Satisfied()) return acc.result();
  acc.TakeFullSecondLevel();
  if (acc.Satisfied()) return acc.result();
  if (options.prefer_uncore) {
    acc.TakeUncoreCaches();
    if (acc.Satisfied()) return acc.result();
  }
  if (sorting != CpuSorting::kSpread) {
    acc.TakeFullCores();
    if (acc.Satisfied()) return acc.result();
  }
  acc.TakeRemainingCpus();
  if (acc.Satisfied()) return acc.result();
  return ResourceExhaustedError("failed to allocate cpus");
}

StatusOr<CpuSet> TakeByTopologyNumaDistributed(const CpuTopologyView& topology,
                                               const CpuSet& available,
                                               int count, int group_size,
                                               CpuSorting sorting,
                                               bool align_by_socket) {
  const TakeOptions packed{.sorting = sorting, .prefer_uncore = false};
  const int group = std::max(group_size, 1);
  if (count % group != 0) {
    return TakeByTopologyNumaPacked(topology, available, count, packed);
  }
  Accumulator acc(topology, available, count, sorting);
  if (acc.Satisfied()) return acc.result();
  if (acc.Failed()) return NotEnough(count, available);
  const std::vector<int> numas = acc.SortedNumaNodes();
  const auto [min_numas, max_numas] = acc.RangeNumaNodesNeeded(group);
  // Nodes one after another, as many as the request may need: the
  // combination whose even share (and remainder) leaves the free CPUs of
  // every node the most balanced.
  for (int k = min_numas; k <= max_numas; ++k) {
    double best_balance = DBL_MAX;
    std::optional<GoIntSlice> best_remainder;
    std::optional<GoIntSlice> best_combo;
    bool best_in_one_socket = false;
    IterateCombinations(numas, k, [&](const GoIntSlice& combo_slice) {
      if (best_balance == 0 && (!align_by_socket || best_in_one_socket)) {
        return Loop::kBreak;
      }
      const std::vector<int> combo = combo_slice.Values();
      const int size = static_cast<int>(combo.size());
      if (acc.FreeInNumas(combo) < count) return Loop::kContinue;
      int groups = 0;
      for (int numa : combo) groups += acc.FreeInNuma(numa) / group;
      if (groups * group < count) return Loop::kContinue;
      int distribution = (count / size / group) * group;
      if (align_by_socket) {
        for (int numa : combo) {
          distribution =
              std::min(distribution, acc.FreeInNuma(numa) / group * group);
        }
      }
      for (int numa : combo) {
        if (acc.FreeInNuma(numa) < distribution) return Loop::kContinue;
      }
      std::map<int, int> after;
      for (int numa : numas) after[numa] = acc.FreeInNuma(numa);
      for (int numa : combo) after[numa] -= distribution;
      const int remainder = count - distribution * size;
      std::vector<int> remainder_combo;
      for (int numa : combo) {
        if (after[numa] >= group) remainder_combo.push_back(numa);
      }
      double best_local = DBL_MAX;
      std::optional<GoIntSlice> best_local_remainder;
      if (remainder == 0) best_local = StandardDeviation(after);
      for (int j = static_cast<int>(remainder_combo.size());
           remainder > 0 && j >= 1; --j) {
        IterateCombinations(
            remainder_combo, j, [&](const GoIntSlice& subset_slice) {
              const std::vector<int> subset = subset_slice.Values();
              std::map<int, int> left_after = after;
              int sum = 0;
              for (int numa : subset) sum += left_after[numa];
              if (sum < remainder) return Loop::kContinue;
              // Groups from each node of the subset in turn. Where no node
              // can give a whole group before the remainder is placed, the
              // kubelet's loop never ends; this subset is not a choice.
              for (int left = remainder; left > 0;) {
                bool placed = false;
                for (int numa : subset) {
                  if (left == 0) break;
                  if (left_after[numa] < group) continue;
                  left_after[numa] -= group;
                  left -= group;
                  placed = true;
                }
                if (!placed) return Loop::kContinue;
              }
              const double balance = StandardDeviation(left_after);
              if (balance < best_local) {
                best_local = balance;
                best_local_remainder = subset_slice;
              }
              return Loop::kContinue;
            });
      }
      const bool in_one_socket = align_by_socket && acc.NumasInOneSocket(combo);
      bool better = best_local < best_balance;
      if (align_by_socket && in_one_socket != best_in_one_socket) {
        better = in_one_socket;
      }
      if (better) {
        best_balance = best_local;
        best_remainder = best_local_remainder;
        best_combo = combo_slice;
        if (align_by_socket) best_in_one_socket = in_one_socket;
      }
      return Loop::kContinue;
    });
    if (!best_combo) continue;
    // Read now, as upstream reads its kept slices (GoIntSlice).
    const std::vector<int> chosen = best_combo->Values();
    int distribution =
        (count / static_cast<int>(chosen.size()) / group) * group;
    for (int numa : chosen) {
      distribution =
          std::min(distribution, acc.FreeInNuma(numa) / group * group);
    }
    for (int numa : chosen) {
      auto cpus = TakeByTopologyNumaPacked(topology, acc.FreeCpusInNuma(numa),
                                           distribution, packed);
      if (cpus.ok()) acc.Take(*cpus);
    }
    const std::vector<int> spread =
        best_remainder ? best_remainder->Values() : std::vector<int>();
    for (int remainder = count - distribution * static_cast<int>(chosen.size());
         remainder > 0;) {
      bool placed = false;
      for (int numa : spread) {
        if (remainder == 0) break;
        if (acc.FreeInNuma(numa) < group) continue;
        auto cpus = TakeByTopologyNumaPacked(topology, acc.FreeCpusInNuma(numa),
                                             group, packed);
        if (cpus.ok()) acc.Take(*cpus);
        remainder -= group;
        placed = true;
      }
      if (!placed) {
        // The kubelet would loop here for ever.
        return InternalError(
            "distributing cpus across NUMA nodes: no node of the chosen " +
            std::string("combination has a whole group of ") +
            std::to_string(group) + " cpus for the remaining " +
            std::to_string(remainder));
      }
    }
    if (acc.needed() > 0) {
      return InternalError(
          "accounting error, not enough CPUs allocated, remaining: " +
          std::to_string(acc.needed()));
    }
    if (acc.needed() < 0) {
      return InternalError(
          "accounting error, too many CPUs allocated, remaining: " +
          std::to_string(acc.needed()));
    }
    return acc.result();
  }
  return TakeByTopologyNumaPacked(topology, available, count, packed);
}

CpuTopologyView DiscoverCpuTopology(const Topology& topology) {
  // A core is named by its lowest thread, the socket is the package, a CPU
  // outside every NUMA node is on node 0 as cadvisor puts it. The uncore
  // cache is the L3 cache where it does not serve exactly the NUMA node's
  // threads (its cores times the core's threads, as cadvisor counts),
  // else the socket.
  CpuTopologyView view;
  std::set<int> cores, sockets, nodes_with_cpus, uncores;
  std::map<int, std::set<int>> node_cores;  // NUMA node -> cores (siblings)
  for (const CpuInfo& cpu : topology.cpus()) {
    const std::vector<int> siblings = cpu.thread_siblings.Ids();
    node_cores[cpu.numa_node.value_or(0)].insert(
        siblings.empty() ? cpu.id : siblings.front());
  }
  for (const CpuInfo& cpu : topology.cpus()) {
    CpuDetail detail;
    const std::vector<int> siblings = cpu.thread_siblings.Ids();
    detail.core = siblings.empty()
                      ? cpu.id
                      : std::min(cpu.id, *std::min_element(siblings.begin(),
                                                           siblings.end()));
    detail.socket = std::max(cpu.package_id, 0);
    detail.numa_node = std::max(cpu.numa_node.value_or(0), 0);
    const int node_threads =
        static_cast<int>(node_cores[cpu.numa_node.value_or(0)].size()) *
        std::max(cpu.thread_siblings.Count(), 1);
    detail.uncore =
        cpu.l3_cache_id >= 0 && cpu.l3_shared.Count() != node_threads
            ? cpu.l3_cache_id
            : detail.socket;
    view.cpus[cpu.id] = detail;
    cores.insert(detail.core);
    sockets.insert(detail.socket);
    nodes_with_cpus.insert(detail.numa_node);
    uncores.insert(detail.uncore);
  }
  view.num_cpus = static_cast<int>(view.cpus.size());
  view.num_cores = static_cast<int>(cores.size());
  view.num_sockets = static_cast<int>(sockets.size());
  view.num_numa_nodes = static_cast<int>(nodes_with_cpus.size());
  view.num_uncore_caches = static_cast<int>(uncores.size());
  return view;
}

}  // namespace topology::manager
