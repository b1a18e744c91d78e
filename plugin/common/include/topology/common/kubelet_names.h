// The kubelet's vocabulary of the device plugin API v1beta1: the version,
// the socket and directory names, and the kubelet's rules for resource
// names and plugin endpoints, written once for both sides (the device
// plugin framework, the host module) and the DRA framework, on the API
// machinery's name rules (k8s_names.h). No protobuf.
#ifndef TOPOLOGY_COMMON_KUBELET_NAMES_H_
#define TOPOLOGY_COMMON_KUBELET_NAMES_H_

#include <string_view>

#include "topology/status.h"

namespace topology::kubelet {

inline constexpr char kApiVersion[] = "v1beta1";
// The kubelet's registration socket, inside the device plugin directory.
inline constexpr char kKubeletSocket[] = "kubelet.sock";
inline constexpr char kDevicePluginPath[] = "/var/lib/kubelet/device-plugins/";
// The kubelet's own checkpoint in that directory.
inline constexpr char kKubeletCheckpoint[] = "kubelet_internal_checkpoint";

// OK when `name` is a valid extended resource name by the kubelet's
// IsExtendedResourceName: "<dns-1123 subdomain>/<name part>", no
// "kubernetes.io/", no "requests." prefix, name part 1-63 characters of
// [A-Za-z0-9] with inner '-', '_', '.'. Otherwise INVALID_ARGUMENT saying
// which rule failed.
Status ValidateResourceName(std::string_view name);

// OK when `endpoint` is a plain file name usable inside the device plugin
// directory: not empty, no '/', not "." or "..", not kubelet.sock and not
// the kubelet's checkpoint file.
Status ValidateEndpointName(std::string_view endpoint);

// The kubelet's IsExtendedResourceName without the name checks: a
// domain-prefixed name outside kubernetes.io, not "requests.": a resource a
// device plugin may serve. The admission's generic fit looks only at these.
bool IsExtendedResourceName(std::string_view name);

}  // namespace topology::kubelet

#endif  // TOPOLOGY_COMMON_KUBELET_NAMES_H_
