#include "cpu_assignment.h"

#include <algorithm>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace topology::manager {
namespace {

enum class Level { kNuma, kSocket, kCore };

int IdAt(const CpuDetail& cpu, Level level) {
  switch (level) {
    case Level::kNuma:
      return cpu.numa_node;
    case Level::kSocket:
      return cpu.socket;
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
  std::vector<int> SortedNumaNodes() const {
    return numa_first_ ? Units(Level::kNuma, std::nullopt, 0)
                       : Within(Level::kNuma, Level::kSocket, SortedSockets());
  }
  std::vector<int> SortedSockets() const {
    return numa_first_ ? Within(Level::kSocket, Level::kNuma, SortedNumaNodes())
                       : Units(Level::kSocket, std::nullopt, 0);
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

  // The units of `sorted` all of whose CPUs are free: a NUMA node's count
  // is its own, a socket's and a core's the machine's average, as upstream
  // compares them.
  std::vector<int> FreeUnits(Level level, const std::vector<int>& sorted,
                             int average) const {
    std::vector<int> out;
    for (int id : sorted) {
      const int whole =
          level == Level::kNuma ? AllIn(level, id).Count() : average;
      if (FreeIn(level, id) == whole) out.push_back(id);
    }
    return out;
  }

  void TakeFullNumaNodes() { TakeFull(Level::kNuma, SortedNumaNodes(), 0); }
  void TakeFullSockets() {
    TakeFull(Level::kSocket, SortedSockets(), topology_.CpusPerSocket());
  }
  // Every unit of `sorted` that is all free (FreeUnits) and that the
  // request still needs whole, in that order.
  void TakeFull(Level level, const std::vector<int>& sorted, int average) {
    for (int id : FreeUnits(level, sorted, average)) {
      const CpuSet cpus = AllIn(level, id);
      if (needed_ < cpus.Count()) continue;
      Take(cpus);
    }
  }

  void Take(const CpuSet& cpus) {
    result_ = result_.Union(cpus);
    for (int cpu : cpus.Ids()) free_.erase(cpu);
    needed_ -= cpus.Count();
  }

  const CpuTopologyView& topology_;
  std::map<int, CpuDetail> free_;
  int needed_;
  const CpuSorting sorting_;
  const bool numa_first_;
  CpuSet result_;
};

}  // namespace

StatusOr<CpuSet> TakeByTopologyNumaPacked(const CpuTopologyView& topology,
                                          const CpuSet& available, int count,
                                          CpuSorting sorting) {
  Accumulator acc(topology, available, count, sorting);
  if (acc.Satisfied()) return acc.result();
  if (acc.Failed()) {
    return ResourceExhaustedError(
        "not enough cpus available to satisfy request: requested=" +
        std::to_string(count) +
        ", available=" + std::to_string(available.Count()));
  }
  acc.TakeFullFirstLevel();
  if (acc.Satisfied()) return acc.result();
  acc.TakeFullSecondLevel();
  if (acc.Satisfied()) return acc.result();
  if (sorting != CpuSorting::kSpread) {
    acc.TakeFullCores();
    if (acc.Satisfied()) return acc.result();
  }
  acc.TakeRemainingCpus();
  if (acc.Satisfied()) return acc.result();
  return ResourceExhaustedError("failed to allocate cpus");
}

}  // namespace topology::manager
