// accel-dra-driver's inventory and claim handler (main.cc runs them; the
// example's test drives them against the installed test kit's kubelet).
// docs/dra-driver-guide.md quotes the parts between the "guide:" markers.
#ifndef ACCEL_DRA_DRIVER_ACCEL_DRIVER_H_
#define ACCEL_DRA_DRIVER_ACCEL_DRIVER_H_

// guide:includes
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <map>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include <glog/logging.h>  // LOG(); glog comes with libtopology::draplugin

#include "topology/common/cdi.h"                 // CdiDevice
#include "topology/common/daemon.h"              // SetUpDaemon, AwaitShutdown
#include "topology/discovery.h"                  // Discover
#include "topology/dra_attributes.h"             // StandardPciAttributes
#include "topology/draplugin/claim_cdi.h"        // WriteClaimCdiSpec
#include "topology/draplugin/driver.h"           // DriverRunner, DriverHandler
#include "topology/draplugin/kube_client.h"      // KubeClient
#include "topology/draplugin/kube_config.h"      // InClusterConfig
#include "topology/draplugin/resource_slices.h"  // SlicePublisher
#include "topology/pci_device.h"                 // PciDevice
#include "topology/status.h"                     // Status, StatusOr
#include "topology/sysfs_reader.h"               // NewHostRootReader
#include "topology/topology.h"                   // Topology
// guide:end

namespace accel {

// guide:flags
namespace dra = topology::draplugin;
namespace common = topology::common;

// What the command line sets (main.cc parses it).
struct Flags {
  std::string driver = "accel.example.com";
  std::string class_prefix = "1200";  // processing accelerators
  std::string vendor;                 // any
  std::string node;                   // default: NODE_NAME
  std::string kubeconfig;             // default: in-cluster credentials
  std::string host_root = "/";
  std::string registry_dir = dra::kDefaultRegistryDir;
  std::string plugin_dir;  // default: /var/lib/kubelet/plugins/<driver>
  std::string cdi_dir = "/var/run/cdi";
  // Shared by capacity: each accelerator's "compute" (100 percent) handed
  // out in shares of this many percent (a claim may ask for more, in these
  // steps); 0: whole devices.
  int share_percent = 0;
  int verbosity = 0;
};
// guide:end

// guide:inventory
// The devices: every PCI function whose class (six hex digits) starts with
// the prefix, as one slice device each, named after its address (a DNS
// label), with the standard attributes the Kubernetes helpers compute
// (libtopology computes them the same way; one it cannot compute is left
// out and logged) and the vendor's own, unqualified (the driver's domain).
inline std::vector<dra::SliceDevice> InventoryOf(
    const topology::Topology& topo, const topology::SysfsReader& sysfs,
    const Flags& flags, std::map<std::string, std::string>& addresses) {
  std::vector<dra::SliceDevice> devices;
  for (const topology::PciDevice& pci : topo.pci_devices()) {
    char class_hex[8];
    char vendor_hex[8];
    char device_hex[8];
    std::snprintf(class_hex, sizeof(class_hex), "%06x", pci.class_code);
    std::snprintf(vendor_hex, sizeof(vendor_hex), "%04x", pci.vendor_id);
    std::snprintf(device_hex, sizeof(device_hex), "%04x", pci.device_id);
    if (!std::string(class_hex).starts_with(flags.class_prefix)) continue;
    if (!flags.vendor.empty() && flags.vendor != vendor_hex) continue;
    const std::string address = pci.address.ToString();
    dra::SliceDevice device;
    device.name = "accel-" + address;
    for (char& c : device.name) {
      if (c == ':' || c == '.') c = '-';
    }
    const topology::dra::PciAttributes standard =
        topology::dra::StandardPciAttributes(
            sysfs, address, topology::dra::NumaAttributeForm::kScalar);
    for (const topology::dra::DeviceAttribute& a : standard.attributes) {
      if (const auto* text = std::get_if<std::string>(&a.value)) {
        device.attributes[a.name] = {*text, false};
      } else if (const auto* number = std::get_if<int64_t>(&a.value)) {
        device.attributes[a.name] = {*number, false};
      }
    }
    for (const auto& [name, why] : standard.omitted) {
      LOG(WARNING) << address << ": " << name << " left out: " << why.message();
    }
    // "0x10de", as sysfs writes them and topology-dra-driver publishes them.
    device.attributes["vendorID"] = {"0x" + std::string(vendor_hex), false};
    device.attributes["deviceID"] = {"0x" + std::string(device_hex), false};
    if (flags.share_percent > 0) {
      // Several claims may hold one accelerator, each a share of its
      // compute: the scheduler keeps their sum within 100.
      const std::string step = std::to_string(flags.share_percent);
      device.allow_multiple_allocations = true;
      device.capacity["compute"] = {"100"};
      device.capacity["compute"].request_policy = dra::CapacityRequestPolicy{
          .default_value = step,
          .valid_range =
              dra::CapacityRequestPolicy::Range{.min = step, .step = step}};
    }
    addresses[device.name] = address;
    devices.push_back(std::move(device));
  }
  return devices;
}
// guide:end

// guide:handler
// Prepare and Unprepare of one claim. The runner calls them for claims the
// kubelet sends, one call at a time per claim, and answers a repeated
// Prepare from its checkpoint; calls for different claims run
// concurrently, and everything here is read-only after construction.
class AcceleratorDriver : public dra::DriverHandler {
 public:
  AcceleratorDriver(Flags flags, std::map<std::string, std::string> addresses)
      : flags_(std::move(flags)), addresses_(std::move(addresses)) {}

  // One CDI spec for the claim: each device (each share of a shared one)
  // under a name of its own, and the claim's addresses (and shares'
  // compute) in variables that every device of the claim sets alike.
  topology::StatusOr<std::vector<dra::PreparedDevice>> Prepare(
      const dra::Claim& claim) override {
    std::vector<common::CdiDevice> cdi;
    std::string visible;
    std::string compute;
    for (const dra::AllocationResult& result : claim.results) {
      const auto address = addresses_.find(result.device);
      if (result.pool != flags_.node || address == addresses_.end()) {
        return topology::NotFoundError("no device " + result.pool + "/" +
                                       result.device + " on this node");
      }
      // A share's name carries its id: two shares never meet in one name.
      cdi.push_back({.name = result.share_id.empty()
                                 ? result.device
                                 : result.device + "-" + result.share_id});
      visible += (visible.empty() ? "" : ",") + address->second;
      const auto share = result.consumed_capacity.find("compute");
      compute +=
          (compute.empty() ? "" : ",") +
          (share != result.consumed_capacity.end() ? share->second : "100");
    }
    auto ids = dra::WriteClaimCdiSpec(flags_.cdi_dir, flags_.driver,
                                      flags_.driver + "/accel", claim.ref.uid,
                                      std::move(cdi),
                                      {{"ACCEL_VISIBLE_DEVICES", visible},
                                       {"ACCEL_COMPUTE_PERCENT", compute}});
    if (!ids.ok()) return ids.status();
    std::vector<dra::PreparedDevice> prepared;
    for (size_t i = 0; i < claim.results.size(); ++i) {
      prepared.push_back({.pool = claim.results[i].pool,
                          .device = claim.results[i].device,
                          .share_id = claim.results[i].share_id,
                          .cdi_device_ids = {(*ids)[i]}});
    }
    return prepared;
  }

  // After a restart the runner passes the checkpointed devices; the spec's
  // name comes from the claim alone, so that is all this needs.
  topology::Status Unprepare(
      const dra::ClaimRef& claim,
      const std::vector<dra::PreparedDevice>& /*devices*/) override {
    return dra::RemoveClaimCdiSpec(flags_.cdi_dir, flags_.driver, claim.uid);
  }

 private:
  const Flags flags_;
  const std::map<std::string, std::string> addresses_;  // name -> address
};
// guide:end

}  // namespace accel

#endif  // ACCEL_DRA_DRIVER_ACCEL_DRIVER_H_
