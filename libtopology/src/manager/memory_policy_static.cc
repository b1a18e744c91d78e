// StaticMemoryPolicy: policy_static.go of the kubelet's Memory Manager, one
// function for each of its functions, in its order of decisions.
#include "topology/manager/memory_policy_static.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cstdio>
#include <set>

#include "family_search.h"
#include "saturating.h"

namespace topology::manager {
namespace {

// The kubelet's bitmask String(): binary digits, padded to an even width
// ("01" for node 0, "0101" for nodes 0 and 2). The reusable-memory keys.
std::string GoMaskString(NumaMask mask) {
  const uint64_t bits = mask.bits();
  int width = 2;
  for (int shift = 62; shift > 0; shift -= 2) {
    if (bits > (uint64_t{1} << shift)) {
      width = shift + 2;
      break;
    }
  }
  std::string out;
  for (int bit = 63; bit >= 0; --bit) {
    if (((bits >> bit) & 1U) != 0 || !out.empty() || bit < width) {
      out += ((bits >> bit) & 1U) != 0 ? '1' : '0';
    }
  }
  return out;
}

uint64_t Add(uint64_t a, uint64_t b) { return internal::SaturatingAdd(a, b); }
uint64_t Multiply(uint64_t a, uint64_t b) {
  return internal::SaturatingMultiply(a, b);
}

NumaMask MaskOf(const std::vector<int>& ids) {
  uint64_t bits = 0;
  for (int id : ids) {
    if (id >= 0 && id < NumaMask::kMaxNodes) bits |= uint64_t{1} << id;
  }
  return NumaMask::FromBits(bits);
}

bool AreGroupsEqual(std::vector<int> a, std::vector<int> b) {
  std::sort(a.begin(), a.end());
  std::sort(b.begin(), b.end());
  return a == b;
}

// Sums of free memory of `mask` cover every request (isAffinitySatisfyRequest).
bool IsAffinitySatisfyRequest(const MemoryMachineState& machine, NumaMask mask,
                              const std::map<std::string, uint64_t>& requests) {
  for (const auto& [type, size] : requests) {
    uint64_t free = 0;
    for (int id : mask.Ids()) {
      const auto node = machine.find(id);
      if (node == machine.end()) continue;
      const auto table = node->second.memory.find(type);
      if (table != node->second.memory.end()) {
        free = Add(free, table->second.free);
      }
    }
    if (free < size) return false;
  }
  return true;
}

// findBestHint: preferred first, then the narrowest.
TopologyHint FindBestHint(const std::vector<TopologyHint>& hints) {
  TopologyHint best;
  for (const TopologyHint& hint : hints) {
    if (!best.affinity) {
      best = hint;
      continue;
    }
    if (hint.preferred && !best.preferred) {
      best = hint;
      continue;
    }
    if (hint.preferred == best.preferred && hint.affinity &&
        hint.affinity->IsNarrowerThan(*best.affinity)) {
      best = hint;
    }
  }
  return best;
}

// updateMachineState: node by node in mask order; every node of the mask
// counts the assignment and joins the group.
void UpdateMachineState(MemoryMachineState& machine,
                        const std::vector<int>& affinity,
                        const std::string& type, uint64_t requested) {
  for (int id : affinity) {
    MemoryNodeState& node = machine[id];
    ++node.assignments;
    node.cells = affinity;
    if (requested == 0) continue;
    MemoryTable& table = node.memory[type];
    if (table.free == 0) continue;
    if (table.free >= requested) {
      table.reserved += requested;
      table.free -= requested;
      requested = 0;
      continue;
    }
    requested -= table.free;
    table.reserved += table.free;
    table.free = 0;
  }
}

bool IsRegularInitContainer(const Pod& pod, const Container& container) {
  for (const Container& init : pod.init_containers) {
    if (init.name == container.name) return !init.restartable;
  }
  return false;
}

// regenerateHints: the hints of memory already allocated (a restart), or
// none (nil) when the blocks do not match the request.
ProviderHints RegenerateHints(const std::vector<MemoryBlock>& blocks,
                              const std::map<std::string, uint64_t>& requests) {
  std::map<std::string, std::vector<TopologyHint>> hints;
  for (const auto& [type, size] : requests) hints[type];
  if (blocks.size() != requests.size()) return {};
  for (const MemoryBlock& block : blocks) {
    const auto it = requests.find(block.type);
    if (it == requests.end() || block.size != it->second) return {};
    auto mask = NumaMask::FromIds(block.numa_affinity);
    if (!mask.ok()) return {};
    hints[block.type].push_back(TopologyHint{*mask, true});
  }
  ProviderHints out;
  for (auto& [type, list] : hints) out[type] = HintList(std::move(list));
  return out;
}

ProviderHints ToProviderHints(
    std::map<std::string, std::vector<TopologyHint>> hints) {
  ProviderHints out;
  for (auto& [type, list] : hints) out[type] = HintList(std::move(list));
  return out;
}

std::string Ids(const MemoryMachineState& machine) {
  std::vector<int> ids;
  for (const auto& [id, node] : machine) ids.push_back(id);
  return NumaMask::FromIds(ids).value_or(NumaMask()).ToString();
}

std::string Group(const std::vector<int>& cells) {
  std::string out = "[";
  for (int id : cells) {
    if (out.size() > 1) out += ',';
    out += std::to_string(id);
  }
  return out + "]";
}

// areMachineStatesEqual of `recorded` and `expected`, with the kubelet's
// tolerance (memory of a group may sit on any of its nodes, so free and
// reserved are compared as sums over each node's group) and the opt-in
// drift of regular memory (`drift_tolerance` bytes of total, with
// allocatable and free moving by as much). The first difference in words,
// empty when equal; a tolerated drift is added to `*drifted`.
std::string MachineStateDifference(const MemoryMachineState& recorded,
                                   const MemoryMachineState& expected,
                                   uint64_t drift_tolerance,
                                   std::string* drifted) {
  if (Ids(recorded) != Ids(expected)) {
    return "NUMA nodes " + Ids(recorded) + " recorded, " + Ids(expected) +
           " now";
  }
  std::set<int> drifted_nodes;
  for (const auto& [id, was] : recorded) {
    const MemoryNodeState& now = expected.at(id);
    const std::string where = "node " + std::to_string(id) + " ";
    if (was.assignments != now.assignments) {
      return where + "has " + std::to_string(was.assignments) +
             " memory assignments recorded, " +
             std::to_string(now.assignments) + " from the assignments";
    }
    if (!AreGroupsEqual(was.cells, now.cells)) {
      return where + "is in the group " + Group(was.cells) + " recorded, " +
             Group(now.cells) + " from the assignments";
    }
    for (const auto& [type, table] : was.memory) {
      if (!now.memory.contains(type)) return where + "has no " + type + " now";
    }
    for (const auto& [type, table] : now.memory) {
      const auto it = was.memory.find(type);
      if (it == was.memory.end()) return where + "had no " + type + " recorded";
      const MemoryTable& old = it->second;
      if (old.system_reserved != table.system_reserved) {
        return where + type + " system reserved " +
               std::to_string(old.system_reserved) + " recorded, " +
               std::to_string(table.system_reserved) + " now";
      }
      const uint64_t drift = old.total > table.total ? old.total - table.total
                                                     : table.total - old.total;
      const bool tolerated =
          type == kMemoryResource && drift <= drift_tolerance &&
          old.total - old.allocatable == table.total - table.allocatable;
      if (drift != 0 && !tolerated) {
        return where + type + " total " + std::to_string(old.total) +
               " bytes recorded, " + std::to_string(table.total) + " now" +
               (type == kMemoryResource
                    ? " (a drift of " + std::to_string(drift) +
                          " bytes; the drift tolerance is " +
                          std::to_string(drift_tolerance) + ")"
                    : "");
      }
      if (drift == 0 && old.allocatable != table.allocatable) {
        return where + type + " allocatable " +
               std::to_string(old.allocatable) + " recorded, " +
               std::to_string(table.allocatable) + " now";
      }
      if (drift != 0) {
        drifted_nodes.insert(id);
        if (drifted != nullptr) {
          *drifted += (drifted->empty() ? "" : "; ") + where +
                      "memory total moved " + std::to_string(drift) +
                      " bytes (tolerated: " + std::to_string(drift_tolerance) +
                      ")";
        }
      }
    }
  }
  for (const auto& [id, was] : recorded) {
    const std::string where = "node " + std::to_string(id) + " ";
    // A drift on a node of the group moves its free memory by as much.
    const bool drift_here =
        std::any_of(was.cells.begin(), was.cells.end(),
                    [&](int cell) { return drifted_nodes.contains(cell); });
    for (const auto& [type, table] : was.memory) {
      uint64_t free_was = 0, reserved_was = 0, free_now = 0, reserved_now = 0;
      for (int cell : was.cells) {
        const auto in_was = recorded.find(cell);
        const auto in_now = expected.find(cell);
        if (in_was == recorded.end() || in_now == expected.end()) {
          return where + "is grouped with node " + std::to_string(cell) +
                 ", which does not exist";
        }
        if (auto t = in_was->second.memory.find(type);
            t != in_was->second.memory.end()) {
          free_was += t->second.free;
          reserved_was += t->second.reserved;
        }
        if (auto t = in_now->second.memory.find(type);
            t != in_now->second.memory.end()) {
          free_now += t->second.free;
          reserved_now += t->second.reserved;
        }
      }
      if (reserved_was != reserved_now ||
          (!drift_here && free_was != free_now)) {
        return where + type + " reserved " + std::to_string(reserved_was) +
               " and free " + std::to_string(free_was) +
               " recorded over its group, " + std::to_string(reserved_now) +
               " and " + std::to_string(free_now) + " from the assignments";
      }
    }
  }
  return {};
}

}  // namespace

bool IsAffinityViolatingNumaAllocations(const MemoryMachineState& machine,
                                        NumaMask mask) {
  const std::vector<int> ids = mask.Ids();
  if (ids.size() == 1) return false;
  for (int id : ids) {
    const auto node = machine.find(id);
    if (node == machine.end() || node->second.assignments == 0) continue;
    if (node->second.cells.size() == 1) return true;
    if (!AreGroupsEqual(node->second.cells, ids)) return true;
  }
  return false;
}

StatusOr<StaticMemoryPolicy> StaticMemoryPolicy::Create(
    std::vector<NumaNode> nodes, ReservedMemory reserved) {
  uint64_t total = 0;
  for (const auto& [id, types] : reserved) {
    const auto it = types.find(kMemoryResource);
    if (it != types.end()) total += it->second;
  }
  if (total == 0) {
    return InvalidArgumentError(
        "[memorymanager] you should specify the system reserved memory");
  }
  return StaticMemoryPolicy(std::move(nodes), std::move(reserved));
}

MemoryMachineState StaticMemoryPolicy::DefaultMachineState() const {
  const auto system_reserved = [&](int id, const std::string& type) {
    const auto node = reserved_.find(id);
    if (node == reserved_.end()) return uint64_t{0};
    const auto it = node->second.find(type);
    return it == node->second.end() ? uint64_t{0} : it->second;
  };
  // Beyond the kubelet, whose unsigned subtraction wraps: a reservation
  // larger than the memory leaves nothing allocatable.
  const auto minus = [](uint64_t a, uint64_t b) { return a > b ? a - b : 0; };
  MemoryMachineState machine;
  for (const NumaNode& node : nodes_) {
    MemoryNodeState& state = machine[node.id];
    state.cells = {node.id};
    uint64_t hugepages = 0;
    for (const HugePages& pages : node.hugepages) {
      const std::string type = HugePagesResourceName(pages.page_size_bytes);
      const uint64_t total = Multiply(pages.total_pages, pages.page_size_bytes);
      const uint64_t reserved = system_reserved(node.id, type);
      const uint64_t allocatable = minus(total, reserved);
      state.memory[type] = MemoryTable{.total = total,
                                       .system_reserved = reserved,
                                       .allocatable = allocatable,
                                       .reserved = 0,
                                       .free = allocatable};
      hugepages = Add(hugepages, total);
    }
    const uint64_t reserved = system_reserved(node.id, kMemoryResource);
    const uint64_t allocatable =
        minus(minus(node.memory_bytes, reserved), hugepages);
    state.memory[kMemoryResource] = MemoryTable{.total = node.memory_bytes,
                                                .system_reserved = reserved,
                                                .allocatable = allocatable,
                                                .reserved = 0,
                                                .free = allocatable};
  }
  return machine;
}

Status StaticMemoryPolicy::Start(MemoryState& state,
                                 const MemoryStartChecks& checks) const {
  if (state.machine.empty()) {
    if (!state.assignments.empty()) {
      return FailedPreconditionError(
          "[memorymanager] machine state can not be empty when it has memory "
          "assignments");
    }
    state.machine = DefaultMachineState();
    return OkStatus();
  }
  MemoryMachineState expected = DefaultMachineState();
  if (Status updated = UpdateExpectedMachineState(expected, state.assignments);
      !updated.ok()) {
    return updated;
  }
  std::string drifted;
  const std::string difference = MachineStateDifference(
      state.machine, expected, checks.drift_tolerance, &drifted);
  if (checks.difference != nullptr) {
    *checks.difference = difference.empty() ? drifted : difference;
  }
  if (!difference.empty()) {
    return FailedPreconditionError(
        "[memorymanager] the expected machine state is different from the "
        "real one");
  }
  // Within the drift: the machine as it is now. Equal: the recorded one,
  // as the kubelet keeps it (a group's memory may sit on other nodes of it).
  if (!drifted.empty()) state.machine = std::move(expected);
  return OkStatus();
}

Status StaticMemoryPolicy::UpdateExpectedMachineState(
    MemoryMachineState& machine, const ContainerMemoryAssignments& assignments,
    std::string* unfit) {
  for (const auto& [pod, containers] : assignments) {
    for (const auto& [container, blocks] : containers) {
      const std::string who =
          "[memorymanager] (pod: " + pod + ", container: " + container + ") ";
      for (const MemoryBlock& block : blocks) {
        uint64_t requested = block.size;
        for (int id : block.numa_affinity) {
          const auto node = machine.find(id);
          if (node == machine.end()) {
            return FailedPreconditionError(
                who +
                "the memory assignment uses the NUMA that does not exist");
          }
          node->second.assignments++;
          node->second.cells = block.numa_affinity;
          const auto table = node->second.memory.find(block.type);
          if (table == node->second.memory.end()) {
            return FailedPreconditionError(
                who +
                "the memory assignment uses memory resource that does not "
                "exist");
          }
          MemoryTable& t = table->second;
          const uint64_t take = std::min(t.free, requested);
          t.reserved += take;
          t.free -= take;
          requested -= take;
        }
        if (requested != 0 && unfit != nullptr && unfit->empty()) {
          *unfit = who + std::to_string(block.size) + " bytes of " +
                   block.type + " on NUMA nodes " + Group(block.numa_affinity) +
                   " do not fit what is free there";
        }
      }
    }
  }
  return OkStatus();
}

uint64_t StaticMemoryPolicy::Reusable(const std::string& pod_uid, NumaMask mask,
                                      const std::string& type) const {
  const auto pod = reusable_.find(pod_uid);
  if (pod == reusable_.end()) return 0;
  const auto numa = pod->second.find(GoMaskString(mask));
  if (numa == pod->second.end()) return 0;
  const auto it = numa->second.find(type);
  return it == numa->second.end() ? 0 : it->second;
}

std::map<std::string, std::vector<TopologyHint>>
StaticMemoryPolicy::CalculateHints(
    const MemoryMachineState& machine, const std::string& pod_uid,
    const std::map<std::string, uint64_t>& requests) const {
  // calculateHints over every subset in IterateBitMasks order, with each
  // node's figures gathered once (the subsets are 2^N; the inner loop
  // allocates nothing).
  std::vector<int> ids;
  struct NodeFacts {
    std::vector<uint64_t> allocatable;  // per requested type
    std::vector<uint64_t> free;
    bool assigned = false;
    size_t cells = 0;
    NumaMask cells_mask;
  };
  std::array<NodeFacts, NumaMask::kMaxNodes> facts;
  std::vector<std::pair<std::string, uint64_t>> wanted(requests.begin(),
                                                       requests.end());
  for (const auto& [id, node] : machine) {
    if (id < 0 || id >= NumaMask::kMaxNodes) continue;
    ids.push_back(id);
    NodeFacts& f = facts[static_cast<size_t>(id)];
    for (const auto& [type, size] : wanted) {
      const auto it = node.memory.find(type);
      f.allocatable.push_back(it == node.memory.end() ? 0
                                                      : it->second.allocatable);
      f.free.push_back(it == node.memory.end() ? 0 : it->second.free);
    }
    f.assigned = node.assignments > 0;
    f.cells = node.cells.size();
    for (int cell : node.cells) {
      if (cell >= 0 && cell < NumaMask::kMaxNodes) {
        f.cells_mask = f.cells_mask.Or(NumaMask::FromBits(uint64_t{1} << cell));
      }
    }
  }
  const bool reuse = reusable_.contains(pod_uid);
  int min_affinity_size = static_cast<int>(ids.size());
  std::vector<NumaMask> members;
  std::vector<uint64_t> sums(wanted.size());
  const auto sum = [&](uint64_t bits, bool free) {
    std::fill(sums.begin(), sums.end(), 0);
    for (; bits != 0; bits &= bits - 1) {
      const NodeFacts& f = facts[static_cast<size_t>(std::countr_zero(bits))];
      const std::vector<uint64_t>& values = free ? f.free : f.allocatable;
      for (size_t k = 0; k < values.size(); ++k) {
        sums[k] = Add(sums[k], values[k]);
      }
    }
  };
  IterateMasks(ids, [&](NumaMask mask) {
    const uint64_t bits = mask.bits();
    const int count = mask.Count();
    const bool single = count == 1;
    sum(bits, false);
    for (size_t k = 0; k < wanted.size(); ++k) {
      if (sums[k] < wanted[k].second) return;
    }
    min_affinity_size = std::min(min_affinity_size, count);
    if (single &&
        facts[static_cast<size_t>(std::countr_zero(bits))].cells > 1) {
      return;
    }
    if (!single) {
      for (uint64_t rest = bits; rest != 0; rest &= rest - 1) {
        const NodeFacts& f = facts[static_cast<size_t>(std::countr_zero(rest))];
        if (!f.assigned) continue;
        if (f.cells == 1) return;
        if (f.cells != static_cast<size_t>(count) || f.cells_mask != mask) {
          return;
        }
      }
    }
    sum(bits, true);
    for (size_t k = 0; k < wanted.size(); ++k) {
      const uint64_t reusable =
          reuse ? Reusable(pod_uid, mask, wanted[k].first) : 0;
      if (Add(sums[k], reusable) < wanted[k].second) return;
    }
    members.push_back(mask);
  });
  std::map<std::string, std::vector<TopologyHint>> hints;
  if (members.empty() || wanted.empty()) return hints;
  std::vector<TopologyHint> list;
  list.reserve(members.size());
  for (NumaMask mask : members) {
    list.push_back(TopologyHint{mask, mask.Count() == min_affinity_size});
  }
  for (const auto& [type, size] : wanted) hints[type] = list;
  return hints;
}

ProviderHints StaticMemoryPolicy::GetTopologyHints(
    const MemoryState& state, const Pod& pod,
    const Container& container) const {
  if (!pod.guaranteed) return {};
  const std::map<std::string, uint64_t> requests =
      ContainerRequestedMemory(container);
  if (const auto* blocks = state.Blocks(pod.uid, container.name)) {
    return RegenerateHints(*blocks, requests);
  }
  return HintsFor(state.machine, pod.uid, requests);
}

ProviderHints StaticMemoryPolicy::GetPodTopologyHints(const MemoryState& state,
                                                      const Pod& pod) const {
  if (!pod.guaranteed) return {};
  const std::map<std::string, uint64_t> requests = PodRequestedMemory(pod);
  for (const auto* list : {&pod.init_containers, &pod.containers}) {
    for (const Container& container : *list) {
      if (const auto* blocks = state.Blocks(pod.uid, container.name)) {
        return RegenerateHints(*blocks, requests);
      }
    }
  }
  return HintsFor(state.machine, pod.uid, requests);
}

ProviderHints StaticMemoryPolicy::HintsFor(
    const MemoryMachineState& machine, const std::string& pod_uid,
    const std::map<std::string, uint64_t>& requests) const {
  if (!Compact(machine)) {
    return ToProviderHints(CalculateHints(machine, pod_uid, requests));
  }
  std::optional<HintFamily> family = CompactHints(machine, pod_uid, requests);
  if (!family || requests.empty()) return {};
  // One family object for every type, as calculateHints gives every type
  // the same list (the merge sees them as one provider's lists).
  const HintList list = HintList::Family(std::move(*family));
  ProviderHints out;
  for (const auto& [type, size] : requests) out[type] = list;
  return out;
}

std::optional<HintFamily> StaticMemoryPolicy::CompactHints(
    const MemoryMachineState& machine, const std::string& pod_uid,
    const std::map<std::string, uint64_t>& requests) const {
  const auto value = [&](int id, const std::string& type, bool free) {
    const auto node = machine.find(id);
    if (node == machine.end()) return uint64_t{0};
    const auto it = node->second.memory.find(type);
    if (it == node->second.memory.end()) return uint64_t{0};
    return free ? it->second.free : it->second.allocatable;
  };
  const auto weights = [&](bool free, NumaMask over) {
    std::vector<HintFamily::Weighted> out;
    for (const auto& [type, size] : requests) {
      HintFamily::Weighted w;
      w.weight.assign(NumaMask::kMaxNodes, 0);
      for (int id : over.Ids()) {
        w.weight[static_cast<size_t>(id)] = value(id, type, free);
      }
      w.request = size;
      out.push_back(std::move(w));
    }
    return out;
  };
  NumaMask all;
  NumaMask pool;  // nodes holding no memory: the upward-closed part
  for (const auto& [id, node] : machine) {
    if (id < 0 || id >= NumaMask::kMaxNodes) continue;
    const NumaMask bit = NumaMask::FromBits(uint64_t{1} << id);
    all = all.Or(bit);
    if (node.assignments == 0 && node.cells.size() <= 1) pool = pool.Or(bit);
  }
  HintFamily family;
  // Preferred: the fewest nodes whose allocatable memory holds the request
  // (calculateHints' minAffinitySize, judged before the group rules).
  const std::vector<HintFamily::Weighted> allocatable = weights(false, all);
  HintFamily whole;
  whole.universe = all;
  whole.weighted = allocatable;
  if (all.IsEmpty() || !whole.WeighsEnough(all)) return std::nullopt;
  family.preferred_size = NarrowestWeighedSize(allocatable, all);
  family.universe = pool;
  family.weighted = weights(true, pool);
  // The nodes already holding memory: alone (a single-node member), or in
  // a group (the group is the one member that may include them).
  const bool reuse = reusable_.contains(pod_uid);
  const auto fits = [&](NumaMask mask) {
    for (const auto& [type, size] : requests) {
      uint64_t free = 0, held = 0;
      for (int id : mask.Ids()) {
        free = Add(free, value(id, type, true));
        held = Add(held, value(id, type, false));
      }
      if (held < size) return false;
      if (Add(free, reuse ? Reusable(pod_uid, mask, type) : 0) < size) {
        return false;
      }
    }
    return true;
  };
  std::set<uint64_t> seen;
  for (const auto& [id, node] : machine) {
    if (id < 0 || id >= NumaMask::kMaxNodes || pool.IsSet(id)) continue;
    NumaMask member;
    if (node.assignments == 0) continue;  // grouped yet free: never alone
    if (node.cells.size() <= 1) {
      member = NumaMask::FromBits(uint64_t{1} << id);
    } else {
      member = MaskOf(node.cells);
      bool consistent = member.IsSet(id);
      for (int other : member.Ids()) {
        const auto it = machine.find(other);
        if (it == machine.end() || pool.IsSet(other)) consistent = false;
        if (it != machine.end() && it->second.assignments > 0 &&
            MaskOf(it->second.cells) != member) {
          consistent = false;
        }
      }
      if (!consistent) continue;
    }
    if (!seen.insert(member.bits()).second) continue;
    if (fits(member)) family.extras.push_back(member);
  }
  std::sort(family.extras.begin(), family.extras.end(),
            [](NumaMask a, NumaMask b) { return a.bits() < b.bits(); });
  const bool upward = !pool.IsEmpty() && family.WeighsEnough(pool);
  if (!upward && family.extras.empty()) return std::nullopt;
  if (!upward) family.universe = NumaMask();
  return family;
}

StatusOr<TopologyHint> StaticMemoryPolicy::BestHint(
    const MemoryMachineState& machine, const std::string& pod_uid,
    const std::map<std::string, uint64_t>& requests,
    std::optional<NumaMask> base) const {
  const bool has_memory = requests.contains(kMemoryResource);
  if (!Compact(machine)) {
    auto hints = CalculateHints(machine, pod_uid, requests);
    if (!base) {
      if (hints.empty()) {
        return ResourceExhaustedError(
            "[memorymanager] failed to get the default NUMA affinity, no NUMA "
            "nodes with enough memory is available");
      }
      // Every type has the same list; the kubelet reads "memory"'s.
      return FindBestHint(hints[kMemoryResource]);
    }
    std::vector<TopologyHint> filtered;
    for (const TopologyHint& hint : hints[kMemoryResource]) {
      if (base->IsSubsetOf(*hint.affinity)) filtered.push_back(hint);
    }
    if (filtered.empty()) {
      return ResourceExhaustedError(
          "[memorymanager] failed to find NUMA nodes to extend the current "
          "topology hint");
    }
    return FindBestHint(filtered);
  }
  // The same choice over the compact form: the extras that hold `base`,
  // and the narrowest (then numerically smallest) member of the
  // upward-closed part that does, sizes tried from the smallest up.
  const std::optional<HintFamily> family =
      CompactHints(machine, pod_uid, requests);
  if (!family && !base) {
    return ResourceExhaustedError(
        "[memorymanager] failed to get the default NUMA affinity, no NUMA "
        "nodes with enough memory is available");
  }
  std::vector<TopologyHint> candidates;
  if (family && has_memory) {
    const NumaMask need = base.value_or(NumaMask());
    for (NumaMask extra : family->extras) {
      if (need.IsSubsetOf(extra)) {
        candidates.push_back({extra, extra.Count() == family->preferred_size});
      }
    }
    if (!family->universe.IsEmpty() && need.IsSubsetOf(family->universe)) {
      const NumaMask rest =
          NumaMask::FromBits(family->universe.bits() & ~need.bits());
      std::optional<NumaMask> found;
      if (!need.IsEmpty() && family->Contains(need)) found = need;
      internal::SearchBudget budget;
      for (int extra = 1; !found && extra <= rest.Count(); ++extra) {
        internal::ForEachSubset(
            rest, extra,
            [&](NumaMask add) {
              const NumaMask m = need.Or(add);
              if (!family->Contains(m)) return true;
              found = m;
              return false;
            },
            &budget);
        if (budget.exhausted) break;
      }
      if (found) {
        candidates.push_back(
            {*found, found->Count() == family->preferred_size});
      }
    }
  }
  if (base && candidates.empty()) {
    return ResourceExhaustedError(
        "[memorymanager] failed to find NUMA nodes to extend the current "
        "topology hint");
  }
  return FindBestHint(candidates);
}

StatusOr<TopologyHint> StaticMemoryPolicy::DefaultHint(
    const MemoryMachineState& machine, const std::string& pod_uid,
    const std::map<std::string, uint64_t>& requests) const {
  return BestHint(machine, pod_uid, requests, std::nullopt);
}

StatusOr<TopologyHint> StaticMemoryPolicy::ExtendHint(
    const MemoryMachineState& machine, const std::string& pod_uid,
    const std::map<std::string, uint64_t>& requests, NumaMask mask) const {
  return BestHint(machine, pod_uid, requests, mask);
}

Status StaticMemoryPolicy::Allocate(MemoryState& state, const Pod& pod,
                                    const Container& container,
                                    const TopologyHint& affinity) {
  if (!pod.guaranteed) return OkStatus();
  if (const auto* blocks = state.Blocks(pod.uid, container.name)) {
    UpdateReusable(pod, container, *blocks);
    return OkStatus();
  }
  const std::map<std::string, uint64_t> requests =
      ContainerRequestedMemory(container);
  MemoryMachineState machine = state.machine;
  TopologyHint best = affinity;
  if (!affinity.affinity) {
    auto hint = DefaultHint(machine, pod.uid, requests);
    if (!hint.ok()) return hint.status();
    if (!hint->preferred && best.preferred) {
      return ResourceExhaustedError(
          "[memorymanager] failed to find the default preferred hint");
    }
    best = *hint;
  }
  // A merged hint may be narrower than the memory needs (restricted AND-ed
  // it with other providers'): extend it to a hint that holds it.
  if (!best.affinity ||
      !IsAffinitySatisfyRequest(machine, *best.affinity, requests)) {
    auto hint = ExtendHint(machine, pod.uid, requests,
                           best.affinity.value_or(NumaMask()));
    if (!hint.ok()) return hint.status();
    if (!hint->preferred && best.preferred) {
      return ResourceExhaustedError(
          "[memorymanager] failed to find the extended preferred hint");
    }
    best = *hint;
  }
  if (!best.affinity ||
      IsAffinityViolatingNumaAllocations(machine, *best.affinity)) {
    return ResourceExhaustedError(
        "[memorymanager] preferred hint violates NUMA node allocation");
  }
  const std::vector<int> bits = best.affinity->Ids();
  std::vector<MemoryBlock> blocks;
  for (const auto& [type, size] : requests) {
    blocks.push_back(MemoryBlock{bits, type, size});
    const uint64_t reusable = Reusable(pod.uid, *best.affinity, type);
    UpdateMachineState(machine, bits, type,
                       reusable >= size ? 0 : size - reusable);
  }
  UpdateReusable(pod, container, blocks);
  state.machine = std::move(machine);
  state.assignments[pod.uid][container.name] = blocks;
  UpdateInitContainersBlocks(state, pod, container, blocks);
  return OkStatus();
}

void StaticMemoryPolicy::UpdateReusable(
    const Pod& pod, const Container& container,
    const std::vector<MemoryBlock>& blocks) {
  for (auto it = reusable_.begin(); it != reusable_.end();) {
    it = it->first != pod.uid ? reusable_.erase(it) : std::next(it);
  }
  if (IsRegularInitContainer(pod, container)) {
    auto& by_mask = reusable_[pod.uid];
    for (const MemoryBlock& block : blocks) {
      uint64_t& held =
          by_mask[GoMaskString(MaskOf(block.numa_affinity))][block.type];
      held = std::max(held, block.size);
    }
    return;
  }
  for (const MemoryBlock& block : blocks) {
    const NumaMask mask = MaskOf(block.numa_affinity);
    const uint64_t reusable = Reusable(pod.uid, mask, block.type);
    if (reusable == 0) continue;
    uint64_t& held = reusable_[pod.uid][GoMaskString(mask)][block.type];
    held = block.size >= reusable ? 0 : held - block.size;
  }
}

void StaticMemoryPolicy::UpdateInitContainersBlocks(
    MemoryState& state, const Pod& pod, const Container& container,
    const std::vector<MemoryBlock>& blocks) const {
  for (const MemoryBlock& block : blocks) {
    uint64_t size = block.size;
    for (const Container& init : pod.init_containers) {
      if (init.name == container.name || size == 0) break;
      if (init.restartable) continue;
      auto pod_it = state.assignments.find(pod.uid);
      if (pod_it == state.assignments.end()) continue;
      auto it = pod_it->second.find(init.name);
      if (it == pod_it->second.end() || it->second.empty()) continue;
      for (MemoryBlock& held : it->second) {
        if (held.size == 0 || held.type != block.type) continue;
        if (MaskOf(held.numa_affinity) != MaskOf(block.numa_affinity)) continue;
        if (held.size > size) {
          held.size -= size;
          size = 0;
        } else {
          size -= held.size;
          held.size = 0;
        }
      }
    }
  }
}

void StaticMemoryPolicy::RemoveContainer(MemoryState& state,
                                         const std::string& pod_uid,
                                         const std::string& container) {
  auto pod = state.assignments.find(pod_uid);
  if (pod == state.assignments.end()) {
    reusable_.erase(pod_uid);
    return;
  }
  auto it = pod->second.find(container);
  if (it == pod->second.end()) return;
  const std::vector<MemoryBlock> blocks = std::move(it->second);
  pod->second.erase(it);
  if (pod->second.empty()) {
    state.assignments.erase(pod);
    // Reusable memory is memory the pod's init containers hold: with the
    // pod gone it is nobody's, and counting it again would pin it twice.
    reusable_.erase(pod_uid);
  }
  for (const MemoryBlock& block : blocks) {
    uint64_t released = block.size;
    for (int id : block.numa_affinity) {
      const auto node_it = state.machine.find(id);
      if (node_it == state.machine.end()) continue;
      MemoryNodeState& node = node_it->second;
      --node.assignments;
      if (node.assignments == 0) node.cells = {id};
      if (released == 0) continue;
      MemoryTable& table = node.memory[block.type];
      if (table.reserved == 0) continue;
      if (table.reserved < released) {
        released -= table.reserved;
        table.free += table.reserved;
        table.reserved = 0;
        continue;
      }
      table.free += released;
      table.reserved -= released;
      released = 0;
    }
  }
}

}  // namespace topology::manager
