// The CDI specs of the device plugin's resources that have a cdiKind: one
// file per kind in --cdi-dir, written at each rescan for what Allocate gives
// each device, and whether each is in place (Allocate returns CDI names
// only then; its threads read that while a rescan writes).
#ifndef TOPOLOGY_REFERENCE_RESOURCE_CDI_H_
#define TOPOLOGY_REFERENCE_RESOURCE_CDI_H_

#include <atomic>
#include <cstddef>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "config.h"

namespace topology::device_plugin {

struct Snapshot;

// The file name of a resource's CDI spec: "topology-device-plugin-" and the
// kind with '/' as '_', ".json".
std::string CdiSpecFileName(const std::string& kind);

class ResourceCdiSpecs {
 public:
  // `resources` is not owned and outlives this. `cdi_dir` empty: no spec
  // is written and none is in place.
  ResourceCdiSpecs(const std::vector<ResourceConfig>* resources,
                   std::filesystem::path cdi_dir,
                   std::filesystem::path host_root);

  // Writes the spec of every resource with a cdiKind for `snapshot`'s
  // devices (a device without edits is left out; a kind without devices
  // has its file removed) and records which succeeded.
  void Write(const Snapshot& snapshot);
  // Whether resource `index`'s spec is in place.
  bool written(size_t index) const { return written_[index].load(); }

 private:
  const std::vector<ResourceConfig>& resources_;
  const std::filesystem::path cdi_dir_;
  const std::filesystem::path host_root_;
  std::unique_ptr<std::atomic<bool>[]> written_;
};

}  // namespace topology::device_plugin

#endif  // TOPOLOGY_REFERENCE_RESOURCE_CDI_H_
