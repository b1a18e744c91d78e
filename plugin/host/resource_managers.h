// The kubelet's resource managers as the host runs them: the Topology
// Manager with its three hint providers (device, CPU and Memory Managers,
// in the kubelet's order), built from the host's configuration. They are
// the only owners of what a pod holds: devices with their Allocate
// answers, exclusive CPUs, pinned memory and affinities. The host's pod
// view, checkpoint and NodeResourceTopology read it from here, as the
// kubelet's podresources server reads its providers.
//
// Thread safety: each manager locks its own state; Admit one pod at a time
// (the host's admission slot).
#ifndef TOPOLOGY_HOST_RESOURCE_MANAGERS_H_
#define TOPOLOGY_HOST_RESOURCE_MANAGERS_H_

#include <memory>
#include <string>
#include <vector>

#include "topology/cost_model.h"
#include "topology/manager/cpu_manager.h"
#include "topology/manager/device_manager.h"
#include "topology/manager/memory_manager.h"
#include "topology/manager/numa_info.h"
#include "topology/manager/pod.h"
#include "topology/manager/topology_manager.h"
#include "topology/status.h"
#include "topology/topology.h"

#include "host_config.h"
#include "pod_result.h"

namespace topology::host {

class ResourceManagers {
 public:
  // Checks the configuration the way the kubelet does at start (feature
  // gates, CPU and memory manager policies, reserved CPUs and memory).
  static StatusOr<std::unique_ptr<ResourceManagers>> Create(
      const HostConfig& config, Topology topology);
  ResourceManagers(const ResourceManagers&) = delete;
  ResourceManagers& operator=(const ResourceManagers&) = delete;

  // The Topology Manager's admission: merge, then every provider's
  // Allocate; then the kubelet's generic fit of extended resources no
  // plugin offers. `traces`, when not null, receives the merges.
  manager::AdmitResult Admit(const manager::Pod& pod,
                             std::vector<manager::MergeTrace>* traces);
  // What `pod` holds, one entry per container (init containers first),
  // each manager asked for its part.
  std::vector<ContainerResult> Holdings(const manager::Pod& pod) const;
  // Every allocation of `uid` given back (devices, CPUs, memory, affinity).
  void Forget(const std::string& uid);

  const Topology& topology() const { return topology_; }
  manager::TopologyManager& topology_manager() { return *topology_manager_; }
  const manager::TopologyManager& topology_manager() const {
    return *topology_manager_;
  }
  manager::DeviceManager& devices() { return *device_manager_; }
  const manager::DeviceManager& devices() const { return *device_manager_; }
  manager::CpuManager& cpus() { return *cpu_manager_; }
  const manager::CpuManager& cpus() const { return *cpu_manager_; }
  manager::MemoryManager& memory() { return *memory_manager_; }
  const manager::MemoryManager& memory() const { return *memory_manager_; }

 private:
  explicit ResourceManagers(Topology topology)
      : topology_(std::move(topology)) {}

  Topology topology_;
  std::unique_ptr<manager::TopologyManager> topology_manager_;
  std::unique_ptr<manager::DeviceManager> device_manager_;
  std::unique_ptr<manager::CpuManager> cpu_manager_;
  std::unique_ptr<manager::MemoryManager> memory_manager_;
  std::unique_ptr<CostModel> cost_model_;  // with cost_based_selection
};

}  // namespace topology::host

#endif  // TOPOLOGY_HOST_RESOURCE_MANAGERS_H_
