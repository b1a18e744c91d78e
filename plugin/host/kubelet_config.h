// serve --config: the kubelet's own configuration file (KubeletConfiguration,
// kubelet.config.k8s.io/v1beta1), so that a node's configuration is pasted,
// not translated into flags by hand. The fields the Topology, CPU and
// Memory Managers and Node Allocatable read are applied to serve's flags,
// each unless its flag was given as well (a flag overrides the file, as the
// kubelet's command line does):
//
//   topologyManagerPolicy          --topology-manager-policy
//   topologyManagerScope           --topology-manager-scope
//   topologyManagerPolicyOptions   --topology-manager-policy-options
//   cpuManagerPolicy               --cpu-manager-policy
//   cpuManagerPolicyOptions        --cpu-manager-policy-options
//   reservedSystemCPUs             --reserved-cpus
//   memoryManagerPolicy            --memory-manager-policy
//   reservedMemory                 --reserved-memory
//   kubeReserved                   --kube-reserved
//   systemReserved                 --system-reserved
//   evictionHard                   --eviction-hard
//
// Every other field of the kubelet's is accepted and left alone. The values
// are then checked as the flags are (memory_flags.h, HostManager::Create).
#ifndef TOPOLOGY_HOST_KUBELET_CONFIG_H_
#define TOPOLOGY_HOST_KUBELET_CONFIG_H_

#include <string_view>

#include "topology/status.h"

#include "manager_cli.h"

namespace topology::host {

// A KubeletConfiguration of at most this size is read.
inline constexpr size_t kMaxKubeletConfigBytes = size_t{1} << 20;

// Applies the KubeletConfiguration `text` (from `where`, for messages) to
// `flags` as the header comment says. INVALID_ARGUMENT naming `where` and
// the field: not YAML, not a KubeletConfiguration of
// kubelet.config.k8s.io/v1beta1, or a field of the wrong type.
Status ApplyKubeletConfiguration(std::string_view text, std::string_view where,
                                 ServeFlags* flags);

// Reads the file flags->kubelet_config (bounded; through links, as the
// kubelet reads its own) and applies it; OK when none is named.
Status LoadKubeletConfiguration(ServeFlags* flags);

}  // namespace topology::host

#endif  // TOPOLOGY_HOST_KUBELET_CONFIG_H_
