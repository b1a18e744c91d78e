// Pod and Container: the parts of a Pod spec the topology manager and its
// hint providers read.
//
// Thread safety: value types.
#ifndef TOPOLOGY_MANAGER_POD_H_
#define TOPOLOGY_MANAGER_POD_H_

#include <algorithm>
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
  friend bool operator==(const Container&, const Container&) = default;
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
  friend bool operator==(const Pod&, const Pod&) = default;
};

// The pod's effective request of one resource, the rule every kubelet
// resource manager applies (KEP-753, "resources calculation for scheduling
// and pod admission"; the CPU manager's podGuaranteedCPUs, the memory
// manager's getPodRequestedResources, the device manager's
// podDevices-sizing): the long-running containers (app containers and
// sidecars) together, or a regular init container with the sidecars
// started before it, whichever is more. `request(container)` gives one
// container's request (negative counts as zero); sums saturate, so a
// hostile manifest cannot overflow them.
template <typename Request>
int64_t EffectiveRequest(const Pod& pod, Request&& request) {
  const auto add = [](int64_t a, int64_t b) {
    int64_t sum = 0;
    return __builtin_add_overflow(a, b, &sum) ? INT64_MAX : sum;
  };
  const auto of = [&](const Container& c) -> int64_t {
    return std::max<int64_t>(request(c), 0);
  };
  int64_t sidecars = 0;
  int64_t init_peak = 0;
  for (const Container& c : pod.init_containers) {
    if (c.restartable) {
      sidecars = add(sidecars, of(c));
    } else {
      init_peak = std::max(init_peak, add(sidecars, of(c)));
    }
  }
  int64_t long_running = sidecars;
  for (const Container& c : pod.containers) {
    long_running = add(long_running, of(c));
  }
  return std::max(long_running, init_peak);
}

}  // namespace topology::manager

#endif  // TOPOLOGY_MANAGER_POD_H_
