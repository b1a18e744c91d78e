// Pod and Container: the parts of a Pod spec the topology manager and its
// hint providers read.
//
// Thread safety: value types.
#ifndef TOPOLOGY_MANAGER_POD_H_
#define TOPOLOGY_MANAGER_POD_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace topology::manager {

// Resource name used for CPUs; its quantity is in millicores.
inline constexpr char kCpuResource[] = "cpu";

struct Container {
  std::string name = {};
  // resources.limits: extended resources in units, "cpu" in millicores.
  std::map<std::string, int64_t> limits = {};
  // An init container with restartPolicy Always (a sidecar).
  bool restartable = false;
};

struct Pod {
  std::string uid = {};
  std::string ns = "default";
  std::string name = {};
  std::vector<Container> init_containers = {};
  std::vector<Container> containers = {};
  // Guaranteed QoS (every container's requests equal its limits); the CPU
  // provider only pins CPUs for Guaranteed pods with integer CPU limits.
  bool guaranteed = false;
  // Beyond the kubelet (the Node Topology Manager design): the pod's own
  // topology policy, honoured only under the node policy "dynamic"; empty
  // when the pod states none. `topology_policy_source` says where it was
  // read ("spec.topology.policy" or the annotation's name).
  std::string topology_policy = {};
  std::string topology_policy_source = {};
};

}  // namespace topology::manager

#endif  // TOPOLOGY_MANAGER_POD_H_
