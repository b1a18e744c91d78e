#include "resource_managers.h"

#include <utility>

#include "topology/common/kubelet_names.h"

#include "cost_selector.h"
#include "host_views.h"

namespace topology::host {

StatusOr<std::unique_ptr<ResourceManagers>> ResourceManagers::Create(
    const HostConfig& config, Topology topology) {
  const auto gate = [&](const char* name, bool by_default) {
    const auto it = config.feature_gates.find(name);
    return it == config.feature_gates.end() ? by_default : it->second;
  };
  if (gate("PodLevelResourceManagers", false)) {
    return Status(
        StatusCode::kUnimplemented,
        "feature gate PodLevelResourceManagers: pod-level resources in the "
        "Topology, CPU and Memory Managers are not modelled; run without it "
        "(it is off by default)");
  }
  auto numa = manager::NumaInfo::FromTopology(topology);
  if (!numa.ok()) return numa.status();
  std::unique_ptr<ResourceManagers> managers(
      new ResourceManagers(std::move(topology)));
  auto tm = manager::TopologyManager::Create(config.topology, *numa);
  if (!tm.ok()) return tm.status();
  managers->topology_manager_ = std::move(*tm);
  manager::CpuManagerConfig cpu_config;
  cpu_config.policy = config.cpu_policy;
  cpu_config.reserved = config.reserved_cpus;
  if (config.reserved_cpus.empty()) {
    cpu_config.reserved_count = config.reserved_cpu_count;
  }
  cpu_config.options = config.cpu_policy_options;
  cpu_config.alpha_options = gate("CPUManagerPolicyAlphaOptions", false);
  cpu_config.beta_options = gate("CPUManagerPolicyBetaOptions", true);
  cpu_config.topology_policy = config.topology.policy;
  auto cpu = manager::CpuManager::Create(cpu_config, managers->topology_,
                                         managers->topology_manager_.get());
  if (!cpu.ok()) {
    return Status(cpu.status().code(),
                  "cpu manager: " + cpu.status().message());
  }
  managers->cpu_manager_ = std::move(*cpu);
  auto memory = manager::MemoryManager::Create(
      config.memory, managers->topology_.numa_nodes(),
      managers->topology_manager_.get());
  if (!memory.ok()) {
    return Status(memory.status().code(),
                  "memory manager: " + memory.status().message());
  }
  managers->memory_manager_ = std::move(*memory);
  managers->device_manager_ = std::make_unique<manager::DeviceManager>(
      numa->node_ids(), managers->topology_manager_.get());
  if (config.cost_based_selection) {
    managers->cost_model_ = std::make_unique<CostModel>(managers->topology_);
    managers->device_manager_->SetJointSelector(
        CostBasedSelector(managers->cost_model_.get()));
  }
  // The kubelet's order (container_manager_linux.go): device manager, CPU
  // manager, memory manager; Allocate runs in the same order.
  managers->topology_manager_->AddHintProvider(managers->device_manager_.get());
  managers->topology_manager_->AddHintProvider(managers->cpu_manager_.get());
  managers->topology_manager_->AddHintProvider(managers->memory_manager_.get());
  return managers;
}

manager::AdmitResult ResourceManagers::Admit(
    const manager::Pod& pod, std::vector<manager::MergeTrace>* traces) {
  manager::AdmitResult admitted = topology_manager_->Admit(pod, traces);
  if (!admitted.admit) return admitted;
  // The generic resource fit (the kubelet's predicate admission, which runs
  // after the Topology Manager's): an extended resource no plugin ever
  // offered and no pod holds cannot fit.
  for (const auto* list : {&pod.init_containers, &pod.containers}) {
    for (const manager::Container& container : *list) {
      for (const auto& [resource, quantity] : container.limits) {
        if (!kubelet::IsExtendedResourceName(resource) || quantity <= 0) {
          continue;
        }
        if (device_manager_->IsDevicePluginResource(resource)) continue;
        admitted.admit = false;
        admitted.reason = "OutOf" + resource;
        admitted.message =
            "Node didn't have enough resource: " + resource + ", requested: " +
            std::to_string(manager::DeviceManager::PodRequest(pod, resource)) +
            ", used: 0, capacity: 0";
        return admitted;
      }
    }
  }
  return admitted;
}

std::vector<ContainerResult> ResourceManagers::Holdings(
    const manager::Pod& pod) const {
  std::vector<ContainerResult> out;
  out.reserve(pod.init_containers.size() + pod.containers.size());
  for (const auto* list : {&pod.init_containers, &pod.containers}) {
    for (const manager::Container& container : *list) {
      ContainerResult held;
      held.name = container.name;
      for (const auto& [resource, quantity] : container.limits) {
        if (!kubelet::IsExtendedResourceName(resource)) continue;
        auto ids = device_manager_->ContainerDevices(pod.uid, container.name,
                                                     resource);
        if (ids.empty()) continue;
        held.devices[resource] = std::move(ids);
        // The device manager keeps the plugin's answer with the allocation.
        const std::string response = device_manager_->AllocateResponse(
            pod.uid, container.name, resource);
        if (!response.empty()) {
          held.allocate_responses[resource] = AllocateResponseJson(response);
        }
      }
      held.cpus = cpu_manager_->ContainerCpus(pod.uid, container.name);
      held.memory = memory_manager_->ContainerBlocks(pod.uid, container.name);
      const manager::TopologyHint hint =
          topology_manager_->GetAffinity(pod.uid, container.name);
      if (hint.affinity) held.numa_nodes = hint.affinity->Ids();
      out.push_back(std::move(held));
    }
  }
  return out;
}

void ResourceManagers::Forget(const std::string& uid) {
  device_manager_->RemovePod(uid);
  cpu_manager_->RemovePod(uid);
  memory_manager_->RemovePod(uid);
  topology_manager_->RemovePod(uid);
}

}  // namespace topology::host
