#include "checkpoint_store.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <system_error>
#include <utility>
#include <vector>

#include <fcntl.h>
#include <unistd.h>

#include "topology/common/safe_file.h"

namespace topology::host {
namespace {

constexpr size_t kMinCompactionBytes = size_t{1} << 20;

// How far ahead of its records the journal's file is written (in zeros).
constexpr size_t kJournalAhead = size_t{256} << 10;

std::string Errno() { return std::strerror(errno); }

std::string JoinWarnings(const std::vector<std::string>& warnings) {
  std::string out;
  for (const std::string& warning : warnings) {
    out += (out.empty() ? "" : "; ") + warning;
  }
  return out;
}

// Zeros over [from, to) of the file.
bool WriteZeros(int fd, size_t from, size_t to) {
  static const std::string kZeros(size_t{64} << 10, '\0');
  while (from < to) {
    const size_t n = std::min(kZeros.size(), to - from);
    const std::string_view zeros = kZeros;
    if (!files::WriteAllAt(fd, zeros.substr(0, n), from)) {
      return false;
    }
    from += n;
  }
  return true;
}

}  // namespace

CheckpointStore::CheckpointStore(std::filesystem::path snapshot,
                                 size_t max_bytes)
    : snapshot_(std::move(snapshot)),
      journal_(snapshot_.string() + ".journal"),
      max_bytes_(max_bytes) {}

CheckpointStore::~CheckpointStore() {
  MutexLock lock(mu_);
  CloseJournal();
}

void CheckpointStore::CloseJournal() {
  if (journal_fd_ >= 0) close(journal_fd_);
  journal_fd_ = -1;
}

StatusOr<Checkpoint> CheckpointStore::Load(std::string* warning,
                                           OnDamage on_damage) {
  MutexLock lock(mu_);
  const bool refuse = on_damage == OnDamage::kRefuse;
  const auto untrusted = [](const std::filesystem::path& path,
                            std::string_view why) {
    return FailedPreconditionError("checkpoint " + path.string() +
                                   " cannot be trusted (" + std::string(why) +
                                   ")");
  };
  std::error_code error;
  const auto move_aside = [&](const std::filesystem::path& path) {
    auto kept = path.string() + ".corrupt";
    std::filesystem::rename(path, kept, error);
    return kept;
  };
  // Temporary files of writes a crash interrupted: never read, removed.
  files::RemoveTemporaryLeftovers(snapshot_);
  files::RemoveTemporaryLeftovers(journal_);
  auto snapshot_text = files::ReadRegularFile(snapshot_, max_bytes_);
  auto journal_text = files::ReadRegularFile(journal_, max_bytes_);
  const bool no_snapshot =
      !snapshot_text.ok() &&
      snapshot_text.status().code() == StatusCode::kNotFound;
  const bool no_journal = !journal_text.ok() &&
                          journal_text.status().code() == StatusCode::kNotFound;
  if (no_snapshot && no_journal) {
    return NotFoundError("no checkpoint at " + snapshot_.string());
  }
  Checkpoint checkpoint;
  if (!no_snapshot) {
    std::string why;
    if (!snapshot_text.ok()) {
      if (snapshot_text.status().code() != StatusCode::kFailedPrecondition) {
        return snapshot_text.status();
      }
      why = snapshot_text.status().message();
    } else if (auto decoded = DecodeCheckpoint(*snapshot_text); !decoded.ok()) {
      why = decoded.status().message();
    } else {
      checkpoint = std::move(*decoded);
      snapshot_bytes_ = snapshot_text->size();
      loaded_snapshot_ = true;
    }
    if (!why.empty() && refuse) return untrusted(snapshot_, why);
    if (!why.empty()) {
      // Without its snapshot the journal says only what changed: it is
      // kept beside the snapshot, not applied to nothing.
      const auto kept = move_aside(snapshot_);
      std::string journal_note;
      if (!no_journal) {
        journal_note = "; the journal is kept as " + move_aside(journal_);
      }
      return DataLossError(
          "checkpoint " + snapshot_.string() + " is corrupt (" + why +
          "); starting with no allocations, the file is kept as " + kept +
          journal_note);
    }
  }
  if (no_journal) return checkpoint;
  std::vector<std::string> warnings;
  if (no_snapshot && refuse) {
    return untrusted(snapshot_,
                     "missing, while its journal " + journal_.string() +
                         " is there: the pods admitted before the journal "
                         "began are not known");
  }
  if (!journal_text.ok() && refuse) {
    return untrusted(journal_, journal_text.status().message());
  }
  if (no_snapshot) {
    // A journal holds what changed after its snapshot: replayed on nothing,
    // it gives the pods admitted since then only. Said, not hidden.
    warnings.push_back(
        "checkpoint " + snapshot_.string() +
        " is missing but its journal is there: only the changes since "
        "the last snapshot are restored (pods admitted before it are "
        "not known)");
  }
  if (!journal_text.ok()) {
    // A link, a FIFO, a device or too large: never used.
    warnings.push_back("checkpoint journal " + journal_.string() +
                       " not used (" + journal_text.status().message() +
                       "); it is kept as " + move_aside(journal_));
    *warning = JoinWarnings(warnings);
    return checkpoint;
  }
  const JournalReplay replay = ReplayJournal(*journal_text, checkpoint);
  if (refuse && !replay.damage.empty() && !replay.torn_tail) {
    return untrusted(journal_, "damaged at " + replay.damage);
  }
  journal_bytes_ = JournalRecords(*journal_text).size();
  loaded_journal_ = journal_text->substr(0, replay.valid_bytes);
  if (!replay.damage.empty()) {
    if (replay.torn_tail) {
      warnings.push_back("checkpoint journal " + journal_.string() + ": " +
                         replay.damage +
                         "; a write cut short by a crash, ignored (" +
                         std::to_string(replay.applied) + " records applied)");
    } else {
      const auto kept = journal_.string() + ".corrupt";
      // A copy: the original stays until the next Compact replaces it. Made
      // as every file here (a planted link at `kept` is replaced, never
      // written through), from the text already read.
      const Status copied =
          files::WriteFileAtomically(kept, *journal_text, 0600);
      warnings.push_back(
          "checkpoint journal " + journal_.string() + " is damaged at " +
          replay.damage + "; the " + std::to_string(replay.applied) +
          " records before it are applied, the rest is ignored; " +
          (copied.ok() ? "a copy is kept as " + kept
                       : "no copy could be kept (" + copied.message() + ")"));
    }
  }
  *warning = JoinWarnings(warnings);
  return checkpoint;
}

Status CheckpointStore::Resume(const std::function<std::string()>& encode) {
  MutexLock lock(mu_);
  if (!loaded_snapshot_) return CompactLocked(encode);
  if (Status started = ReplaceJournal(loaded_journal_); !started.ok()) {
    return started;
  }
  std::string().swap(loaded_journal_);
  return OkStatus();
}

Status CheckpointStore::ReplaceJournal(std::string_view records) {
  auto fd = files::CreateFileAtomically(journal_, records, 0600);
  CloseJournal();
  if (!fd.ok()) {
    broken_ = true;
    return fd.status();
  }
  journal_fd_ = *fd;
  journal_bytes_ = records.size();
  journal_reserved_ = records.size();
  broken_ = false;
  return OkStatus();
}

Status CheckpointStore::Compact(const std::function<std::string()>& encode) {
  MutexLock lock(mu_);
  return CompactLocked(encode);
}

Status CheckpointStore::CompactLocked(
    const std::function<std::string()>& encode) {
  const std::string text = encode();
  if (Status written = files::WriteFileAtomically(snapshot_, text, 0600);
      !written.ok()) {
    return written;
  }
  snapshot_bytes_ = text.size();
  // A fresh, empty journal renamed over the old one: a record appended to
  // the old one after the snapshot was encoded cannot exist (the lock), and
  // the old records are all in the snapshot.
  if (Status started = ReplaceJournal(""); !started.ok()) return started;
  loaded_snapshot_ = true;
  std::string().swap(loaded_journal_);
  return OkStatus();
}

Status CheckpointStore::Append(std::string_view records,
                               const std::function<void()>& publish) {
  MutexLock lock(mu_);
  if (journal_fd_ < 0 || broken_) {
    return FailedPreconditionError(
        "checkpoint journal " + journal_.string() +
        " is not open for appending (a write failed earlier); the next "
        "compaction starts a new one");
  }
  const size_t end = journal_bytes_ + records.size();
  bool written = true;
  if (end > journal_reserved_) {
    // Synced with the record below: one new file size per kJournalAhead.
    const size_t ahead = (end / kJournalAhead + 1) * kJournalAhead;
    written = WriteZeros(journal_fd_, journal_reserved_, ahead);
    if (written) journal_reserved_ = ahead;
  }
  if (!written || !files::WriteAllAt(journal_fd_, records, journal_bytes_) ||
      fdatasync(journal_fd_) != 0) {
    const std::string reason = Errno();
    // Cut the partial record (and the zeros after it) off so that later
    // ones do not follow it.
    if (ftruncate(journal_fd_, static_cast<off_t>(journal_bytes_)) != 0) {
      broken_ = true;
    }
    journal_reserved_ = journal_bytes_;
    return InternalError("cannot append to the checkpoint journal " +
                         journal_.string() + ": " + reason);
  }
  journal_bytes_ = end;
  if (publish) publish();
  return OkStatus();
}

bool CheckpointStore::NeedsCompaction() const {
  MutexLock lock(mu_);
  return broken_ || journal_fd_ < 0 ||
         journal_bytes_ > std::max(kMinCompactionBytes, snapshot_bytes_);
}

size_t CheckpointStore::journal_bytes() const {
  MutexLock lock(mu_);
  return journal_bytes_;
}

size_t CheckpointStore::snapshot_bytes() const {
  MutexLock lock(mu_);
  return snapshot_bytes_;
}

}  // namespace topology::host
