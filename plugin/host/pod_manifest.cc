#include "pod_manifest.h"

#include <cctype>
#include <charconv>
#include <cmath>
#include <map>
#include <optional>

#include <yaml-cpp/yaml.h>

#include "topology/common/text_util.h"
#include "topology/common/yaml_load.h"
#include "topology/manager/memory_manager.h"
#include "topology/manager/topology_manager.h"
#include "topology/text_file.h"

namespace topology::host {

using text::IsValidUtf8;
using text::Quoted;

namespace {

// Memory and other non-CPU quantities: only compared, so kept as text
// normalised by value where simple ("1Gi" and "1024Mi" both become bytes).
std::optional<double> QuantityValue(std::string text) {
  static const std::map<std::string, double> kSuffixes = {
      {"", 1},
      {"m", 1e-3},
      {"k", 1e3},
      {"M", 1e6},
      {"G", 1e9},
      {"T", 1e12},
      {"P", 1e15},
      {"E", 1e18},
      {"Ki", 1024.0},
      {"Mi", 1048576.0},
      {"Gi", 1073741824.0},
      {"Ti", 1099511627776.0},
      {"Pi", 1125899906842624.0},
      {"Ei", 1152921504606846976.0}};
  size_t end = 0;
  while (end < text.size() &&
         (std::isdigit(static_cast<unsigned char>(text[end])) != 0 ||
          text[end] == '.' || (end == 0 && text[end] == '+'))) {
    ++end;
  }
  if (end == 0) return std::nullopt;
  auto suffix = kSuffixes.find(text.substr(end));
  if (suffix == kSuffixes.end()) return std::nullopt;
  double number = 0;
  const std::string digits = text.substr(0, end);
  auto [ptr, error] =
      std::from_chars(digits.data(), digits.data() + digits.size(), number);
  if (error != std::errc() || ptr != digits.data() + digits.size()) {
    return std::nullopt;
  }
  return number * suffix->second;
}

// Longer than any name the API server accepts (253 for a DNS subdomain).
constexpr size_t kMaxNameLength = 253;

class Parser {
 public:
  Parser(std::string_view source, size_t document)
      : where_(std::string(source) + " (document " +
               std::to_string(document + 1) + ")") {}

  Status Error(const std::string& path, const YAML::Node& node,
               const std::string& message) const {
    std::string at = where_;
    if (node.IsDefined() && !node.Mark().is_null()) {
      at += " line " + std::to_string(node.Mark().line + 1);
    }
    return InvalidArgumentError(at + ": " + path + ": " + message);
  }

  struct Resources {
    std::map<std::string, int64_t> limits;
    bool guaranteed = true;
  };

  StatusOr<Resources> ParseResources(const std::string& path,
                                     const YAML::Node& container) const {
    Resources out;
    const YAML::Node resources = container["resources"];
    std::map<std::string, std::string> limits;
    std::map<std::string, std::string> requests;
    for (auto [name, target] :
         {std::pair{"limits", &limits}, std::pair{"requests", &requests}}) {
      if (!resources || !resources[name]) continue;
      const YAML::Node map = resources[name];
      if (!map.IsMap()) {
        return Error(path + ".resources." + name, map, "expected a mapping");
      }
      for (const auto& entry : map) {
        if (!entry.second.IsScalar()) {
          return Error(
              path + ".resources." + name + "." + entry.first.as<std::string>(),
              entry.second, "expected a quantity");
        }
        const auto key = entry.first.as<std::string>();
        if (!IsValidUtf8(key) || key.size() > kMaxNameLength) {
          return Error(
              path + ".resources." + name, map,
              "resource name " + Quoted(key) + " is not a valid resource name");
        }
        (*target)[key] = entry.second.Scalar();
      }
    }
    for (const auto& [resource, text] : limits) {
      const std::string field = path + ".resources.limits." + resource;
      if (resource == manager::kCpuResource) {
        auto millis = ParseCpuQuantity(text);
        if (!millis.ok())
          return Error(field, resources["limits"], millis.status().message());
        out.limits[resource] = *millis;
      } else if (manager::IsMemoryResource(resource)) {
        auto bytes = ParseByteQuantity(text);
        if (!bytes.ok())
          return Error(field, resources["limits"], bytes.status().message());
        out.limits[resource] = *bytes;
      } else if (resource.find('/') != std::string::npos) {
        int64_t count = 0;
        auto [ptr, error] =
            std::from_chars(text.data(), text.data() + text.size(), count);
        if (error != std::errc() || ptr != text.data() + text.size() ||
            count < 0) {
          return Error(field, resources["limits"],
                       Quoted(text) + " is not a whole number of devices");
        }
        if (count > 0) out.limits[resource] = count;
      } else if (!QuantityValue(text)) {
        return Error(field, resources["limits"],
                     Quoted(text) + " is not a quantity");
      }
    }
    // Guaranteed: cpu and memory limits, and requests equal to limits.
    if (!limits.contains("cpu") || !limits.contains("memory")) {
      out.guaranteed = false;
    }
    for (const auto& [resource, text] : requests) {
      auto limit = limits.find(resource);
      if (limit == limits.end()) {
        if (resource == "cpu" || resource == "memory") out.guaranteed = false;
        continue;
      }
      const auto request_value = QuantityValue(text);
      const auto limit_value = QuantityValue(limit->second);
      if (!request_value) {
        return Error(path + ".resources.requests." + resource,
                     resources["requests"],
                     Quoted(text) + " is not a quantity");
      }
      if (limit_value && std::abs(*request_value - *limit_value) > 1e-9) {
        out.guaranteed = false;
      }
    }
    return out;
  }

  // spec.topology.policy (the design's field) or the annotation (the real
  // Pod API has no such field); both given must agree.
  Status ParseTopologyPolicy(const YAML::Node& doc, const YAML::Node& spec,
                             manager::Pod* pod) const {
    std::vector<std::pair<std::string, YAML::Node>> given;
    if (spec["topology"]) {
      if (!spec["topology"].IsMap()) {
        return Error("spec.topology", spec["topology"], "expected a mapping");
      }
      if (spec["topology"]["policy"]) {
        given.emplace_back("spec.topology.policy", spec["topology"]["policy"]);
      }
    }
    const YAML::Node annotations = doc["metadata"]["annotations"];
    if (annotations && annotations.IsMap() &&
        annotations[kTopologyPolicyAnnotation]) {
      given.emplace_back(
          std::string("metadata.annotations.") + kTopologyPolicyAnnotation,
          annotations[kTopologyPolicyAnnotation]);
    }
    for (const auto& [field, node] : given) {
      if (!node.IsScalar()) {
        return Error(field, node, "expected a policy name");
      }
      const std::string value = node.Scalar();
      if (!manager::IsPodTopologyPolicy(value)) {
        return Error(field, node,
                     "pod " + Quoted(pod->name) + ": unknown topology policy " +
                         Quoted(value) +
                         " (none, best-effort, restricted, single-numa-node, "
                         "pod-level-single-numa-node)");
      }
      if (!pod->topology_policy.empty() && pod->topology_policy != value) {
        return Error(field, node,
                     "pod " + Quoted(pod->name) + ": " + Quoted(value) +
                         " contradicts " + pod->topology_policy_source + " " +
                         Quoted(pod->topology_policy));
      }
      if (pod->topology_policy.empty()) {
        pod->topology_policy = value;
        pod->topology_policy_source =
            field == "spec.topology.policy"
                ? field
                : std::string("annotation ") + kTopologyPolicyAnnotation;
      }
    }
    return OkStatus();
  }

  StatusOr<manager::Pod> Parse(const YAML::Node& doc) const {
    if (!doc.IsMap()) return Error("(document)", doc, "expected a mapping");
    if (!doc["kind"] || doc["kind"].Scalar() != "Pod") {
      return Error("kind", doc, "only Pod manifests are admitted");
    }
    manager::Pod pod;
    const YAML::Node metadata = doc["metadata"];
    if (!metadata || !metadata["name"] || !metadata["name"].IsScalar() ||
        metadata["name"].Scalar().empty()) {
      return Error("metadata.name", doc, "a Pod needs a name");
    }
    pod.name = metadata["name"].Scalar();
    if (metadata["namespace"]) pod.ns = metadata["namespace"].Scalar();
    pod.uid =
        metadata["uid"] ? metadata["uid"].Scalar() : pod.ns + "/" + pod.name;
    // Names travel in protobuf strings and JSON replies: UTF-8 only, and of
    // a size the API server would accept.
    for (const char* field : {"name", "namespace", "uid"}) {
      const YAML::Node node = metadata[field];
      if (!node) continue;
      if (!node.IsScalar()) {
        return Error(std::string("metadata.") + field, node,
                     "expected a string");
      }
      if (!IsValidUtf8(node.Scalar())) {
        return Error(std::string("metadata.") + field, node,
                     "is not valid UTF-8");
      }
      if (node.Scalar().size() > kMaxNameLength) {
        return Error(std::string("metadata.") + field, node,
                     Quoted(node.Scalar()) + " is longer than " +
                         std::to_string(kMaxNameLength) + " bytes");
      }
    }
    const YAML::Node spec = doc["spec"];
    if (!spec || !spec["containers"] || !spec["containers"].IsSequence() ||
        spec["containers"].size() == 0) {
      return Error("spec.containers", doc,
                   "a Pod needs at least one container");
    }
    if (Status policy = ParseTopologyPolicy(doc, spec, &pod); !policy.ok()) {
      return policy;
    }
    bool guaranteed = true;
    for (auto [key, target] :
         {std::pair{"initContainers", &pod.init_containers},
          std::pair{"containers", &pod.containers}}) {
      const YAML::Node list = spec[key];
      if (!list) continue;
      if (!list.IsSequence()) {
        return Error(std::string("spec.") + key, list, "expected a list");
      }
      for (size_t i = 0; i < list.size(); ++i) {
        const std::string path =
            std::string("spec.") + key + "[" + std::to_string(i) + "]";
        const YAML::Node node = list[i];
        if (!node.IsMap() || !node["name"] || !node["name"].IsScalar()) {
          return Error(path + ".name", node, "every container needs a name");
        }
        manager::Container container;
        container.name = node["name"].Scalar();
        if (!IsValidUtf8(container.name)) {
          return Error(path + ".name", node["name"], "is not valid UTF-8");
        }
        if (container.name.size() > kMaxNameLength) {
          return Error(path + ".name", node["name"],
                       Quoted(container.name) + " is longer than " +
                           std::to_string(kMaxNameLength) + " bytes");
        }
        for (const auto& other : pod.init_containers) {
          if (other.name == container.name) {
            return Error(
                path + ".name", node["name"],
                "container name " + Quoted(container.name) + " is used twice");
          }
        }
        for (const auto& other : pod.containers) {
          if (other.name == container.name) {
            return Error(
                path + ".name", node["name"],
                "container name " + Quoted(container.name) + " is used twice");
          }
        }
        container.restartable =
            node["restartPolicy"] && node["restartPolicy"].Scalar() == "Always";
        auto resources = ParseResources(path, node);
        if (!resources.ok()) return resources.status();
        container.limits = std::move(resources->limits);
        guaranteed = guaranteed && resources->guaranteed;
        target->push_back(std::move(container));
      }
    }
    pod.guaranteed = guaranteed;
    return pod;
  }

 private:
  std::string where_;
};

}  // namespace

StatusOr<int64_t> ParseByteQuantity(std::string_view text) {
  __extension__ using u128 = unsigned __int128;
  const auto bad = [&](const std::string& why) {
    return InvalidArgumentError(Quoted(text) + " is not a quantity of bytes" +
                                (why.empty() ? "" : " (" + why + ")"));
  };
  std::string_view rest = text;
  if (!rest.empty() && rest.front() == '+') rest.remove_prefix(1);
  if (!rest.empty() && rest.front() == '-') return bad("negative");
  // Digits, at most 36 of them so that they fit 128 bits with room.
  u128 digits = 0;
  int count = 0;
  int fraction = 0;
  bool seen_point = false;
  while (!rest.empty() &&
         (std::isdigit(static_cast<unsigned char>(rest.front())) != 0 ||
          (rest.front() == '.' && !seen_point))) {
    if (rest.front() == '.') {
      seen_point = true;
    } else {
      if (++count > 36) return bad("too many digits");
      digits = digits * 10 + static_cast<unsigned>(rest.front() - '0');
      if (seen_point) ++fraction;
    }
    rest.remove_prefix(1);
  }
  if (count == 0) return bad("");
  // The suffix: binary (Ki..Ei), decimal (m, k..E) or an exponent (e6).
  int binary = 0;   // powers of 1024
  int decimal = 0;  // powers of 10
  static const std::map<std::string_view, std::pair<int, int>> kSuffixes = {
      {"", {0, 0}},   {"m", {0, -3}}, {"k", {0, 3}},  {"M", {0, 6}},
      {"G", {0, 9}},  {"T", {0, 12}}, {"P", {0, 15}}, {"E", {0, 18}},
      {"Ki", {1, 0}}, {"Mi", {2, 0}}, {"Gi", {3, 0}}, {"Ti", {4, 0}},
      {"Pi", {5, 0}}, {"Ei", {6, 0}}};
  if (auto it = kSuffixes.find(rest); it != kSuffixes.end()) {
    binary = it->second.first;
    decimal = it->second.second;
  } else if (rest.size() >= 2 && (rest.front() == 'e' || rest.front() == 'E')) {
    int exponent = 0;
    const std::string_view e = rest.substr(1);
    auto [ptr, ec] = std::from_chars(e.data(), e.data() + e.size(), exponent);
    if (ec != std::errc() || ptr != e.data() + e.size() || exponent < -40 ||
        exponent > 40) {
      return bad("bad exponent");
    }
    decimal = exponent;
  } else {
    return bad("unknown suffix " + Quoted(rest));
  }
  decimal -= fraction;
  constexpr u128 kLimit = static_cast<u128>(INT64_MAX);
  u128 value = digits;
  for (int i = 0; i < binary; ++i) {
    if (value > kLimit) return bad("beyond int64");
    value *= 1024;
  }
  for (; decimal > 0; --decimal) {
    if (value > kLimit) return bad("beyond int64");
    value *= 10;
  }
  for (; decimal < 0; ++decimal) {
    if (value % 10 != 0) return bad("not a whole number of bytes");
    value /= 10;
  }
  if (value > kLimit) return bad("beyond int64");
  return static_cast<int64_t>(value);
}

StatusOr<int64_t> ParseCpuQuantity(std::string_view text) {
  const auto value = QuantityValue(std::string(text));
  if (!value || *value < 0) {
    return InvalidArgumentError(Quoted(text) +
                                " is not a CPU quantity such as 2 or 500m");
  }
  // Millicores are 64-bit, as a Kubernetes quantity's MilliValue.
  if (*value * 1000.0 >= 9.2e18) {
    return InvalidArgumentError(Quoted(text) + " is too large a CPU quantity");
  }
  return static_cast<int64_t>(std::llround(*value * 1000.0));
}

StatusOr<std::vector<manager::Pod>> ParsePodManifests(std::string_view text,
                                                      std::string_view source) {
  std::vector<manager::Pod> pods;
  if (text.size() > kMaxManifestBytes) {
    return InvalidArgumentError(std::string(source) + ": larger than " +
                                ByteSize(kMaxManifestBytes) +
                                ", the limit of a manifest");
  }
  auto loaded = yaml::LoadAll(text, source);
  if (!loaded.ok()) return loaded.status();
  try {
    const std::vector<YAML::Node>& docs = *loaded;
    for (size_t i = 0; i < docs.size(); ++i) {
      if (docs[i].IsNull()) continue;
      auto pod = Parser(source, i).Parse(docs[i]);
      if (!pod.ok()) return pod.status();
      pods.push_back(std::move(*pod));
    }
  } catch (const YAML::Exception& e) {
    std::string where(source);
    if (!e.mark.is_null()) {
      where += ":" + std::to_string(e.mark.line + 1) + ":" +
               std::to_string(e.mark.column + 1);
    }
    return InvalidArgumentError(where + ": " + e.msg.substr(0, 200));
  }
  if (pods.empty()) {
    return InvalidArgumentError(std::string(source) + ": no Pod manifest");
  }
  return pods;
}

}  // namespace topology::host
