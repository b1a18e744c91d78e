// What the NVIDIA kernel driver says about one GPU in
// /proc/driver/nvidia/gpus/<address>/information, and the outputs an NVIDIA
// GPU's container needs from a device plugin: its /dev/nvidia<minor> node,
// the driver's control nodes, NVIDIA_VISIBLE_DEVICES (GPU UUIDs, as the
// NVIDIA device plugin's default "uuid" strategy) and CDI names as
// `nvidia-ctk cdi generate` writes them ("nvidia.com/gpu=<UUID>").
#ifndef TOPOLOGY_DEVICE_PLUGIN_NVIDIA_H_
#define TOPOLOGY_DEVICE_PLUGIN_NVIDIA_H_

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "topology/pci_address.h"
#include "topology/plugin/types.h"
#include "topology/status.h"

namespace topology::device_plugin {

struct NvidiaGpuInformation {
  std::string model = {};         // "Tesla V100-SXM2-32GB"
  std::string uuid = {};          // "GPU-6a1b..." (as nvidia-smi -L prints it)
  uint32_t minor = 0;             // /dev/nvidia<minor>
  std::string bus_location = {};  // "0000:1a:00.0"
};

// Parses the "Key: <tabs/spaces> value" lines. DATA_LOSS naming the line
// when "Device Minor" or "GPU UUID" is missing or malformed (a minor above
// 255, a UUID not "GPU-" + hex and dashes), or when a field the plugin uses
// (Model, GPU UUID, Device Minor, Bus Location) is given twice.
StatusOr<NvidiaGpuInformation> ParseNvidiaGpuInformation(std::string_view text);

// Reads <host_root>/proc/driver/nvidia/gpus/<address>/information (links
// not followed, at most 64 KiB) and checks that its Bus Location names
// `address`. Errors name the file.
StatusOr<NvidiaGpuInformation> ReadNvidiaGpuInformation(
    const std::filesystem::path& host_root, const PciAddress& address);

// What the driver says about a plugin's GPUs, cross-checked: no two GPUs
// may share a device node or a UUID (each would reach the other's GPU).
struct NvidiaInventory {
  // GPUs whose information is readable and unique.
  std::map<PciAddress, NvidiaGpuInformation> gpus;
  // Why each other GPU is refused: its information file's error, or the
  // GPU it shares a Device Minor or UUID with. Such GPUs are advertised
  // Unhealthy and never allocated.
  std::map<PciAddress, std::string> problems;
  // Set when <host_root>/proc/driver/nvidia is not there at all: the
  // driver is not loaded or the host's directory is not mounted.
  std::string driver_missing;
};

// Reads and cross-checks the information of every GPU in `addresses`.
NvidiaInventory ReadNvidiaInventory(const std::filesystem::path& host_root,
                                    const std::vector<PciAddress>& addresses);

// The control nodes every NVIDIA container needs, those present under
// <host_root>/dev; when <host_root>/dev is not visible, nvidiactl,
// nvidia-uvm and nvidia-uvm-tools (what the NVIDIA device plugin passes).
std::vector<std::string> NvidiaControlNodes(
    const std::filesystem::path& host_root);

// Adds the GPUs' outputs to `allocation`: /dev/nvidia<minor> nodes, the
// control nodes, NVIDIA_VISIBLE_DEVICES and nvidia.com/gpu=<UUID> CDI names.
void AddNvidiaOutputs(const std::vector<NvidiaGpuInformation>& gpus,
                      const std::vector<std::string>& control_nodes,
                      plugin::ContainerAllocation& allocation);

}  // namespace topology::device_plugin

#endif  // TOPOLOGY_DEVICE_PLUGIN_NVIDIA_H_
