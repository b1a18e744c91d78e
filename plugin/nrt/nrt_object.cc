#include "nrt_object.h"

#include <algorithm>

#include "topology/common/pod_fingerprint.h"

namespace topology::nrt {

using nlohmann::json;

std::string TopologyPolicyName(const std::string& policy,
                               const std::string& scope) {
  const std::string level = scope == "pod" ? "PodLevel" : "ContainerLevel";
  if (policy == "single-numa-node") return "SingleNUMANode" + level;
  if (policy == "restricted") return "Restricted" + level;
  if (policy == "best-effort") return "BestEffort" + level;
  return "None";
}

void AppendMemoryResources(const NumaNode& node,
                           const manager::MemoryNodeState* state,
                           std::vector<ZoneResource>* out) {
  const auto add = [&](const std::string& name, uint64_t capacity) {
    ZoneResource r{name, capacity, capacity, capacity};
    if (state != nullptr) {
      const auto table = state->memory.find(name);
      if (table != state->memory.end()) {
        r.capacity = table->second.total;
        r.allocatable = table->second.allocatable;
        r.available = std::min(table->second.free, table->second.allocatable);
      }
    }
    out->push_back(std::move(r));
  };
  if (node.memory_bytes != 0) add(manager::kMemoryResource, node.memory_bytes);
  for (const HugePages& pages : node.hugepages) {
    add(HugePagesResourceName(pages.page_size_bytes),
        pages.total_pages * pages.page_size_bytes);
  }
}

json Render(const NodeTopology& topology) {
  json zones = json::array();
  for (const Zone& zone : topology.zones) {
    json costs = json::array();
    for (const auto& [other, distance] : zone.costs) {
      costs.push_back(
          {{"name", "node-" + std::to_string(other)}, {"value", distance}});
    }
    json resources = json::array();
    for (const ZoneResource& r : zone.resources) {
      resources.push_back({{"name", r.name},
                           {"capacity", std::to_string(r.capacity)},
                           {"allocatable", std::to_string(r.allocatable)},
                           {"available", std::to_string(r.available)}});
    }
    zones.push_back({{"name", "node-" + std::to_string(zone.id)},
                     {"type", "Node"},
                     {"costs", std::move(costs)},
                     {"resources", std::move(resources)}});
  }
  json attributes = {
      {{"name", "topologyManagerPolicy"}, {"value", topology.policy}},
      {{"name", "topologyManagerScope"}, {"value", topology.scope}}};
  if (topology.max_numa_nodes > 0) {
    attributes.push_back({{"name", kMaxNumaNodesAttribute},
                          {"value", std::to_string(topology.max_numa_nodes)}});
  }
  if (!topology.fingerprint.empty()) {
    attributes.push_back({{"name", common::kPodFingerprintAttribute},
                          {"value", topology.fingerprint}});
    attributes.push_back({{"name", common::kPodFingerprintMethodAttribute},
                          {"value", topology.fingerprint_method}});
  }
  json metadata = {{"name", topology.node_name}};
  if (!topology.node_uid.empty()) {
    metadata["ownerReferences"] = {{{"apiVersion", "v1"},
                                    {"kind", "Node"},
                                    {"name", topology.node_name},
                                    {"uid", topology.node_uid}}};
  }
  return {{"apiVersion", kApiVersion},
          {"kind", kKind},
          {"metadata", std::move(metadata)},
          {"topologyPolicies",
           {TopologyPolicyName(topology.policy, topology.scope)}},
          {"attributes", std::move(attributes)},
          {"zones", std::move(zones)}};
}

}  // namespace topology::nrt
