#include "serve_options.h"

#include <charconv>
#include <chrono>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <tuple>

#include <grp.h>
#include <unistd.h>

#include "topology/common/duration.h"
#include "topology/common/text_util.h"
#include "topology/manager/policy_options.h"

#include "memory_flags.h"
#include "pod_manifest.h"

namespace topology::host {

using text::Quoted;

namespace {

// The kubelet's key=value,... flags of policy options and gates.
Status ParseKeyValues(const std::string& flag, const std::string& text,
                      std::map<std::string, std::string>* out) {
  std::stringstream items(text);
  std::string item;
  while (std::getline(items, item, ',')) {
    const size_t equals = item.find('=');
    if (equals == std::string::npos || equals == 0) {
      return InvalidArgumentError(flag + ": \"" + item + "\" is not key=value");
    }
    (*out)[item.substr(0, equals)] = item.substr(equals + 1);
  }
  return OkStatus();
}

// --feature-gates, with the kubelet's refusal of a value that is not a
// Go bool.
StatusOr<std::map<std::string, bool>> ParseFeatureGates(
    const std::string& text) {
  std::map<std::string, std::string> gates;
  if (Status parsed = ParseKeyValues("--feature-gates", text, &gates);
      !parsed.ok()) {
    return parsed;
  }
  std::map<std::string, bool> out;
  for (const auto& [name, value] : gates) {
    const std::optional<bool> on = manager::ParseGoBool(value);
    if (!on) {
      return InvalidArgumentError("--feature-gates: invalid value of " + name +
                                  "=" + value +
                                  ", err: strconv.ParseBool: parsing \"" +
                                  value + "\": invalid syntax");
    }
    out[name] = *on;
  }
  return out;
}

// --control-group: a group name or a numeric id.
StatusOr<int> ParseControlGroup(const std::string& name) {
  if (const group* entry = getgrnam(name.c_str()); entry != nullptr) {
    return static_cast<int>(entry->gr_gid);
  }
  int gid = -1;
  auto [ptr, error] =
      std::from_chars(name.data(), name.data() + name.size(), gid);
  if (error != std::errc() || ptr != name.data() + name.size() || gid < 0) {
    return InvalidArgumentError("--control-group: no group " + Quoted(name));
  }
  return gid;
}

// A Go duration flag as milliseconds; `positive` refuses zero.
StatusOr<std::chrono::milliseconds> ParseMilliseconds(const std::string& flag,
                                                      const std::string& text,
                                                      bool positive) {
  auto parsed = common::ParseDuration(text);
  if (!parsed.ok()) {
    return InvalidArgumentError(flag + ": " + parsed.status().message());
  }
  if (positive && *parsed <= std::chrono::nanoseconds(0)) {
    return InvalidArgumentError(flag + ": must be positive");
  }
  return std::chrono::duration_cast<std::chrono::milliseconds>(*parsed);
}

// The CPUs kept for the system: --reserved-cpus, or as many as kube- and
// system-reserved cpu (the kubelet's numReservedCPUs).
Status SetReservedCpus(const ServeFlags& flags, HostConfig* config) {
  if (!flags.reserved_cpus.empty()) {
    auto reserved = CpuSet::ParseList(flags.reserved_cpus);
    if (!reserved.ok()) {
      return InvalidArgumentError("--reserved-cpus: " +
                                  reserved.status().message());
    }
    config->reserved_cpus = *reserved;
    return OkStatus();
  }
  auto count = ReservedCpuCount(flags.memory.kube_reserved,
                                flags.memory.system_reserved);
  if (!count.ok()) return count.status();
  config->reserved_cpu_count = *count;
  return OkStatus();
}

// The Memory Manager's options and the restart's drift tolerance.
Status SetMemory(const ServeFlags& flags, const Topology& topology,
                 HostConfig* config) {
  uint64_t memory_capacity = 0;
  for (const NumaNode& node : topology.numa_nodes()) {
    memory_capacity += node.memory_bytes;
  }
  auto memory = MemoryOptions(flags.memory, memory_capacity);
  if (!memory.ok()) return memory.status();
  config->memory = std::move(*memory);
  auto drift = ParseByteQuantity(flags.memory_drift_tolerance);
  if (!drift.ok()) {
    return InvalidArgumentError("--memory-drift-tolerance: " +
                                drift.status().message());
  }
  config->memory.drift_tolerance = static_cast<uint64_t>(*drift);
  return OkStatus();
}

}  // namespace

StatusOr<HostConfig> HostConfigFromFlags(const ServeFlags& flags,
                                         const Topology& topology) {
  HostConfig config;
  config.plugin_dir = flags.plugin_dir;
  config.control_socket = flags.control_socket;
  config.topology.policy = flags.policy;
  config.topology.scope = flags.scope;
  config.cpu_policy = flags.cpu_policy;
  for (const auto& [flag, text, out] :
       {std::tuple{"--topology-manager-policy-options", &flags.policy_options,
                   &config.topology.policy_options},
        std::tuple{"--cpu-manager-policy-options", &flags.cpu_policy_options,
                   &config.cpu_policy_options}}) {
    if (Status parsed = ParseKeyValues(flag, *text, out); !parsed.ok()) {
      return parsed;
    }
  }
  auto gates = ParseFeatureGates(flags.feature_gates);
  if (!gates.ok()) return gates.status();
  for (const auto& [name, on] : *gates) config.feature_gates[name] = on;
  if (Status set = SetReservedCpus(flags, &config); !set.ok()) return set;
  if (Status set = SetMemory(flags, topology, &config); !set.ok()) return set;
  auto grace = ParseMilliseconds("--grace-period", flags.grace_period, false);
  if (!grace.ok()) return grace.status();
  config.grace_period = *grace;
  auto rpc_timeout =
      ParseMilliseconds("--plugin-rpc-timeout", flags.rpc_timeout, true);
  if (!rpc_timeout.ok()) return rpc_timeout.status();
  config.rpc_timeout = *rpc_timeout;
  if (!flags.control_group.empty()) {
    auto gid = ParseControlGroup(flags.control_group);
    if (!gid.ok()) return gid.status();
    config.control_group = *gid;
  }
  config.cost_based_selection = flags.cost_based_selection;
  config.node_name = flags.node_name;
  if (config.node_name.empty()) {
    char host[256] = {};
    gethostname(host, sizeof(host) - 1);
    config.node_name = host;
  }
  return config;
}

}  // namespace topology::host
