// What a container is given besides its environment: mounts and device
// nodes. Plain values shared by the device plugin framework's Allocate
// answers (topology/plugin/types.h) and the CDI specs every program writes
// (topology/common/cdi.h).
#ifndef TOPOLOGY_COMMON_CONTAINER_EDITS_H_
#define TOPOLOGY_COMMON_CONTAINER_EDITS_H_

#include <string>

namespace topology::common {

struct Mount {
  std::string container_path = {};
  std::string host_path = {};
  bool read_only = false;
  friend bool operator==(const Mount&, const Mount&) = default;
};

struct DeviceNode {
  std::string container_path = {};
  std::string host_path = {};
  std::string permissions = {};  // any of "r", "w", "m"
  friend bool operator==(const DeviceNode&, const DeviceNode&) = default;
};

}  // namespace topology::common

#endif  // TOPOLOGY_COMMON_CONTAINER_EDITS_H_
