#include "build.h"

#include <algorithm>
#include <map>
#include <optional>
#include <set>

#include "topology/common/pod_fingerprint.h"
#include "topology/manager/memory_state.h"

namespace topology::nrt {

namespace {

struct Counts {
  uint64_t capacity = 0;
  uint64_t allocatable = 0;
  uint64_t available = 0;
};
// resource -> node id -> counts
using DeviceCounts = std::map<std::string, std::map<int, Counts>>;

// The nodes a device is counted on: its own, or the only node there is;
// none (and a note) otherwise.
class Placement {
 public:
  explicit Placement(const Topology& topology) : topology_(topology) {}
  std::vector<int> Nodes(const std::string& resource,
                         const std::vector<int>& reported) {
    std::vector<int> out;
    for (const int id : reported) {
      if (topology_.FindNumaNode(id) != nullptr) {
        out.push_back(id);
      } else {
        ++unknown_node_[resource];
      }
    }
    if (!reported.empty()) return out;
    if (topology_.numa_nodes().size() == 1) {
      return {topology_.numa_nodes().front().id};
    }
    ++no_node_[resource];
    return {};
  }
  void Notes(std::vector<std::string>* notes) const {
    for (const auto& [resource, n] : no_node_) {
      notes->push_back(std::to_string(n) + " device(s) of " + resource +
                       " report no NUMA node; left out");
    }
    for (const auto& [resource, n] : unknown_node_) {
      notes->push_back(std::to_string(n) + " NUMA node(s) of devices of " +
                       resource + " are not the machine's; left out");
    }
  }

 private:
  const Topology& topology_;
  std::map<std::string, size_t> no_node_;
  std::map<std::string, size_t> unknown_node_;
};

void CountDevicePlugins(const NodeResources& resources, Placement& placement,
                        DeviceCounts* counts) {
  std::set<std::pair<std::string, std::string>> held;
  for (const PodEntry& pod : resources.pods) {
    for (const DeviceEntry& d : pod.devices) held.emplace(d.resource, d.id);
  }
  for (const DeviceEntry& d : resources.allocatable_devices) {
    const bool in_use = held.contains({d.resource, d.id});
    for (const int node : placement.Nodes(d.resource, d.numa_nodes)) {
      Counts& c = (*counts)[d.resource][node];
      ++c.capacity;
      ++c.allocatable;
      c.available += in_use ? 0u : 1u;
    }
  }
}

void CountDra(const Inputs& inputs, Placement& placement, DeviceCounts* counts,
              std::vector<std::string>* notes) {
  if (inputs.dra_devices == nullptr || inputs.classes == nullptr) return;
  std::set<DraRef> held;
  for (const PodEntry& pod : inputs.resources->pods) {
    held.insert(pod.dra.begin(), pod.dra.end());
  }
  for (const ClassSelector& selector : *inputs.classes) {
    if (!selector.unsupported.empty()) {
      notes->push_back("DeviceClass " + selector.name +
                       " is not counted: " + selector.unsupported);
    }
  }
  for (const DraDevice& device : *inputs.dra_devices) {
    const bool in_use =
        held.contains(DraRef{device.driver, device.pool, device.name});
    std::vector<int> reported;
    if (device.numa_node) reported.push_back(*device.numa_node);
    for (const ClassSelector& selector : *inputs.classes) {
      if (!Matches(selector, device)) continue;
      for (const int node : placement.Nodes(selector.name, reported)) {
        Counts& c = (*counts)[selector.name][node];
        ++c.capacity;
        ++c.allocatable;
        c.available += in_use ? 0u : 1u;
      }
    }
  }
}

ZoneResource Cpu(const NumaNode& node, const std::set<int>& allocatable,
                 const std::set<int>& exclusive) {
  ZoneResource r{
      .name = "cpu", .capacity = 0, .allocatable = 0, .available = 0};
  for (const int cpu : node.cpus.Ids()) {
    ++r.capacity;
    // No allocatable CPUs named: the None policy, every CPU is shared.
    if (allocatable.empty() || allocatable.contains(cpu)) {
      ++r.allocatable;
      r.available += exclusive.contains(cpu) ? 0u : 1u;
    }
  }
  return r;
}

// The machine state once the blocks of pods the kubelet no longer has are
// released, as releaseMemory (policy_static.go) releases them: each block
// from its nodes in order, as much as each has reserved.
manager::MemoryMachineState WithoutGonePods(const Inputs& inputs) {
  manager::MemoryMachineState machine = inputs.memory->machine;
  if (inputs.live_pods == nullptr) return machine;
  for (const auto& [uid, blocks] : inputs.memory->blocks) {
    if (inputs.live_pods->contains(uid)) continue;
    for (const manager::MemoryBlock& block : blocks) {
      uint64_t released = block.size;
      for (const int id : block.numa_affinity) {
        const auto node = machine.find(id);
        if (released == 0 || node == machine.end()) continue;
        const auto table = node->second.memory.find(block.type);
        if (table == node->second.memory.end()) continue;
        manager::MemoryTable& t = table->second;
        const uint64_t freed = std::min(t.reserved, released);
        t.free += freed;
        t.reserved -= freed;
        released -= freed;
      }
    }
  }
  return machine;
}

// The node's state in `machine`, or null.
const manager::MemoryNodeState* NodeState(
    const NumaNode& node, const manager::MemoryMachineState* machine) {
  if (machine == nullptr) return nullptr;
  const auto it = machine->find(node.id);
  return it == machine->end() ? nullptr : &it->second;
}

}  // namespace

Built Build(const Inputs& inputs) {
  const Topology& topology = *inputs.topology;
  const NodeResources& resources = *inputs.resources;
  Built built;
  NodeTopology& object = built.object;
  object.node_name = inputs.node_name;
  object.node_uid = inputs.node_uid;
  object.policy = inputs.kubelet.policy;
  object.scope = inputs.kubelet.scope;
  object.max_numa_nodes = inputs.kubelet.max_numa_nodes;

  const std::set<int> allocatable(resources.allocatable_cpus.begin(),
                                  resources.allocatable_cpus.end());
  std::set<int> exclusive;
  for (const PodEntry& pod : resources.pods) {
    exclusive.insert(pod.cpus.begin(), pod.cpus.end());
  }
  Placement placement(topology);
  DeviceCounts devices;
  CountDevicePlugins(resources, placement, &devices);
  CountDra(inputs, placement, &devices, &built.notes);
  placement.Notes(&built.notes);

  std::optional<manager::MemoryMachineState> machine;
  if (inputs.memory != nullptr &&
      inputs.memory->policy == manager::kMemoryPolicyStatic) {
    machine = WithoutGonePods(inputs);
  }
  for (const NumaNode& node : topology.numa_nodes()) {
    Zone zone{.id = node.id, .costs = {}, .resources = {}};
    for (const NumaNode& other : topology.numa_nodes()) {
      if (auto d = topology.Distance(node.id, other.id)) {
        zone.costs.emplace_back(other.id, *d);
      }
    }
    if (node.has_cpus()) {
      zone.resources.push_back(Cpu(node, allocatable, exclusive));
    }
    AppendMemoryResources(node, NodeState(node, machine ? &*machine : nullptr),
                          &zone.resources);
    for (const auto& [name, by_node] : devices) {
      const auto it = by_node.find(node.id);
      if (it == by_node.end()) continue;
      zone.resources.push_back({name, it->second.capacity,
                                it->second.allocatable, it->second.available});
    }
    object.zones.push_back(std::move(zone));
  }

  const bool exclusive_only =
      inputs.fingerprint_method == common::kPodFingerprintMethodExclusive;
  common::PodFingerprint fingerprint(resources.pods.size());
  for (const PodEntry& pod : resources.pods) {
    if (!exclusive_only || pod.Exclusive()) fingerprint.Add(pod.ns, pod.name);
  }
  object.fingerprint = fingerprint.Sign();
  object.fingerprint_method = exclusive_only
                                  ? common::kPodFingerprintMethodExclusive
                                  : common::kPodFingerprintMethodAll;
  std::sort(built.notes.begin(), built.notes.end());
  return built;
}

}  // namespace topology::nrt
