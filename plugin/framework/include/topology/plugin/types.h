// Plain C++ values of the device plugin API, so that plugins built on the
// framework never see protobuf or gRPC types. proto_conversion.cc is the one
// place that turns them into v1beta1 messages and back.
#ifndef TOPOLOGY_PLUGIN_TYPES_H_
#define TOPOLOGY_PLUGIN_TYPES_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "topology/common/container_edits.h"  // Mount, DeviceNode
#include "topology/export.h"                  // C++20 check

namespace topology::plugin {

inline constexpr char kApiVersion[] = "v1beta1";
inline constexpr char kKubeletSocket[] = "kubelet.sock";
inline constexpr char kDefaultPluginDir[] = "/var/lib/kubelet/device-plugins/";

enum class Health { kHealthy, kUnhealthy };

// Returns "Healthy" or "Unhealthy", the exact strings of the API.
const char* HealthName(Health health);

struct Device {
  std::string id = {};
  Health health = Health::kHealthy;
  // NUMA nodes the device is local to; empty means "no topology" and is sent
  // as an absent TopologyInfo. Never holds a negative id.
  std::vector<int64_t> numa_nodes = {};

  friend bool operator==(const Device&, const Device&) = default;
};

struct DevicePluginOptions {
  bool pre_start_required = false;
  bool get_preferred_allocation_available = false;

  friend bool operator==(const DevicePluginOptions&,
                         const DevicePluginOptions&) = default;
};

// One container's GetPreferredAllocation question after the framework's
// checks: ids are known, de-duplicated, must_include is a subset of
// available, and 0 < |must_include| <= size <= |available| holds.
struct PreferredAllocationRequest {
  std::vector<std::string> available = {};
  std::vector<std::string> must_include = {};
  int size = 0;
};

// What one container gets for its devices (ContainerAllocateResponse).
struct ContainerAllocation {
  std::map<std::string, std::string> envs = {};
  std::vector<common::Mount> mounts = {};
  std::vector<common::DeviceNode> devices = {};
  std::map<std::string, std::string> annotations = {};
  std::vector<std::string> cdi_devices = {};  // fully qualified CDI names
  friend bool operator==(const ContainerAllocation&,
                         const ContainerAllocation&) = default;
};

}  // namespace topology::plugin

#endif  // TOPOLOGY_PLUGIN_TYPES_H_
