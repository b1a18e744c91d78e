// The Memory Manager's state (pkg/kubelet/cm/memorymanager/state): per NUMA
// node and memory type the total, system reserved, allocatable, reserved and
// free bytes, the number of assignments and the group of nodes the node is
// allocated with; and the memory blocks each container holds.
//
// Memory types are "memory" and "hugepages-<size>" ("hugepages-2Mi"); sizes
// are bytes.
#ifndef TOPOLOGY_MANAGER_MEMORY_STATE_H_
#define TOPOLOGY_MANAGER_MEMORY_STATE_H_

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "topology/export.h"

namespace topology::manager {

inline constexpr char kMemoryResource[] = "memory";
inline constexpr char kHugePagesPrefix[] = "hugepages-";
inline constexpr char kMemoryPolicyNone[] = "None";
inline constexpr char kMemoryPolicyStatic[] = "Static";

// "hugepages-<size>".
TOPOLOGY_EXPORT bool IsHugePagesResource(std::string_view name);
// "memory" or "hugepages-<size>".
TOPOLOGY_EXPORT bool IsMemoryResource(std::string_view name);

// One memory type on one NUMA node (state.MemoryTable), bytes.
struct MemoryTable {
  uint64_t total = 0;  // TotalMemSize
  uint64_t system_reserved = 0;
  uint64_t allocatable = 0;
  uint64_t reserved = 0;
  uint64_t free = 0;
  friend bool operator==(const MemoryTable&, const MemoryTable&) = default;
};

// One NUMA node (state.NUMANodeState).
struct MemoryNodeState {
  std::map<std::string, MemoryTable> memory = {};  // by memory type
  int assignments = 0;                             // NumberOfAssignments
  // Cells: the nodes this node is allocated with (itself alone when free).
  std::vector<int> cells = {};
  friend bool operator==(const MemoryNodeState&,
                         const MemoryNodeState&) = default;
};
using MemoryMachineState = std::map<int, MemoryNodeState>;

// Memory of one type a container holds on a group of nodes (state.Block).
struct MemoryBlock {
  std::vector<int> numa_affinity = {};
  std::string type = {};
  uint64_t size = 0;
  friend bool operator==(const MemoryBlock&, const MemoryBlock&) = default;
};
// pod uid -> container name -> blocks (state.ContainerMemoryAssignments).
using ContainerMemoryAssignments =
    std::map<std::string, std::map<std::string, std::vector<MemoryBlock>>>;

struct MemoryState {
  MemoryMachineState machine = {};
  ContainerMemoryAssignments assignments = {};
  // The container's blocks, or nullptr (GetMemoryBlocks' nil).
  const std::vector<MemoryBlock>* Blocks(const std::string& pod_uid,
                                         const std::string& container) const;
};

}  // namespace topology::manager

#endif  // TOPOLOGY_MANAGER_MEMORY_STATE_H_
