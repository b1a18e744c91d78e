// The sysfs readers behind Discover(): NUMA nodes with their distance matrix,
// and PCI devices with their locality and PCIe path.
#ifndef TOPOLOGY_SRC_SYSFS_DISCOVERY_H_
#define TOPOLOGY_SRC_SYSFS_DISCOVERY_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "topology/cpu_info.h"
#include "topology/numa_node.h"
#include "topology/pci_device.h"
#include "topology/sysfs_reader.h"

#include "libpci_scanner.h"

namespace topology::internal {

struct NumaFacts {
  std::vector<NumaNode> nodes;              // increasing id
  std::vector<std::vector<int>> distances;  // empty when unusable
  // Per node (parallel to `nodes`): the initiator nodes of
  // nodeN/access0/initiators (HMAT), empty when absent.
  std::vector<std::vector<int>> initiators;
  // cpu/online, else the cpuN directories; nullopt when neither exists.
  std::optional<CpuSet> online_cpus;
  // False on a kernel without NUMA (no devices/system/node).
  bool has_node_directory = true;
};

// What hwloc's Linux back-end computed for the same host root.
struct HwlocMachine {
  struct Node {
    // hwloc's locality of the node: its own CPUs, or for a CPU-less node
    // the CPUs hwloc attaches it to.
    CpuSet cpus;
    uint64_t memory_bytes = 0;
  };
  std::vector<CpuInfo> cpus;  // one per PU (online CPU)
  CpuSet online;              // the topology's CPU set
  std::map<int, Node> nodes;  // by OS index; nodes hwloc dropped are absent
};

// Reads devices/system/node and the online CPUs as the kernel lists them:
// nodes from node/online, else the nodeN directories; one node 0 when there
// is no node directory. Problems go to `warnings`, naming the file.
NumaFacts ReadNumaFacts(const SysfsReader& reader,
                        std::vector<std::string>* warnings);

// Turns the raw facts into the nodes libtopology reports (docs/sysfs.md):
// offline or absent CPUs leave the node lists, memory missing from sysfs
// comes from hwloc, contradictory firmware data (every node the same CPUs,
// a uniform SLIT) collapses to one node as in hwloc, and CPU-less nodes get
// the CPUs near them. `hwloc` may be null (no host root, or hwloc failed).
void ReconcileNumaFacts(const SysfsReader& reader, const HwlocMachine* hwloc,
                        NumaFacts* facts, std::vector<std::string>* warnings);

// The functions of bus/pci/devices as the sysfs pass read them.
struct PciFunctions {
  std::vector<PciDevice> devices;
  // Per device, the index of the device whose class, ids and revision it
  // has: its own, or for a VF the first VF of its PF. The kernel gives every
  // VF of a PF the vendor of the PF, the VF device id of the PF's SR-IOV
  // capability and the class, revision and subsystem ids it read from the
  // first VF (drivers/pci/iov.c, since Linux 4.18), so reading them once per
  // PF reads what the kernel shows for each.
  std::vector<size_t> identity_of;
  // Per device, whether the pass read its class, ids and revision itself
  // (libpci not used for it).
  std::vector<bool> identity_read;
};

// Reads every entry of bus/pci/devices: locality, driver, IOMMU group,
// SR-IOV, link and PCIe path, subsystem ids, and class, ids and revision
// when `read_identity` (else they are left for libpci). Each function's
// directory is listed once when the reader can, and files it does not list
// are not asked for. With a `plan`, each entry's verdict for libpci is
// decided as the entry is read (one not decided stays kSkip).
// Affinity is resolved against `nodes`. A device directory that cannot be
// opened for want of resources (no file descriptors, no memory: UNAVAILABLE)
// fails the whole read, since skipping it would report a present device as
// removed; one that is gone or unreadable is skipped with a warning.
StatusOr<PciFunctions> ReadPciDevices(const SysfsReader& reader,
                                      const std::vector<std::string>& entries,
                                      bool read_identity,
                                      const std::vector<NumaNode>& nodes,
                                      LibpciPlan* plan,
                                      std::vector<std::string>* warnings);

// Fills each device's os_devices from sysfs class/{net,block,infiniband,drm,
// dma,ve,bxi}: one link read per entry; partitions, DRM connectors and entries
// not below a PCI function are skipped.
void ReadOsDevices(const SysfsReader& reader, std::vector<PciDevice>* devices);

// Reads class, ids and revision of the devices at `indices` from sysfs
// (where libpci did not); their subsystem ids were read by the pass.
void ReadPciIdentity(const SysfsReader& reader,
                     const std::vector<size_t>& indices,
                     std::vector<PciDevice>* devices,
                     std::vector<std::string>* warnings);

// Copies libpci's class, ids and revision into the matching devices.
void ApplyLibpciIdentity(const std::vector<LibpciIdentity>& identities,
                         std::vector<PciDevice>* devices);

// Sets each device's physical_slot from bus/pci/slots/*/address (the
// first slot, in name order, naming its bus and device number).
void ReadPhysicalSlots(const SysfsReader& reader,
                       std::vector<PciDevice>* devices);

// Gives each device the class, ids and revision of its identity_of.
void ShareIdentity(PciFunctions* functions);

}  // namespace topology::internal

#endif  // TOPOLOGY_SRC_SYSFS_DISCOVERY_H_
