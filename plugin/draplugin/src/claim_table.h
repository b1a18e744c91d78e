// The claims a DRA driver has prepared, as the Go helper keeps them apart
// from its gRPC services: each change durable before it is visible (written
// to the claim checkpoint first, shown to calls only once written: the
// host's journal rule), and one call at a time on a claim, a turn waited
// for on a condition of that claim alone, within the kubelet's deadline on
// the runner's clock. Thread-safe. Private to the DRA framework.
#ifndef TOPOLOGY_DRAPLUGIN_CLAIM_TABLE_H_
#define TOPOLOGY_DRAPLUGIN_CLAIM_TABLE_H_

#include <condition_variable>
#include <cstddef>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "topology/clock.h"
#include "topology/draplugin/claim_checkpoint.h"
#include "topology/draplugin/driver.h"
#include "topology/status.h"
#include "topology/thread_annotations.h"

namespace topology::draplugin {

class ClaimTable {
 public:
  using Deadline = Clock::TimePoint;

  // `clock` is not owned.
  ClaimTable(std::filesystem::path checkpoint, const Clock* clock)
      : checkpoint_(std::move(checkpoint)), clock_(clock) {}
  ClaimTable(const ClaimTable&) = delete;
  ClaimTable& operator=(const ClaimTable&) = delete;

  const std::filesystem::path& checkpoint() const { return checkpoint_; }

  // The checkpoint read again (at start, and where another instance of the
  // driver may have changed it): durable and visible both become what it
  // holds; NOT_FOUND (an empty table) when there is none; its error, the
  // table unchanged, when it cannot be read.
  Status Reload() TOPOLOGY_EXCLUDES(write_mu_, mu_);
  // The table written as it is: the checkpoint's directory can hold it.
  Status Save() TOPOLOGY_EXCLUDES(write_mu_);
  // Makes the claim `uid` `claim`, or forgets it (nullopt): the checkpoint
  // is written first, the table changed only once it is. Writes are
  // ordered, each from the last durable state, so none loses another
  // claim's change.
  Status Commit(const std::string& uid, std::optional<PreparedClaim> claim)
      TOPOLOGY_EXCLUDES(write_mu_, mu_);

  std::optional<PreparedClaim> Find(const std::string& uid) const
      TOPOLOGY_EXCLUDES(mu_);
  std::vector<ClaimRef> Refs() const TOPOLOGY_EXCLUDES(mu_);
  std::set<std::string> Uids() const TOPOLOGY_EXCLUDES(mu_);
  size_t size() const TOPOLOGY_EXCLUDES(mu_);

  // A claim's turn: had (unless stopping or out of time) when made, given
  // back when destroyed; the next waiter of that claim, and only it, is
  // woken.
  class Turn {
   public:
    Turn(ClaimTable& table, const std::string& uid, Deadline deadline)
        : table_(table),
          uid_(uid),
          held_(table.Acquire(uid, deadline, &expired_)) {}
    ~Turn() {
      if (held_) table_.Release(uid_);
    }
    Turn(const Turn&) = delete;
    Turn& operator=(const Turn&) = delete;
    bool held() const { return held_; }
    // Why the turn was not had.
    std::string why() const {
      return expired_ ? "the kubelet's deadline passed while another call "
                        "worked on the claim"
                      : "the driver is stopping";
    }

   private:
    ClaimTable& table_;
    const std::string uid_;
    bool expired_ = false;
    const bool held_;
  };

  // No turn is had from now on; every waiter returns.
  void Stop() TOPOLOGY_EXCLUDES(mu_);

 private:
  bool Acquire(const std::string& uid, Deadline deadline, bool* expired)
      TOPOLOGY_EXCLUDES(mu_);
  void Release(const std::string& uid) TOPOLOGY_EXCLUDES(mu_);

  const std::filesystem::path checkpoint_;
  const Clock* const clock_;

  Mutex write_mu_ TOPOLOGY_ACQUIRED_BEFORE(mu_);
  // The claims as the checkpoint holds them.
  PreparedClaims durable_ TOPOLOGY_GUARDED_BY(write_mu_);

  mutable Mutex mu_;
  PreparedClaims claims_ TOPOLOGY_GUARDED_BY(mu_);
  // A claim being worked on, or waited for: its waiters wait on its own
  // condition. The entry goes when the last of them is done.
  struct Turns {
    bool busy = false;
    size_t waiting = 0;
    std::condition_variable_any free;
  };
  std::map<std::string, std::unique_ptr<Turns>> turns_ TOPOLOGY_GUARDED_BY(mu_);
  bool stopping_ TOPOLOGY_GUARDED_BY(mu_) = false;
};

}  // namespace topology::draplugin

#endif  // TOPOLOGY_DRAPLUGIN_CLAIM_TABLE_H_
