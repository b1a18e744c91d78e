#include "host_journal.h"

#include <glog/logging.h>
#include <sys/stat.h>

#include "topology/common/unix_socket.h"

#include "checkpoint.h"
#include "checkpoint_store.h"
#include "host_restore.h"
#include "plugin_registry.h"

namespace topology::host {

Status PreparePluginDirectory(const std::filesystem::path& plugin_dir) {
  std::error_code error;
  std::filesystem::create_directories(plugin_dir, error);
  if (error || !std::filesystem::is_directory(plugin_dir)) {
    return FailedPreconditionError(
        "cannot create the device plugin directory " + plugin_dir.string() +
        (error ? ": " + error.message() : ""));
  }
  if (chmod(plugin_dir.c_str(), 0750) != 0) {
    return FailedPreconditionError("cannot set the mode of " +
                                   plugin_dir.string());
  }
  const std::string temporary_prefix = std::string(".") + kCheckpointFile + ".";
  for (const auto& entry :
       std::filesystem::directory_iterator(plugin_dir, error)) {
    const std::string name = entry.path().filename().string();
    const bool leftover =
        name.starts_with(temporary_prefix) && name.ends_with(".tmp") &&
        entry.is_regular_file(error) && !entry.is_symlink(error);
    if (common::IsSocket(entry.path()) || leftover) {
      VLOG(1) << "removing " << entry.path().string();
      std::filesystem::remove(entry.path(), error);
    }
  }
  return OkStatus();
}

namespace {

// What the containers hold, as the checkpoint keeps it.
std::vector<CheckpointContainer> CheckpointContainers(
    const std::vector<ContainerResult>& containers) {
  std::vector<CheckpointContainer> out;
  out.reserve(containers.size());
  for (const ContainerResult& c : containers) {
    out.push_back({c.name, c.devices, c.cpus, c.numa_nodes, c.memory});
  }
  return out;
}

}  // namespace

std::string HostJournal::AdmitRecord(
    const manager::Pod& pod, const std::vector<ContainerResult>& containers) {
  return EncodeAdmitRecord({pod, CheckpointContainers(containers)});
}

HostJournal::HostJournal(const std::filesystem::path& plugin_dir,
                         size_t max_bytes, ResourceManagers* managers,
                         PodLedger* ledger, PluginRegistry* registry)
    : managers_(managers),
      ledger_(ledger),
      registry_(registry),
      store_(std::make_unique<CheckpointStore>(plugin_dir / kCheckpointFile,
                                               max_bytes)) {}

HostJournal::~HostJournal() = default;

Status HostJournal::Restore(std::vector<std::string>* warnings,
                            size_t max_warnings) {
  Status refusal;
  if (Status loaded = Load(warnings, max_warnings, &refusal); !loaded.ok()) {
    LOG(WARNING) << loaded.message();
  }
  return refusal;
}

Status HostJournal::Append(std::string_view records,
                           const std::function<void()>& publish) {
  return publish ? store_->Append(records, publish) : store_->Append(records);
}

Status HostJournal::RecordResource(const std::string& resource) {
  // Read when written: of two lists journaled by two threads, the later
  // record holds the newer list.
  std::vector<std::string> healthy;
  for (const auto& device : managers_->devices().Devices(resource)) {
    if (device.healthy) healthy.push_back(device.id);
  }
  return Persist(EncodeResourceRecord(resource, healthy));
}

std::string HostJournal::EncodeSnapshot() const {
  Checkpoint checkpoint;
  ledger_->ForEach([&](const PodRecord& record) {
    checkpoint.pods.push_back(
        {record.pod, CheckpointContainers(managers_->Holdings(record.pod))});
  });
  for (const std::string& name : registry_->Resources()) {
    std::vector<std::string>& healthy = checkpoint.registered[name];
    for (const auto& device : managers_->devices().Devices(name)) {
      if (device.healthy) healthy.push_back(device.id);
    }
  }
  checkpoint.memory = MemoryRecord(managers_->memory());
  return EncodeCheckpoint(checkpoint);
}

Status HostJournal::Persist(std::string_view records) {
  Status appended = store_->Append(records);
  if (!appended.ok()) LOG(ERROR) << appended.message();
  // After a failed append the state in memory (a device list) is newer
  // than the journal: a new snapshot holds it.
  if (CompactIfNeeded() && !appended.ok()) return OkStatus();
  return appended;
}

bool HostJournal::CompactIfNeeded() {
  // Either the journal outgrew the snapshot or an append failed.
  if (!store_->NeedsCompaction()) return false;
  return Compact().ok();
}

Status HostJournal::Compact() {
  // The store's lock first, then the ledger's (inside encode): records are
  // encoded under the ledger's lock and appended after it is released, so
  // none is lost between the snapshot's encoding and the new journal.
  Status compacted = store_->Compact([this] { return EncodeSnapshot(); });
  if (!compacted.ok()) LOG(ERROR) << compacted.message();
  return compacted;
}

Status HostJournal::Load(std::vector<std::string>* warnings,
                         size_t max_warnings, Status* refusal) {
  const auto path = store_->snapshot_path();
  std::string warning;
  // The kubelet refuses to start on a CPU or Memory Manager checkpoint it
  // cannot trust (state_checkpoint.go: "please drain this node and delete
  // the ... checkpoint file"): starting without the CPUs and memory running
  // containers hold would pin them a second time. Such damage is refused,
  // with the files left as they are; without those managers, what can be
  // read is salvaged, as the kubelet's device manager does.
  const bool pins =
      managers_->memory().is_static() || managers_->cpus().is_static();
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
        (managers_->memory().is_static() ? "memory manager Static"
                                         : "CPU manager static") +
        " holds pinned resources it records)");
    return *refusal;
  }
  // Appends go to a fresh journal from here on. Entries dropped as
  // conflicting are dropped on disk too, by a new snapshot; otherwise the
  // files read are the state in force and are not encoded again.
  const auto restored = [this](bool rewrite) {
    restored_ = true;
    if (rewrite) return Compact();
    Status resumed = store_->Resume([this] { return EncodeSnapshot(); });
    if (!resumed.ok()) LOG(ERROR) << resumed.message();
    return resumed;
  };
  const auto record_memory = [this] {
    if (Status recorded =
            Persist(EncodeMemoryRecord(MemoryRecord(managers_->memory())));
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

  // The memory manager's restart rule first (validateState on what the
  // checkpoint records): a checkpoint of another policy or machine, or
  // memory that no longer fits, is refused before anything else is
  // restored or written. Pinned memory is never dropped: the kubelet
  // refuses to start rather than run a container on memory it no longer
  // holds.
  const bool memory_recorded =
      checkpoint->memory &&
      *checkpoint->memory == MemoryRecord(managers_->memory());
  if (Status memory = RestoreMemory(*checkpoint, managers_->memory());
      !memory.ok()) {
    *refusal = FailedPreconditionError(
        memory.message() + "; drain the node and remove the checkpoint " +
        path.string() + " to start afresh");
    return *refusal;
  }
  RestoredPods pods = RestorePods(*checkpoint, path.string(), *managers_,
                                  *ledger_, max_warnings);
  *warnings = std::move(pods.warnings);
  for (const auto& [name, ids] : checkpoint->registered) {
    // Known from before the restart, but without a plugin: capacity 0
    // until it registers again, removed after the grace period.
    registry_->AddRestored(name);
  }
  LOG(INFO) << "restored " << pods.pods << " pod(s) and "
            << checkpoint->registered.size() << " resource(s) from "
            << path.string()
            << (pods.dropped > 0 ? "; " + std::to_string(pods.dropped) +
                                       " conflicting entries dropped"
                                 : "")
            << (pods.unknown > 0 ? "; " + std::to_string(pods.unknown) +
                                       " device(s) held that no recorded "
                                       "plugin list offers"
                                 : "");
  const size_t dropped = pods.dropped;
  // A new policy or machine baseline is recorded (by the new snapshot, or
  // appended to the journal).
  Status status = restored(dropped > 0);
  if (status.ok() && dropped == 0 && !memory_recorded) record_memory();
  return status;
}

}  // namespace topology::host
