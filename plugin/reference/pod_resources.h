// The kubelet's pod resources API (proto/podresources/v1), asked from
// outside the kubelet: which device ids running pods hold through device
// plugins. The kubelet's device checkpoint keeps a deleted pod's devices
// until the next device allocation on the node (the device manager
// forgets them only then); the pod resources List names running pods
// alone, so the two together say what is held now.
#ifndef TOPOLOGY_PLUGIN_REFERENCE_POD_RESOURCES_H_
#define TOPOLOGY_PLUGIN_REFERENCE_POD_RESOURCES_H_

#include <chrono>
#include <filesystem>
#include <set>
#include <string>

#include "topology/status.h"

namespace topology::device_plugin {

// The kubelet's socket of the API below its --root-dir.
std::filesystem::path PodResourcesSocket(const std::filesystem::path& root);

// The device ids (of any device plugin resource) that List names for the
// containers of running pods, asked on `socket` within `deadline`.
// UNAVAILABLE naming the socket when the kubelet does not answer (not
// running, no such socket, the deadline passed); an answer larger than
// 16 MiB is refused.
StatusOr<std::set<std::string>> ListDevicePluginDeviceIds(
    const std::filesystem::path& socket, std::chrono::milliseconds deadline);

}  // namespace topology::device_plugin

#endif  // TOPOLOGY_PLUGIN_REFERENCE_POD_RESOURCES_H_
