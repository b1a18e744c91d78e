#include "kubelet_config.h"

#include <exception>
#include <map>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include <yaml-cpp/yaml.h>

#include "topology/common/yaml_load.h"
#include "topology/text_file.h"

namespace topology::host {
namespace {

constexpr char kApiVersion[] = "kubelet.config.k8s.io/v1beta1";
constexpr char kKind[] = "KubeletConfiguration";

// Thrown by the readers below; ApplyKubeletConfiguration turns it into
// INVALID_ARGUMENT naming the file.
struct FieldError {
  std::string message;
};

std::string Scalar(const YAML::Node& node, const std::string& field) {
  if (!node.IsScalar()) throw FieldError{field + ": not a string or number"};
  return node.Scalar();
}

// A map of scalars ("kubeReserved: {cpu: 500m, memory: 1Gi}"), in key order.
std::map<std::string, std::string> ScalarMap(const YAML::Node& node,
                                             const std::string& field) {
  if (node.IsNull()) return {};
  if (!node.IsMap()) throw FieldError{field + ": not a mapping"};
  std::map<std::string, std::string> out;
  for (const auto& entry : node) {
    const std::string key = Scalar(entry.first, field);
    out[key] = Scalar(entry.second, field + "." + key);
  }
  return out;
}

// "k=v,k=v" (`separator` '=') or "k<v,k<v" (evictionHard).
std::string Joined(const std::map<std::string, std::string>& map,
                   char separator) {
  std::string out;
  for (const auto& [key, value] : map) {
    if (!out.empty()) out += ',';
    out += key + separator + value;
  }
  return out;
}

// reservedMemory: [{numaNode: 0, limits: {memory: 1Gi}}] as --reserved-memory
// values ("0:memory=1Gi"), each entry one.
std::vector<std::string> ReservedMemory(const YAML::Node& node) {
  if (node.IsNull()) return {};
  if (!node.IsSequence()) throw FieldError{"reservedMemory: not a list"};
  std::vector<std::string> out;
  for (size_t i = 0; i < node.size(); ++i) {
    const std::string at = "reservedMemory[" + std::to_string(i) + "]";
    const YAML::Node entry = node[i];
    if (!entry.IsMap()) throw FieldError{at + ": not a mapping"};
    const YAML::Node numa = entry["numaNode"];
    if (!numa) throw FieldError{at + ".numaNode: missing"};
    const std::string limits =
        Joined(ScalarMap(entry["limits"], at + ".limits"), '=');
    if (limits.empty()) throw FieldError{at + ".limits: missing or empty"};
    out.push_back(Scalar(numa, at + ".numaNode") + ":" + limits);
  }
  return out;
}

}  // namespace

Status ApplyKubeletConfiguration(std::string_view text, std::string_view where,
                                 ServeFlags* flags) {
  auto loaded = yaml::Load(text, where);
  if (!loaded.ok()) return loaded.status();
  const YAML::Node& doc = *loaded;
  const std::string file(where);
  if (!doc.IsMap()) {
    return InvalidArgumentError(file + ": not a KubeletConfiguration");
  }
  // What a flag given on the command line leaves alone.
  const auto unless_given = [&](const char* flag, const auto& apply) {
    if (!flags->given.contains(flag)) apply();
  };
  try {
    const YAML::Node api_version = doc["apiVersion"];
    const YAML::Node kind = doc["kind"];
    if (!api_version || !kind ||
        Scalar(api_version, "apiVersion") != kApiVersion ||
        Scalar(kind, "kind") != kKind) {
      return InvalidArgumentError(
          file + ": not a KubeletConfiguration of " + kApiVersion +
          " (apiVersion and kind say what the file is)");
    }
    const std::vector<std::pair<const char*, std::string*>> strings = {
        {"topologyManagerPolicy", &flags->policy},
        {"topologyManagerScope", &flags->scope},
        {"cpuManagerPolicy", &flags->cpu_policy},
        {"reservedSystemCPUs", &flags->reserved_cpus},
        {"memoryManagerPolicy", &flags->memory.policy}};
    const std::map<std::string, const char*> flag_of = {
        {"topologyManagerPolicy", "--topology-manager-policy"},
        {"topologyManagerScope", "--topology-manager-scope"},
        {"cpuManagerPolicy", "--cpu-manager-policy"},
        {"reservedSystemCPUs", "--reserved-cpus"},
        {"memoryManagerPolicy", "--memory-manager-policy"}};
    for (const auto& entry : strings) {
      const YAML::Node value = doc[entry.first];
      if (!value || value.IsNull()) continue;
      const std::string text_value = Scalar(value, entry.first);
      // A local, not a structured binding: clang 14 captures none.
      std::string* const target = entry.second;
      unless_given(flag_of.at(entry.first), [&] { *target = text_value; });
    }
    const std::vector<std::tuple<const char*, const char*, char, std::string*>>
        maps = {
            {"topologyManagerPolicyOptions",
             "--topology-manager-policy-options", '=', &flags->policy_options},
            {"cpuManagerPolicyOptions", "--cpu-manager-policy-options", '=',
             &flags->cpu_policy_options},
            {"featureGates", "--feature-gates", '=', &flags->feature_gates},
            {"kubeReserved", "--kube-reserved", '=',
             &flags->memory.kube_reserved},
            {"systemReserved", "--system-reserved", '=',
             &flags->memory.system_reserved}};
    for (const auto& entry : maps) {
      const char* const field = std::get<0>(entry);
      const YAML::Node value = doc[field];
      if (!value) continue;
      const std::string joined =
          Joined(ScalarMap(value, field), std::get<2>(entry));
      std::string* const target = std::get<3>(entry);
      unless_given(std::get<1>(entry), [&] { *target = joined; });
    }
    if (const YAML::Node eviction = doc["evictionHard"]; eviction) {
      const std::string joined =
          Joined(ScalarMap(eviction, "evictionHard"), '<');
      unless_given("--eviction-hard",
                   [&] { flags->memory.eviction_hard = joined; });
    }
    if (const YAML::Node reserved = doc["reservedMemory"]; reserved) {
      std::vector<std::string> values = ReservedMemory(reserved);
      unless_given("--reserved-memory",
                   [&] { flags->memory.reserved_memory = std::move(values); });
    }
  } catch (const FieldError& e) {
    return InvalidArgumentError(file + ": " + e.message);
  } catch (const std::exception& e) {
    return yaml::ParseError(where, e);
  }
  return OkStatus();
}

Status LoadKubeletConfiguration(ServeFlags* flags) {
  if (flags->kubelet_config.empty()) return OkStatus();
  auto text = ReadTextFile(flags->kubelet_config, kMaxKubeletConfigBytes);
  if (!text.ok()) {
    return Status(text.status().code(), "--config: " + text.status().message());
  }
  return ApplyKubeletConfiguration(*text, flags->kubelet_config, flags);
}

}  // namespace topology::host
