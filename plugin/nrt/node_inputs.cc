#include "node_inputs.h"

#include <algorithm>
#include <cctype>
#include <charconv>

#include <nlohmann/json.hpp>

#include "topology/common/json_fields.h"
#include "topology/common/yaml_load.h"
#include "topology/manager/policy_options.h"

namespace topology::nrt {

namespace {

using nlohmann::json;
namespace jf = json_fields;

// A YAML scalar of a mapping, or nullopt when absent or null.
std::optional<std::string> Scalar(const YAML::Node& map, const char* key,
                                  const std::string& where) {
  const YAML::Node node = map[key];
  if (!node || node.IsNull()) return std::nullopt;
  if (!node.IsScalar()) {
    throw jf::JsonFieldError(where + ": " + key + ": not a string");
  }
  return node.Scalar();
}

StatusOr<json> ParseJson(std::string_view text, size_t limit,
                         std::string_view what) {
  if (text.size() > limit) {
    return InvalidArgumentError(std::string(what) + ": larger than " +
                                std::to_string(limit) + " bytes");
  }
  json doc = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded()) {
    return InvalidArgumentError(std::string(what) + ": not JSON");
  }
  return doc;
}

}  // namespace

StatusOr<KubeletSettings> ParseKubeletConfig(std::string_view text,
                                             std::string_view where) {
  const std::string at(where);
  if (text.size() > kMaxConfigBytes) {
    return InvalidArgumentError(at + ": larger than " +
                                std::to_string(kMaxConfigBytes) + " bytes");
  }
  auto loaded = yaml::Load(text, where);
  if (!loaded.ok()) return loaded.status();
  YAML::Node config = *loaded;
  KubeletSettings out;
  try {
    if (!config.IsMap()) throw jf::JsonFieldError(at + ": not a mapping");
    // configz wraps the configuration.
    if (config["kubeletconfig"] && config["kubeletconfig"].IsMap()) {
      config = config["kubeletconfig"];
    } else if (const auto kind = Scalar(config, "kind", at);
               kind && *kind != "KubeletConfiguration") {
      throw jf::JsonFieldError(at + ": kind " + *kind +
                               ", not KubeletConfiguration");
    }
    out.policy = Scalar(config, "topologyManagerPolicy", at).value_or("none");
    out.scope =
        Scalar(config, "topologyManagerScope", at).value_or("container");
    out.cpu_policy = Scalar(config, "cpuManagerPolicy", at).value_or("none");
    out.memory_policy =
        Scalar(config, "memoryManagerPolicy", at).value_or("None");
    static const std::vector<std::string> kPolicies = {
        "none", "best-effort", "restricted", "single-numa-node"};
    if (std::find(kPolicies.begin(), kPolicies.end(), out.policy) ==
        kPolicies.end()) {
      throw jf::JsonFieldError(at +
                               ": topologyManagerPolicy: unknown policy \"" +
                               out.policy.substr(0, 64) + "\"");
    }
    if (out.scope != "container" && out.scope != "pod") {
      throw jf::JsonFieldError(at + ": topologyManagerScope: unknown scope \"" +
                               out.scope.substr(0, 64) + "\"");
    }
    std::map<std::string, std::string> options;
    if (const YAML::Node node = config["topologyManagerPolicyOptions"];
        node && !node.IsNull()) {
      if (!node.IsMap()) {
        throw jf::JsonFieldError(
            at + ": topologyManagerPolicyOptions: not a mapping");
      }
      for (const auto& entry : node) {
        if (!entry.first.IsScalar() || !entry.second.IsScalar()) {
          throw jf::JsonFieldError(
              at + ": topologyManagerPolicyOptions: not strings");
        }
        options[entry.first.Scalar()] = entry.second.Scalar();
      }
    }
    auto parsed = manager::PolicyOptions::Parse(options);
    if (!parsed.ok()) {
      throw jf::JsonFieldError(
          at + ": topologyManagerPolicyOptions: " + parsed.status().message());
    }
    out.max_numa_nodes = parsed->max_allowable_numa_nodes;
  } catch (const jf::JsonFieldError& e) {
    return InvalidArgumentError(e.what());
  } catch (const std::exception& e) {
    return yaml::ParseError(where, e);
  }
  return out;
}

StatusOr<MemoryManagerState> ParseMemoryManagerState(std::string_view text,
                                                     std::string_view where) {
  const std::string at(where);
  auto doc = ParseJson(text, kMaxStateBytes, where);
  if (!doc.ok()) return doc.status();
  MemoryManagerState out;
  try {
    const json* state = &*doc;
    json payload;
    // v3: the authoritative state is the "data" string.
    if (const json* data = jf::OptionalField(*doc, "data"); data != nullptr) {
      auto inner =
          ParseJson(jf::AsString(*data, "data"), kMaxStateBytes, at + ": data");
      if (!inner.ok()) return inner.status();
      payload = std::move(*inner);
      state = &payload;
    }
    out.policy = jf::String(*state, "policyName");
    const auto read_blocks = [&out](const std::string& uid, const json& list) {
      if (!list.is_array()) throw jf::JsonFieldError("blocks: not an array");
      for (const json& block : list) {
        manager::MemoryBlock b;
        b.type = jf::String(block, "type");
        b.size = jf::Uint(block, "size");
        for (const json& id : jf::Array(block, "numaAffinity")) {
          b.numa_affinity.push_back(
              static_cast<int>(jf::AsInt(id, "numaAffinity", 0, 1 << 20)));
        }
        out.blocks[uid].push_back(std::move(b));
      }
    };
    if (const json* entries = jf::OptionalField(*state, "entries")) {
      if (!entries->is_object())
        throw jf::JsonFieldError("entries: not an object");
      for (const auto& [uid, containers] : entries->items()) {
        if (!containers.is_object()) {
          throw jf::JsonFieldError("entries: not an object");
        }
        for (const auto& [name, list] : containers.items()) {
          read_blocks(uid, list);
        }
      }
    }
    if (const json* pods = jf::OptionalField(*state, "podEntries")) {
      if (!pods->is_object())
        throw jf::JsonFieldError("podEntries: not an object");
      for (const auto& [uid, entry] : pods->items()) {
        if (const json* list = jf::OptionalField(entry, "memoryBlocks")) {
          read_blocks(uid, *list);
        }
      }
    }
    const json* machine = jf::OptionalField(*state, "machineState");
    if (machine == nullptr) return out;
    if (!machine->is_object())
      throw jf::JsonFieldError("machineState: not an object");
    for (const auto& [key, node] : machine->items()) {
      int id = 0;
      const auto [end, error] =
          std::from_chars(key.data(), key.data() + key.size(), id);
      if (error != std::errc() || end != key.data() + key.size() || id < 0) {
        throw jf::JsonFieldError("machineState: \"" + key.substr(0, 32) +
                                 "\" is not a NUMA node id");
      }
      manager::MemoryNodeState& out_node = out.machine[id];
      out_node.assignments =
          static_cast<int>(jf::Int(node, "numberOfAssignments", 0, 1 << 30));
      if (const json* cells = jf::OptionalField(node, "cells")) {
        if (!cells->is_array()) throw jf::JsonFieldError("cells: not an array");
        for (const json& cell : *cells) {
          out_node.cells.push_back(
              static_cast<int>(jf::AsInt(cell, "cells", 0, 1 << 20)));
        }
      }
      const json& map = jf::Field(node, "memoryMap");
      if (!map.is_object())
        throw jf::JsonFieldError("memoryMap: not an object");
      for (const auto& [type, table] : map.items()) {
        if (!manager::IsMemoryResource(type)) continue;
        manager::MemoryTable& t = out_node.memory[type];
        t.total = jf::Uint(table, "total");
        t.system_reserved = jf::Uint(table, "systemReserved");
        t.allocatable = jf::Uint(table, "allocatable");
        t.reserved = jf::Uint(table, "reserved");
        t.free = jf::Uint(table, "free");
      }
    }
  } catch (const std::exception& e) {
    return InvalidArgumentError(at + ": " + e.what());
  }
  return out;
}

StatusOr<std::vector<DraDevice>> ParseResourceSlices(std::string_view list,
                                                     std::string_view node) {
  auto doc = ParseJson(list, kMaxListBytes, "resourceslices");
  if (!doc.ok()) return doc.status();
  std::vector<DraDevice> out;
  try {
    // The newest generation of each (driver, pool).
    std::map<std::pair<std::string, std::string>, int64_t> newest;
    const json& items = jf::Array(*doc, "items");
    for (const json& slice : items) {
      const json& spec = jf::Field(slice, "spec");
      if (jf::StringOr(spec, "nodeName", "") != node) continue;
      const json& pool = jf::Field(spec, "pool");
      auto key =
          std::make_pair(jf::String(spec, "driver"), jf::String(pool, "name"));
      const int64_t generation = jf::Int(pool, "generation", 0);
      auto [it, inserted] = newest.emplace(key, generation);
      if (!inserted) it->second = std::max(it->second, generation);
    }
    for (const json& slice : items) {
      const json& spec = jf::Field(slice, "spec");
      if (jf::StringOr(spec, "nodeName", "") != node) continue;
      const std::string driver = jf::String(spec, "driver");
      const json& pool = jf::Field(spec, "pool");
      const std::string pool_name = jf::String(pool, "name");
      if (jf::Int(pool, "generation", 0) != newest[{driver, pool_name}])
        continue;
      const json* devices = jf::OptionalField(spec, "devices");
      if (devices == nullptr) continue;
      if (!devices->is_array())
        throw jf::JsonFieldError("devices: not an array");
      for (const json& device : *devices) {
        DraDevice d{.driver = driver,
                    .pool = pool_name,
                    .name = jf::String(device, "name")};
        if (const json* attributes = jf::OptionalField(device, "attributes")) {
          if (!attributes->is_object()) {
            throw jf::JsonFieldError("attributes: not an object");
          }
          for (const auto& [name, value] : attributes->items()) {
            const std::string qualified = name.find('/') == std::string::npos
                                              ? driver + "/" + name
                                              : name;
            // The list form (DRAListTypeAttributes): a device on one node.
            if (const json* ints = jf::OptionalField(value, "ints");
                ints != nullptr && qualified == kNumaNodeAttribute &&
                ints->is_array() && ints->size() == 1) {
              d.numa_node =
                  static_cast<int>(jf::AsInt((*ints)[0], name, 0, 1 << 20));
            }
            std::string text;
            if (const json* s = jf::OptionalField(value, "string")) {
              text = json(jf::AsString(*s, name)).dump();
            } else if (const json* v = jf::OptionalField(value, "version")) {
              text = json(jf::AsString(*v, name)).dump();
            } else if (const json* i = jf::OptionalField(value, "int")) {
              text = std::to_string(jf::AsInt(*i, name));
            } else if (const json* b = jf::OptionalField(value, "bool")) {
              text = jf::AsBool(*b, name) ? "true" : "false";
            } else {
              continue;
            }
            if (qualified == kNumaNodeAttribute) {
              if (const json* i = jf::OptionalField(value, "int")) {
                d.numa_node = static_cast<int>(jf::AsInt(*i, name, 0, 1 << 20));
              }
            }
            d.attributes[qualified] = std::move(text);
          }
        }
        out.push_back(std::move(d));
      }
    }
  } catch (const std::exception& e) {
    return InvalidArgumentError(std::string("resourceslices: ") + e.what());
  }
  return out;
}

namespace {

// A small reader of the CEL subset ParseCelSelector accepts.
class CelReader {
 public:
  explicit CelReader(std::string_view text) : text_(text) {}
  void Space() {
    while (pos_ < text_.size() &&
           std::isspace(static_cast<unsigned char>(text_[pos_]))) {
      ++pos_;
    }
  }
  bool Eat(std::string_view token) {
    Space();
    if (text_.substr(pos_, token.size()) != token) return false;
    pos_ += token.size();
    return true;
  }
  bool AtEnd() {
    Space();
    return pos_ == text_.size();
  }
  // A double-quoted string literal without escapes.
  std::optional<std::string> String() {
    Space();
    if (pos_ >= text_.size() || text_[pos_] != '"') return std::nullopt;
    const size_t end = text_.find('"', pos_ + 1);
    if (end == std::string_view::npos) return std::nullopt;
    std::string out(text_.substr(pos_ + 1, end - pos_ - 1));
    if (out.find('\\') != std::string::npos) return std::nullopt;
    pos_ = end + 1;
    return out;
  }
  std::optional<std::string> Identifier() {
    Space();
    const size_t start = pos_;
    while (pos_ < text_.size() &&
           (std::isalnum(static_cast<unsigned char>(text_[pos_])) ||
            text_[pos_] == '_')) {
      ++pos_;
    }
    if (pos_ == start) return std::nullopt;
    return std::string(text_.substr(start, pos_ - start));
  }
  // A literal in its JSON spelling: "s", an integer, true or false.
  std::optional<std::string> Literal() {
    Space();
    if (auto s = String()) return json(*s).dump();
    const size_t start = pos_;
    if (pos_ < text_.size() && text_[pos_] == '-') ++pos_;
    const size_t digits = pos_;
    while (pos_ < text_.size() &&
           std::isdigit(static_cast<unsigned char>(text_[pos_]))) {
      ++pos_;
    }
    if (pos_ > digits) return std::string(text_.substr(start, pos_ - start));
    pos_ = start;
    if (Eat("true")) return "true";
    if (Eat("false")) return "false";
    return std::nullopt;
  }

 private:
  std::string_view text_;
  size_t pos_ = 0;
};

// device.driver | device.attributes["domain"].name | ...["domain"]["name"]:
// "driver" or the qualified attribute name; nullopt otherwise.
std::optional<std::string> Operand(CelReader& in) {
  if (!in.Eat("device.")) return std::nullopt;
  const auto field = in.Identifier();
  if (field == "driver") return std::string("driver");
  if (field != "attributes" || !in.Eat("[")) return std::nullopt;
  const auto domain = in.String();
  if (!domain || !in.Eat("]")) return std::nullopt;
  std::optional<std::string> name;
  if (in.Eat(".")) {
    name = in.Identifier();
  } else if (in.Eat("[")) {
    name = in.String();
    if (!in.Eat("]")) return std::nullopt;
  }
  if (!name) return std::nullopt;
  return *domain + "/" + *name;
}

}  // namespace

bool ParseCelSelector(std::string_view expression, ClassSelector* selector) {
  CelReader in(expression);
  const auto unsupported = [&] {
    selector->unsupported =
        "the selector \"" + std::string(expression.substr(0, 200)) +
        "\" is not a conjunction of equalities on device.driver and "
        "device.attributes";
    return false;
  };
  do {
    int parens = 0;
    while (in.Eat("(")) ++parens;
    const auto operand = Operand(in);
    if (!operand || !in.Eat("==")) return unsupported();
    const auto literal = in.Literal();
    if (!literal) return unsupported();
    for (; parens > 0; --parens) {
      if (!in.Eat(")")) return unsupported();
    }
    if (*operand == "driver") {
      const std::string driver =
          json::parse(*literal, nullptr, false).is_string()
              ? json::parse(*literal).get<std::string>()
              : std::string();
      if (driver.empty() || (selector->driver && *selector->driver != driver)) {
        return unsupported();
      }
      selector->driver = driver;
    } else {
      selector->attributes[*operand] = *literal;
    }
  } while (in.Eat("&&"));
  return in.AtEnd() || unsupported();
}

StatusOr<std::vector<ClassSelector>> ParseDeviceClasses(std::string_view list) {
  auto doc = ParseJson(list, kMaxListBytes, "deviceclasses");
  if (!doc.ok()) return doc.status();
  std::vector<ClassSelector> out;
  try {
    for (const json& item : jf::Array(*doc, "items")) {
      ClassSelector selector{
          .name = jf::String(jf::Field(item, "metadata"), "name")};
      const json& spec = jf::Field(item, "spec");
      if (const json* selectors = jf::OptionalField(spec, "selectors")) {
        if (!selectors->is_array()) {
          throw jf::JsonFieldError("selectors: not an array");
        }
        for (const json& s : *selectors) {
          const std::string expression =
              jf::String(jf::Field(s, "cel"), "expression");
          if (!ParseCelSelector(expression, &selector)) break;
        }
      }
      out.push_back(std::move(selector));
    }
  } catch (const std::exception& e) {
    return InvalidArgumentError(std::string("deviceclasses: ") + e.what());
  }
  return out;
}

bool Matches(const ClassSelector& selector, const DraDevice& device) {
  if (!selector.unsupported.empty()) return false;
  if (selector.driver && *selector.driver != device.driver) return false;
  for (const auto& [name, value] : selector.attributes) {
    const auto it = device.attributes.find(name);
    if (it == device.attributes.end() || it->second != value) return false;
  }
  return true;
}

}  // namespace topology::nrt
