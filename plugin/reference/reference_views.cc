// The reference plugin's text for people: --print-matches and the device
// list it logs (reference_views.h).
#include "reference_views.h"

#include <algorithm>
#include <cstdio>
#include <sstream>

#include <glog/logging.h>

namespace topology::device_plugin {

namespace {

// "10de:20b0 class 030200  driver nvidia  numa 0,1" for --print-matches;
// the ids are left out when the function is not in the snapshot.
template <typename Nodes>
std::string DescribeFunction(const PciDevice* pci, const Nodes& numa_nodes) {
  char ids[32] = "";
  if (pci != nullptr) {
    std::snprintf(ids, sizeof(ids), "%04x:%04x class %06x", pci->vendor_id,
                  pci->device_id, pci->class_code);
  }
  std::string numa;
  for (const auto node : numa_nodes) {
    numa += (numa.empty() ? "" : ",") + std::to_string(node);
  }
  return std::string(ids) + "  driver " +
         (pci != nullptr && pci->driver ? *pci->driver : "(none)") + "  numa " +
         (numa.empty() ? "(none)" : numa);
}

}  // namespace

std::string DeviceListLine(const std::vector<plugin::Device>& devices) {
  constexpr size_t kShown = 16;
  std::string list;
  for (size_t i = 0; i < devices.size() && i < kShown; ++i) {
    const plugin::Device& d = devices[i];
    list += (i == 0 ? " " : ", ") + d.id + " (numa ";
    if (d.numa_nodes.empty()) list += "-";
    for (size_t n = 0; n < d.numa_nodes.size(); ++n) {
      list += (n == 0 ? "" : ",") + std::to_string(d.numa_nodes[n]);
    }
    list += d.health == plugin::Health::kHealthy ? ")" : ", Unhealthy)";
  }
  if (devices.size() > kShown) {
    list += ", and " + std::to_string(devices.size() - kShown) + " more";
  }
  return list;
}

std::string DescribeMatches(const MatchesView& view) {
  const Snapshot* snapshot = &view.snapshot;
  std::ostringstream out;
  for (size_t r = 0; r < view.config.resources.size(); ++r) {
    const ResourceConfig& config = view.config.resources[r];
    const std::vector<plugin::Device>& devices = view.devices[r];
    out << config.name << ": " << devices.size() << " device(s)\n";
    for (const plugin::Device& device : devices) {
      auto address = PciAddress::Parse(device.id);
      const PciDevice* pci =
          address.ok() ? snapshot->topology.FindDevice(*address) : nullptr;
      std::string reason;
      if (device.health != plugin::Health::kHealthy && address.ok()) {
        const auto known = view.unhealthy_reasons.find(*address);
        if (known != view.unhealthy_reasons.end())
          reason = " (" + known->second + ")";
      }
      out << "  " << device.id << "  "
          << DescribeFunction(pci, device.numa_nodes) << "  "
          << plugin::HealthName(device.health) << reason << "\n";
    }
  }
  // Functions no resource claims, so that a selector that misses can be
  // seen for what it misses.
  std::vector<const PciDevice*> unclaimed;
  for (const PciDevice& device : snapshot->topology.pci_devices()) {
    if (!device.is_bridge() && !snapshot->claims.contains(device.address)) {
      unclaimed.push_back(&device);
    }
  }
  out << "unclaimed: " << unclaimed.size() << " non-bridge PCI function(s)\n";
  for (const PciDevice* pci : unclaimed) {
    std::string interfaces;
    for (const OsDevice& os : pci->os_devices) {
      if (os.kind == "net") interfaces += " " + os.name;
    }
    out << "  " << pci->address.ToString() << "  "
        << DescribeFunction(pci, pci->numa_nodes)
        << (interfaces.empty() ? "" : "  net" + interfaces) << "\n";
  }
  for (const std::string& warning :
       PfNamesWithoutInterface(view.config, snapshot->topology)) {
    out << "warning: " << warning << "\n";
  }
  if (!snapshot->nvidia.driver_missing.empty()) {
    out << "warning: " << snapshot->nvidia.driver_missing
        << "; the GPUs are Unhealthy until it is\n";
  }
  for (const auto& [address, gpu] : snapshot->nvidia.gpus) {
    if (!snapshot->cdi_defined.contains("nvidia.com/gpu=" + gpu.uuid)) {
      out << "warning: no CDI spec on the node defines nvidia.com/gpu="
          << gpu.uuid << " (" << address.ToString()
          << "): Allocate returns no CDI name for it\n";
    }
  }
  for (size_t r = 0; r < view.config.resources.size(); ++r) {
    const std::string& kind = view.config.resources[r].cdi_kind;
    if (!kind.empty()) {
      out << "CDI: " << view.config.resources[r].name << " as " << kind
          << (view.cdi_written[r]
                  ? " in " + (view.cdi_dir / CdiSpecFileName(kind)).string()
                  : std::string(": no spec written, no CDI names returned"))
          << "\n";
    }
  }
  return out.str();
}

void LogDraHeldChanges(const std::set<PciAddress>& before,
                       const std::set<PciAddress>& now) {
  for (const PciAddress& address : now) {
    if (!before.contains(address)) {
      LOG(INFO) << address.ToString()
                << " is held by a prepared DRA claim: not offered";
    }
  }
  for (const PciAddress& address : before) {
    if (!now.contains(address)) {
      LOG(INFO) << address.ToString()
                << " is no longer held by a DRA claim: offered again";
    }
  }
}

void DropPartialLocality(const std::string& resource,
                         std::vector<plugin::Device>& devices, bool* warned) {
  const auto with_locality = static_cast<size_t>(std::count_if(
      devices.begin(), devices.end(),
      [](const auto& device) { return !device.numa_nodes.empty(); }));
  if (with_locality == 0 || with_locality == devices.size()) {
    *warned = false;
    return;
  }
  if (!*warned) {
    LOG(WARNING) << resource << ": " << devices.size() - with_locality << " of "
                 << devices.size()
                 << " devices have no known NUMA node; reporting no "
                    "topology for the whole resource";
    *warned = true;
  }
  for (plugin::Device& device : devices) device.numa_nodes.clear();
}

std::vector<std::string> UndefinedGpuCdiNames(const Snapshot& snapshot) {
  std::vector<std::string> out;
  for (const auto& [address, gpu] : snapshot.nvidia.gpus) {
    const std::string name = "nvidia.com/gpu=" + gpu.uuid;
    if (!snapshot.cdi_defined.contains(name)) out.push_back(name);
  }
  return out;
}

}  // namespace topology::device_plugin
