// HostManager's start from its checkpoint: the snapshot and journal read,
// every entry checked against itself and the machine, conflicts dropped and
// suspect devices named.
#include <map>
#include <set>
#include <string>
#include <vector>

#include <glog/logging.h>

#include "topology/common/text_util.h"

#include "checkpoint.h"
#include "checkpoint_store.h"

// HostManager's start from its checkpoint: the snapshot and journal read,
// the memory manager's restart rule run on what it records, every other
// entry checked against itself and the machine, conflicts dropped and
// suspect devices named. The managers get what the pods hold; the ledger
// gets the pods.
#include <map>
#include <set>
#include <string>
#include <vector>

#include <glog/logging.h>

#include "topology/common/text_util.h"

#include "checkpoint.h"
#include "checkpoint_store.h"
#include "host_restore.h"

namespace topology::host {

using text::Quoted;

CheckpointMemory MemoryRecord(const manager::MemoryManager& memory) {
  CheckpointMemory record;
  record.policy = memory.policy_name();
  record.machine = memory.Baseline();
  // Only what the machine and the configuration decide.
  for (auto& [id, node] : record.machine) {
    node.cells.clear();
    node.assignments = 0;
    for (auto& [type, table] : node.memory) table.reserved = table.free = 0;
  }
  return record;
}

Status RestoreMemory(const Checkpoint& checkpoint,
                     manager::MemoryManager& memory) {
  manager::MemoryState recorded;
  if (checkpoint.memory) recorded.machine = checkpoint.memory->machine;
  std::set<std::string> seen;
  for (const CheckpointPod& entry : checkpoint.pods) {
    // A pod listed twice keeps its first entry (RestorePods drops the
    // second the same way).
    if (!seen.insert(entry.pod.uid).second) continue;
    for (const CheckpointContainer& listed : entry.containers) {
      if (listed.memory.empty()) continue;
      auto& blocks = recorded.assignments[entry.pod.uid][listed.name];
      if (!blocks.empty()) {
        return FailedPreconditionError("[memorymanager] pod " + entry.pod.uid +
                                       " container " + listed.name +
                                       " is listed twice with pinned memory");
      }
      blocks = listed.memory;
    }
  }
  // A checkpoint without a memory record (written before the record was
  // kept) is taken as written under this policy on this machine.
  const std::string policy =
      checkpoint.memory ? checkpoint.memory->policy : memory.policy_name();
  std::string drift;
  Status restored = memory.Restore(policy, recorded, &drift);
  if (restored.ok() && !drift.empty()) {
    LOG(WARNING) << "memory manager: " << drift;
  }
  return restored;
}

RestoredPods RestorePods(const Checkpoint& checkpoint, const std::string& path,
                         ResourceManagers& managers, PodLedger& ledger,
                         size_t max_warnings) {
  RestoredPods out;
  // Checked against itself and the machine: a device claimed by a second
  // pod is dropped from that pod, CPUs that cannot be restored are dropped;
  // nothing is ever double-booked.
  std::map<std::pair<std::string, std::string>, std::string> owner;
  // The resources the checkpoint has a plugin record of, with the devices
  // that record lists.
  std::map<std::string, std::set<std::string>> offered;
  for (const auto& [name, ids] : checkpoint.registered) {
    offered[name].insert(ids.begin(), ids.end());
  }
  // The first `max_warnings` device warnings are logged and kept for
  // status; the rest are counted in the summary line (a node restored
  // with 10,000 such devices neither builds nor logs 10,000 lines).
  const auto warn = [&](const auto& line) {
    if (out.warnings.size() >= max_warnings) return;
    out.warnings.push_back(line());
    LOG(WARNING) << out.warnings.back();
  };
  for (const CheckpointPod& entry : checkpoint.pods) {
    PodRecord record;
    record.pod = entry.pod;
    const manager::Pod& pod = record.pod;
    const std::string who = "checkpoint " + path + ": pod " + pod.ns + "/" +
                            pod.name + " (" + pod.uid + ")";
    if (!pod.topology_policy.empty() &&
        !manager::IsPodTopologyPolicy(pod.topology_policy)) {
      LOG(WARNING) << who << ": unknown topology policy "
                   << Quoted(pod.topology_policy) << "; none assumed";
      record.pod.topology_policy.clear();
    }
    record.answer.uid = pod.uid;
    record.answer.ns = pod.ns;
    record.answer.name = pod.name;
    record.answer.admitted = true;
    record.answer.policy = managers.topology_manager().Effective(pod);
    if (!ledger.InsertRestored(record)) {
      LOG(WARNING) << who << " listed twice; the second entry is dropped";
      ++out.dropped;
      continue;
    }
    ++out.pods;
    for (const CheckpointContainer& listed : entry.containers) {
      for (const auto& [name, ids] : listed.devices) {
        // A plain reference: the warnings' lambdas capture it (a
        // structured binding cannot be captured before C++20's clang 16).
        const std::string& resource = name;
        std::vector<std::string> kept;
        std::set<std::string> seen;
        const auto listed_by = offered.find(resource);
        for (const std::string& id : ids) {
          // One device twice in one container's list: a container holds
          // a device once (init and app containers of one pod may share
          // it; that is reuse, not a duplicate).
          if (!seen.insert(id).second) {
            LOG(WARNING) << who << " container " << Quoted(listed.name) << ": "
                         << resource << " device " << Quoted(id)
                         << " listed twice; the second is dropped";
            ++out.dropped;
            continue;
          }
          // A resource the checkpoint never had a plugin for: kept (its
          // plugin may come back), but said, at most `max_warnings` lines
          // (the count is in the summary). A device merely absent from the
          // healthy list is not suspect: it may have turned unhealthy.
          if (listed_by == offered.end()) {
            ++out.unknown;
            warn([&] {
              return who + " container " + Quoted(listed.name) + " holds " +
                     resource + " device " + Quoted(id) +
                     ", but no plugin of " + resource +
                     " is recorded in the checkpoint; kept";
            });
          } else if (!listed_by->second.contains(id)) {
            // Kept, as the kubelet keeps it: the plugin's last list may
            // have left it out as unhealthy. Said, since it may also be
            // a device the plugin never offered.
            ++out.unknown;
            warn([&] {
              return who + " container " + Quoted(listed.name) + " holds " +
                     resource + " device " + Quoted(id) +
                     ", which the last list of " + resource +
                     "'s plugin in the checkpoint does not offer "
                     "(unhealthy, or never offered); kept";
            });
          }
          auto [it, fresh] = owner.emplace(std::pair{resource, id}, pod.uid);
          if (!fresh && it->second != pod.uid) {
            LOG(WARNING) << who << " container " << Quoted(listed.name) << ": "
                         << resource << " device " << Quoted(id)
                         << " is already held by pod " << it->second
                         << "; dropped from this pod";
            ++out.dropped;
            continue;
          }
          kept.push_back(id);
        }
        if (kept.empty()) continue;
        managers.devices().Restore(pod.uid, listed.name, resource, kept);
      }
      if (Status cpus =
              managers.cpus().Restore(pod.uid, listed.name, listed.cpus);
          !cpus.ok()) {
        LOG(WARNING) << who << ": " << cpus.message()
                     << "; its exclusive CPUs are dropped";
        ++out.dropped;
      }
      if (listed.numa_nodes) {
        auto mask = manager::NumaMask::FromIds(*listed.numa_nodes);
        if (mask.ok()) {
          managers.topology_manager().RestoreAffinity(
              pod.uid, listed.name, manager::TopologyHint{*mask, true});
        }
      }
    }
  }
  return out;
}

}  // namespace topology::host
