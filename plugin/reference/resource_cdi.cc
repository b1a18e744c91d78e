#include "resource_cdi.h"

#include <algorithm>
#include <set>
#include <utility>

#include <glog/logging.h>

#include "topology/common/cdi.h"

#include "reference_plugin.h"

namespace topology::device_plugin {

std::string CdiSpecFileName(const std::string& kind) {
  std::string name = "topology-device-plugin-" + kind + ".json";
  std::replace(name.begin(), name.end(), '/', '_');
  return name;
}

ResourceCdiSpecs::ResourceCdiSpecs(const std::vector<ResourceConfig>* resources,
                                   std::filesystem::path cdi_dir,
                                   std::filesystem::path host_root)
    : resources_(*resources),
      cdi_dir_(std::move(cdi_dir)),
      host_root_(std::move(host_root)),
      written_(std::make_unique<std::atomic<bool>[]>(resources->size())) {}

void ResourceCdiSpecs::Write(const Snapshot& snapshot) {
  for (size_t r = 0; r < resources_.size(); ++r) {
    const ResourceConfig& config = resources_[r];
    if (config.cdi_kind.empty()) continue;
    if (cdi_dir_.empty()) {
      written_[r] = false;
      continue;
    }
    common::CdiSpec spec;
    spec.kind = config.cdi_kind;
    for (const auto& [address, index] : snapshot.claims) {
      if (index != r) continue;
      const PciDevice* device = snapshot.topology.FindDevice(address);
      if (device == nullptr) continue;
      const auto gpu = snapshot.nvidia.gpus.find(address);
      auto paths = NodePathsOf(
          config, *device, host_root_,
          config.nvidia && gpu != snapshot.nvidia.gpus.end() ? &gpu->second
                                                             : nullptr);
      if (!paths.ok()) continue;  // Allocate refuses such a device
      common::CdiDevice cdi;
      cdi.name = address.ToString();
      std::set<std::string> seen;
      for (const std::string& path : *paths) {
        if (seen.insert(path).second) {
          cdi.device_nodes.push_back({path, path, "rw"});
        }
      }
      // A device without edits would make runtimes refuse the whole spec:
      // it is left out, and Allocate names only what the spec defines.
      if (cdi.device_nodes.empty()) continue;
      spec.devices.push_back(std::move(cdi));
    }
    if (spec.devices.empty()) {
      // Nothing to define (no device with a node): no file, no names.
      (void)common::RemoveCdiSpec(cdi_dir_, CdiSpecFileName(config.cdi_kind));
      written_[r] = false;
      continue;
    }
    const Status status =
        common::WriteCdiSpec(cdi_dir_, CdiSpecFileName(config.cdi_kind), spec);
    const bool was = written_[r].exchange(status.ok());
    if (!status.ok() && was) {
      LOG(ERROR) << config.name << ": " << status.message()
                 << "; Allocate returns no CDI names until it is written";
    } else if (!status.ok()) {
      LOG_FIRST_N(ERROR, 4) << config.name << ": " << status.message()
                            << "; Allocate returns no CDI names";
    }
  }
}

}  // namespace topology::device_plugin
