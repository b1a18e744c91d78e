// HostManager's start from its checkpoint: the snapshot and journal read,
// every entry checked against itself and the machine, conflicts dropped and
// suspect devices named.
#include <map>
#include <set>
#include <string>
#include <vector>

#include <glog/logging.h>

#include "checkpoint.h"
#include "checkpoint_store.h"
#include "host_manager.h"
#include "text_util.h"

namespace topology::host {
namespace {

std::string NumaList(const std::vector<int>& ids) {
  std::string out = "[";
  for (int id : ids) {
    if (out.size() > 1) out += ',';
    out += std::to_string(id);
  }
  return out + "]";
}

}  // namespace

CheckpointMemory HostManager::MemoryRecord() const {
  CheckpointMemory record;
  record.policy = memory_manager_->policy_name();
  record.machine = memory_manager_->Baseline();
  // Only what the machine and the configuration decide.
  for (auto& [id, node] : record.machine) {
    node.cells.clear();
    node.assignments = 0;
    for (auto& [type, table] : node.memory) table.reserved = table.free = 0;
  }
  return record;
}

Status HostManager::CheckMemoryRecord(const CheckpointMemory& recorded) const {
  const CheckpointMemory now = MemoryRecord();
  const std::string remedy = "; drain the node and remove the checkpoint " +
                             store_->snapshot_path().string() +
                             " to start afresh";
  if (recorded.policy != now.policy) {
    return FailedPreconditionError(
        "[memorymanager] configured policy \"" + now.policy +
        "\" differs from state checkpoint policy \"" + recorded.policy + "\"" +
        remedy);
  }
  const auto refuse = [&](const std::string& what) {
    return FailedPreconditionError(
        "[memorymanager] the expected machine state is different from the "
        "real one: " +
        what + remedy);
  };
  const auto ids = [](const manager::MemoryMachineState& machine) {
    std::vector<int> out;
    for (const auto& [id, node] : machine) out.push_back(id);
    return out;
  };
  if (ids(recorded.machine) != ids(now.machine)) {
    return refuse("NUMA nodes " + NumaList(ids(recorded.machine)) +
                  " in the checkpoint, " + NumaList(ids(now.machine)) + " now");
  }
  for (const auto& [id, node] : recorded.machine) {
    const manager::MemoryNodeState& current = now.machine.at(id);
    const std::string where = "node " + std::to_string(id) + " ";
    for (const auto& [type, table] : node.memory) {
      if (!current.memory.contains(type)) {
        return refuse(where + "has no " + type + " now");
      }
    }
    for (const auto& [type, table] : current.memory) {
      const auto it = node.memory.find(type);
      if (it == node.memory.end()) {
        return refuse(where + "had no " + type + " in the checkpoint");
      }
      const manager::MemoryTable& was = it->second;
      if (was.system_reserved != table.system_reserved) {
        return refuse(where + type + " system reserved " +
                      std::to_string(was.system_reserved) +
                      " in the checkpoint, " +
                      std::to_string(table.system_reserved) + " now");
      }
      // KEP-6232, opt-in: regular memory may drift within the bound; huge
      // pages never.
      const uint64_t drift = was.total > table.total ? was.total - table.total
                                                     : table.total - was.total;
      const bool tolerated =
          type == manager::kMemoryResource &&
          drift <= config_.memory_drift_tolerance &&
          was.total - was.allocatable == table.total - table.allocatable;
      if (drift != 0 && !tolerated) {
        return refuse(
            where + type + " total " + std::to_string(was.total) +
            " bytes in the checkpoint, " + std::to_string(table.total) +
            " now" +
            (type == manager::kMemoryResource
                 ? " (a drift of " + std::to_string(drift) +
                       " bytes; --memory-drift-tolerance is " +
                       std::to_string(config_.memory_drift_tolerance) + ")"
                 : ""));
      }
      if (drift == 0 && was.allocatable != table.allocatable) {
        return refuse(where + type + " allocatable " +
                      std::to_string(was.allocatable) + " in the checkpoint, " +
                      std::to_string(table.allocatable) + " now");
      }
      if (drift != 0) {
        LOG(WARNING) << "memory manager: " << where << "memory total moved "
                     << drift << " bytes since the checkpoint (tolerated, "
                     << "--memory-drift-tolerance "
                     << config_.memory_drift_tolerance << ")";
      }
    }
  }
  return OkStatus();
}

Status HostManager::RestoreCheckpoint(Status* refusal) {
  const auto path = store_->snapshot_path();
  std::string warning;
  // The kubelet refuses to start on a CPU or Memory Manager checkpoint it
  // cannot trust (state_checkpoint.go: "please drain this node and delete
  // the ... checkpoint file"): starting without the CPUs and memory running
  // containers hold would pin them a second time. Such damage is refused,
  // with the files left as they are; without those managers, what can be
  // read is salvaged, as the kubelet's device manager does.
  const bool pins = memory_manager_->is_static() || cpu_manager_->is_static();
  // Never follows a link, never blocks on a FIFO, never reads unbounded.
  auto checkpoint =
      store_->Load(&warning, pins ? CheckpointStore::OnDamage::kRefuse
                                  : CheckpointStore::OnDamage::kSalvage);
  if (!warning.empty()) LOG(WARNING) << warning;
  if (pins && !checkpoint.ok() &&
      checkpoint.status().code() != StatusCode::kNotFound) {
    *refusal = FailedPreconditionError(
        "could not restore state from checkpoint: " +
        checkpoint.status().message() +
        ", please drain this node and delete the checkpoint files " +
        path.string() + " and " + store_->journal_path().string() +
        " before restarting (" +
        (memory_manager_->is_static() ? "memory manager Static"
                                      : "CPU manager static") +
        " holds pinned resources it records)");
    return *refusal;
  }
  // Appends go to a fresh journal from here on. Entries dropped as
  // conflicting are dropped on disk too, by a new snapshot; otherwise the
  // files read are the state in force and are not encoded again.
  const auto restored = [this](bool rewrite) {
    {
      MutexLock lock(mu_);
      restored_ = true;
    }
    if (rewrite) return Compact();
    Status resumed = store_->Resume([this] {
      MutexLock lock(mu_);
      return EncodeSnapshot();
    });
    if (!resumed.ok()) LOG(ERROR) << resumed.message();
    return resumed;
  };
  const auto record_memory = [this] {
    if (Status recorded = Persist(EncodeMemoryRecord(MemoryRecord()));
        !recorded.ok()) {
      LOG(ERROR) << "cannot record the memory manager's machine: "
                 << recorded.message();
    }
  };
  if (!checkpoint.ok()) {
    if (checkpoint.status().code() == StatusCode::kNotFound) {
      LOG(INFO) << "no checkpoint at " << path.string() << ": starting empty";
    } else if (checkpoint.status().code() == StatusCode::kDataLoss) {
      LOG(WARNING) << checkpoint.status().message();
    } else {
      // Unreadable (not corrupt): left alone, nothing written over it.
      return checkpoint.status();
    }
    Status status = restored(false);
    if (status.ok()) record_memory();
    return status;
  }

  // The memory manager's validateState first: a checkpoint of another
  // policy or machine is refused before anything is restored or written.
  if (checkpoint->memory) {
    if (Status memory = CheckMemoryRecord(*checkpoint->memory); !memory.ok()) {
      *refusal = memory;
      return memory;
    }
  }
  const bool memory_recorded =
      checkpoint->memory && *checkpoint->memory == MemoryRecord();

  // Checked against itself and the machine: a device claimed by a second
  // pod is dropped from that pod, CPUs that cannot be restored are dropped;
  // nothing is ever double-booked.
  size_t dropped = 0;
  size_t unknown = 0;
  {
    MutexLock lock(mu_);
    std::map<std::pair<std::string, std::string>, std::string> owner;
    // The resources the checkpoint has a plugin record of, with the devices
    // that record lists.
    std::map<std::string, std::set<std::string>> offered;
    for (const auto& [name, ids] : checkpoint->registered) {
      offered[name].insert(ids.begin(), ids.end());
    }
    // The first kMaxRestoreWarnings device warnings are logged and kept for
    // status; the rest are counted in the summary line (a node restored
    // with 10,000 such devices neither builds nor logs 10,000 lines).
    std::vector<std::string> warnings;
    const auto warn = [&warnings](const auto& line) {
      if (warnings.size() >= kMaxRestoreWarnings) return;
      warnings.push_back(line());
      LOG(WARNING) << warnings.back();
    };
    for (CheckpointPod& entry : checkpoint->pods) {
      const manager::Pod& pod = entry.pod;
      const std::string who = "checkpoint " + path.string() + ": pod " +
                              pod.ns + "/" + pod.name + " (" + pod.uid + ")";
      if (pods_.contains(pod.uid)) {
        LOG(WARNING) << who << " listed twice; the second entry is dropped";
        ++dropped;
        continue;
      }
      PodRecord record;
      record.pod = pod;
      record.result.uid = pod.uid;
      record.result.ns = pod.ns;
      record.result.name = pod.name;
      record.result.admitted = true;
      if (!pod.topology_policy.empty() &&
          !manager::IsPodTopologyPolicy(pod.topology_policy)) {
        LOG(WARNING) << who << ": unknown topology policy "
                     << Quoted(pod.topology_policy) << "; none assumed";
        record.pod.topology_policy.clear();
      }
      record.result.policy = topology_manager_->Effective(record.pod);
      for (const CheckpointContainer& listed : entry.containers) {
        ContainerResult container;
        container.name = listed.name;
        container.numa_nodes = listed.numa_nodes;
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
              LOG(WARNING) << who << " container " << Quoted(listed.name)
                           << ": " << resource << " device " << Quoted(id)
                           << " listed twice; the second is dropped";
              ++dropped;
              continue;
            }
            // A resource the checkpoint never had a plugin for: kept (its
            // plugin may come back), but said, at most 16 lines (the count
            // is in the summary). A device merely absent from the healthy
            // list is not suspect: it may have turned unhealthy.
            if (listed_by == offered.end()) {
              ++unknown;
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
              ++unknown;
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
              LOG(WARNING) << who << " container " << Quoted(container.name)
                           << ": " << resource << " device " << Quoted(id)
                           << " is already held by pod " << it->second
                           << "; dropped from this pod";
              ++dropped;
              continue;
            }
            kept.push_back(id);
          }
          if (kept.empty()) continue;
          device_manager_->Restore(pod.uid, container.name, resource, kept);
          container.devices[resource] = std::move(kept);
        }
        if (Status cpus_restored =
                cpu_manager_->Restore(pod.uid, container.name, listed.cpus);
            !cpus_restored.ok()) {
          LOG(WARNING) << who << ": " << cpus_restored.message()
                       << "; its exclusive CPUs are dropped";
          ++dropped;
        } else {
          container.cpus = listed.cpus;
        }
        // Pinned memory is never dropped: the kubelet refuses to start
        // rather than run a container on memory it no longer holds.
        if (!listed.memory.empty()) {
          if (Status memory =
                  memory_manager_->Restore(pod.uid, listed.name, listed.memory);
              !memory.ok()) {
            *refusal = FailedPreconditionError(
                "[memorymanager] " + who + ": " + memory.message() +
                "; drain the node and remove the checkpoint " + path.string() +
                " to start afresh");
            return *refusal;
          }
          container.memory = listed.memory;
        }
        record.result.containers.push_back(std::move(container));
      }
      pods_[pod.uid] = std::move(record);
    }
    restore_warnings_ = std::move(warnings);
    for (const auto& [name, ids] : checkpoint->registered) {
      // Known from before the restart, but without a plugin: capacity 0
      // until it registers again, removed after the grace period.
      registry_->AddRestored(name);
    }
    LOG(INFO) << "restored " << pods_.size() << " pod(s) and "
              << checkpoint->registered.size() << " resource(s) from "
              << path.string()
              << (dropped > 0 ? "; " + std::to_string(dropped) +
                                    " conflicting entries dropped"
                              : "")
              << (unknown > 0 ? "; " + std::to_string(unknown) +
                                    " device(s) held that no recorded plugin "
                                    "list offers"
                              : "");
  }
  // A new policy or machine baseline is recorded (by the new snapshot, or
  // appended to the journal).
  Status status = restored(dropped > 0);
  if (status.ok() && dropped == 0 && !memory_recorded) record_memory();
  return status;
}

}  // namespace topology::host
