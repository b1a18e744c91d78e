// PciDevice: one PCI function with its identity, driver, locality and place
// in the PCIe tree, as discovered from sysfs (or an hwloc XML export).
//
// Thread safety: a value type.
#ifndef TOPOLOGY_PCI_DEVICE_H_
#define TOPOLOGY_PCI_DEVICE_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "topology/cpu_set.h"
#include "topology/export.h"
#include "topology/pci_address.h"

namespace topology {

// Where a device's resolved NUMA affinity came from, best first.
enum class NumaSource {
  kSysfs,       // numa_node >= 0
  kLocalCpus,   // the nodes whose CPUs meet local_cpulist (strict subset)
  kBridge,      // the nearest upstream bridge's resolved affinity
  kSingleNode,  // nothing said, but the machine has one node (with CPUs)
  kUnknown,     // no usable information: the device is "anywhere"
};

// "sysfs", "local_cpus", "bridge", "single_node" or "unknown" (the JSON
// contract).
TOPOLOGY_EXPORT std::string_view NumaSourceName(NumaSource source);

// Something the kernel made of a PCI function, as hwloc's OS devices:
// a network interface, a disk, an InfiniBand port, a DRM node.
struct OsDevice {
  // "net", "block", "openfabrics", "gpu" (DRM card/render nodes), "dma" or
  // "coproc" (NEC Vector Engine), after hwloc's OS device types.
  std::string kind = {};
  // The kernel's name: "eth0", "nvme0n1", "mlx5_0", "card0", "renderD128".
  std::string name = {};

  friend bool operator==(const OsDevice&, const OsDevice&) = default;
};

struct PcieLink {
  std::string current_speed = {};  // as sysfs prints it, e.g. "8.0 GT/s PCIe"
  int current_width = 0;           // lanes; 0 when unknown
  std::string max_speed = {};
  int max_width = 0;
};

struct PciDevice {
  PciAddress address = {};
  uint32_t class_code = 0;  // 24-bit 0xCCSSPP
  uint16_t vendor_id = 0;
  uint16_t device_id = 0;
  uint16_t subsystem_vendor_id = 0;
  uint16_t subsystem_device_id = 0;
  uint8_t revision = 0;
  // Name of the bound driver (the last component of the driver link text),
  // nullopt when none is bound.
  std::optional<std::string> driver = {};
  // Raw sysfs numa_node: nullopt when the file is absent, -1 when the kernel
  // does not know.
  std::optional<int> sysfs_numa_node = {};
  // local_cpulist (or local_cpus when only the mask exists); nullopt when
  // absent.
  std::optional<CpuSet> local_cpus = {};
  std::optional<int> iommu_group = {};
  std::optional<std::string> physical_slot = {};

  // SR-IOV: set on a virtual function.
  std::optional<PciAddress> physfn = {};
  // SR-IOV: the VFs of a physical function, in virtfn index order.
  std::vector<PciAddress> virtfns = {};
  std::optional<int> sriov_totalvfs = {};
  std::optional<int> sriov_numvfs = {};

  PcieLink link = {};

  // The root bus, e.g. "pci0000:17"; empty when unknown.
  std::string host_bridge = {};
  // PCI bridges between the device and its host bridge, nearest first (the
  // direct parent is upstream_bridges[0], the root port is last). Taken from
  // the canonical sysfs path, so bridges missing from bus/pci/devices still
  // appear.
  std::vector<PciAddress> upstream_bridges = {};
  // For each entry of upstream_bridges: true when it is the upstream port of a
  // PCIe switch (from the PCIe capability when readable, else the path shape).
  std::vector<bool> upstream_is_switch = {};

  // Resolved NUMA affinity: sorted node ids, empty iff source is kUnknown.
  std::vector<int> numa_nodes = {};
  NumaSource numa_source = NumaSource::kUnknown;
  // Disagreements found while resolving (e.g. numa_node vs local_cpulist),
  // kept rather than hidden.
  std::vector<std::string> conflicts = {};

  // The OS devices below this function (from sysfs class/net, block,
  // infiniband, bxi, drm, dma and ve), sorted by kind then name.
  std::vector<OsDevice> os_devices = {};

  bool is_bridge() const { return (class_code >> 8) == 0x0604; }
  bool is_virtual_function() const { return physfn.has_value(); }
};

}  // namespace topology

#endif  // TOPOLOGY_PCI_DEVICE_H_
