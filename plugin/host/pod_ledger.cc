#include "pod_ledger.h"

#include <algorithm>
#include <chrono>
#include <utility>

#include "topology/common/text_util.h"

namespace topology::host {

using text::Quoted;

uint64_t PodLedger::NextRequest() {
  MutexLock lock(mu_);
  return ++last_request_;
}

PodLedger::BusyWait PodLedger::WaitUntilNotBusy(
    const std::string& uid, uint64_t request,
    const std::function<bool()>& cancelled) {
  MutexLock lock(mu_);
  for (;;) {
    if (stopping_) return BusyWait::kCancelled;
    const auto pending = pending_.find(uid);
    const bool own =
        pending != pending_.end() && pending->second.request == request;
    if (own || !busy_.contains(uid)) return BusyWait::kFree;
    if (request != 0 &&
        std::any_of(pending_.begin(), pending_.end(), [&](const auto& entry) {
          return entry.second.request == request;
        })) {
      return BusyWait::kHeld;
    }
    // Bounded waits: a cancelled caller (the client went away) is noticed
    // without a notification of its own.
    busy_done_.wait_for(lock, std::chrono::milliseconds(50));
    if (cancelled && cancelled()) return BusyWait::kCancelled;
  }
}

bool PodLedger::LockAdmission(const std::function<bool()>& cancelled) {
  // A slot rather than a timed mutex: the wait polls for cancellation and
  // for Stop() (and ThreadSanitizer sees every step of it).
  MutexLock lock(mu_);
  while (admitting_ && !stopping_) {
    slot_free_.wait_for(lock, std::chrono::milliseconds(50));
    if (cancelled && cancelled()) return false;
  }
  if (stopping_ || (cancelled && cancelled())) return false;
  admitting_ = true;
  return true;
}

void PodLedger::UnlockAdmission() {
  {
    MutexLock lock(mu_);
    admitting_ = false;
  }
  slot_free_.notify_one();
}

PodLedger::Claim PodLedger::ClaimForAdmission(const std::string& uid,
                                              uint64_t request,
                                              PodRecord* answer) {
  MutexLock lock(mu_);
  if (auto it = pods_.find(uid); it != pods_.end()) {
    *answer = it->second;
    return Claim::kAnswered;
  }
  if (auto it = pending_.find(uid);
      it != pending_.end() && it->second.request == request) {
    *answer = it->second;
    return Claim::kAnswered;
  }
  return busy_.insert(uid).second ? Claim::kClaimed : Claim::kRetry;
}

void PodLedger::AddPending(PodRecord record) {
  MutexLock lock(mu_);
  std::string uid = record.pod.uid;
  pending_.insert_or_assign(std::move(uid), std::move(record));
}

std::vector<std::string> PodLedger::PendingOf(
    uint64_t request, const std::vector<std::string>& uids) const {
  std::vector<std::string> out;
  MutexLock lock(mu_);
  for (const std::string& uid : uids) {
    const auto it = pending_.find(uid);
    if (it != pending_.end() && it->second.request == request &&
        std::find(out.begin(), out.end(), uid) == out.end()) {
      out.push_back(uid);
    }
  }
  return out;
}

void PodLedger::Publish(const std::vector<std::string>& uids) {
  MutexLock lock(mu_);
  for (const std::string& uid : uids) {
    auto node = pending_.extract(uid);
    if (node.empty()) continue;  // owned by the caller's request: cannot be
    node.mapped().request = 0;
    pods_.insert_or_assign(uid, std::move(node.mapped()));
    EndBusyLocked(uid);
  }
  high_water_ = std::max(high_water_, pods_.size());
}

void PodLedger::Drop(const std::vector<std::string>& uids) {
  MutexLock lock(mu_);
  for (const std::string& uid : uids) {
    pending_.erase(uid);
    EndBusyLocked(uid);
  }
}

const PodRecord* PodLedger::Find(const std::map<std::string, PodRecord>& pods,
                                 const std::string& key) {
  if (auto it = pods.find(key); it != pods.end()) return &it->second;
  const PodRecord* found = nullptr;
  for (const auto& [uid, record] : pods) {
    if (record.pod.ns + "/" + record.pod.name == key ||
        record.pod.name == key) {
      if (found != nullptr) return nullptr;  // ambiguous name
      found = &record;
    }
  }
  return found;
}

StatusOr<std::string> PodLedger::ClaimForRelease(const std::string& key) {
  // A pod being admitted or released by another request is waited for (as
  // long as that request, whose plugin calls have deadlines): the release
  // then acts on what it left (a pod released meanwhile is not found),
  // never answers "busy".
  for (;;) {
    std::string waiting;
    {
      MutexLock lock(mu_);
      const PodRecord* record = Find(pods_, key);
      if (record == nullptr) record = Find(pending_, key);
      if (record == nullptr) {
        return NotFoundError("no admitted pod " + Quoted(key) +
                             " (by uid, namespace/name or unique name)");
      }
      if (pods_.contains(record->pod.uid) &&
          busy_.insert(record->pod.uid).second) {
        return record->pod.uid;
      }
      waiting = record->pod.uid;
    }
    if (WaitUntilNotBusy(waiting, 0, nullptr) != BusyWait::kFree) {
      return UnavailableError("the manager is stopping; pod " + Quoted(key) +
                              " is not released");
    }
  }
}

void PodLedger::Erase(const std::string& uid) {
  MutexLock lock(mu_);
  pods_.erase(uid);
}

void PodLedger::EndBusy(const std::string& uid) {
  MutexLock lock(mu_);
  EndBusyLocked(uid);
}

bool PodLedger::EndRelease(const std::string& uid) {
  MutexLock lock(mu_);
  EndBusyLocked(uid);
  // The released pod left pods_ already: it counts towards the most held.
  high_water_ = std::max(high_water_, pods_.size() + 1);
  if (high_water_ >= kTrimAfterPods && pods_.size() <= high_water_ / 2) {
    high_water_ = pods_.size();
    return true;
  }
  return false;
}

void PodLedger::EndBusyLocked(const std::string& uid) {
  busy_.erase(uid);
  busy_done_.notify_all();
}

bool PodLedger::InsertRestored(PodRecord record) {
  MutexLock lock(mu_);
  std::string uid = record.pod.uid;
  return pods_.emplace(std::move(uid), std::move(record)).second;
}

void PodLedger::ForEach(
    const std::function<void(const PodRecord&)>& visit) const {
  MutexLock lock(mu_);
  for (const auto& [uid, record] : pods_) visit(record);
}

std::map<std::string, std::string> PodLedger::Names() const {
  std::map<std::string, std::string> names;
  MutexLock lock(mu_);
  for (const auto* map : {&pods_, &pending_}) {
    for (const auto& [uid, held] : *map) {
      names[uid] = held.pod.ns + "/" + held.pod.name;
    }
  }
  return names;
}

void PodLedger::Stop() {
  {
    MutexLock lock(mu_);
    stopping_ = true;
  }
  busy_done_.notify_all();
  slot_free_.notify_all();
}

bool PodLedger::stopping() const {
  MutexLock lock(mu_);
  return stopping_;
}

}  // namespace topology::host
