#include "config.h"

#include <cctype>
#include <fstream>
#include <set>
#include <sstream>

#include <yaml-cpp/yaml.h>

#include "topology/common/quantity.h"
#include "topology/common/yaml_load.h"
#include "topology/plugin/resource_name.h"
#include "topology/text_file.h"

namespace topology::device_plugin {
namespace {

class Parser {
 public:
  explicit Parser(std::string_view source) : source_(source) {}

  Status Error(const std::string& path, const YAML::Node& node,
               const std::string& message) const {
    std::string where(source_);
    const YAML::Mark mark = node.Mark();
    if (!mark.is_null()) {
      where += ":" + std::to_string(mark.line + 1) + ":" +
               std::to_string(mark.column + 1);
    }
    return InvalidArgumentError(where + ": " + path + ": " + message);
  }

  Status CheckKeys(const std::string& path, const YAML::Node& map,
                   const std::set<std::string>& known) const {
    if (!map.IsMap()) return Error(path, map, "expected a mapping");
    for (const auto& entry : map) {
      const auto key = entry.first.as<std::string>();
      if (!known.contains(key)) {
        std::string list;
        for (const std::string& k : known)
          list += (list.empty() ? "" : ", ") + k;
        return Error(path, entry.first,
                     "unknown key \"" + key + "\" (known: " + list + ")");
      }
    }
    return OkStatus();
  }

  StatusOr<std::vector<std::pair<std::string, YAML::Node>>> Strings(
      const std::string& path, const YAML::Node& node) const {
    if (!node.IsSequence()) return Error(path, node, "expected a list");
    std::vector<std::pair<std::string, YAML::Node>> out;
    for (size_t i = 0; i < node.size(); ++i) {
      const YAML::Node item = node[i];
      const std::string item_path = path + "[" + std::to_string(i) + "]";
      if (!item.IsScalar()) return Error(item_path, item, "expected a string");
      out.emplace_back(item.Scalar(), item);
    }
    return out;
  }

  static std::string Lower(std::string text) {
    for (char& c : text)
      c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return text;
  }

  // "10de", "0x10DE" -> digits without 0x, lower case; nullopt when not hex.
  static std::optional<std::string> Hex(const std::string& text) {
    std::string digits = Lower(text);
    if (digits.starts_with("0x")) digits = digits.substr(2);
    if (digits.empty()) return std::nullopt;
    for (char c : digits) {
      if (!std::isxdigit(static_cast<unsigned char>(c))) return std::nullopt;
    }
    return digits;
  }

  Status Ids(const std::string& path, const YAML::Node& node,
             std::vector<uint16_t>* out) const {
    auto items = Strings(path, node);
    if (!items.ok()) return items.status();
    for (size_t i = 0; i < items->size(); ++i) {
      const auto& [text, item] = (*items)[i];
      auto hex = Hex(text);
      if (!hex || hex->size() > 4) {
        return Error(
            path + "[" + std::to_string(i) + "]", item,
            "\"" + text + R"(" is not a 16-bit hex id such as "10de")");
      }
      out->push_back(static_cast<uint16_t>(std::stoul(*hex, nullptr, 16)));
    }
    return OkStatus();
  }

  Status Classes(const std::string& path, const YAML::Node& node,
                 std::vector<std::string>* out) const {
    auto items = Strings(path, node);
    if (!items.ok()) return items.status();
    for (size_t i = 0; i < items->size(); ++i) {
      const auto& [text, item] = (*items)[i];
      auto hex = Hex(text);
      if (!hex || (hex->size() != 2 && hex->size() != 4 && hex->size() != 6)) {
        return Error(path + "[" + std::to_string(i) + "]", item,
                     "\"" + text +
                         "\" is not a class code prefix of 2, 4 or 6 hex "
                         "digits such as \"0302\"");
      }
      out->push_back(*hex);
    }
    return OkStatus();
  }

  Status PfNames(const std::string& path, const YAML::Node& node,
                 std::vector<PfNameSelector>* out) const {
    auto items = Strings(path, node);
    if (!items.ok()) return items.status();
    for (size_t i = 0; i < items->size(); ++i) {
      const auto& [text, item] = (*items)[i];
      const std::string item_path = path + "[" + std::to_string(i) + "]";
      PfNameSelector selector;
      const size_t hash = text.find('#');
      selector.name = text.substr(0, hash);
      if (selector.name.empty() || selector.name.size() > 15) {
        return Error(
            item_path, item,
            "\"" + text + "\" needs an interface name of 1-15 characters");
      }
      if (hash != std::string::npos) {
        int first = 0;
        int last = 0;
        char dash = 0;
        std::istringstream range(text.substr(hash + 1));
        if (!(range >> first >> dash >> last) || dash != '-' || !range.eof() ||
            first < 0 || last < first) {
          return Error(
              item_path, item,
              "\"" + text + R"(": VF range must read "name#first-last")");
        }
        selector.vf_range = std::make_pair(first, last);
      }
      out->push_back(selector);
    }
    return OkStatus();
  }

  StatusOr<Selector> ParseSelector(const std::string& path,
                                   const YAML::Node& node) const {
    Status keys = CheckKeys(path, node,
                            {"vendors", "devices", "classes", "drivers",
                             "pciAddresses", "pfNames"});
    if (!keys.ok()) return keys;
    Selector selector;
    Status status;
    if (node["vendors"]) {
      status = Ids(path + ".vendors", node["vendors"], &selector.vendors);
      if (!status.ok()) return status;
    }
    if (node["devices"]) {
      status = Ids(path + ".devices", node["devices"], &selector.devices);
      if (!status.ok()) return status;
    }
    if (node["classes"]) {
      status = Classes(path + ".classes", node["classes"], &selector.classes);
      if (!status.ok()) return status;
    }
    if (node["drivers"]) {
      auto items = Strings(path + ".drivers", node["drivers"]);
      if (!items.ok()) return items.status();
      for (auto& [text, item] : *items) selector.drivers.push_back(text);
    }
    if (node["pciAddresses"]) {
      auto items = Strings(path + ".pciAddresses", node["pciAddresses"]);
      if (!items.ok()) return items.status();
      for (size_t i = 0; i < items->size(); ++i) {
        const auto& [text, item] = (*items)[i];
        auto address = PciAddress::Parse(text);
        if (!address.ok()) {
          return Error(path + ".pciAddresses[" + std::to_string(i) + "]", item,
                       address.status().message());
        }
        selector.pci_addresses.push_back(*address);
      }
    }
    if (node["pfNames"]) {
      status = PfNames(path + ".pfNames", node["pfNames"], &selector.pf_names);
      if (!status.ok()) return status;
    }
    if (selector.vendors.empty() && selector.devices.empty() &&
        selector.classes.empty() && selector.drivers.empty() &&
        selector.pci_addresses.empty() && selector.pf_names.empty()) {
      return Error(path, node,
                   "an empty selector would claim every device; name at "
                   "least one of vendors, devices, classes, drivers, "
                   "pciAddresses, pfNames");
    }
    return selector;
  }

  StatusOr<ResourceConfig> ParseResource(const std::string& path,
                                         const YAML::Node& node) const {
    Status keys =
        CheckKeys(path, node,
                  {"name", "selectors", "deviceNodes", "cdiKind", "nvidia",
                   "excludeTopology", "preferredAllocation", "shareable"});
    if (!keys.ok()) return keys;
    ResourceConfig resource;
    const YAML::Node name = node["name"];
    if (!name || !name.IsScalar()) {
      return Error(path + ".name", node, "every resource needs a name");
    }
    resource.name = name.Scalar();
    Status valid = plugin::ValidateResourceName(resource.name);
    if (!valid.ok()) return Error(path + ".name", name, valid.message());
    const YAML::Node selectors = node["selectors"];
    if (!selectors || !selectors.IsSequence() || selectors.size() == 0) {
      return Error(path + ".selectors", selectors ? selectors : node,
                   "needs a list of at least one selector");
    }
    for (size_t i = 0; i < selectors.size(); ++i) {
      auto selector = ParseSelector(
          path + ".selectors[" + std::to_string(i) + "]", selectors[i]);
      if (!selector.ok()) return selector.status();
      resource.selectors.push_back(std::move(*selector));
    }
    if (node["deviceNodes"]) {
      auto items = Strings(path + ".deviceNodes", node["deviceNodes"]);
      if (!items.ok()) return items.status();
      for (size_t i = 0; i < items->size(); ++i) {
        const auto& [text, item] = (*items)[i];
        if (!text.starts_with("/dev/")) {
          return Error(path + ".deviceNodes[" + std::to_string(i) + "]", item,
                       "\"" + text + "\" must be a path under /dev/");
        }
        resource.device_nodes.push_back(text);
      }
    }
    if (const YAML::Node kind = node["cdiKind"]) {
      if (!kind.IsScalar() || kind.Scalar().find('/') == std::string::npos ||
          kind.Scalar().find('=') != std::string::npos) {
        return Error(path + ".cdiKind", kind,
                     "expected a CDI kind such as \"vendor.com/class\"");
      }
      resource.cdi_kind = kind.Scalar();
    }
    for (auto [key, target] :
         {std::pair{"nvidia", &resource.nvidia},
          std::pair{"excludeTopology", &resource.exclude_topology},
          std::pair{"preferredAllocation", &resource.preferred_allocation}}) {
      if (const YAML::Node flag = node[key]) {
        bool value = false;
        if (!flag.IsScalar() || !YAML::convert<bool>::decode(flag, value)) {
          return Error(path + "." + key, flag, "expected true or false");
        }
        *target = value;
      }
    }
    if (const YAML::Node shareable = node["shareable"]) {
      if (Status status = ParseShareable(path + ".shareable", shareable,
                                         &resource.shared_capacity);
          !status.ok()) {
        return status;
      }
    }
    return resource;
  }

  // A quantity at `path`: the API's grammar, checked exactly.
  StatusOr<std::string> QuantityAt(const std::string& path,
                                   const YAML::Node& node) const {
    if (!node.IsScalar() || !k8s::Quantity::Parse(node.Scalar())) {
      return Error(path, node,
                   "expected a quantity such as \"100\", \"500m\" or \"80Gi\"");
    }
    return node.Scalar();
  }

  // shareable: {capacity: {<name>: {value, default, validValues |
  // validRange: {min, max, step}}}}
  Status ParseShareable(const std::string& path, const YAML::Node& node,
                        std::map<std::string, SharedCapacity>* out) const {
    if (Status keys = CheckKeys(path, node, {"capacity"}); !keys.ok()) {
      return keys;
    }
    const YAML::Node capacity = node["capacity"];
    if (!capacity || !capacity.IsMap() || capacity.size() == 0) {
      return Error(path + ".capacity", capacity ? capacity : node,
                   "needs at least one capacity a share consumes");
    }
    for (const auto& entry : capacity) {
      const std::string name = entry.first.as<std::string>();
      const std::string at = path + ".capacity." + name;
      const YAML::Node spec = entry.second;
      if (Status keys = CheckKeys(
              at, spec, {"value", "default", "validValues", "validRange"});
          !keys.ok()) {
        return keys;
      }
      SharedCapacity shared;
      if (!spec["value"]) return Error(at + ".value", spec, "required");
      auto value = QuantityAt(at + ".value", spec["value"]);
      if (!value.ok()) return value.status();
      shared.value = *value;
      if (spec["default"]) {
        auto fallback = QuantityAt(at + ".default", spec["default"]);
        if (!fallback.ok()) return fallback.status();
        shared.default_value = *fallback;
      }
      if (spec["validValues"]) {
        auto items = Strings(at + ".validValues", spec["validValues"]);
        if (!items.ok()) return items.status();
        for (size_t i = 0; i < items->size(); ++i) {
          auto item = QuantityAt(at + ".validValues[" + std::to_string(i) + "]",
                                 (*items)[i].second);
          if (!item.ok()) return item.status();
          shared.valid_values.push_back(*item);
        }
      }
      if (const YAML::Node range = spec["validRange"]) {
        if (Status keys =
                CheckKeys(at + ".validRange", range, {"min", "max", "step"});
            !keys.ok()) {
          return keys;
        }
        if (!range["min"]) {
          return Error(at + ".validRange.min", range, "required");
        }
        for (auto [key, target] : {std::pair{"min", &shared.range_min},
                                   std::pair{"max", &shared.range_max},
                                   std::pair{"step", &shared.range_step}}) {
          if (!range[key]) continue;
          auto q = QuantityAt(at + ".validRange." + key, range[key]);
          if (!q.ok()) return q.status();
          *target = *q;
        }
      }
      out->emplace(name, std::move(shared));
    }
    return OkStatus();
  }

  StatusOr<Config> Parse(const YAML::Node& root) const {
    if (!root.IsDefined() || root.IsNull()) {
      return InvalidArgumentError(std::string(source_) +
                                  ": the configuration is empty");
    }
    Status keys = CheckKeys("(top level)", root, {"resources"});
    if (!keys.ok()) return keys;
    const YAML::Node resources = root["resources"];
    if (!resources || !resources.IsSequence() || resources.size() == 0) {
      return Error("resources", resources ? resources : root,
                   "needs a list of at least one resource");
    }
    Config config;
    std::set<std::string> names;
    for (size_t i = 0; i < resources.size(); ++i) {
      const std::string path = "resources[" + std::to_string(i) + "]";
      auto resource = ParseResource(path, resources[i]);
      if (!resource.ok()) return resource.status();
      if (!names.insert(resource->name).second) {
        return Error(path + ".name", resources[i]["name"],
                     "resource \"" + resource->name + "\" is declared twice");
      }
      config.resources.push_back(std::move(*resource));
    }
    return config;
  }

 private:
  std::string_view source_;
};

}  // namespace

StatusOr<Config> ParseConfig(std::string_view text, std::string_view source) {
  Parser parser(source);
  auto root = yaml::Load(text, source);
  if (!root.ok()) return root.status();
  try {
    return parser.Parse(*root);
  } catch (const YAML::Exception& e) {
    std::string where(source);
    if (!e.mark.is_null()) {
      where += ":" + std::to_string(e.mark.line + 1) + ":" +
               std::to_string(e.mark.column + 1);
    }
    return InvalidArgumentError(where + ": " + e.msg);
  }
}

StatusOr<Config> LoadConfig(const std::filesystem::path& file) {
  std::error_code error;
  if (!std::filesystem::exists(file, error)) {
    return NotFoundError("cannot read the configuration " + file.string() +
                         ": it does not exist");
  }
  auto text = ReadTextFile(file.string(), kMaxConfigBytes);
  if (!text.ok()) {
    return InvalidArgumentError("the configuration: " +
                                text.status().message());
  }
  return ParseConfig(*text, file.string());
}

std::string PciDeviceEnvName(std::string_view resource_name) {
  std::string name = "PCIDEVICE_";
  for (char c : resource_name) {
    name += std::isalnum(static_cast<unsigned char>(c)) != 0
                ? static_cast<char>(std::toupper(static_cast<unsigned char>(c)))
                : '_';
  }
  return name;
}

}  // namespace topology::device_plugin
