// The host module's checkpoint on disk: a snapshot file and an append-only
// journal beside it (`<snapshot>.journal`), in a directory that plugins can
// write. An admission or a release appends one record and syncs it
// (fdatasync), so its cost does not grow with the pods held. The journal's
// file is written ahead of its records in zeros, 256 KiB at a time: a
// record then fills space the file already has, and its sync does not
// also commit a new file size (on ext4 about a third of a sync's time).
// When the
// journal outgrows the snapshot (and 1 MiB) the owner compacts: a new
// snapshot is written atomically (fresh temporary file, fsync, rename,
// fsync of the directory), then a fresh, empty journal replaces the old
// one the same way. A crash at any point leaves a snapshot and a journal
// whose replay gives the last synced state (see checkpoint.h).
#ifndef TOPOLOGY_HOST_CHECKPOINT_STORE_H_
#define TOPOLOGY_HOST_CHECKPOINT_STORE_H_

#include <cstddef>
#include <filesystem>
#include <functional>
#include <mutex>
#include <string>
#include <string_view>

#include "topology/status.h"
#include "topology/thread_annotations.h"

#include "checkpoint.h"

namespace topology::host {

class CheckpointStore {
 public:
  // Neither file is touched until Load or Compact. Files larger than
  // `max_bytes` are refused.
  CheckpointStore(std::filesystem::path snapshot, size_t max_bytes);
  ~CheckpointStore();
  CheckpointStore(const CheckpointStore&) = delete;
  CheckpointStore& operator=(const CheckpointStore&) = delete;

  const std::filesystem::path& snapshot_path() const { return snapshot_; }
  const std::filesystem::path& journal_path() const { return journal_; }

  // The snapshot with the journal replayed. NOT_FOUND when neither file
  // exists. DATA_LOSS when the snapshot is unusable (a link, not a regular
  // file, too large, not a checkpoint): both files are moved aside to
  // `<name>.corrupt` and the message says so. A damaged journal record
  // ends the replay there; `*warning` says which record and why, and a
  // damaged journal (not merely a last record cut short by a crash) is
  // copied to `<journal>.corrupt` first. Never follows a link, never blocks
  // on a FIFO.
  //
  // With `on_damage` kRefuse (a manager that pins memory or CPUs is in
  // force, and the kubelet refuses to start on such a manager's checkpoint
  // it cannot trust), any damage beyond a last record cut short by a crash
  // is FAILED_PRECONDITION naming the file and why, and both files are
  // left exactly as they are: the next start refuses again until an
  // operator drains the node and removes them.
  enum class OnDamage { kSalvage, kRefuse };
  StatusOr<Checkpoint> Load(std::string* warning,
                            OnDamage on_damage = OnDamage::kSalvage);

  // Writes the snapshot `encode()` returns (called with the store's lock
  // held, so no record can be appended between the state it encodes and
  // the new journal) and starts an empty journal. Mode 0600 whatever the
  // umask; never writes through a planted link.
  Status Compact(const std::function<std::string()>& encode);

  // Continues from what Load read without re-encoding it: a fresh journal
  // (created and renamed over the old one, like Compact's) holding the
  // records Load applied, a damaged tail left out. When Load found no
  // usable snapshot, or was not called, this is a Compact.
  Status Resume(const std::function<std::string()>& encode);

  // Appends `records` (whole lines) and syncs them; then, still under the
  // store's lock, runs `publish` (when given): the caller makes the
  // records' effect visible there, so that no Compact can encode a state
  // without an effect whose record it then discards, and no effect is seen
  // before its record is durable. A failed append is cut off again, so
  // later records never follow a partial one, and `publish` is not run; if
  // even the cut fails, the next Append reports FAILED_PRECONDITION until a
  // Compact.
  Status Append(std::string_view records,
                const std::function<void()>& publish = nullptr);

  // The journal has outgrown the snapshot: time to Compact.
  bool NeedsCompaction() const;

  // Bytes in the journal and in the last snapshot written or loaded.
  size_t journal_bytes() const;
  size_t snapshot_bytes() const;

 private:
  void CloseJournal() TOPOLOGY_REQUIRES(mu_);
  Status CompactLocked(const std::function<std::string()>& encode)
      TOPOLOGY_REQUIRES(mu_);
  // A new journal holding `records`, renamed over the old one and kept
  // open for appending.
  Status ReplaceJournal(std::string_view records) TOPOLOGY_REQUIRES(mu_);

  const std::filesystem::path snapshot_;
  const std::filesystem::path journal_;
  const size_t max_bytes_;
  // Serialises the file operations; held across their writes and syncs
  // (that is its purpose: the journal's order), never across a call out.
  mutable Mutex mu_;
  // Open for appending after a Compact.
  int journal_fd_ TOPOLOGY_GUARDED_BY(mu_) = -1;
  // A failed append could not be cut off.
  bool broken_ TOPOLOGY_GUARDED_BY(mu_) = false;
  size_t journal_bytes_ TOPOLOGY_GUARDED_BY(mu_) = 0;  // the records
  // The file: the records, then zeros.
  size_t journal_reserved_ TOPOLOGY_GUARDED_BY(mu_) = 0;
  size_t snapshot_bytes_ TOPOLOGY_GUARDED_BY(mu_) = 0;
  // Load read a usable snapshot.
  bool loaded_snapshot_ TOPOLOGY_GUARDED_BY(mu_) = false;
  // The records Load applied.
  std::string loaded_journal_ TOPOLOGY_GUARDED_BY(mu_);
};

}  // namespace topology::host

#endif  // TOPOLOGY_HOST_CHECKPOINT_STORE_H_
