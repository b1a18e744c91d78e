// The standard device attributes of Dynamic Resource Allocation for PCI
// devices, computed as the Kubernetes helpers compute them
// (k8s.io/dynamic-resource-allocation/deviceattribute), so that a C++ DRA
// driver publishes the same values, and fails in the same cases, as a Go one:
//
//   resource.kubernetes.io/pciBusID  "0000:3b:00.0" (string)
//   resource.kubernetes.io/pcieRoot  "pci0000:3a"   (string): the first
//       folder below /sys/devices on the device's canonical path, read from
//       the bus/pci/devices/<id> link
//   resource.kubernetes.io/numaNode  0 (int), or [0, 1] (ints): the device's
//       own numa_node; the list form adds the nodes of the same package at
//       the smallest SLIT distance
//
// Differences from libtopology's resolved affinity are deliberate: the
// attributes match what the scheduler compares across drivers, so they use
// the raw numa_node (a device reporting -1 gets no numaNode attribute, never
// a guess) and the helpers' strict bus id format (lower-case hex, four-digit
// domain).
#ifndef TOPOLOGY_DRA_ATTRIBUTES_H_
#define TOPOLOGY_DRA_ATTRIBUTES_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "topology/export.h"
#include "topology/pci_address.h"
#include "topology/status.h"
#include "topology/sysfs_reader.h"

namespace topology::dra {

// A PCI function's DRA device name, as topology-dra-driver publishes it
// and topology-info --format dra prints it: "pci-0000-3b-00-0", a DNS label
// (a device name must be one; the bus id "0000:3b:00.0" is not).
TOPOLOGY_EXPORT std::string PciDeviceName(const PciAddress& address);
// The address a PciDeviceName names; nullopt for any other text (the name
// of the returned address is exactly `name`).
TOPOLOGY_EXPORT std::optional<PciAddress> AddressOfPciDeviceName(
    std::string_view name);

inline constexpr char kAttributePrefix[] = "resource.kubernetes.io/";
inline constexpr char kPcieRootAttribute[] = "resource.kubernetes.io/pcieRoot";
inline constexpr char kPciBusIdAttribute[] = "resource.kubernetes.io/pciBusID";
inline constexpr char kNumaNodeAttribute[] = "resource.kubernetes.io/numaNode";

// Linux's MAX_NUMNODES upper bound, as the helpers check it.
inline constexpr int kMaxNumaNodes = 1024;

// One attribute of a ResourceSlice device: a string, an int or a list of
// ints (the list form needs the cluster's DRAListTypeAttributes gate).
struct DeviceAttribute {
  std::string name = {};
  std::variant<std::string, int64_t, std::vector<int64_t>> value = {};

  friend bool operator==(const DeviceAttribute&,
                         const DeviceAttribute&) = default;
};

enum class NumaAttributeForm { kScalar, kList };

// OK when `bus_id` is "dddd:bb:dd.f" in lower-case hex. Otherwise
// INVALID_ARGUMENT "PCI Bus ID cannot be empty" or "invalid PCI Bus ID
// format: <id>".
TOPOLOGY_EXPORT Status VerifyPciBusId(std::string_view bus_id);

// resource.kubernetes.io/pciBusID with `bus_id` as its value.
TOPOLOGY_EXPORT StatusOr<DeviceAttribute> PciBusIdAttribute(
    std::string_view bus_id);

// resource.kubernetes.io/pcieRoot: reads the link bus/pci/devices/<id>,
// which must lead to devices/pci.../<id>. Errors name the id and link.
TOPOLOGY_EXPORT StatusOr<DeviceAttribute> PcieRootAttribute(
    const SysfsReader& sysfs, std::string_view bus_id);

// resource.kubernetes.io/numaNode from bus/pci/devices/<id>/numa_node.
// FAILED_PRECONDITION when the device has no NUMA affinity (-1): the
// attribute must then not be published.
TOPOLOGY_EXPORT StatusOr<DeviceAttribute> NumaNodeAttribute(
    const SysfsReader& sysfs, std::string_view bus_id, NumaAttributeForm form);

// resource.kubernetes.io/numaNode for a device that knows its node (CPUs,
// memory). INVALID_ARGUMENT when negative or >= kMaxNumaNodes.
TOPOLOGY_EXPORT StatusOr<DeviceAttribute> NumaNodeAttributeOfNode(
    const SysfsReader& sysfs, int node, NumaAttributeForm form);

// What a driver publishes for one PCI device: every attribute that could be
// computed, and for each one that could not, why.
struct PciAttributes {
  std::vector<DeviceAttribute> attributes = {};  // pciBusID, pcieRoot, numaNode
  std::vector<std::pair<std::string, Status>> omitted = {};  // name, reason
};
TOPOLOGY_EXPORT PciAttributes StandardPciAttributes(const SysfsReader& sysfs,
                                                    std::string_view bus_id,
                                                    NumaAttributeForm form);

}  // namespace topology::dra

#endif  // TOPOLOGY_DRA_ATTRIBUTES_H_
