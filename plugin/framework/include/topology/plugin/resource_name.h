// The kubelet's rules for extended resource names and plugin endpoints.
#ifndef TOPOLOGY_PLUGIN_RESOURCE_NAME_H_
#define TOPOLOGY_PLUGIN_RESOURCE_NAME_H_

#include <string_view>

#include "topology/status.h"

namespace topology::plugin {

// OK when `name` is a valid extended resource name by the kubelet's
// IsExtendedResourceName: "<dns-1123 subdomain>/<name part>", no
// "kubernetes.io/", no "requests." prefix, name part 1-63 characters of
// [A-Za-z0-9] with inner '-', '_', '.'. Otherwise INVALID_ARGUMENT saying
// which rule failed.
Status ValidateResourceName(std::string_view name);

// OK when `endpoint` is a plain file name usable inside the device plugin
// directory: not empty, no '/', not "." or "..", not "kubelet.sock" and not
// the kubelet's checkpoint file.
Status ValidateEndpointName(std::string_view endpoint);

}  // namespace topology::plugin

#endif  // TOPOLOGY_PLUGIN_RESOURCE_NAME_H_
