// The host's durable state: the checkpoint (snapshot and journal, in
// CheckpointStore) written from what the ledger and the managers hold, and
// the start from it. Nothing here keeps state of its own but the store: a
// snapshot is encoded from the ledger's pods, the managers' holdings and
// the registry's resources at the moment it is written.
//
// Thread safety: any thread. The store's lock is taken before the
// ledger's (HostManager's lock order).
#ifndef TOPOLOGY_HOST_HOST_JOURNAL_H_
#define TOPOLOGY_HOST_HOST_JOURNAL_H_

#include <atomic>
#include <cstddef>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "topology/status.h"

#include "host_config.h"  // kCheckpointFile
#include "pod_ledger.h"
#include "pod_result.h"
#include "resource_managers.h"

namespace topology::host {

class CheckpointStore;
class PluginRegistry;

// Creates `plugin_dir` (mode 0750) and, like the kubelet, removes every
// socket in it (plugins see theirs vanish and register again) and the
// checkpoint's temporary files an interrupted write left; other files,
// directories and checkpoints stay.
Status PreparePluginDirectory(const std::filesystem::path& plugin_dir);

class HostJournal {
 public:
  // The checkpoint in `plugin_dir`, refused as corrupt above `max_bytes`.
  // `managers`, `ledger` and `registry` must outlive the journal.
  HostJournal(const std::filesystem::path& plugin_dir, size_t max_bytes,
              ResourceManagers* managers, PodLedger* ledger,
              PluginRegistry* registry);
  ~HostJournal();
  HostJournal(const HostJournal&) = delete;
  HostJournal& operator=(const HostJournal&) = delete;

  // Reads the checkpoint into the managers, the ledger and the registry.
  // FAILED_PRECONDITION where the kubelet refuses to start (a damaged
  // checkpoint with pinned CPUs or memory; the memory manager's restart
  // rule); other problems are logged and the start goes on. `warnings`
  // receives what was kept but is suspect, at most `max_warnings` lines.
  Status Restore(std::vector<std::string>* warnings, size_t max_warnings);
  // Whether Restore read the checkpoint (a clean stop then compacts it).
  bool restored() const { return restored_; }

  // An admitted pod's journal record, with what its containers hold.
  static std::string AdmitRecord(
      const manager::Pod& pod, const std::vector<ContainerResult>& containers);
  // Appends `records` and syncs them; `publish`, when given, runs under the
  // store's lock once they are durable (a compaction then sees both or
  // neither).
  Status Append(std::string_view records,
                const std::function<void()>& publish = nullptr);
  // Journals the healthy devices of `resource` (a plugin's new list);
  // errors are logged and returned.
  Status RecordResource(const std::string& resource);
  // A new snapshot and an empty journal.
  Status Compact();
  // Compacts when the journal has outgrown the snapshot or cannot be
  // appended to; true when it did.
  bool CompactIfNeeded();

 private:
  // The whole state as a checkpoint snapshot. Takes the ledger's lock.
  std::string EncodeSnapshot() const;
  // Appends records and compacts when needed; errors are logged.
  Status Persist(std::string_view records);
  // Reads the checkpoint; `*refusal` is set when the start must be refused
  // (the returned status is only logged).
  Status Load(std::vector<std::string>* warnings, size_t max_warnings,
              Status* refusal);

  ResourceManagers* const managers_;
  PodLedger* const ledger_;
  PluginRegistry* const registry_;
  const std::unique_ptr<CheckpointStore> store_;
  std::atomic<bool> restored_ = false;
};

}  // namespace topology::host

#endif  // TOPOLOGY_HOST_HOST_JOURNAL_H_
