// The pieces of the host's restore from its checkpoint that need no
// HostManager: the memory manager's record and restart, and the pods put
// back into the managers and the ledger (host_restore.cc).
#ifndef TOPOLOGY_HOST_HOST_RESTORE_H_
#define TOPOLOGY_HOST_HOST_RESTORE_H_

#include <cstddef>
#include <string>
#include <vector>

#include "topology/manager/memory_manager.h"
#include "topology/status.h"

#include "checkpoint.h"
#include "pod_ledger.h"
#include "resource_managers.h"

namespace topology::host {

// The memory manager's policy and machine as the checkpoint records them:
// what the machine and the configuration decide, nothing assigned.
CheckpointMemory MemoryRecord(const manager::MemoryManager& memory);

// The memory manager's one restart rule (MemoryManager::Restore) run on
// the checkpoint's record and every container's pinned blocks (a pod
// listed twice keeps its first entry). A tolerated drift is logged.
Status RestoreMemory(const Checkpoint& checkpoint,
                     manager::MemoryManager& memory);

struct RestoredPods {
  size_t pods = 0;
  size_t dropped = 0;  // conflicting entries
  size_t unknown = 0;  // devices held that no recorded plugin list offers
  std::vector<std::string> warnings = {};  // the first of them, in words
};
// Every pod into the ledger (a pod listed twice keeps its first entry) and
// what it holds into the managers: devices (one holder each; a second
// claim is dropped), exclusive CPUs (dropped when they cannot be restored)
// and affinities. Pinned memory is RestoreMemory's. `path` names the
// checkpoint in the warnings; at most `max_warnings` are kept.
RestoredPods RestorePods(const Checkpoint& checkpoint, const std::string& path,
                         ResourceManagers& managers, PodLedger& ledger,
                         size_t max_warnings);

}  // namespace topology::host

#endif  // TOPOLOGY_HOST_HOST_RESTORE_H_
