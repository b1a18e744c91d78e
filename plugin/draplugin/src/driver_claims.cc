#include "driver_runner_impl.h"

namespace topology::draplugin {

// --- claims ------------------------------------------------------------------

bool DriverRunner::Impl::AcquireClaim(const std::string& uid, Deadline deadline,
                                      bool* expired) {
  const Clock& clock = *options_.clock;
  MutexLock lock(mu_);
  while (busy_.contains(uid) && !stopping_) {
    if (clock.Now() >= deadline) {
      *expired = true;
      return false;
    }
    clock.WaitUntil(changed_, lock, deadline);
  }
  if (stopping_) return false;
  busy_.insert(uid);
  return true;
}

void DriverRunner::Impl::ReleaseClaim(const std::string& uid) {
  {
    MutexLock lock(mu_);
    busy_.erase(uid);
  }
  changed_.notify_all();
}

Status DriverRunner::Impl::Commit(const std::string& uid,
                                  std::optional<PreparedClaim> claim) {
  MutexLock write(write_mu_);
  draplugin::PreparedClaims next = durable_;
  if (claim) {
    next[uid] = *claim;
  } else {
    next.erase(uid);
  }
  if (Status saved = SaveClaims(checkpoint_, next); !saved.ok()) return saved;
  durable_ = std::move(next);
  MutexLock lock(mu_);
  if (claim) {
    claims_[uid] = std::move(*claim);
  } else {
    claims_.erase(uid);
  }
  return OkStatus();
}

std::string DriverRunner::Impl::RefusedUid(const ClaimRef& ref) {
  // A UID names files (CDI specs, the checkpoint's entries): the API
  // server's are RFC 4122 UUIDs; anything that could leave a directory or
  // is not printable is refused before any handler sees it.
  const std::string who = "claim " + ref.ns + "/" + ref.name;
  if (ref.uid.empty()) return who + " has no UID";
  if (ref.uid.size() > 128 ||
      ref.uid.find_first_not_of("abcdefghijklmnopqrstuvwxyz"
                                "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-") !=
          std::string::npos) {
    return who +
           ": the UID is not a Kubernetes UID (letters, digits and "
           "'-', at most 128): " +
           "\"" + ref.uid.substr(0, 64) + "\"";
  }
  return "";
}

std::string DriverRunner::Impl::LockInstances(Deadline deadline) {
  // flock's wait cannot be bounded; polled, with the kubelet's deadline.
  while (flock(instance_lock_fd_, LOCK_EX | LOCK_NB) != 0) {
    if (errno != EWOULDBLOCK && errno != EINTR) {
      return std::string("cannot lock ") +
             (options_.plugin_dir / kSerializeLock).string() + ": " +
             std::strerror(errno);
    }
    if (options_.clock->Now() >= deadline) {
      return "the kubelet's deadline passed while another instance of the "
             "driver held " +
             (options_.plugin_dir / kSerializeLock).string();
    }
    MutexLock lock(mu_);
    if (stopping_) return "the driver is stopping";
    changed_.wait_for(lock, std::chrono::milliseconds(5));
  }
  // What the other instance did since: the checkpoint is the truth.
  auto loaded = LoadClaims(checkpoint_);
  if (!loaded.ok() && loaded.status().code() != StatusCode::kNotFound) {
    LOG(ERROR) << loaded.status().message()
               << "; the claims this instance knows are kept";
    return "";
  }
  draplugin::PreparedClaims claims =
      loaded.ok() ? std::move(*loaded) : draplugin::PreparedClaims();
  MutexLock write(write_mu_);
  durable_ = claims;
  MutexLock lock(mu_);
  claims_ = std::move(claims);
  return "";
}

void DriverRunner::Impl::UnlockInstances() {
  (void)flock(instance_lock_fd_, LOCK_UN);
}

std::map<std::string, ClaimOutcome> DriverRunner::Impl::PrepareClaims(
    const std::vector<ClaimRef>& refs, Deadline deadline) {
  std::map<std::string, ClaimOutcome> out;
  std::optional<MutexLock> instances;
  if (instance_lock_fd_ >= 0) {
    instances.emplace(instance_mu_);
    if (std::string error = LockInstances(deadline); !error.empty()) {
      for (const ClaimRef& ref : refs) out[ref.uid].error = error;
      return out;
    }
  }
  for (const ClaimRef& ref : refs) {
    if (out.contains(ref.uid)) continue;  // listed twice: one answer
    out[ref.uid] = PrepareOne(ref, deadline);
  }
  if (instances) UnlockInstances();
  return out;
}

std::map<std::string, std::string> DriverRunner::Impl::UnprepareClaims(
    const std::vector<ClaimRef>& refs, Deadline deadline) {
  std::map<std::string, std::string> out;
  std::optional<MutexLock> instances;
  if (instance_lock_fd_ >= 0) {
    instances.emplace(instance_mu_);
    if (std::string error = LockInstances(deadline); !error.empty()) {
      for (const ClaimRef& ref : refs) out[ref.uid] = error;
      return out;
    }
  }
  for (const ClaimRef& ref : refs) {
    if (out.contains(ref.uid)) continue;
    out[ref.uid] = UnprepareOne(ref, deadline);
  }
  if (instances) UnlockInstances();
  return out;
}

ClaimOutcome DriverRunner::Impl::PrepareOne(const ClaimRef& ref,
                                            Deadline deadline) {
  ClaimOutcome outcome;
  if (std::string refused = RefusedUid(ref); !refused.empty()) {
    outcome.error = std::move(refused);
    return outcome;
  }
  const ClaimTurn turn(this, ref.uid, deadline);
  if (!turn.held()) {
    outcome.error = Describe(ref) + ": " + turn.why();
    return outcome;
  }
  std::optional<PreparedClaim> known;
  {
    MutexLock lock(mu_);
    if (auto it = claims_.find(ref.uid); it != claims_.end()) {
      known = it->second;
    }
  }
  if (known && !known->unpreparing) {
    outcome.devices = known->devices;  // prepared before: the same
    return outcome;
  }
  if (known) {
    // An unprepare that was cut short (the process was killed): finished
    // first, so that nothing of the old preparation is answered again.
    const Status undone = Guarded(
        [&] { return handler_->Unprepare(known->ref, known->devices); });
    Status forgotten = undone.ok() ? Commit(ref.uid, std::nullopt) : undone;
    if (!forgotten.ok()) {
      outcome.error = Describe(ref) +
                      ": an earlier unprepare could not be finished: " +
                      forgotten.message();
      return outcome;
    }
  }
  const StatusOr<Claim> claim =
      Guarded([&] { return source_->Get(ref, options_.driver_name); });
  if (!claim.ok()) {
    outcome.error = Describe(ref) + ": " + claim.status().message();
    return outcome;
  }
  StatusOr<std::vector<PreparedDevice>> devices =
      Guarded([&] { return handler_->Prepare(*claim); });
  if (!devices.ok()) {
    outcome.error = Describe(ref) + ": " + devices.status().message();
    return outcome;
  }
  // request_names: the allocation result's request, when the driver left
  // them out; each as its top-level request, as the kubelet matches them.
  for (PreparedDevice& device : *devices) {
    if (device.request_names.empty()) {
      for (const AllocationResult& result : claim->results) {
        if (result.pool == device.pool && result.device == device.device) {
          device.request_names.push_back(result.request);
        }
      }
    }
    std::vector<std::string> base;
    for (const std::string& name : device.request_names) {
      const std::string top(BaseRequestName(name));
      if (std::find(base.begin(), base.end(), top) == base.end()) {
        base.push_back(top);
      }
    }
    device.request_names = std::move(base);
  }
  // Durable before answered (and before another call can see it).
  if (Status saved = Commit(ref.uid, PreparedClaim{ref, *devices, false});
      !saved.ok()) {
    const Status undone =
        Guarded([&] { return handler_->Unprepare(ref, *devices); });
    LOG(ERROR) << Describe(ref) << ": " << saved.message()
               << (undone.ok() ? "; its preparation was undone"
                               : "; undoing it failed: " + undone.message());
    outcome.error = Describe(ref) + ": cannot checkpoint the prepared claim (" +
                    saved.message() + ")";
    return outcome;
  }
  outcome.devices = std::move(*devices);
  return outcome;
}

std::string DriverRunner::Impl::UnprepareOne(const ClaimRef& ref,
                                             Deadline deadline) {
  if (std::string refused = RefusedUid(ref); !refused.empty()) return refused;
  const ClaimTurn turn(this, ref.uid, deadline);
  if (!turn.held()) return Describe(ref) + ": " + turn.why();
  std::optional<PreparedClaim> known;
  {
    MutexLock lock(mu_);
    if (auto it = claims_.find(ref.uid); it != claims_.end()) {
      known = it->second;
    }
  }
  // Said durably before anything is undone: a process killed halfway finds
  // the claim "unpreparing", never "prepared" with its CDI spec gone.
  if (known && !known->unpreparing) {
    known->unpreparing = true;
    if (Status marked = Commit(ref.uid, *known); !marked.ok()) {
      return Describe(ref) + ": cannot checkpoint the unprepare (" +
             marked.message() + ")";
    }
  }
  const Status undone = Guarded([&] {
    return handler_->Unprepare(
        known ? known->ref : ref,
        known ? known->devices : std::vector<PreparedDevice>{});
  });
  if (!undone.ok()) return Describe(ref) + ": " + undone.message();
  if (!known) return "";  // not prepared (any more): nothing to forget
  if (Status saved = Commit(ref.uid, std::nullopt); !saved.ok()) {
    return Describe(ref) + ": cannot checkpoint the unprepared claim (" +
           saved.message() + ")";
  }
  return "";
}

}  // namespace topology::draplugin
