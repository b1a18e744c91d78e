// The host's configuration: the kubelet's flags and configuration fields
// the managers read (policies, reservations, feature gates), and the
// daemon's own (sockets, deadlines, the checkpoint's bound, the clock).
#ifndef TOPOLOGY_HOST_HOST_CONFIG_H_
#define TOPOLOGY_HOST_HOST_CONFIG_H_

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <map>
#include <string>

#include "topology/clock.h"
#include "topology/cpu_set.h"
#include "topology/manager/cpu_manager.h"
#include "topology/manager/memory_manager.h"
#include "topology/manager/topology_manager.h"

namespace topology::host {

inline constexpr char kCheckpointFile[] = "topology_manager_checkpoint";

struct HostConfig {
  std::filesystem::path plugin_dir = "/var/lib/kubelet/device-plugins/";
  // Empty: no control socket (tests drive the manager directly).
  std::filesystem::path control_socket = "/run/topology-manager.sock";
  std::string node_name;
  manager::ManagerConfig topology;  // policy, scope, options
  std::string cpu_policy = manager::kCpuPolicyNone;
  // The static policy's options (--cpu-manager-policy-options).
  std::map<std::string, std::string> cpu_policy_options;
  CpuSet reserved_cpus;
  // Without reserved_cpus: the kubelet's numReservedCPUs (--kube-reserved
  // plus --system-reserved cpu, rounded up), which the static policy then
  // chooses itself; -1 when unset.
  int reserved_cpu_count = -1;
  // The kubelet's --feature-gates / featureGates: those that decide what
  // the managers accept (CPUManagerPolicyAlphaOptions,
  // CPUManagerPolicyBetaOptions) are read, PodLevelResourceManagers on is
  // refused (not modelled); others are kept but unused.
  std::map<std::string, bool> feature_gates;
  // The kubelet's Memory Manager: --memory-manager-policy, --reserved-memory
  // and the Node Allocatable reservation of memory types (kube-reserved +
  // system-reserved + hard eviction); beyond the kubelet, the restart's
  // drift tolerance (--memory-drift-tolerance).
  manager::MemoryManager::Options memory;
  // A plugin that disconnected is removed after this long.
  std::chrono::milliseconds grace_period = std::chrono::minutes(5);
  // Opt-in, beyond the kubelet: choose the devices of a container that asks
  // for several PCI device resources together, by PCIe cost (the cost-graph
  // selector), instead of one resource at a time.
  bool cost_based_selection = false;
  // How long Register waits for the plugin's socket to accept (the
  // kubelet's 10 s).
  std::chrono::milliseconds dial_timeout = std::chrono::seconds(10);
  // Deadline of every GetPreferredAllocation and Allocate call. Beyond the
  // kubelet, which sets none: a hung plugin fails the admissions that need
  // it (UnexpectedAdmissionError) instead of stalling the node.
  std::chrono::milliseconds rpc_timeout = std::chrono::seconds(30);
  // Group allowed to use the control socket (mode 0660); -1: root only
  // (mode 0600).
  int control_group = -1;
  // A checkpoint larger than this is refused as corrupt.
  size_t max_checkpoint_bytes = size_t{256} << 20;
  // Time for the grace period and the plugin endpoints' pauses; not owned.
  const Clock* clock = &Clock::Real();
};

}  // namespace topology::host

#endif  // TOPOLOGY_HOST_HOST_CONFIG_H_
