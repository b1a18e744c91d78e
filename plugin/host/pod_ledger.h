// The pods the host admitted, and the bookkeeping that orders admissions and
// releases: which pods are admitted (durable), which are admitted but not
// yet durable (pending under the request that admitted them), which are
// being admitted or released (busy), and the admission slot that lets one
// pod be admitted at a time.
//
// It keeps each pod's spec and its admission's answer (reason, policy,
// explanation), never what the pod holds: that is the resource managers'
// (resource_managers.h).
//
// Lock order (docs/architecture.md): the checkpoint store's lock, then
// this ledger's, then the plugin registry's, then the managers' own. The
// admission slot is a flag under the ledger's lock, taken with no lock held
// and kept (no lock held) for the whole admission.
#ifndef TOPOLOGY_HOST_POD_LEDGER_H_
#define TOPOLOGY_HOST_POD_LEDGER_H_

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "topology/manager/pod.h"
#include "topology/status.h"
#include "topology/thread_annotations.h"

#include "pod_result.h"

namespace topology::host {

struct PodRecord {
  manager::Pod pod;
  // The admission's answer without the containers' holdings.
  PodResult answer;
  // The admission request that made a pending record; only that request
  // answers with it and commits it (0 once committed).
  uint64_t request = 0;
};

class PodLedger {
 public:
  // A new admission request's identity (never 0).
  uint64_t NextRequest() TOPOLOGY_EXCLUDES(mu_);

  // Waits until no other request admits or releases `uid` (its admission
  // pending under `request` itself does not count), so that a second
  // caller for the same pod answers from what the first one left. kHeld,
  // without waiting, when `request` itself holds admissions not yet
  // committed (two such requests waiting on each other's pods would wait
  // forever); kCancelled when `cancelled` says so or the ledger stops.
  enum class BusyWait { kFree, kHeld, kCancelled };
  BusyWait WaitUntilNotBusy(const std::string& uid, uint64_t request,
                            const std::function<bool()>& cancelled)
      TOPOLOGY_EXCLUDES(mu_);

  // The admission slot: waits for it; false when cancelled or stopping.
  bool LockAdmission(const std::function<bool()>& cancelled)
      TOPOLOGY_EXCLUDES(mu_);
  void UnlockAdmission() TOPOLOGY_EXCLUDES(mu_);

  // With the slot held: the answer for `uid` when it is admitted (or
  // pending under `request`: the same answer, committed with it) in
  // `*answer`; otherwise marks it busy and returns kClaimed, or kRetry when
  // another request took it between the wait and the slot.
  enum class Claim { kAnswered, kClaimed, kRetry };
  Claim ClaimForAdmission(const std::string& uid, uint64_t request,
                          PodRecord* answer) TOPOLOGY_EXCLUDES(mu_);
  // An admitted pod, busy and pending under its request until Commit.
  void AddPending(PodRecord record) TOPOLOGY_EXCLUDES(mu_);
  // Of `uids`, those pending under `request`, each once.
  std::vector<std::string> PendingOf(uint64_t request,
                                     const std::vector<std::string>& uids) const
      TOPOLOGY_EXCLUDES(mu_);
  // Pending pods become admitted and free (call when their records are
  // durable).
  void Publish(const std::vector<std::string>& uids) TOPOLOGY_EXCLUDES(mu_);
  // Pending pods that could not be made durable are forgotten.
  void Drop(const std::vector<std::string>& uids) TOPOLOGY_EXCLUDES(mu_);

  // An admitted pod by uid, "namespace/name" or unique name, marked busy
  // for its release (waiting while another request has it). NOT_FOUND when
  // unknown; UNAVAILABLE when the ledger stops.
  StatusOr<std::string> ClaimForRelease(const std::string& key)
      TOPOLOGY_EXCLUDES(mu_);
  // The pod leaves the admitted ones (still busy).
  void Erase(const std::string& uid) TOPOLOGY_EXCLUDES(mu_);
  // Ends a pod's busy mark.
  void EndBusy(const std::string& uid) TOPOLOGY_EXCLUDES(mu_);
  // Ends a released pod's busy mark. True when the pods held have halved
  // since the most held: the heap they used may go back to the system
  // (amortised, at most once per halving).
  bool EndRelease(const std::string& uid) TOPOLOGY_EXCLUDES(mu_);

  // Restore: an admitted pod; false when its uid is already there.
  bool InsertRestored(PodRecord record) TOPOLOGY_EXCLUDES(mu_);

  // `visit` sees every admitted pod in uid order, under the ledger's lock
  // (it may take the registry's and the managers' locks, never the
  // store's).
  void ForEach(const std::function<void(const PodRecord&)>& visit) const
      TOPOLOGY_EXCLUDES(mu_);
  // "namespace/name" by uid, of the admitted and pending pods.
  std::map<std::string, std::string> Names() const TOPOLOGY_EXCLUDES(mu_);

  // Every wait returns; no admission starts.
  void Stop() TOPOLOGY_EXCLUDES(mu_);
  bool stopping() const TOPOLOGY_EXCLUDES(mu_);

 private:
  static constexpr size_t kTrimAfterPods = 64;

  void EndBusyLocked(const std::string& uid) TOPOLOGY_REQUIRES(mu_);
  // By uid, "namespace/name" or unique name.
  static const PodRecord* Find(const std::map<std::string, PodRecord>& pods,
                               const std::string& key);

  mutable Mutex mu_;
  // By uid; durable.
  std::map<std::string, PodRecord> pods_ TOPOLOGY_GUARDED_BY(mu_);
  // Admitted, their records not yet durable: busy, in no view, released
  // by nobody; Publish or Drop ends them.
  std::map<std::string, PodRecord> pending_ TOPOLOGY_GUARDED_BY(mu_);
  // uids being admitted or released; busy_done_ is notified when one
  // leaves it.
  std::set<std::string> busy_ TOPOLOGY_GUARDED_BY(mu_);
  std::condition_variable_any busy_done_;
  uint64_t last_request_ TOPOLOGY_GUARDED_BY(mu_) = 0;
  size_t high_water_ TOPOLOGY_GUARDED_BY(mu_) = 0;  // since the last trim
  bool stopping_ TOPOLOGY_GUARDED_BY(mu_) = false;
  // The admission slot: taken (a flag under mu_, not a lock held) for the
  // whole of one admission; slot_free_ is notified when it is given back.
  bool admitting_ TOPOLOGY_GUARDED_BY(mu_) = false;
  std::condition_variable_any slot_free_;
};

}  // namespace topology::host

#endif  // TOPOLOGY_HOST_POD_LEDGER_H_
