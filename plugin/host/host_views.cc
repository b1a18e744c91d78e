#include "host_views.h"

#include <algorithm>
#include <map>
#include <set>
#include <utility>

#include "topology/common/pod_fingerprint.h"

#include "deviceplugin/v1beta1/api.pb.h"
#include "nrt_object.h"
#include "pod_manifest.h"

namespace topology::host {

using nlohmann::json;

namespace {

json HintListJson(const manager::HintList& list) {
  if (!list.has_value()) return nullptr;
  json out = json::array();
  std::vector<manager::TopologyHint> hints = list.Expand();
  for (size_t i = 0; i < hints.size() && i < 64; ++i) {
    const auto& hint = hints[i];
    out.push_back(
        {{"mask", hint.affinity ? json(hint.affinity->Ids()) : json(nullptr)},
         {"preferred", hint.preferred}});
  }
  return out;
}

// One resource's devices on one NUMA node ("none": devices without one).
struct NodeCounts {
  int capacity = 0;
  int allocatable = 0;  // healthy, the plugin connected
  int available = 0;    // allocatable and held by no pod
};

std::map<std::string, NodeCounts> CountsByNode(const ResourceSnapshot& resource,
                                               size_t* allocatable) {
  std::map<std::string, NodeCounts> out;
  *allocatable = 0;
  for (const manager::Device& device : resource.devices) {
    const bool healthy = device.healthy && resource.connected;
    const bool held = std::binary_search(resource.in_use.begin(),
                                         resource.in_use.end(), device.id);
    *allocatable += healthy ? 1 : 0;
    std::vector<std::string> keys;
    for (int node : device.numa_nodes) keys.push_back(std::to_string(node));
    if (keys.empty()) keys.emplace_back("none");
    for (const std::string& key : keys) {
      NodeCounts& counts = out[key];
      ++counts.capacity;
      if (healthy) {
        ++counts.allocatable;
        if (!held) ++counts.available;
      }
    }
  }
  return out;
}

}  // namespace

json ToJson(const ContainerResult& c) {
  json devices = json::object();
  for (const auto& [resource, ids] : c.devices) devices[resource] = ids;
  json memory = json::array();
  for (const manager::MemoryBlock& block : c.memory) {
    memory.push_back({{"type", block.type},
                      {"size", block.size},
                      {"numa_nodes", block.numa_affinity}});
  }
  return {{"name", c.name},
          {"devices", std::move(devices)},
          {"cpus", c.cpus.ToList()},
          {"numa_nodes", c.numa_nodes ? json(*c.numa_nodes) : json(nullptr)},
          {"memory", std::move(memory)}};
}

json ToJson(const PodResult& result, bool explain) {
  json containers = json::array();
  for (const ContainerResult& c : result.containers) {
    json container = ToJson(c);
    if (!c.allocate_responses.empty()) {
      container["allocate_responses"] = c.allocate_responses;
    }
    containers.push_back(std::move(container));
  }
  json policy = nullptr;
  if (!result.policy.policy.empty()) {
    policy = {{"policy", result.policy.policy},
              {"scope", result.policy.scope},
              {"source", result.policy.source},
              {"requested", result.policy.requested.empty()
                                ? json(nullptr)
                                : json(result.policy.requested)}};
  }
  json out = {
      {"topology_policy", policy},
      {"pod", result.name},
      {"namespace", result.ns},
      {"uid", result.uid},
      {"admitted", result.admitted},
      {"reason", result.reason.empty() ? json(nullptr) : json(result.reason)},
      {"message",
       result.message.empty() ? json(nullptr) : json(result.message)},
      {"containers", containers}};
  if (explain) out["explanation"] = result.explanation;
  return out;
}

std::vector<ResourceSnapshot> ResourceSnapshots(
    std::vector<PluginRegistry::PluginState> plugins,
    std::map<std::string, manager::DeviceManager::ResourceSnapshot> devices) {
  std::vector<ResourceSnapshot> out;
  out.reserve(plugins.size());
  for (PluginRegistry::PluginState& state : plugins) {
    ResourceSnapshot resource;
    resource.name = state.resource;
    if (auto it = devices.find(state.resource); it != devices.end()) {
      resource.devices = std::move(it->second.devices);
      resource.in_use = std::move(it->second.in_use);
    }
    resource.connected = state.connected;
    if (!state.socket.empty()) {
      resource.plugin = std::filesystem::path(state.socket).filename().string();
    }
    resource.socket = std::move(state.socket);
    resource.problem = std::move(state.problem);
    out.push_back(std::move(resource));
  }
  return out;
}

std::map<std::string, ResourceView> ResourceViews(
    const HostSnapshot& snapshot) {
  std::map<std::string, ResourceView> out;
  for (const ResourceSnapshot& resource : snapshot.resources) {
    ResourceView view;
    view.capacity = resource.devices.size();
    if (resource.connected) {
      view.allocatable = static_cast<size_t>(
          std::count_if(resource.devices.begin(), resource.devices.end(),
                        [](const manager::Device& d) { return d.healthy; }));
    }
    view.stopped = !resource.connected;
    view.endpoint = resource.socket;
    out[resource.name] = std::move(view);
  }
  return out;
}

json StatusJson(const HostSnapshot& snapshot) {
  json resources = json::array();
  for (const ResourceSnapshot& resource : snapshot.resources) {
    size_t allocatable = 0;
    json per_node = json::object();
    for (const auto& [key, counts] : CountsByNode(resource, &allocatable)) {
      per_node[key] = {{"capacity", counts.capacity},
                       {"allocatable", counts.allocatable},
                       {"available", counts.available}};
    }
    resources.push_back(
        {{"name", resource.name},
         {"capacity", resource.devices.size()},
         {"allocatable", allocatable},
         {"in_use", resource.in_use.size()},
         {"plugin",
          resource.plugin.empty() ? json(nullptr) : json(resource.plugin)},
         {"connected", resource.connected},
         {"problem",
          resource.problem.empty() ? json(nullptr) : json(resource.problem)},
         {"numa_nodes", per_node}});
  }
  json pods = json::array();
  for (const PodResult& pod : snapshot.pods) pods.push_back(ToJson(pod, false));
  json nodes = json::array();
  for (const NumaNode& node : snapshot.topology->numa_nodes()) {
    nodes.push_back({{"id", node.id}, {"cpus", node.cpus.ToList()}});
  }
  return {{"node", snapshot.node_name},
          {"policy", snapshot.policy},
          {"pod_policies", snapshot.pod_policies
                               ? json("each pod's own (spec.topology.policy "
                                      "or annotation " +
                                      std::string(kTopologyPolicyAnnotation) +
                                      "), none by default")
                               : json(nullptr)},
          {"scope", snapshot.scope},
          {"cpu_policy", snapshot.cpu_policy},
          {"memory_policy", snapshot.memory_policy},
          {"numa_nodes", nodes},
          {"cpus",
           {{"reserved", snapshot.reserved_cpus.ToList()},
            {"shared", snapshot.shared_cpus.ToList()}}},
          {"resources", resources},
          {"pods", pods}};
}

json NodeResourceTopologyJson(const HostSnapshot& snapshot) {
  const Topology& topology = *snapshot.topology;
  // Each resource's counts per node, computed once.
  std::vector<std::pair<std::string, std::map<std::string, NodeCounts>>> counts;
  for (const ResourceSnapshot& resource : snapshot.resources) {
    size_t allocatable = 0;
    counts.emplace_back(resource.name, CountsByNode(resource, &allocatable));
  }
  nrt::NodeTopology object{.node_name = snapshot.node_name,
                           .policy = snapshot.policy,
                           .scope = snapshot.scope,
                           .max_numa_nodes = snapshot.max_numa_nodes};
  for (const NumaNode& node : topology.numa_nodes()) {
    nrt::Zone zone{.id = node.id, .costs = {}, .resources = {}};
    for (const NumaNode& other : topology.numa_nodes()) {
      if (auto d = topology.Distance(node.id, other.id)) {
        zone.costs.emplace_back(other.id, *d);
      }
    }
    const int capacity = node.cpus.Count();
    const int allocatable =
        capacity - node.cpus.Intersection(snapshot.reserved_cpus).Count();
    // Available: allocatable CPUs nobody holds exclusively.
    const CpuSet shared = node.cpus.Intersection(snapshot.shared_cpus);
    const int available =
        shared.Count() - shared.Intersection(snapshot.reserved_cpus).Count();
    zone.resources.push_back({"cpu", static_cast<uint64_t>(capacity),
                              static_cast<uint64_t>(allocatable),
                              static_cast<uint64_t>(available)});
    const manager::MemoryNodeState* state = nullptr;
    if (snapshot.memory) {
      const auto it = snapshot.memory->machine.find(node.id);
      if (it != snapshot.memory->machine.end()) state = &it->second;
    }
    nrt::AppendMemoryResources(node, state, &zone.resources);
    const std::string key = std::to_string(node.id);
    for (const auto& [name, by_node] : counts) {
      const auto it = by_node.find(key);
      if (it == by_node.end()) continue;
      const auto count = [](int n) { return static_cast<uint64_t>(n); };
      zone.resources.push_back({name, count(it->second.capacity),
                                count(it->second.allocatable),
                                count(it->second.available)});
    }
    object.zones.push_back(std::move(zone));
  }
  // The pods this view counts, for schedulers' overreserve caches: every
  // admitted pod (method "all"), signed as podfingerprint signs.
  common::PodFingerprint fingerprint(snapshot.pods.size());
  for (const PodResult& pod : snapshot.pods) {
    if (pod.admitted) fingerprint.Add(pod.ns, pod.name);
  }
  object.fingerprint = fingerprint.Sign();
  object.fingerprint_method = common::kPodFingerprintMethodAll;
  return nrt::Render(object);
}

std::vector<std::string> MemoryExplanationLines(
    const manager::MemoryExplanation& explanation,
    const std::function<std::string(const std::string&)>& name_of) {
  using manager::NumaMask;
  std::vector<std::string> out;
  // Every size in one unit, the largest that holds each exactly, so that
  // sizes compare at a glance ("13212Mi free" beside "23552Mi", never
  // beside "23Gi").
  int unit = 6;  // 1024^6: Ei
  const auto fit = [&unit](uint64_t bytes) {
    int k = 0;
    while (k < unit && bytes != 0 && bytes % 1024 == 0) {
      bytes /= 1024;
      ++k;
    }
    if (bytes != 0) unit = k;
  };
  for (const auto& [type, size] : explanation.requests) {
    fit(size);
    for (const auto& node : explanation.nodes) {
      if (const auto it = node.memory.find(type); it != node.memory.end()) {
        fit(it->second.free);
        fit(it->second.allocatable);
      }
    }
  }
  const auto quantity = [unit](uint64_t bytes) {
    static constexpr const char* kSuffixes[] = {"",   "Ki", "Mi", "Gi",
                                                "Ti", "Pi", "Ei"};
    for (int k = 0; k < unit; ++k) bytes /= 1024;
    return std::to_string(bytes) + kSuffixes[unit];
  };
  std::string asked;
  for (const auto& [type, size] : explanation.requests) {
    asked += (asked.empty() ? "" : ", ") + type + " " + quantity(size);
  }
  out.push_back((explanation.container ? "container " + *explanation.container
                                       : std::string("the pod")) +
                " asks for " + (asked.empty() ? "no memory" : asked));
  // Who holds memory on each node, in words, sorted.
  std::map<int, std::string> holders;
  for (const auto& node : explanation.nodes) {
    std::set<std::string> names;
    for (const auto& holder : node.holders) {
      names.insert("pod " + name_of(holder.pod_uid) + " (" + holder.container +
                   ")");
    }
    std::string text;
    for (const std::string& name : names) {
      text += (text.empty() ? "" : ", ") + name;
    }
    holders[node.id] = std::move(text);
  }
  const auto group = [](const std::vector<int>& cells) {
    return NumaMask::FromIds(cells).value_or(NumaMask()).ToString();
  };
  for (const auto& node : explanation.nodes) {
    std::string line = "node " + std::to_string(node.id) + ":";
    for (const auto& [type, size] : explanation.requests) {
      const auto table = node.memory.find(type);
      line += " " + type + " " +
              (table == node.memory.end()
                   ? std::string("none")
                   : quantity(table->second.free) + " free of " +
                         quantity(table->second.allocatable));
      line += ";";
    }
    if (node.assignments == 0) {
      line += " nothing pinned";
    } else if (node.cells.size() <= 1) {
      line += " a single-node allocation of " + holders[node.id];
    } else {
      line += " in the cross-node group " + group(node.cells) + " of " +
              holders[node.id];
    }
    out.push_back(line);
  }
  std::set<std::string> barred;
  for (const auto& bar : explanation.barred) {
    const std::string node = "node " + std::to_string(bar.node);
    barred.insert(bar.group.empty()
                      ? node + " holds a single-node allocation of " +
                            holders[bar.node] + "; a cross-node allocation " +
                            bar.set.ToString() + " may not include it"
                      : node + " is in the cross-node group " +
                            group(bar.group) + " of " + holders[bar.node] +
                            "; an allocation " + bar.set.ToString() +
                            " may not include it");
  }
  out.insert(out.end(), barred.begin(), barred.end());
  if (explanation.large) {
    for (const auto& node : explanation.nodes) {
      if (node.assignments == 0 || out.size() >= 32) continue;
      out.push_back("node " + std::to_string(node.id) +
                    " takes no cross-node allocation but its own group's: "
                    "it holds memory of " +
                    holders[node.id]);
    }
  }
  if (explanation.fits_nowhere) {
    out.push_back("no set of NUMA nodes can hold it now");
  } else if (explanation.large) {
    std::string fits;
    for (NumaMask extra : explanation.fit_extras) {
      fits += (fits.empty() ? "" : ", ") + extra.ToString();
    }
    if (explanation.fit_universe) {
      fits += (fits.empty() ? "" : ", ") +
              std::string("any set of the nodes ") +
              explanation.fit_universe->ToString() +
              " that holds it (the fewest: " +
              std::to_string(explanation.narrowest) + ")";
    }
    out.push_back("it fits on " + fits + "; preferred: " +
                  std::to_string(explanation.preferred_size) + " node(s)");
  } else {
    std::string fits;
    for (const auto& fit_set : explanation.fits) {
      fits += (fits.empty() ? "" : ", ") + fit_set.set.ToString() +
              (fit_set.preferred ? " (preferred)" : "");
    }
    out.push_back("it fits on " + fits);
  }
  return out;
}

json MergeTraceJson(const manager::MergeTrace& trace,
                    const std::vector<std::string>& memory) {
  json providers = json::array();
  for (const manager::ProviderHints& hints : trace.provider_hints) {
    json provider = json::object();
    for (const auto& [resource, list] : hints) {
      provider[resource] = HintListJson(list);
    }
    providers.push_back(provider);
  }
  json out = {{"container",
               trace.container.empty() ? json(nullptr) : json(trace.container)},
              {"providers", providers},
              {"merged",
               {{"mask", trace.result.hint.affinity
                             ? json(trace.result.hint.affinity->Ids())
                             : json(nullptr)},
                {"preferred", trace.result.hint.preferred}}},
              {"admit", trace.result.admit},
              {"reason", trace.explanation.reason},
              {"permutations", trace.explanation.permutations}};
  if (!memory.empty()) out["memory"] = memory;
  return out;
}

json AllocateResponseJson(const std::string& bytes) {
  v1beta1::ContainerAllocateResponse response;
  if (bytes.empty() || !response.ParseFromString(bytes)) return nullptr;
  json envs = json::object();
  for (const auto& [key, value] : response.envs()) envs[key] = value;
  json annotations = json::object();
  for (const auto& [key, value] : response.annotations()) {
    annotations[key] = value;
  }
  json mounts = json::array();
  for (const auto& mount : response.mounts()) {
    mounts.push_back({{"container_path", mount.container_path()},
                      {"host_path", mount.host_path()},
                      {"read_only", mount.read_only()}});
  }
  json devices = json::array();
  for (const auto& device : response.devices()) {
    devices.push_back({{"container_path", device.container_path()},
                       {"host_path", device.host_path()},
                       {"permissions", device.permissions()}});
  }
  json cdi = json::array();
  for (const auto& device : response.cdi_devices())
    cdi.push_back(device.name());
  return {{"envs", envs},
          {"mounts", mounts},
          {"devices", devices},
          {"annotations", annotations},
          {"cdi_devices", cdi}};
}

}  // namespace topology::host
