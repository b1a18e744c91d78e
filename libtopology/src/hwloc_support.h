// hwloc as a source: the CPU topology of a host root, and whole topologies
// from hwloc XML exports.
#ifndef TOPOLOGY_SRC_HWLOC_SUPPORT_H_
#define TOPOLOGY_SRC_HWLOC_SUPPORT_H_

#include <filesystem>
#include <string>
#include <vector>

#include <hwloc.h>

#include "topology/cpu_info.h"
#include "topology/numa_node.h"
#include "topology/status.h"
#include "topology/sysfs_reader.h"

#include "sysfs_discovery.h"

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

// The huge pages of a NUMANode object: its page types after the first,
// which hwloc's Linux back-end gives to normal pages. Free counts are not
// known (nullopt).
std::vector<HugePages> HugePagesFromHwloc(hwloc_obj_t node);

// One CpuInfo per PU of a loaded topology (numa_node left unset). Packages
// are hwloc's Package objects, which it groups by the siblings masks: their
// OS index (physical_package_id) when every package has a distinct one,
// else (ids repeated or -1, as on s390 and ia64) hwloc's logical index.
std::vector<CpuInfo> CpusFromHwloc(hwloc_topology_t topology);

// Loads the online CPUs (packages, cores and SMT siblings) and the NUMA
// nodes (locality and memory) below `host_root` with hwloc's Linux back-end,
// keeping NVIDIA GPU-memory nodes as the kernel lists them. hwloc 2.x takes its
// file-system root only from the HWLOC_FSROOT environment variable, so for a
// root other than "/" the variable is set for the duration of the load under a
// process-wide lock and restored afterwards. A load blocked on a FIFO in such
// a tree is interrupted (a timer signal to the calling thread, no thread
// started) and its result refused (FAILED_PRECONDITION, naming the FIFO).
StatusOr<HwlocMachine> LoadMachineWithHwloc(
    const std::filesystem::path& host_root);

}  // namespace topology::internal

#endif  // TOPOLOGY_SRC_HWLOC_SUPPORT_H_
