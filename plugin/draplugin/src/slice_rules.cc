#include "slice_rules.h"

#include <limits>
#include <optional>
#include <set>
#include <string_view>
#include <vector>

#include "topology/common/quantity.h"

namespace topology::draplugin {
namespace {

using k8s::Quantity;
using nlohmann::json;

Status Fail(const std::string& path, const std::string& what) {
  return InvalidArgumentError(path + ": " + what);
}

const json* Member(const json& object, std::string_view key) {
  if (!object.is_object()) return nullptr;
  const auto it = object.find(key);
  return it == object.end() || it->is_null() ? nullptr : &*it;
}

// A quantity field of the policy: nullopt and `*status` set when it is not
// one.
std::optional<Quantity> QuantityAt(const json& value, const std::string& path,
                                   Status* status) {
  if (value.is_string()) {
    if (auto q = Quantity::Parse(value.get<std::string>())) return q;
  }
  *status = Fail(path,
                 "Invalid value: quantities must match the regular "
                 "expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'");
  return std::nullopt;
}

Status ValidValues(const Quantity& capacity, const Quantity& default_value,
                   const json& values, const std::string& path) {
  if (!values.is_array()) return Fail(path, "not a list");
  if (values.size() > kCapacityRequestPolicyMaxOptions) {
    return Fail(path, "Too many: " + std::to_string(values.size()) +
                          ": must have at most 10 items");
  }
  std::vector<Quantity> options;
  for (size_t i = 0; i < values.size(); ++i) {
    Status status = OkStatus();
    const std::string at = path + "[" + std::to_string(i) + "]";
    auto q = QuantityAt(values[i], at, &status);
    if (!q) return status;
    if (!options.empty() && options.back() > *q) {
      return Fail(at,
                  "Invalid value: values must be sorted in ascending order");
    }
    if (!options.empty() && options.back() == *q) {
      return Fail(at, "Duplicate value: " + q->ToString());
    }
    if (*q > capacity) {
      return Fail(at, "Invalid value: option is larger than capacity value");
    }
    options.push_back(*q);
  }
  for (const Quantity& option : options) {
    if (option == default_value) return OkStatus();
  }
  return Fail(path,
              "Invalid value: default value is not valid according to "
              "the requestPolicy");
}

Status ValidRange(const Quantity& capacity, const Quantity& default_value,
                  const json& range, const std::string& path) {
  if (!range.is_object()) return Fail(path, "not an object");
  const json* min_json = Member(range, "min");
  if (min_json == nullptr) {
    return Fail(path + ".min",
                "Required value: required when validRange is "
                "defined");
  }
  Status status = OkStatus();
  const auto min = QuantityAt(*min_json, path + ".min", &status);
  if (!min) return status;
  std::optional<Quantity> max;
  if (const json* max_json = Member(range, "max")) {
    max = QuantityAt(*max_json, path + ".max", &status);
    if (!max) return status;
  }
  std::optional<Quantity> step;
  if (const json* step_json = Member(range, "step")) {
    step = QuantityAt(*step_json, path + ".step", &status);
    if (!step) return status;
  }
  if (*min > capacity) {
    return Fail(path + ".min",
                "Invalid value: min is larger than capacity "
                "value");
  }
  if (default_value < *min) {
    return Fail(path + ".default", "Invalid value: default is less than min");
  }
  if (max) {
    if (*min > *max) {
      return Fail(path + ".max", "Invalid value: min is larger than max");
    }
    if (*max > capacity) {
      return Fail(path + ".max",
                  "Invalid value: max is larger than capacity "
                  "value");
    }
    if (default_value > *max) {
      return Fail(path + ".default", "Invalid value: default is more than max");
    }
  }
  if (!step) return OkStatus();
  if (step->negative() || step->zero()) {
    return Fail(path + ".step", "Invalid value: must be greater than zero");
  }
  if (auto one = min->Plus(*step); !one || *one > capacity) {
    return Fail(path + ".step",
                "Invalid value: one step is larger than "
                "capacity value");
  }
  // The server's integer path: each amount read as a whole number
  // (Quantity.Value(), rounding up), in [0, MaxInt64].
  const Quantity one = Quantity::FromInt(1);
  const Quantity max_int64 =
      Quantity::FromInt(std::numeric_limits<long long>::max());
  for (const auto& [name, q] :
       {std::pair{"default", std::optional(default_value)},
        std::pair{"min", min}, std::pair{"max", max},
        std::pair{"step", step}}) {
    if (!q) continue;
    if (q->negative()) {
      return Fail(path + "." + name,
                  "Invalid value: must be greater than or equal to 0");
    }
    if (*q > max_int64) {
      return Fail(path + "." + name,
                  "Invalid value: must not be larger than 9223372036854775807");
    }
  }
  const auto whole = [&](const Quantity& q) {
    return q.RoundUpToStep(Quantity(), one);
  };
  if (!whole(default_value).OnStep(whole(*min), whole(*step))) {
    return Fail(path + ".step",
                "Invalid value: value is not a multiple of a "
                "given step from min");
  }
  if (max && !whole(*max).OnStep(whole(*min), whole(*step))) {
    return Fail(path + ".step",
                "Invalid value: max is not a multiple of a "
                "given step from min");
  }
  return OkStatus();
}

}  // namespace

Status ValidateRequestPolicy(const std::string& capacity_text,
                             const json& policy, const std::string& path) {
  if (!policy.is_object()) return Fail(path, "not an object");
  const auto capacity = Quantity::Parse(capacity_text);
  if (!capacity) return OkStatus();  // the value's own check names it
  const json* values = Member(policy, "validValues");
  if (values != nullptr && values->is_array() && values->empty()) {
    values = nullptr;
  }
  const json* range = Member(policy, "validRange");
  if (values != nullptr && range != nullptr) {
    return Fail(path,
                "Forbidden: exactly one policy can be specified, cannot "
                "specify \"validValues\" and \"validRange\" at the same "
                "time");
  }
  if (values == nullptr && range == nullptr) {
    if (const json* default_json = Member(policy, "default")) {
      Status status = OkStatus();
      if (!QuantityAt(*default_json, path + ".default", &status)) {
        return status;
      }
    }
    return OkStatus();
  }
  const json* default_json = Member(policy, "default");
  if (default_json == nullptr) {
    return Fail(path + ".default",
                std::string("Required value: required when ") +
                    (values != nullptr ? "validValues" : "validRange") +
                    " is defined");
  }
  Status status = OkStatus();
  const auto default_value =
      QuantityAt(*default_json, path + ".default", &status);
  if (!default_value) return status;
  return values != nullptr ? ValidValues(*capacity, *default_value, *values,
                                         path + ".validValues")
                           : ValidRange(*capacity, *default_value, *range,
                                        path + ".validRange");
}

Status ValidatePartitionType(const json& spec) {
  const json* type = Member(spec, "partitionTypeAttribute");
  if (type == nullptr) return OkStatus();
  const std::string path = "spec.partitionTypeAttribute";
  if (!type->is_string()) return Fail(path, "not a string");
  const std::string name = type->get<std::string>();
  const json* devices = Member(spec, "devices");
  bool consumes = false;
  if (devices != nullptr && devices->is_array()) {
    for (const json& device : *devices) {
      const json* uses = Member(device, "consumesCounters");
      consumes =
          consumes || (uses != nullptr && uses->is_array() && !uses->empty());
    }
  }
  if (!consumes) {
    return Fail(path, "Invalid value: \"" + name.substr(0, 80) +
                          "\": may only be set on a slice which declares "
                          "devices that consume counters");
  }
  // A name must be fully qualified ("<domain>/<name>"); the server reports
  // a malformed one on its own and checks no device against it.
  const size_t slash = name.find('/');
  if (slash == std::string::npos || slash == 0 || slash + 1 == name.size()) {
    return Fail(path, "Invalid value: \"" + name.substr(0, 80) +
                          "\": must be a fully qualified name "
                          "(<domain>/<name>)");
  }
  const json* driver = Member(spec, "driver");
  std::string bare;
  if (driver != nullptr && driver->is_string() &&
      name.starts_with(driver->get<std::string>() + "/")) {
    bare = name.substr(driver->get<std::string>().size() + 1);
  }
  for (size_t i = 0; i < devices->size(); ++i) {
    const json& device = (*devices)[i];
    const json* uses = Member(device, "consumesCounters");
    if (uses == nullptr || !uses->is_array() || uses->empty()) continue;
    const std::string at =
        "spec.devices[" + std::to_string(i) + "].attributes[" + name + "]";
    const json* attributes = Member(device, "attributes");
    const json* attribute =
        attributes != nullptr ? Member(*attributes, name) : nullptr;
    if (attribute == nullptr && !bare.empty() && attributes != nullptr) {
      attribute = Member(*attributes, bare);
    }
    if (attribute == nullptr) {
      return Fail(at,
                  "Required value: device consumes counters and "
                  "`partitionTypeAttribute` names this attribute, so it "
                  "must be set");
    }
    if (Member(*attribute, "string") == nullptr) {
      return Fail(at,
                  "Invalid value: must be a string value because "
                  "`partitionTypeAttribute` names this attribute");
    }
  }
  return OkStatus();
}

}  // namespace topology::draplugin
