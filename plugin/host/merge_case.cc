#include "merge_case.h"

#include <set>

#include "topology/manager/policy_options.h"
#include "topology/manager/topology_manager.h"

namespace topology::host {
namespace {

using manager::HintList;
using manager::NumaMask;
using manager::ProviderHints;
using manager::TopologyHint;
using nlohmann::json;

Status FieldError(const std::string& field, const std::string& message) {
  return InvalidArgumentError(field + ": " + message);
}

StatusOr<int> NodeId(const json& value, const std::string& field) {
  if (!value.is_number_integer())
    return FieldError(field, "want an integer NUMA node id");
  const auto id = value.get<int64_t>();
  if (id < 0 || id >= NumaMask::kMaxNodes) {
    return FieldError(
        field, "NUMA node id " + std::to_string(id) + " out of range 0-63");
  }
  return static_cast<int>(id);
}

StatusOr<HintList> ParseHintList(const json& value, const std::string& field,
                                 const std::set<int>& nodes) {
  if (value.is_null()) return HintList(std::nullopt);
  if (!value.is_array())
    return FieldError(field, "want a list of hints or null");
  std::vector<TopologyHint> hints;
  for (size_t i = 0; i < value.size(); ++i) {
    const std::string at = field + "[" + std::to_string(i) + "]";
    const json& h = value[i];
    if (!h.is_object())
      return FieldError(at, R"(want {"mask":...,"preferred":...})");
    for (const auto& [key, unused] : h.items()) {
      if (key != "mask" && key != "preferred") {
        return FieldError(at + "." + key, "unknown key");
      }
    }
    TopologyHint hint;
    if (!h.contains("preferred") || !h["preferred"].is_boolean()) {
      return FieldError(at + ".preferred", "want true or false");
    }
    hint.preferred = h["preferred"].get<bool>();
    if (!h.contains("mask"))
      return FieldError(at + ".mask", "missing (use null for nil)");
    const json& mask = h["mask"];
    if (!mask.is_null()) {
      if (!mask.is_array())
        return FieldError(at + ".mask", "want a list of NUMA node ids or null");
      std::vector<int> ids;
      for (size_t k = 0; k < mask.size(); ++k) {
        auto id = NodeId(mask[k], at + ".mask[" + std::to_string(k) + "]");
        if (!id.ok()) return id.status();
        if (!nodes.count(*id)) {
          return FieldError(
              at + ".mask[" + std::to_string(k) + "]",
              "NUMA node " + std::to_string(*id) + " is not in numa_nodes");
        }
        ids.push_back(*id);
      }
      hint.affinity = *NumaMask::FromIds(ids);
    }
    hints.push_back(hint);
  }
  return HintList(std::move(hints));
}

}  // namespace

StatusOr<MergeCase> ParseMergeCase(const json& doc) {
  if (!doc.is_object()) return InvalidArgumentError("case: want a JSON object");
  for (const auto& [key, unused] : doc.items()) {
    if (key != "policy" && key != "options" && key != "numa_nodes" &&
        key != "distances" && key != "providers" && key != "pod_policy") {
      return FieldError(key, "unknown key");
    }
  }
  MergeCase c;
  if (!doc.contains("policy") || !doc["policy"].is_string()) {
    return FieldError("policy", "want a policy name");
  }
  c.policy = doc["policy"].get<std::string>();
  if (doc.contains("pod_policy")) {
    if (!doc["pod_policy"].is_string() ||
        !manager::IsPodTopologyPolicy(doc["pod_policy"].get<std::string>())) {
      return FieldError("pod_policy",
                        "want none, best-effort, restricted, single-numa-node "
                        "or pod-level-single-numa-node");
    }
    c.pod_policy = doc["pod_policy"].get<std::string>();
  }

  if (doc.contains("options") && !doc["options"].is_null()) {
    if (!doc["options"].is_object())
      return FieldError("options", "want an object");
    for (const auto& [key, value] : doc["options"].items()) {
      if (value.is_string()) {
        c.options[key] = value.get<std::string>();
      } else if (value.is_boolean()) {
        c.options[key] = value.get<bool>() ? "true" : "false";
      } else if (value.is_number_integer()) {
        c.options[key] = std::to_string(value.get<int64_t>());
      } else {
        return FieldError("options." + key,
                          "want a string, boolean or integer");
      }
    }
  }

  if (!doc.contains("numa_nodes") || !doc["numa_nodes"].is_array() ||
      doc["numa_nodes"].empty()) {
    return FieldError("numa_nodes", "want a non-empty list of NUMA node ids");
  }
  std::set<int> nodes;
  for (size_t i = 0; i < doc["numa_nodes"].size(); ++i) {
    const std::string at = "numa_nodes[" + std::to_string(i) + "]";
    auto id = NodeId(doc["numa_nodes"][i], at);
    if (!id.ok()) return id.status();
    if (!nodes.insert(*id).second)
      return FieldError(at, "duplicate NUMA node id");
    c.numa_nodes.push_back(*id);
  }

  if (doc.contains("distances") && !doc["distances"].is_null()) {
    if (!doc["distances"].is_object()) {
      return FieldError("distances",
                        "want {\"<node>\":[row indexed by node id]} or null");
    }
    c.distances.emplace();
    for (const auto& [key, row] : doc["distances"].items()) {
      const std::string at = "distances." + key;
      int id = -1;
      try {
        size_t used = 0;
        id = std::stoi(key, &used);
        if (used != key.size()) id = -1;
      } catch (const std::exception&) {
        id = -1;
      }
      if (!nodes.count(id)) return FieldError(at, "not a node of numa_nodes");
      if (!row.is_array()) return FieldError(at, "want a list of distances");
      std::vector<int> values;
      for (size_t k = 0; k < row.size(); ++k) {
        if (!row[k].is_number_integer() || row[k].get<int64_t>() < 0 ||
            row[k].get<int64_t>() > 100000) {
          return FieldError(at + "[" + std::to_string(k) + "]",
                            "want a distance 0..100000");
        }
        values.push_back(static_cast<int>(row[k].get<int64_t>()));
      }
      (*c.distances)[id] = std::move(values);
    }
    for (int from : c.numa_nodes) {
      const auto row = c.distances->find(from);
      if (row == c.distances->end()) {
        return FieldError("distances." + std::to_string(from), "missing row");
      }
      for (int to : c.numa_nodes) {
        if (to >= static_cast<int>(row->second.size())) {
          return FieldError("distances." + std::to_string(from),
                            "row has no entry for node " + std::to_string(to) +
                                " (rows are indexed by node id)");
        }
      }
    }
  }

  if (!doc.contains("providers") || !doc["providers"].is_array()) {
    return FieldError("providers", "want a list of providers");
  }
  for (size_t p = 0; p < doc["providers"].size(); ++p) {
    const json& provider = doc["providers"][p];
    const std::string at = "providers[" + std::to_string(p) + "]";
    ProviderHints hints;
    if (!provider.is_null()) {
      if (!provider.is_object())
        return FieldError(at, "want {\"resource\":hints} or null");
      for (const auto& [resource, list] : provider.items()) {
        auto parsed = ParseHintList(list, at + "." + resource, nodes);
        if (!parsed.ok()) return parsed.status();
        hints[resource] = *std::move(parsed);
      }
    }
    c.providers.push_back(std::move(hints));
  }
  return c;
}

StatusOr<json> RunMergeCase(const MergeCase& merge_case,
                            manager::MergeEngine engine, bool explain) {
  auto options = manager::PolicyOptions::Parse(merge_case.options);
  if (!options.ok()) return FieldError("options", options.status().message());
  if (options->prefer_closest_numa && !merge_case.distances) {
    return FieldError("distances",
                      "required by option \"prefer-closest-numa-nodes\"");
  }
  auto numa =
      manager::NumaInfo::Create(merge_case.numa_nodes, merge_case.distances);
  if (!numa.ok()) return FieldError("numa_nodes", numa.status().message());
  // Under "dynamic" the pod's policy merges (one merge: the scope does not
  // matter here, so pod-level-single-numa-node merges as single-numa-node);
  // a fixed node policy ignores it.
  std::string applied = merge_case.policy;
  std::string source = "node";
  if (merge_case.policy == manager::kPolicyDynamic) {
    applied = merge_case.pod_policy.empty() ? manager::kPolicyNone
                                            : merge_case.pod_policy;
    if (applied == manager::kPolicyPodLevelSingleNumaNode) {
      applied = manager::kPolicySingleNumaNode;
    }
    source = merge_case.pod_policy.empty() ? "default" : "pod_policy";
  }
  auto policy = manager::NewPolicy(applied, *numa, *options, engine);
  if (!policy.ok()) return FieldError("policy", policy.status().message());
  manager::MergeExplanation explanation;
  const manager::MergeResult result =
      (*policy)->Merge(merge_case.providers, explain ? &explanation : nullptr);
  json out;
  out["mask"] =
      result.hint.affinity ? json(result.hint.affinity->Ids()) : json(nullptr);
  out["preferred"] = result.hint.preferred;
  out["admit"] = result.admit;
  if (merge_case.policy == manager::kPolicyDynamic ||
      !merge_case.pod_policy.empty()) {
    out["applied_policy"] = {{"policy", applied}, {"source", source}};
  }
  if (explain) {
    out["explanation"] = {
        {"policy", std::string((*policy)->Name())},
        {"engine",
         engine == manager::MergeEngine::kFast ? "fast" : "reference"},
        {"hint_lists", explanation.hint_lists},
        {"best_non_preferred_count", explanation.best_non_preferred_count},
        {"permutations", explanation.permutations},
        {"candidates_examined", explanation.candidates_examined},
        {"reason", explanation.reason}};
  }
  return out;
}

}  // namespace topology::host
