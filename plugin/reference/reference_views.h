// The reference plugin's text for people, rendered from what it holds:
// --print-matches (each resource's devices, the functions no resource
// claims, what is missing for CDI) and the device list it logs.
#ifndef TOPOLOGY_REFERENCE_REFERENCE_VIEWS_H_
#define TOPOLOGY_REFERENCE_REFERENCE_VIEWS_H_

#include <filesystem>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "topology/pci_address.h"
#include "topology/plugin/types.h"

#include "config.h"
#include "reference_plugin.h"

namespace topology::device_plugin {

struct MatchesView {
  const Snapshot& snapshot;
  const Config& config;
  std::filesystem::path cdi_dir;
  std::vector<std::vector<plugin::Device>> devices = {};  // by resource
  std::vector<bool> cdi_written = {};                     // by resource
  std::map<PciAddress, std::string> unhealthy_reasons = {};
};
// Human-readable claims per resource (--print-matches).
std::string DescribeMatches(const MatchesView& view);

// " 0000:3b:00.0 (numa 0), 0000:5e:00.0 (numa 1, Unhealthy)": the first 16
// devices with their NUMA nodes and health, and how many more.
std::string DeviceListLine(const std::vector<plugin::Device>& devices);

// Logs which devices prepared DRA claims took (not offered) and gave back.
void LogDraHeldChanges(const std::set<PciAddress>& before,
                       const std::set<PciAddress>& now);

// All or nothing: the kubelet treats a resource with any NUMA-aware device
// as alignment-sensitive, and its devices without nodes would then never
// fit a NUMA mask. When only some of `devices` have NUMA nodes, every
// device's are cleared, with a warning once (`*warned` keeps that).
void DropPartialLocality(const std::string& resource,
                         std::vector<plugin::Device>& devices, bool* warned);

// The nvidia.com/gpu=<UUID> names of the snapshot's GPUs that no CDI spec
// on the node defines (Allocate returns no CDI name for them).
std::vector<std::string> UndefinedGpuCdiNames(const Snapshot& snapshot);

}  // namespace topology::device_plugin

#endif  // TOPOLOGY_REFERENCE_REFERENCE_VIEWS_H_
