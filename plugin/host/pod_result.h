// What an admission answers for one pod, and its JSON form (the control
// API's replies and the status view).
#ifndef TOPOLOGY_HOST_POD_RESULT_H_
#define TOPOLOGY_HOST_POD_RESULT_H_

#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "topology/cpu_set.h"
#include "topology/manager/memory_manager.h"
#include "topology/manager/topology_manager.h"

namespace topology::host {

struct ContainerResult {
  std::string name = {};
  std::map<std::string, std::vector<std::string>> devices = {};
  CpuSet cpus = {};  // exclusive CPUs; empty = shared pool
  std::optional<std::vector<int>> numa_nodes = {};  // nullopt = no affinity
  // Memory the memory manager (Static) pinned, by type.
  std::vector<manager::MemoryBlock> memory = {};
  // What each plugin's Allocate returned for this container, by resource
  // (envs, mounts, devices, annotations, cdi_devices), as the device
  // manager keeps it with the allocation. Not checkpointed.
  nlohmann::json allocate_responses = nlohmann::json::object();
};

// (clang-tidy 14 cannot see that the json members never throw on destruction
// or move.)
// NOLINTNEXTLINE(bugprone-exception-escape)
struct PodResult {
  std::string uid = {};
  std::string ns = {};
  std::string name = {};
  bool admitted = false;
  // "TopologyAffinityError", "UnexpectedAdmissionError"...
  std::string reason = {};
  std::string message = {};
  std::vector<ContainerResult> containers = {};
  // Which topology policy and scope decided the pod, and from where (beyond
  // the kubelet: under the node policy "dynamic" the pod's own).
  manager::EffectivePolicy policy = {};
  nlohmann::json explanation = {};  // with explain: the merges
};

// {"name","devices":{resource:[ids]},"cpus","numa_nodes","memory":[{"type",
// "size","numa_nodes"}]}: a container's result as replies show it ("memory"
// is the podresources ContainerMemory shape; empty when nothing is pinned).
nlohmann::json ToJson(const ContainerResult& container);
nlohmann::json ToJson(const PodResult& result, bool explain);

}  // namespace topology::host

#endif  // TOPOLOGY_HOST_POD_RESULT_H_
