// The YAML configuration of topology-device-plugin: which PCI devices each
// extended resource claims (selectors in the SR-IOV device plugin's
// vocabulary) and what a container gets for them.
//
//   resources:
//     - name: example.com/gpu
//       selectors:              # a device matches when any selector matches;
//         - vendors: ["10de"]   # inside a selector every field must match
//           classes: ["0302"]
//       deviceNodes: ["/dev/dri/by-path/pci-{address}-render"]
//       cdiKind: example.com/gpu
//       nvidia: true            # /dev/nvidia<minor>, NVIDIA_VISIBLE_DEVICES...
//       shareable:              # DRA only: shared by capacity (KEP-5075)
//         capacity:
//           bandwidth: {value: "100", default: "10",
//                       validRange: {min: "10", step: "10"}}
//
// Resources are tried in order; a device belongs to the first that claims it.
#ifndef TOPOLOGY_DEVICE_PLUGIN_CONFIG_H_
#define TOPOLOGY_DEVICE_PLUGIN_CONFIG_H_

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "topology/pci_address.h"
#include "topology/status.h"

namespace topology::device_plugin {

struct PfNameSelector {
  std::string name;  // network interface of the physical function
  // "ens1f0#2-5": only VFs 2..5 of it. nullopt: every VF.
  std::optional<std::pair<int, int>> vf_range;
};

struct Selector {
  std::vector<uint16_t> vendors;
  std::vector<uint16_t> devices;
  // Lower-case hex prefixes of the 24-bit class code: "03" (class),
  // "0302" (class + subclass) or "030200" (with the programming interface).
  std::vector<std::string> classes;
  std::vector<std::string> drivers;
  std::vector<PciAddress> pci_addresses;
  std::vector<PfNameSelector> pf_names;
};

// One capacity of a device shared by capacity (topology-dra-driver only,
// KEP-5075): its value and what one allocation may consume of it (a
// default, and valid values or a range). Quantities as text ("100", "80Gi").
struct SharedCapacity {
  std::string value;
  std::string default_value;  // empty: a request names its amount
  std::vector<std::string> valid_values;
  std::string range_min;  // a range when set
  std::string range_max;  // empty: up to the value
  std::string range_step;
};

struct ResourceConfig {
  std::string name;
  std::vector<Selector> selectors;
  // Device nodes to hand out, as globs under the host root; "{address}" and
  // "{iommuGroup}" are replaced per device. vfio-pci devices get their
  // /dev/vfio nodes without being listed here.
  std::vector<std::string> device_nodes;
  // When set, Allocate also names each device as the CDI device
  // "<cdiKind>=<address>".
  std::string cdi_kind;
  // NVIDIA GPUs: read the driver's /proc/driver/nvidia/gpus/<address>/
  // information and hand out /dev/nvidia<minor>, the control nodes,
  // NVIDIA_VISIBLE_DEVICES (UUIDs) and nvidia.com/gpu=<UUID> CDI names.
  bool nvidia = false;
  // Never report NUMA affinity for this resource (as SR-IOV's option).
  bool exclude_topology = false;
  // Advertise and answer GetPreferredAllocation. Default: true.
  bool preferred_allocation = true;
  // topology-dra-driver: each device is shareable by these capacities
  // (name -> capacity): published with allowMultipleAllocations, and each
  // claim gets a share of it. The device plugin hands devices out whole.
  std::map<std::string, SharedCapacity> shared_capacity;
};

struct Config {
  std::vector<ResourceConfig> resources;
};

// Parses the YAML text. Errors name `source`, the line and column for YAML
// syntax, and the key path ("resources[0].selectors[1].vendors[0]") for bad
// values and unknown keys.
StatusOr<Config> ParseConfig(std::string_view text, std::string_view source);
// A configuration larger than this is refused (a ConfigMap holds at most
// 1 MiB).
inline constexpr size_t kMaxConfigBytes = size_t{1} << 20;

// Reads and parses `file`: NOT_FOUND when it does not exist;
// INVALID_ARGUMENT naming it when it is a directory, larger than
// kMaxConfigBytes or not a valid configuration.
StatusOr<Config> LoadConfig(const std::filesystem::path& file);

// "PCIDEVICE_EXAMPLE_COM_GPU" for "example.com/gpu" (the SR-IOV convention).
std::string PciDeviceEnvName(std::string_view resource_name);

}  // namespace topology::device_plugin

#endif  // TOPOLOGY_DEVICE_PLUGIN_CONFIG_H_
