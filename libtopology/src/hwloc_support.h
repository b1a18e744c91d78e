// hwloc as a source: the CPU topology of a host root, and whole topologies
// from hwloc XML exports.
#ifndef TOPOLOGY_SRC_HWLOC_SUPPORT_H_
#define TOPOLOGY_SRC_HWLOC_SUPPORT_H_

#include <filesystem>
#include <string>
#include <vector>

#include <hwloc.h>

#include "topology/cpu_info.h"
#include "topology/status.h"
#include "topology/sysfs_reader.h"

namespace topology::internal {

// Owns an hwloc topology handle.
class HwlocTopology {
 public:
  HwlocTopology() { hwloc_topology_init(&topology_); }
  HwlocTopology(const HwlocTopology&) = delete;
  HwlocTopology& operator=(const HwlocTopology&) = delete;
  ~HwlocTopology() { hwloc_topology_destroy(topology_); }
  hwloc_topology_t get() const { return topology_; }

 private:
  hwloc_topology_t topology_ = nullptr;
};

// Converts an hwloc bitmap (ids at or above CpuSet::kMaxCpus are dropped).
CpuSet CpuSetFromHwloc(hwloc_const_bitmap_t bitmap);

// One CpuInfo per PU of a loaded topology (numa_node left unset).
std::vector<CpuInfo> CpusFromHwloc(hwloc_topology_t topology);

// Loads packages, cores and SMT siblings of every CPU below `host_root` with
// hwloc's Linux back-end. hwloc 2.x takes its file-system root only from the
// HWLOC_FSROOT environment variable, so for a root other than "/" the variable
// is set for the duration of the load under a process-wide lock and restored
// afterwards. Refuses (FAILED_PRECONDITION) trees whose CPU or node files
// include FIFOs or device nodes, which would block hwloc.
StatusOr<std::vector<CpuInfo>> LoadCpusWithHwloc(
    const SysfsReader& reader, const std::filesystem::path& host_root);

}  // namespace topology::internal

#endif  // TOPOLOGY_SRC_HWLOC_SUPPORT_H_
