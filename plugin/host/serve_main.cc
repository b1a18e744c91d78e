// topology-manager-grpc: the program that serves (topology-manager execs
// it for serve, with the same arguments); the other commands run as in
// topology-manager (manager_cli.h).
#include <charconv>
#include <chrono>
#include <iostream>
#include <optional>
#include <sstream>
#include <string>

#include <glog/logging.h>
#include <grp.h>
#include <sys/stat.h>
#include <unistd.h>

#include "topology/discovery.h"
#include "topology/manager/policy_options.h"
#include "topology/plugin/daemon.h"
#include "topology/plugin/duration.h"
#include "topology/plugin/logging.h"

#include "host_manager.h"
#include "host_server.h"
#include "kubelet_config.h"
#include "manager_cli.h"
#include "memory_flags.h"
#include "pod_manifest.h"
#include "text_util.h"

namespace {

int RunServe(const topology::host::ServeFlags& given, char** argv) {
  const char* argv0 = argv[0];
  // The kubelet's own configuration file first, the flags given over it.
  topology::host::ServeFlags flags = given;
  if (topology::Status loaded =
          topology::host::LoadKubeletConfiguration(&flags);
      !loaded.ok()) {
    std::cerr << "topology-manager serve: " << loaded.message() << "\n";
    return topology::host::kExitUsage;
  }
  // Files and sockets get explicit modes; the umask only covers the short
  // window between creating a socket and setting its mode.
  umask(077);
  // epoll1, not the plugins' poll: the servers here are handed their
  // connections by descriptor (UnixAcceptor), and under poll a second call
  // on a connection waits until the first has been answered.
  const std::string engine = topology::plugin::ChooseGrpcPollEngine("epoll1");
  topology::plugin::InitLogging(argv0, flags.verbosity);
  topology::plugin::BlockShutdownSignals();
  topology::plugin::RaiseOpenFileLimit();
  VLOG(1) << "gRPC polling engine: " << engine;
  topology::DiscoveryOptions discovery;
  discovery.host_root = flags.host_root;
  topology::StatusOr<topology::Topology> topology =
      flags.hwloc_xml.empty() ? topology::Discover(discovery)
                              : topology::LoadHwlocXml(flags.hwloc_xml);
  if (!topology.ok()) {
    std::cerr << "topology-manager serve: " << topology.status().message()
              << "\n";
    return topology::host::kExitUsage;
  }
  topology::host::HostConfig config;
  config.plugin_dir = flags.plugin_dir;
  config.control_socket = flags.control_socket;
  config.topology.policy = flags.policy;
  config.topology.scope = flags.scope;
  config.cpu_policy = flags.cpu_policy;
  // The kubelet's key=value,... flags of policy options.
  const auto options = [](const std::string& flag, const std::string& text,
                          std::map<std::string, std::string>* out) {
    std::stringstream items(text);
    std::string item;
    while (std::getline(items, item, ',')) {
      const size_t equals = item.find('=');
      if (equals == std::string::npos || equals == 0) {
        std::cerr << "topology-manager serve: " << flag << ": \"" << item
                  << "\" is not key=value\n";
        return false;
      }
      (*out)[item.substr(0, equals)] = item.substr(equals + 1);
    }
    return true;
  };
  if (!options("--topology-manager-policy-options", flags.policy_options,
               &config.topology.policy_options) ||
      !options("--cpu-manager-policy-options", flags.cpu_policy_options,
               &config.cpu_policy_options)) {
    return topology::host::kExitUsage;
  }
  {
    std::map<std::string, std::string> gates;
    if (!options("--feature-gates", flags.feature_gates, &gates)) {
      return topology::host::kExitUsage;
    }
    for (const auto& [name, value] : gates) {
      const std::optional<bool> on = topology::manager::ParseGoBool(value);
      if (!on) {
        std::cerr << "topology-manager serve: --feature-gates: invalid value "
                     "of "
                  << name << "=" << value << ", err: strconv.ParseBool: "
                  << "parsing \"" << value << "\": invalid syntax\n";
        return topology::host::kExitUsage;
      }
      config.feature_gates[name] = *on;
    }
  }
  if (!flags.reserved_cpus.empty()) {
    auto reserved = topology::CpuSet::ParseList(flags.reserved_cpus);
    if (!reserved.ok()) {
      std::cerr << "topology-manager serve: --reserved-cpus: "
                << reserved.status().message() << "\n";
      return topology::host::kExitUsage;
    }
    config.reserved_cpus = *reserved;
  } else {
    // The kubelet reserves CPUs by count from kube- and system-reserved
    // cpu when no set is given (--reserved-cpus overrides both).
    auto count = topology::host::ReservedCpuCount(flags.memory.kube_reserved,
                                                  flags.memory.system_reserved);
    if (!count.ok()) {
      std::cerr << "topology-manager serve: " << count.status().message()
                << "\n";
      return topology::host::kExitUsage;
    }
    config.reserved_cpu_count = *count;
  }
  uint64_t memory_capacity = 0;
  for (const topology::NumaNode& node : topology->numa_nodes()) {
    memory_capacity += node.memory_bytes;
  }
  auto memory = topology::host::MemoryOptions(flags.memory, memory_capacity);
  if (!memory.ok()) {
    std::cerr << "topology-manager serve: " << memory.status().message()
              << "\n";
    return topology::host::kExitUsage;
  }
  config.memory = std::move(*memory);
  auto drift = topology::host::ParseByteQuantity(flags.memory_drift_tolerance);
  if (!drift.ok()) {
    std::cerr << "topology-manager serve: --memory-drift-tolerance: "
              << drift.status().message() << "\n";
    return topology::host::kExitUsage;
  }
  config.memory_drift_tolerance = static_cast<uint64_t>(*drift);
  auto grace = topology::plugin::ParseDuration(flags.grace_period);
  if (!grace.ok()) {
    std::cerr << "topology-manager serve: --grace-period: "
              << grace.status().message() << "\n";
    return topology::host::kExitUsage;
  }
  config.grace_period =
      std::chrono::duration_cast<std::chrono::milliseconds>(*grace);
  auto rpc_timeout = topology::plugin::ParseDuration(flags.rpc_timeout);
  if (!rpc_timeout.ok() || *rpc_timeout <= std::chrono::nanoseconds(0)) {
    std::cerr << "topology-manager serve: --plugin-rpc-timeout: "
              << (rpc_timeout.ok() ? std::string("must be positive")
                                   : rpc_timeout.status().message())
              << "\n";
    return topology::host::kExitUsage;
  }
  config.rpc_timeout =
      std::chrono::duration_cast<std::chrono::milliseconds>(*rpc_timeout);
  if (!flags.control_group.empty()) {
    const group* entry = getgrnam(flags.control_group.c_str());
    int gid = -1;
    if (entry != nullptr) {
      gid = static_cast<int>(entry->gr_gid);
    } else {
      auto [ptr, error] = std::from_chars(
          flags.control_group.data(),
          flags.control_group.data() + flags.control_group.size(), gid);
      if (error != std::errc() ||
          ptr != flags.control_group.data() + flags.control_group.size() ||
          gid < 0) {
        std::cerr << "topology-manager serve: --control-group: no group "
                  << topology::host::Quoted(flags.control_group) << "\n";
        return topology::host::kExitUsage;
      }
    }
    config.control_group = gid;
  }
  config.cost_based_selection = flags.cost_based_selection;
  config.node_name = flags.node_name;
  if (config.node_name.empty()) {
    char host[256] = {};
    gethostname(host, sizeof(host) - 1);
    config.node_name = host;
  }
  auto host = topology::host::HostManager::Create(config, std::move(*topology));
  if (!host.ok()) {
    std::cerr << "topology-manager serve: " << host.status().message() << "\n";
    return topology::host::kExitUsage;
  }
  // Admission state first, then the sockets that expose it.
  if (auto restored = (*host)->Restore(); !restored.ok()) {
    LOG(ERROR) << "cannot start: " << restored.message();
    return 1;
  }
  auto server = topology::host::HostServer::Start(
      (*host)->ServerOptions(), (*host)->registry(), host->get());
  if (!server.ok()) {
    LOG(ERROR) << "cannot start: " << server.status().message();
    return 1;
  }
  (*host)->Serve(std::move(*server));
  const int signal = topology::plugin::WaitForShutdownSignal();
  LOG(INFO) << "received signal " << signal << "; shutting down";
  topology::plugin::ExitIfStillRunningAfter(std::chrono::milliseconds(4500), 0);
  (*host)->Stop();
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return topology::host::RunGuarded(argc, argv, &RunServe);
}
