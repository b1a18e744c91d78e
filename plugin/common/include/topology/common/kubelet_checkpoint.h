// The kubelet device manager's checkpoint, read from outside the kubelet:
// /var/lib/kubelet/device-plugins/kubelet_internal_checkpoint (fixed in the
// kubelet whatever its --root-dir), which names the devices each running
// container holds through a device plugin. The
// DRA driver reads it so that a device a pod still holds through the
// device plugin is not handed out again through a claim (the switch from
// one path to the other on a live node).
//
// The format (pkg/kubelet/cm/devicemanager/checkpoint, checkpoint.go and
// checkpointv1.go):
//
//   {"Data": {"PodDeviceEntries": [{"PodUID": "...", "ContainerName": "...",
//              "ResourceName": "...", "DeviceIDs": {"<numa>": ["id", ...]},
//              "AllocResp": "<base64>"}, ...],
//             "RegisteredDevices": {"<resource>": ["id", ...]}},
//    "Checksum": <uint64>}
//
// and, from kubelets before 1.20, "DeviceIDs" as a flat list. The checksum
// is FNV-1a over Go's spew dump of the structure, which only Go reproduces:
// it is not verified. The kubelet writes the file whole (a rename), so a
// reader sees one version or the other.
//
// Thread safety: free functions.
#ifndef TOPOLOGY_COMMON_KUBELET_CHECKPOINT_H_
#define TOPOLOGY_COMMON_KUBELET_CHECKPOINT_H_

#include <cstddef>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "topology/status.h"

namespace topology::kubelet {

// One container's devices of one resource.
struct PodDevices {
  std::string pod_uid;
  std::string container;
  std::string resource;
  std::vector<std::string> device_ids;  // every NUMA node's, sorted
};

// The checkpoint is refused beyond this size (a node's worth of entries is
// well under a megabyte; 110 pods with 8 containers of 8 devices each is
// 300 KiB). Parsed, a document takes about eight times its size: 4 MiB
// keeps the DRA driver, which reads it, within its DaemonSet's 64 MiB
// memory limit whatever the file holds.
inline constexpr size_t kMaxDeviceCheckpointBytes = size_t{4} << 20;

// Parses the checkpoint's text. INVALID_ARGUMENT naming the entry and the
// field when it is not the kubelet's format (a missing key, a wrong type,
// nesting beyond any real checkpoint's).
StatusOr<std::vector<PodDevices>> ParseDeviceCheckpoint(std::string_view text);

// Reads and parses `file` (regular, bounded, no link followed: the device
// plugin directory is writable by every plugin). NOT_FOUND when there is
// none (no kubelet has run the device manager here yet).
StatusOr<std::vector<PodDevices>> ReadDeviceCheckpoint(
    const std::filesystem::path& file);

}  // namespace topology::kubelet

#endif  // TOPOLOGY_COMMON_KUBELET_CHECKPOINT_H_
