#include "dropped_fields.h"

#include <functional>
#include <string_view>

namespace topology::draplugin {
namespace {

using nlohmann::json;

// `key` of `object` is there, not null, and not an empty list or map (the
// Go types' nil, empty and absent all read as "not in use").
bool Used(const json& object, std::string_view key) {
  if (!object.is_object()) return false;
  const auto it = object.find(key);
  if (it == object.end() || it->is_null()) return false;
  if (it->is_array() || it->is_object()) return !it->empty();
  return true;
}

// `check` holds for a device of `spec`.
bool AnyDevice(const json& spec,
               const std::function<bool(const json&)>& check) {
  if (!spec.is_object()) return false;
  const auto devices = spec.find("devices");
  if (devices == spec.end() || !devices->is_array()) return false;
  for (const json& device : *devices) {
    if (device.is_object() && check(device)) return true;
  }
  return false;
}

// The in-use checks of strategy.go, one a gate.
bool TaintsInUse(const json& spec) {
  return AnyDevice(spec, [](const json& d) { return Used(d, "taints"); });
}

bool PartitionableInUse(const json& spec) {
  if (Used(spec, "sharedCounters") || Used(spec, "perDeviceNodeSelection")) {
    return true;
  }
  return AnyDevice(spec, [](const json& d) {
    return Used(d, "consumesCounters") || Used(d, "nodeName") ||
           Used(d, "nodeSelector") || Used(d, "allNodes");
  });
}

bool BindingConditionsInUse(const json& spec) {
  return AnyDevice(spec, [](const json& d) {
    return Used(d, "bindingConditions") ||
           Used(d, "bindingFailureConditions") || Used(d, "bindsToNode");
  });
}

bool ConsumableCapacityInUse(const json& spec) {
  return AnyDevice(spec, [](const json& d) {
    if (Used(d, "allowMultipleAllocations")) return true;
    const auto capacity = d.find("capacity");
    if (capacity == d.end() || !capacity->is_object()) return false;
    for (const auto& [name, value] : capacity->items()) {
      if (Used(value, "requestPolicy")) return true;
    }
    return false;
  });
}

bool CompatibilityGroupsInUse(const json& spec) {
  return AnyDevice(spec, [](const json& d) {
    const auto consumes = d.find("consumesCounters");
    if (consumes == d.end() || !consumes->is_array()) return false;
    for (const json& consumption : *consumes) {
      if (Used(consumption, "compatibilityGroups")) return true;
    }
    return false;
  });
}

bool NodeAllocatableInUse(const json& spec) {
  return AnyDevice(
      spec, [](const json& d) { return Used(d, "nodeAllocatableResources"); });
}

bool ListAttributesInUse(const json& spec) {
  return AnyDevice(spec, [](const json& d) {
    const auto attributes = d.find("attributes");
    if (attributes == d.end() || !attributes->is_object()) return false;
    for (const auto& [name, value] : attributes->items()) {
      if (value.is_object() &&
          (value.contains("bools") || value.contains("ints") ||
           value.contains("strings") || value.contains("versions"))) {
        return true;
      }
    }
    return false;
  });
}

bool PartitionTypeInUse(const json& spec) {
  return Used(spec, "partitionTypeAttribute");
}

bool SkipNodeOperationsInUse(const json& spec) {
  return Used(spec, "skipNodeOperations");
}

struct Gate {
  const char* gate;
  const char* fields;
  bool (*in_use)(const json&);
};

// strategy.go's dropDisabledFields, in its order.
constexpr Gate kGates[] = {
    {"DRADeviceTaints", "devices[].taints", TaintsInUse},
    {"DRAPartitionableDevices",
     "sharedCounters, perDeviceNodeSelection, devices[].consumesCounters, "
     "devices[].nodeName, nodeSelector, allNodes",
     PartitionableInUse},
    {"DRADeviceBindingConditions (with DRAResourceClaimDeviceStatus)",
     "devices[].bindingConditions, bindingFailureConditions, bindsToNode",
     BindingConditionsInUse},
    {"DRAConsumableCapacity",
     "devices[].allowMultipleAllocations, capacity[].requestPolicy",
     ConsumableCapacityInUse},
    {"DRADeviceCompatibilityGroups",
     "devices[].consumesCounters[].compatibilityGroups",
     CompatibilityGroupsInUse},
    {"DRANodeAllocatableResources", "devices[].nodeAllocatableResources",
     NodeAllocatableInUse},
    {"DRAListTypeAttributes",
     "devices[].attributes[] bools, ints, strings, versions",
     ListAttributesInUse},
    {"DRAPartitionableDevicesType", "partitionTypeAttribute",
     PartitionTypeInUse},
    {"DRAOptionalNodeOperations", "skipNodeOperations",
     SkipNodeOperationsInUse},
};

}  // namespace

std::vector<DisabledFeature> DisabledFeatures(const json& sent,
                                              const json& stored) {
  std::vector<DisabledFeature> disabled;
  const bool partitionable_off =
      PartitionableInUse(sent) && !PartitionableInUse(stored);
  for (const Gate& gate : kGates) {
    if (!gate.in_use(sent) || gate.in_use(stored)) continue;
    // Compatibility groups live inside counter consumptions: gone with
    // them, they say nothing of their own gate.
    if (gate.in_use == CompatibilityGroupsInUse && partitionable_off) {
      continue;
    }
    disabled.push_back({gate.gate, gate.fields});
  }
  return disabled;
}

}  // namespace topology::draplugin
