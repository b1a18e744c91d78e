// The reference DRA driver's half of topology-device-plugin's inventory:
// the same configuration and discovery (DiscoverSnapshot), published as
// ResourceSlice devices, and claims prepared with the same container edits
// that the device plugin's Allocate gives (AllocationFor), as one CDI spec
// per claim.
#ifndef TOPOLOGY_DEVICE_PLUGIN_DRA_DRIVER_H_
#define TOPOLOGY_DEVICE_PLUGIN_DRA_DRIVER_H_

#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "topology/dra_attributes.h"
#include "topology/draplugin/driver.h"
#include "topology/draplugin/resource_slices.h"
#include "topology/sysfs_reader.h"

#include "config.h"
#include "reference_plugin.h"

namespace topology::device_plugin {

inline constexpr char kDefaultDraDriverName[] = "pci.libtopology.dev";

// A PCI function's DRA device name: "pci-0000-3b-00-0" (a DNS label).
std::string DraDeviceName(const PciAddress& address);

// Every device `snapshot` assigns to a resource of `config`, as a slice
// device of `driver`: resource.kubernetes.io/pciBusID, pcieRoot and
// numaNode (omitted where the Kubernetes helpers omit them, with a warning
// naming why), and in the driver's own domain: "resource" (the configured
// resource name), "vendorID" and "deviceID" (0x-prefixed hex), "class"
// (the class code), "pcieSwitch" (the nearest PCIe switch's upstream port,
// when one is above the device) and "nearestNumaNodes" (the device's NUMA
// node and those at the smallest distance from it, "0,1"). Sorted by name.
std::vector<draplugin::SliceDevice> DraInventory(
    const Config& config, const Snapshot& snapshot, const SysfsReader& sysfs,
    dra::NumaAttributeForm numa_form, std::vector<std::string>* warnings);

// Prepares claims on the node's devices: each allocated device of this
// pool must be one the snapshot assigns to a configured resource; its CDI
// spec (<cdi dir>/<driver>-<claim uid>.json, kind "<driver>/pci") gives each
// device the nodes and mounts the device plugin's Allocate gives it, and
// every device of the claim the environment Allocate gives the claim's
// devices of each resource together (PCIDEVICE_<RESOURCE>=<all addresses>,
// NVIDIA_VISIBLE_DEVICES...). Unprepare removes the spec.
class DraHandler final : public draplugin::DriverHandler {
 public:
  using SnapshotSource = std::function<std::shared_ptr<const Snapshot>()>;
  DraHandler(Config config, std::filesystem::path host_root,
             std::filesystem::path cdi_dir, std::string driver,
             std::string pool, SnapshotSource snapshot);

  StatusOr<std::vector<draplugin::PreparedDevice>> Prepare(
      const draplugin::Claim& claim) override;
  Status Unprepare(
      const draplugin::ClaimRef& claim,
      const std::vector<draplugin::PreparedDevice>& devices) override;

  // The CDI kind of the specs: "<driver>/pci".
  std::string cdi_kind() const { return driver_ + "/pci"; }

 private:
  const Config config_;
  const std::filesystem::path host_root_;
  const std::filesystem::path cdi_dir_;
  const std::string driver_;
  const std::string pool_;
  const SnapshotSource snapshot_;
};

}  // namespace topology::device_plugin

#endif  // TOPOLOGY_DEVICE_PLUGIN_DRA_DRIVER_H_
