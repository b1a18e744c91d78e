#include "topology/plugin/resource_name.h"

#include <string_view>

#include "topology/common/kubelet_names.h"
#include "topology/plugin/types.h"

namespace topology::plugin {

// The framework's names are the kubelet vocabulary's, spelled for plugins
// that never include the proto's headers.
static_assert(std::string_view(kApiVersion) == kubelet::kApiVersion);
static_assert(std::string_view(kKubeletSocket) == kubelet::kKubeletSocket);
static_assert(std::string_view(kDefaultPluginDir) ==
              kubelet::kDevicePluginPath);

Status ValidateResourceName(std::string_view name) {
  return kubelet::ValidateResourceName(name);
}

Status ValidateEndpointName(std::string_view endpoint) {
  return kubelet::ValidateEndpointName(endpoint);
}

}  // namespace topology::plugin
