// The reference DRA driver's half of topology-device-plugin's inventory:
// the same configuration and discovery (DiscoverSnapshot), published as
// ResourceSlice devices, and claims prepared with the same container edits
// that the device plugin's Allocate gives (AllocationFor), as one CDI spec
// per claim.
#ifndef TOPOLOGY_DEVICE_PLUGIN_DRA_DRIVER_H_
#define TOPOLOGY_DEVICE_PLUGIN_DRA_DRIVER_H_

#include <chrono>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "topology/common/kubelet_checkpoint.h"
#include "topology/dra_attributes.h"
#include "topology/draplugin/driver.h"
#include "topology/draplugin/resource_slices.h"
#include "topology/plugin/health.h"
#include "topology/sysfs_reader.h"
#include "topology/thread_annotations.h"

#include "config.h"
#include "reference_plugin.h"

namespace topology::device_plugin {

inline constexpr char kDefaultDraDriverName[] = "pci.libtopology.dev";

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

// Health from the device plugin's sources, judged the same way: the bound
// driver and the AER fatal counter through plugin::HealthTracker (a
// faulted device is Healthy again after a quiet period), and the NVIDIA
// driver information a GPU lacks. Not thread-safe: one thread judges.
class DraHealth {
 public:
  explicit DraHealth(std::chrono::nanoseconds quiet_period)
      : tracker_(quiet_period) {}

  // Reads every device `snapshot` assigns to a resource (at start and at
  // each rescan); devices no longer there are forgotten. True when a
  // verdict changed.
  bool Judge(const Snapshot& snapshot, const SysfsReader& sysfs);
  // Reads only what can change without a rescan: the AER counters of the
  // devices that have one and of those not healthy (a quiet period may
  // end). True when a verdict changed.
  bool Recheck(const Snapshot& snapshot, const SysfsReader& sysfs);
  // The devices that are not healthy, and why.
  const std::map<PciAddress, std::string>& unhealthy() const {
    return unhealthy_;
  }

 private:
  bool Update(const Snapshot& snapshot, const PciAddress& address,
              plugin::HealthVerdict verdict);

  plugin::HealthTracker tracker_;
  std::map<PciAddress, std::string> unhealthy_;
};

// The taint an unhealthy device carries in its slice: "<driver>/unhealthy",
// effect NoSchedule (no new claim gets it; running pods keep it, as the
// device plugin's Unhealthy does).
draplugin::DeviceTaint UnhealthyTaint(const std::string& driver);

// Adds UnhealthyTaint to every device of `devices` in `unhealthy`.
void TaintUnhealthy(const std::string& driver,
                    const std::map<PciAddress, std::string>& unhealthy,
                    std::vector<draplugin::SliceDevice>* devices);

// The devices running pods hold through a device plugin, from the kubelet
// device manager's checkpoint (kubelet_checkpoint.h): each PCI function
// named by a device id (topology-device-plugin's ids are PCI addresses;
// any plugin's id that is one counts, whatever its resource), with the UIDs
// of the pods holding it, sorted. Ids that are not PCI addresses (a GPU
// UUID) are not matched.
std::map<PciAddress, std::vector<std::string>> HeldThroughDevicePlugins(
    const std::vector<kubelet::PodDevices>& entries);
// HeldThroughDevicePlugins of the kubelet's device checkpoint at
// `checkpoint`, read now: empty when there is none; the reader's error
// (a link, too large, not the kubelet's format) when it cannot be read.
StatusOr<std::map<PciAddress, std::vector<std::string>>>
ReadHeldThroughDevicePlugins(const std::filesystem::path& checkpoint);

// Of `held`, the devices whose PCI address is one of `ids` (device ids the
// pod resources API lists for running pods); the others are a deleted
// pod's, which the kubelet's checkpoint keeps until its next allocation.
std::map<PciAddress, std::vector<std::string>> RunningHolders(
    std::map<PciAddress, std::vector<std::string>> held,
    const std::set<std::string>& ids);

// What the driver asks before it publishes and at every Prepare: the
// devices running pods hold through device plugins now. The kubelet's
// device checkpoint (ReadHeldThroughDevicePlugins), confirmed by its pod
// resources API on `pod_resources_socket` (2 s deadline); where that API
// does not answer, the checkpoint alone, so that a deleted pod's device
// stays held rather than one device ever being handed out twice (the
// problem logged once until it changes). Safe from any thread; no lock is
// held across the call.
class HeldDevicesReader {
 public:
  HeldDevicesReader(std::filesystem::path checkpoint,
                    std::filesystem::path pod_resources_socket);
  StatusOr<std::map<PciAddress, std::vector<std::string>>> Read() const;

 private:
  const std::filesystem::path checkpoint_;
  const std::filesystem::path pod_resources_socket_;
  mutable Mutex mu_;
  mutable std::string problem_ TOPOLOGY_GUARDED_BY(mu_);
};

// The taint a device held through a device plugin carries in its slice:
// "<driver>/device-plugin-allocated", its value the UID of the (first)
// pod holding it, effect NoSchedule: no new claim gets it while the pod
// runs; the taint goes at the first resync after the kubelet's checkpoint
// no longer names the device. A UID that is not a label value (the
// checkpoint is another program's file) leaves the value empty.
draplugin::DeviceTaint HeldTaint(const std::string& driver,
                                 const std::string& pod_uid);

// Adds HeldTaint to every device of `devices` in `held`.
void TaintHeld(const std::string& driver,
               const std::map<PciAddress, std::vector<std::string>>& held,
               std::vector<draplugin::SliceDevice>* devices);

// The environment a claim's configurations for this driver give the
// devices of `request` (ConfigsFor: the classes' first, then the claim's;
// a later one sets a variable over an earlier one). A configuration's
// parameters are {"env": {"NAME": "value", ...}} (apiVersion and kind, if
// given, are ignored); a DeviceClass's config (source FromClass) reaches
// pods that cannot carry claim configuration (a pod written for the device
// plugin, served through the class's extendedResourceName).
// FAILED_PRECONDITION naming the configuration for unknown parameters, a
// name that is not a variable name or a value that is not a string.
StatusOr<std::map<std::string, std::string>> ConfiguredEnvironment(
    const draplugin::Claim& claim, const std::string& request);

// OK when every shareable resource of `config` publishes as the API server
// takes it (request policies: values ascending and within the capacity,
// the default among them or on the range's step); else INVALID_ARGUMENT
// naming the resource and the rule.
Status ValidateSharing(const Config& config, const std::string& driver);

// The environment variable that tells a container what its claim's shares
// of a shared resource's devices may use of `capacity`:
// "PCIDEVICE_EXAMPLE_COM_NIC_BANDWIDTH" for example.com/nic and bandwidth,
// a comma-separated list in the order of the resource's device variable.
std::string ShareEnvName(const std::string& resource,
                         const std::string& capacity);

// The attribute (in the driver's domain) that names a partition's type, and
// the pool's partitionTypeAttribute: "vf" for a virtual function, "pf-<N>"
// for a physical function over N published VFs (functions of one type
// consume the same counters).
inline constexpr char kPartitionTypeAttribute[] = "partitionType";

// SR-IOV functions as partitions of one counter set (KEP-4815): for each
// PF of `devices` with VFs among them, a counter set named as the PF's
// device with one counter "vfs" of the VFs' count; the PF consumes all of
// it, each VF one, so that the scheduler never hands out a PF and one of
// its VFs at once (a VF's traffic is the PF's). Each partition gets the
// kPartitionTypeAttribute attribute. Returns the counter sets, by name.
std::vector<draplugin::CounterSet> PartitionSriov(
    const Snapshot& snapshot, std::vector<draplugin::SliceDevice>* devices);

// The health streams' complete list: every device DraInventory publishes
// from `snapshot`, Healthy or Unhealthy with the reason.
std::vector<draplugin::DeviceHealth> HealthReport(
    const std::string& pool, const Snapshot& snapshot,
    const std::map<PciAddress, std::string>& unhealthy);

// One device must not be handed out by both paths on a node: the devices
// that `snapshot` assigns to the DRA driver's configuration and that
// `device_plugin_config` (topology-device-plugin's) selects on the same
// discovered machine. FAILED_PRECONDITION naming each shared device (the
// first 8) and the resource of each side; OK when none is shared.
Status CheckNoOverlap(const Config& dra_config, const Snapshot& snapshot,
                      const Config& device_plugin_config,
                      const SysfsReader& sysfs);

// Prepares claims on the node's devices: each allocated device of this
// pool must be one the snapshot assigns to a configured resource; its CDI
// spec (<cdi dir>/<driver>-<claim uid>.json, kind "<driver>/pci") gives each
// device the nodes and mounts the device plugin's Allocate gives it, and
// every device of the claim the environment Allocate gives the claim's
// devices of each resource together (PCIDEVICE_<RESOURCE>=<all addresses>,
// NVIDIA_VISIBLE_DEVICES...). Unprepare removes the spec.
// The DeviceClass of a resource of the configuration: its name
// ("example.com/gpu" -> "gpu.example.com", lower case, '_' as '-').
std::string DeviceClassName(const std::string& resource);
// The DeviceClasses of every resource of `config`, as YAML documents
// separated by "---": each selects the devices `driver` publishes for that
// resource (CEL on the driver and its "resource" attribute) and names the
// resource as its extendedResourceName, so that a pod's `limits:
// <resource>: N` is served through DRA where no device plugin serves it. What
// topology-dra-driver --print-device-classes writes; the DaemonSet's DRA
// component ships exactly this output for its ConfigMap.
std::string DeviceClassesYaml(const Config& config, const std::string& driver);

class DraHandler final : public draplugin::DriverHandler {
 public:
  using SnapshotSource = std::function<std::shared_ptr<const Snapshot>()>;
  // The devices running pods hold through device plugins, read afresh
  // (ReadHeldThroughDevicePlugins of the kubelet's checkpoint).
  using HeldSource =
      std::function<StatusOr<std::map<PciAddress, std::vector<std::string>>>()>;
  // With `held`, Prepare refuses a claim any of whose devices a pod holds
  // through a device plugin, and every claim while `held` cannot say
  // (fails closed): one device is never handed out by both paths.
  DraHandler(Config config, std::filesystem::path host_root,
             std::filesystem::path cdi_dir, std::string driver,
             std::string pool, SnapshotSource snapshot, HeldSource held = {});

  StatusOr<std::vector<draplugin::PreparedDevice>> Prepare(
      const draplugin::Claim& claim) override;
  Status Unprepare(
      const draplugin::ClaimRef& claim,
      const std::vector<draplugin::PreparedDevice>& devices) override;

  // The CDI kind of the specs: "<driver>/pci".
  std::string cdi_kind() const { return driver_ + "/pci"; }

  // Device metadata (DriverOptions::device_metadata): each prepared
  // device's metadata attributes, by device name (the published slice's).
  using MetadataSource =
      std::function<std::map<std::string, draplugin::AttributeValue>(
          const std::string&)>;
  void set_metadata(MetadataSource metadata) {
    metadata_ = std::move(metadata);
  }

 private:
  // OK unless a pod holds one of `chosen` through a device plugin (or the
  // kubelet's checkpoint cannot say): FAILED_PRECONDITION naming the pod.
  Status RefuseHeld(
      const draplugin::Claim& claim,
      const std::vector<std::pair<const draplugin::AllocationResult*,
                                  PciAddress>>& chosen) const;
  // The CDI device name of a result within its claim's spec: the device's
  // name, and for a share of a shared device "<device>-<share id>", so that
  // each share has its own.
  static std::string CdiNameOf(const draplugin::AllocationResult& result);
  // For a shared resource, ShareEnvName(resource, capacity) for each of its
  // capacities: what the claim's shares of each device of `ids` may use
  // (the sum of their consumedCapacity; a device allocated whole, all of
  // it), comma-separated in the order of `ids`.
  static std::map<std::string, std::string> ShareEnvironment(
      const ResourceConfig& resource, const std::vector<std::string>& ids,
      const std::vector<
          std::pair<const draplugin::AllocationResult*, PciAddress>>& chosen);

  const Config config_;
  const std::filesystem::path host_root_;
  const std::filesystem::path cdi_dir_;
  const std::string driver_;
  const std::string pool_;
  const SnapshotSource snapshot_;
  const HeldSource held_;
  MetadataSource metadata_;  // set before the runner starts
};

}  // namespace topology::device_plugin

#endif  // TOPOLOGY_DEVICE_PLUGIN_DRA_DRIVER_H_
