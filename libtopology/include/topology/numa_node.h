// NumaNode: one online NUMA node as the kernel reports it.
//
// Thread safety: a value type.
#ifndef TOPOLOGY_NUMA_NODE_H_
#define TOPOLOGY_NUMA_NODE_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "topology/cpu_set.h"
#include "topology/export.h"

namespace topology {

// One size of huge pages on a NUMA node
// (nodeN/hugepages/hugepages-<kB>kB, or an hwloc page type).
struct HugePages {
  uint64_t page_size_bytes = 0;
  // nr_hugepages: pages set aside, in use or not.
  uint64_t total_pages = 0;
  // free_hugepages; nullopt when the source does not say (hwloc XML).
  std::optional<uint64_t> free_pages = std::nullopt;

  friend bool operator==(const HugePages&, const HugePages&) = default;
};

// A size in bytes as a Kubernetes binary quantity prints it: the largest
// power-of-1024 suffix that divides it ("2Mi", "1Gi", "1536").
TOPOLOGY_EXPORT std::string BinaryQuantity(uint64_t bytes);
// The kubelet's resource name of a huge page size: "hugepages-2Mi".
TOPOLOGY_EXPORT std::string HugePagesResourceName(uint64_t page_size_bytes);

struct NumaNode {
  // The kernel's node id. Ids may be sparse (0, 8, 250-255).
  int id = 0;
  // CPUs of the node; empty for CPU-less nodes (CXL, GPU or HBM memory).
  CpuSet cpus = {};
  // MemTotal of the node in bytes; 0 when unknown.
  uint64_t memory_bytes = 0;
  // Huge pages by increasing page size; empty when the node has none
  // configured or the source does not say.
  std::vector<HugePages> hugepages = {};
  // For a CPU-less node: the CPUs nearest to its memory (the HMAT
  // initiators, else the nodes nearest in the SLIT, else what hwloc
  // computes, e.g. a GPU's local CPUs); empty when unknown. Empty for nodes
  // with CPUs, whose own CPUs are nearest.
  CpuSet near_cpus = {};

  bool has_cpus() const { return !cpus.empty(); }
};

}  // namespace topology

#endif  // TOPOLOGY_NUMA_NODE_H_
