#include "topology/draplugin/slice_validation.h"

#include <set>
#include <string>

#include <nlohmann/json.hpp>

#include "topology/common/k8s_names.h"

#include "slice_rules.h"
#include "slice_validation_json.h"

namespace topology::draplugin {
namespace {

using nlohmann::json;

// The Kubernetes quantity grammar (k8s.io/apimachinery resource.Quantity):
// a signed decimal, then a binary or decimal SI suffix or an exponent.
bool IsQuantity(std::string_view text) {
  size_t i = 0;
  if (i < text.size() && (text[i] == '+' || text[i] == '-')) ++i;
  size_t digits = 0;
  bool dot = false;
  while (i < text.size() && (k8s::IsDigit(text[i]) || text[i] == '.')) {
    if (text[i] == '.') {
      if (dot) return false;
      dot = true;
    } else {
      ++digits;
    }
    ++i;
  }
  if (digits == 0) return false;
  const std::string_view suffix = text.substr(i);
  static const std::set<std::string_view> kSuffixes = {
      "",  "n", "u",  "m",  "k",  "M",  "G",  "T",
      "P", "E", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"};
  if (kSuffixes.contains(suffix)) return true;
  if (suffix.front() != 'e' && suffix.front() != 'E') return false;
  std::string_view exponent = suffix.substr(1);
  if (!exponent.empty() && (exponent[0] == '+' || exponent[0] == '-')) {
    exponent.remove_prefix(1);
  }
  if (exponent.empty()) return false;
  for (char c : exponent) {
    if (!k8s::IsDigit(c)) return false;
  }
  return true;
}

std::string Shown(std::string_view text) {
  std::string out(text.substr(0, 80));
  if (text.size() > 80) out += "...";
  return "\"" + out + "\"";
}

class Checker {
 public:
  Status Slice(const json& slice) {
    if (!slice.is_object()) return Fail("", "not a JSON object");
    const json* spec = Member(slice, "spec");
    if (spec == nullptr || !spec->is_object()) {
      return Fail("spec", "Required value");
    }
    if (Status s = Driver(*spec); !s.ok()) return s;
    if (Status s = Pool(*spec); !s.ok()) return s;
    if (Status s = Nodes(*spec); !s.ok()) return s;
    const json* devices = Member(*spec, "devices");
    const json* counters = Member(*spec, "sharedCounters");
    if (devices != nullptr && !devices->is_null() && counters != nullptr &&
        !counters->is_null()) {
      return Fail("spec",
                  "Invalid value: \"\": only one of `sharedCounters` or "
                  "`devices` is allowed");
    }
    if (Status s = CounterSets(*spec); !s.ok()) return s;
    if (Status s = Devices(*spec); !s.ok()) return s;
    return ValidatePartitionType(*spec);
  }

  Status Device(const json& device, const std::string& path,
                std::set<std::string>* names) {
    if (!device.is_object()) return Fail(path, "not an object");
    const json* name = Member(device, "name");
    if (name == nullptr || !name->is_string() ||
        !k8s::IsDns1123Label(name->get<std::string>())) {
      return Fail(path + ".name",
                  "Invalid value: " +
                      (name != nullptr && name->is_string()
                           ? Shown(name->get<std::string>())
                           : std::string("(none)")) +
                      ": a lowercase RFC 1123 label must consist of lower "
                      "case alphanumeric characters or '-', start and end "
                      "with one, at most 63 characters");
    }
    if (!names->insert(name->get<std::string>()).second) {
      return Fail(path + ".name",
                  "Duplicate value: " + Shown(name->get<std::string>()));
    }
    const json* attributes = Member(device, "attributes");
    const json* capacity = Member(device, "capacity");
    if (attributes != nullptr && !attributes->is_object()) {
      return Fail(path + ".attributes", "not an object");
    }
    if (capacity != nullptr && !capacity->is_object()) {
      return Fail(path + ".capacity", "not an object");
    }
    const size_t count = (attributes ? attributes->size() : 0) +
                         (capacity ? capacity->size() : 0);
    if (count > kMaxAttributesAndCapacitiesPerDevice) {
      return Fail(path, "Invalid value: " + std::to_string(count) +
                            ": the total number of attributes and "
                            "capacities must not exceed 32");
    }
    size_t values = 0;
    if (attributes != nullptr) {
      for (const auto& [key, value] : attributes->items()) {
        const std::string at = path + ".attributes[" + key + "]";
        if (Status s = QualifiedName(key, path + ".attributes"); !s.ok()) {
          return s;
        }
        if (Status s = Attribute(value, at, &values); !s.ok()) return s;
      }
    }
    if (values > kMaxAttributeValuesPerDevice) {
      return Fail(path, "Invalid value: " + std::to_string(values) +
                            ": the total number of attribute values must "
                            "not exceed 48");
    }
    if (capacity != nullptr) {
      const json* multiple = Member(device, "allowMultipleAllocations");
      const bool shared = multiple != nullptr && multiple->is_boolean() &&
                          multiple->get<bool>();
      for (const auto& [key, value] : capacity->items()) {
        const std::string at = path + ".capacity[" + key + "]";
        if (Status s = QualifiedName(key, path + ".capacity"); !s.ok()) {
          return s;
        }
        const json* quantity =
            value.is_object() ? Member(value, "value") : nullptr;
        if (quantity == nullptr || !quantity->is_string() ||
            !IsQuantity(quantity->get<std::string>())) {
          return Fail(
              at + ".value",
              "Invalid value: quantities must match the regular "
              "expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'");
        }
        const json* policy = Member(value, "requestPolicy");
        if (policy == nullptr || policy->is_null()) continue;
        if (!shared) {
          return Fail(at + ".requestPolicy",
                      "Forbidden: allowMultipleAllocations must be true");
        }
        if (Status s = ValidateRequestPolicy(quantity->get<std::string>(),
                                             *policy, at + ".requestPolicy");
            !s.ok()) {
          return s;
        }
      }
    }
    if (const json* uses = Member(device, "consumesCounters");
        uses != nullptr && !uses->is_null()) {
      if (Status s =
              NamedCounterLists(*uses, path + ".consumesCounters", "counterSet",
                                kMaxCounterConsumptionsPerDevice,
                                kMaxCountersPerCounterConsumption);
          !s.ok()) {
        return s;
      }
    }
    if (const json* taints = Member(device, "taints"); taints != nullptr) {
      if (!taints->is_array()) return Fail(path + ".taints", "not a list");
      if (taints->size() > kDeviceTaintsMaxLength) {
        return Fail(path + ".taints",
                    "Too many: " + std::to_string(taints->size()) +
                        ": must have at most 16 items");
      }
      for (size_t i = 0; i < taints->size(); ++i) {
        if (Status s = Taint((*taints)[i],
                             path + ".taints[" + std::to_string(i) + "]");
            !s.ok()) {
          return s;
        }
      }
    }
    return OkStatus();
  }

  static bool Advanced(const json& device) {
    if (!device.is_object()) return false;
    const json* taints = Member(device, "taints");
    if (taints != nullptr && taints->is_array() && !taints->empty()) {
      return true;
    }
    const json* counters = Member(device, "consumesCounters");
    if (counters != nullptr && counters->is_array() && !counters->empty()) {
      return true;
    }
    const json* attributes = Member(device, "attributes");
    if (attributes == nullptr || !attributes->is_object()) return false;
    for (const auto& [key, value] : attributes->items()) {
      if (!value.is_object()) continue;
      for (const char* list : {"ints", "bools", "strings", "versions"}) {
        if (value.contains(list)) return true;
      }
    }
    return false;
  }

 private:
  static const json* Member(const json& object, std::string_view key) {
    const auto it = object.find(key);
    return it == object.end() ? nullptr : &*it;
  }
  static Status Fail(const std::string& path, const std::string& what) {
    return InvalidArgumentError((path.empty() ? "" : path + ": ") + what);
  }

  Status Driver(const json& spec) {
    const json* driver = Member(spec, "driver");
    if (driver == nullptr || !driver->is_string()) {
      return Fail("spec.driver", "Required value");
    }
    if (Status s = ValidateDriverName(driver->get<std::string>()); !s.ok()) {
      return Fail("spec.driver", s.message());
    }
    return OkStatus();
  }

  Status Pool(const json& spec) {
    const json* pool = Member(spec, "pool");
    if (pool == nullptr || !pool->is_object()) {
      return Fail("spec.pool", "Required value");
    }
    const json* name = Member(*pool, "name");
    if (name == nullptr || !name->is_string() ||
        name->get<std::string>().empty()) {
      return Fail("spec.pool.name", "Required value");
    }
    const std::string text = name->get<std::string>();
    if (text.size() > kPoolNameMaxLength) {
      return Fail("spec.pool.name", "Too long: may not be more than 253 bytes");
    }
    size_t start = 0;
    while (true) {
      const size_t slash = text.find('/', start);
      if (!k8s::IsDns1123Subdomain(text.substr(start, slash - start))) {
        return Fail("spec.pool.name",
                    "Invalid value: " + Shown(text) +
                        ": each part separated by '/' must be a lowercase "
                        "RFC 1123 subdomain");
      }
      if (slash == std::string::npos) break;
      start = slash + 1;
    }
    const json* generation = Member(*pool, "generation");
    if (generation != nullptr &&
        (!generation->is_number_integer() || generation->get<int64_t>() < 0)) {
      return Fail("spec.pool.generation",
                  "Invalid value: must be greater than or equal to zero");
    }
    const json* count = Member(*pool, "resourceSliceCount");
    if (count == nullptr || !count->is_number_integer() ||
        count->get<int64_t>() <= 0) {
      return Fail("spec.pool.resourceSliceCount",
                  "Invalid value: must be greater than zero");
    }
    return OkStatus();
  }

  Status Nodes(const json& spec) {
    int set = 0;
    if (const json* node = Member(spec, "nodeName");
        node != nullptr && !node->is_null()) {
      if (!node->is_string() || node->get<std::string>().empty()) {
        return Fail("spec.nodeName",
                    "Invalid value: must be either unset or set to a "
                    "non-empty string");
      }
      if (!k8s::IsDns1123Subdomain(node->get<std::string>())) {
        return Fail("spec.nodeName",
                    "Invalid value: " + Shown(node->get<std::string>()) +
                        ": a lowercase RFC 1123 subdomain");
      }
      ++set;
    }
    if (const json* selector = Member(spec, "nodeSelector");
        selector != nullptr && !selector->is_null()) {
      ++set;
    }
    for (const char* flag : {"allNodes", "perDeviceNodeSelection"}) {
      if (const json* value = Member(spec, flag);
          value != nullptr && !value->is_null()) {
        if (!value->is_boolean() || !value->get<bool>()) {
          return Fail(std::string("spec.") + flag,
                      "Invalid value: must be either unset or set to true");
        }
        ++set;
      }
    }
    if (set == 0) {
      return Fail("spec",
                  "Required value: exactly one of `nodeName`, "
                  "`nodeSelector`, `allNodes`, `perDeviceNodeSelection` is "
                  "required");
    }
    if (set > 1) {
      return Fail("spec",
                  "Invalid value: exactly one of `nodeName`, "
                  "`nodeSelector`, `allNodes`, `perDeviceNodeSelection` is "
                  "required, but multiple fields are set");
    }
    return OkStatus();
  }

  Status CounterSets(const json& spec) {
    const json* sets = Member(spec, "sharedCounters");
    if (sets == nullptr || sets->is_null()) return OkStatus();
    return NamedCounterLists(*sets, "spec.sharedCounters", "name",
                             kResourceSliceMaxCounterSets,
                             kMaxCountersPerCounterSet);
  }

  // A list of {<key>: <DNS label, unique>, counters: {<DNS label>:
  // {value: <quantity>}}}: the slice's counter sets (key "name") or a
  // device's consumptions of them (key "counterSet").
  static Status NamedCounterLists(const json& list, const std::string& path,
                                  const char* key, size_t max_items,
                                  size_t max_counters) {
    if (!list.is_array()) return Fail(path, "not a list");
    if (list.size() > max_items) {
      return Fail(path, "Too many: " + std::to_string(list.size()) +
                            ": must have at most " + std::to_string(max_items) +
                            " items");
    }
    std::set<std::string> names;
    for (size_t i = 0; i < list.size(); ++i) {
      const std::string at = path + "[" + std::to_string(i) + "]";
      const json& item = list[i];
      if (!item.is_object()) return Fail(at, "not an object");
      const json* name = Member(item, key);
      if (name == nullptr || !name->is_string() ||
          name->get<std::string>().empty()) {
        return Fail(at + "." + key, "Required value");
      }
      if (!k8s::IsDns1123Label(name->get<std::string>())) {
        return Fail(at + "." + key,
                    "Invalid value: " + Shown(name->get<std::string>()) +
                        ": a lowercase RFC 1123 label");
      }
      if (!names.insert(name->get<std::string>()).second) {
        return Fail(at + "." + key,
                    "Duplicate value: " + Shown(name->get<std::string>()));
      }
      const json* counters = Member(item, "counters");
      if (counters == nullptr || !counters->is_object() || counters->empty()) {
        return Fail(at + ".counters", "Required value");
      }
      if (counters->size() > max_counters) {
        return Fail(at + ".counters",
                    "Too many: " + std::to_string(counters->size()) +
                        ": must have at most " + std::to_string(max_counters) +
                        " items");
      }
      for (const auto& [counter, value] : counters->items()) {
        if (!k8s::IsDns1123Label(counter)) {
          return Fail(at + ".counters", "Invalid value: " + Shown(counter) +
                                            ": a lowercase RFC 1123 label");
        }
        const json* quantity =
            value.is_object() ? Member(value, "value") : nullptr;
        if (quantity == nullptr || !quantity->is_string() ||
            !IsQuantity(quantity->get<std::string>())) {
          return Fail(at + ".counters[" + counter + "].value",
                      "Invalid value: not a quantity");
        }
      }
    }
    return OkStatus();
  }

  Status Devices(const json& spec) {
    const json* devices = Member(spec, "devices");
    if (devices == nullptr || devices->is_null()) return OkStatus();
    if (!devices->is_array()) return Fail("spec.devices", "not a list");
    bool advanced = false;
    for (const json& device : *devices) advanced = advanced || Advanced(device);
    const size_t max = advanced ? kResourceSliceMaxDevicesWithAdvancedFeatures
                                : kResourceSliceMaxDevices;
    if (devices->size() > max) {
      return Fail("spec.devices",
                  "Too many: " + std::to_string(devices->size()) +
                      ": must have at most " + std::to_string(max) + " items" +
                      (advanced ? " (a device has taints, counters or a list "
                                  "attribute)"
                                : ""));
    }
    std::set<std::string> names;
    for (size_t i = 0; i < devices->size(); ++i) {
      if (Status s = Device((*devices)[i],
                            "spec.devices[" + std::to_string(i) + "]", &names);
          !s.ok()) {
        return s;
      }
    }
    return OkStatus();
  }

  static Status QualifiedName(const std::string& name,
                              const std::string& path) {
    const size_t slash = name.find('/');
    std::string_view id = name;
    if (slash != std::string::npos) {
      if (name.find('/', slash + 1) != std::string::npos) {
        // The API server checks a name of one slash or none and takes one
        // of more unchecked (its validateQualifiedName, a known gap it
        // means to close with ratcheting); so do we, or the publisher would
        // refuse what the server stores.
        return OkStatus();
      }
      const std::string_view domain = std::string_view(name).substr(0, slash);
      if (domain.empty()) {
        return Fail(path, "Invalid value: \"\": the domain must not be empty");
      }
      if (Status s = ValidateDriverName(domain); !s.ok()) {
        return Fail(path, "Invalid value: " + Shown(name) + ": " + s.message());
      }
      id = std::string_view(name).substr(slash + 1);
      if (id.empty()) {
        return Fail(path, "Invalid value: \"\": the name must not be empty");
      }
    }
    if (id.size() > kDeviceMaxIdLength) {
      return Fail(
          path, "Too long: " + Shown(name) + ": may not be more than 32 bytes");
    }
    if (!k8s::IsCIdentifier(id)) {
      return Fail(path, "Invalid value: " + Shown(name) +
                            ": a valid C identifier must start with "
                            "alphabetic character or '_', followed by a "
                            "string of alphanumeric characters or '_'");
    }
    return OkStatus();
  }

  static Status Text(const json& value, const std::string& path, bool version) {
    if (!value.is_string()) return Fail(path, "not a string");
    const std::string text = value.get<std::string>();
    if (version && !k8s::IsSemver(text)) {
      return Fail(path, "Invalid value: " + Shown(text) +
                            ": must be a string compatible with semver.org "
                            "spec 2.0.0");
    }
    if (text.size() > kDeviceAttributeMaxValueLength) {
      return Fail(path, "Too long: may not be more than 64 bytes");
    }
    return OkStatus();
  }

  static Status Attribute(const json& value, const std::string& path,
                          size_t* values) {
    if (!value.is_object()) return Fail(path, "not an object");
    int fields = 0;
    std::string unknown;
    for (const auto& [key, item] : value.items()) {
      const std::string at = path + "." + key;
      if (key == "int") {
        if (!item.is_number_integer()) return Fail(at, "not an integer");
      } else if (key == "bool") {
        if (!item.is_boolean()) return Fail(at, "not a boolean");
      } else if (key == "string" || key == "version") {
        if (Status s = Text(item, at, key == "version"); !s.ok()) return s;
      } else if (key == "ints" || key == "bools" || key == "strings" ||
                 key == "versions") {
        if (!item.is_array()) return Fail(at, "not a list");
        if (item.empty()) {
          return Fail(at, "Invalid value: []: must not be empty if specified");
        }
        for (size_t i = 0; i < item.size(); ++i) {
          const std::string element = at + "[" + std::to_string(i) + "]";
          if (key == "ints" && !item[i].is_number_integer()) {
            return Fail(element, "not an integer");
          }
          if (key == "bools" && !item[i].is_boolean()) {
            return Fail(element, "not a boolean");
          }
          if (key == "strings" || key == "versions") {
            if (Status s = Text(item[i], element, key == "versions"); !s.ok()) {
              return s;
            }
          }
        }
        *values += item.size() - 1;  // one is counted below
      } else {
        // Pruned by the server: as if it were not there.
        unknown = key;
        continue;
      }
      ++fields;
    }
    ++*values;
    if (fields != 1) {
      return Fail(path,
                  "Invalid value: exactly one value must be specified" +
                      (unknown.empty() ? std::string()
                                       : " (unknown field " + Shown(unknown) +
                                             " is dropped by the server)"));
    }
    return OkStatus();
  }

  static Status Taint(const json& taint, const std::string& path) {
    if (!taint.is_object()) return Fail(path, "not an object");
    const json* key = Member(taint, "key");
    if (key == nullptr || !key->is_string() ||
        key->get<std::string>().empty()) {
      return Fail(path + ".key", "Required value");
    }
    if (!k8s::IsQualifiedName(key->get<std::string>())) {
      return Fail(path + ".key",
                  "Invalid value: " + Shown(key->get<std::string>()) +
                      ": name part must consist of alphanumeric characters, "
                      "'-', '_' or '.', and must start and end with an "
                      "alphanumeric character, with an optional DNS subdomain "
                      "prefix and '/'");
    }
    if (const json* value = Member(taint, "value"); value != nullptr) {
      if (!value->is_string() ||
          !k8s::IsLabelValue(value->get<std::string>())) {
        return Fail(path + ".value",
                    "Invalid value: a valid label must be an empty string or "
                    "consist of alphanumeric characters, '-', '_' or '.', "
                    "and must start and end with an alphanumeric character, "
                    "at most 63 characters");
      }
    }
    const json* effect = Member(taint, "effect");
    if (effect == nullptr || !effect->is_string() ||
        effect->get<std::string>().empty()) {
      return Fail(path + ".effect", "Required value");
    }
    const std::string text = effect->get<std::string>();
    if (text != "NoSchedule" && text != "NoExecute" && text != "None") {
      return Fail(path + ".effect",
                  "Unsupported value: " + Shown(text) +
                      ": supported values: \"NoExecute\", \"NoSchedule\", "
                      "\"None\"");
    }
    return OkStatus();
  }
};

}  // namespace

Status ValidateDriverName(std::string_view driver) {
  if (driver.empty()) return InvalidArgumentError("Required value");
  if (driver.size() > kDriverNameMaxLength) {
    return InvalidArgumentError("Too long: " + Shown(driver) +
                                ": may not be more than 63 bytes");
  }
  std::string lower(driver);
  for (char& c : lower) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  if (!k8s::IsDns1123Subdomain(lower)) {
    return InvalidArgumentError(
        "Invalid value: " + Shown(driver) +
        ": a lowercase RFC 1123 subdomain must consist of lower case "
        "alphanumeric characters, '-' or '.', and must start and end with "
        "an alphanumeric character");
  }
  return OkStatus();
}

Status ValidateResourceSlice(std::string_view slice_json) {
  const json slice = json::parse(slice_json, nullptr, false);
  if (slice.is_discarded()) return InvalidArgumentError("not JSON");
  return ValidateResourceSliceJson(slice);
}

Status ValidateResourceSliceJson(const nlohmann::json& slice) {
  return Checker().Slice(slice);
}

Status ValidateDeviceJson(const nlohmann::json& device) {
  std::set<std::string> names;
  return Checker().Device(device, "device", &names);
}

bool HasAdvancedFeatures(const nlohmann::json& device) {
  return Checker::Advanced(device);
}

}  // namespace topology::draplugin
