// The kubelet's pod resources API (v1, its socket below --root-dir), read
// as the exporter needs it: what the node can give (GetAllocatableResources:
// CPUs, devices of device plugins with their NUMA nodes, pinnable memory)
// and what each running pod holds (List: exclusive CPUs, devices, pinned
// memory, DRA devices by driver, pool and device). Every call has a
// deadline; an answer larger than 16 MiB or holding ids out of range is
// refused.
#ifndef TOPOLOGY_NRT_NODE_RESOURCES_H_
#define TOPOLOGY_NRT_NODE_RESOURCES_H_

#include <chrono>
#include <compare>
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "topology/status.h"

namespace topology::nrt {

struct DeviceEntry {
  std::string resource = {};
  std::string id = {};
  std::vector<int> numa_nodes = {};  // empty: the plugin gave no topology
};

struct MemoryEntry {
  std::string type = {};  // "memory", "hugepages-<size>"
  uint64_t size = 0;
  std::vector<int> numa_nodes = {};
};

struct DraRef {
  std::string driver = {};
  std::string pool = {};
  std::string device = {};
  friend auto operator<=>(const DraRef&, const DraRef&) = default;
};

struct PodEntry {
  std::string ns = {};
  std::string name = {};
  std::vector<int> cpus = {};  // exclusive CPUs of its containers (and the pod)
  std::vector<DeviceEntry> devices = {};
  std::vector<MemoryEntry> memory = {};
  std::vector<DraRef> dra = {};
  // Whether it holds anything exclusively: the fingerprint method
  // "with-exclusive-resources" counts only these.
  bool Exclusive() const {
    return !cpus.empty() || !devices.empty() || !memory.empty() || !dra.empty();
  }
};

struct NodeResources {
  std::vector<int> allocatable_cpus = {};
  std::vector<DeviceEntry> allocatable_devices = {};
  std::vector<MemoryEntry> allocatable_memory = {};
  std::vector<PodEntry> pods = {};
};

inline constexpr int kMaxPodResourcesAnswerBytes = 16 << 20;

// GetAllocatableResources then List on `socket`, each within `deadline`,
// on a connection of the call's own (one kept between an exporter's rounds
// keeps gRPC's connection machinery awake: docs/performance.md).
// UNAVAILABLE naming the socket and the call when the kubelet does not
// answer; INVALID_ARGUMENT for an id out of range.
StatusOr<NodeResources> ReadNodeResources(const std::filesystem::path& socket,
                                          std::chrono::milliseconds deadline);

}  // namespace topology::nrt

#endif  // TOPOLOGY_NRT_NODE_RESOURCES_H_
