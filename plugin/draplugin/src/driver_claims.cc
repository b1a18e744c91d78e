#include "topology/common/k8s_names.h"
#include "topology/draplugin/claim_cdi.h"
#include "topology/draplugin/device_metadata.h"

#include "driver_runner_impl.h"

namespace topology::draplugin {

// --- claims ------------------------------------------------------------------

std::string DriverRunner::Impl::RefusedUid(const ClaimRef& ref) {
  // A UID names files (CDI specs, the checkpoint's entries): the API
  // server's are RFC 4122 UUIDs; anything that could leave a directory or
  // is not printable is refused before any handler sees it.
  const std::string who = "claim " + ref.ns + "/" + ref.name;
  if (ref.uid.empty()) return who + " has no UID";
  if (!k8s::IsUid(ref.uid)) {
    return who +
           ": the UID is not a Kubernetes UID (letters, digits and "
           "'-', at most 128): " +
           "\"" + ref.uid.substr(0, 64) + "\"";
  }
  return "";
}

StatusOr<std::unique_ptr<InstanceLock::Held>> DriverRunner::Impl::LockInstances(
    Deadline deadline) {
  auto held = instances_->Acquire(deadline, [this] {
    MutexLock lock(mu_);
    return stopping_;
  });
  if (!held.ok()) return held.status();
  // What the other instance did since: the checkpoint is the truth.
  if (Status loaded = claims_.Reload();
      !loaded.ok() && loaded.code() != StatusCode::kNotFound) {
    LOG(ERROR) << loaded.message()
               << "; the claims this instance knows are kept";
  }
  return held;
}

Status DriverRunner::Impl::RemoveUnpreparedSpecs() {
  if (options_.cdi_dir.empty()) return OkStatus();
  // Under the instances' lock, with the checkpoint read again there: a
  // claim another instance is preparing has its record before its spec.
  std::unique_ptr<InstanceLock::Held> held;
  if (instances_) {
    auto locked =
        LockInstances(options_.clock->Now() + std::chrono::seconds(10));
    if (!locked.ok()) {
      return FailedPreconditionError(locked.status().message());
    }
    held = std::move(*locked);
  }
  auto removed = draplugin::RemoveUnpreparedCdiSpecs(
      options_.cdi_dir, options_.driver_name, claims_.Uids());
  if (removed.ok() && options_.device_metadata) {
    auto metadata = RemoveUnpreparedMetadataSpecs(
        options_.cdi_dir, options_.driver_name, claims_.Uids());
    if (!metadata.ok()) {
      removed = metadata.status();
    } else {
      removed->insert(removed->end(), metadata->begin(), metadata->end());
    }
  }
  held.reset();
  if (!removed.ok()) return removed.status();
  for (const std::string& uid : *removed) {
    LOG(INFO) << options_.driver_name << ": removed the CDI spec of claim "
              << uid << ", which is not prepared";
  }
  return OkStatus();
}

std::map<std::string, ClaimOutcome> DriverRunner::Impl::PrepareClaims(
    const std::vector<ClaimRef>& refs, Deadline deadline) {
  std::map<std::string, ClaimOutcome> out;
  std::unique_ptr<InstanceLock::Held> held;
  if (instances_) {
    auto locked = LockInstances(deadline);
    if (!locked.ok()) {
      for (const ClaimRef& ref : refs) {
        out[ref.uid].error = locked.status().message();
      }
      return out;
    }
    held = std::move(*locked);
  }
  for (const ClaimRef& ref : refs) {
    if (out.contains(ref.uid)) continue;  // listed twice: one answer
    out[ref.uid] = PrepareOne(ref, deadline);
  }
  return out;
}

std::map<std::string, std::string> DriverRunner::Impl::UnprepareClaims(
    const std::vector<ClaimRef>& refs, Deadline deadline) {
  std::map<std::string, std::string> out;
  std::unique_ptr<InstanceLock::Held> held;
  if (instances_) {
    auto locked = LockInstances(deadline);
    if (!locked.ok()) {
      for (const ClaimRef& ref : refs) out[ref.uid] = locked.status().message();
      return out;
    }
    held = std::move(*locked);
  }
  for (const ClaimRef& ref : refs) {
    if (out.contains(ref.uid)) continue;
    out[ref.uid] = UnprepareOne(ref, deadline);
  }
  return out;
}

ClaimOutcome DriverRunner::Impl::PrepareOne(const ClaimRef& ref,
                                            Deadline deadline) {
  ClaimOutcome outcome;
  if (std::string refused = RefusedUid(ref); !refused.empty()) {
    outcome.error = std::move(refused);
    return outcome;
  }
  const ClaimTable::Turn turn(claims_, ref.uid, deadline);
  if (!turn.held()) {
    outcome.error = Describe(ref) + ": " + turn.why();
    return outcome;
  }
  std::optional<PreparedClaim> known = claims_.Find(ref.uid);
  if (known && !known->unpreparing) {
    outcome.devices = known->devices;  // prepared before: the same
    return outcome;
  }
  if (known) {
    // An unprepare that was cut short (the process was killed): finished
    // first, so that nothing of the old preparation is answered again.
    const Status undone = Guarded(
        [&] { return handler_->Unprepare(known->ref, known->devices); });
    Status forgotten =
        undone.ok() ? claims_.Commit(ref.uid, std::nullopt) : undone;
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
  // share_id: the device's one share in the claim, when the driver left it
  // out. request_names: the allocation result's request, when the driver
  // left them out; each as its top-level request, as the kubelet matches
  // them. admin_access: as its result says (a device of an adminAccess
  // result is no one's exclusively). A result is the device's when pool,
  // device and share match.
  for (PreparedDevice& device : *devices) {
    if (device.share_id.empty()) {
      std::set<std::string> shares;
      for (const AllocationResult& result : claim->results) {
        if (result.pool == device.pool && result.device == device.device &&
            !result.share_id.empty()) {
          shares.insert(result.share_id);
        }
      }
      if (shares.size() == 1) device.share_id = *shares.begin();
    }
    const auto of_device = [&](const AllocationResult& result) {
      return result.pool == device.pool && result.device == device.device &&
             (device.share_id.empty() || result.share_id == device.share_id);
    };
    for (const AllocationResult& result : claim->results) {
      if (of_device(result) && result.admin_access) device.admin_access = true;
    }
    if (device.request_names.empty()) {
      for (const AllocationResult& result : claim->results) {
        if (of_device(result)) device.request_names.push_back(result.request);
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
  // Device metadata: a file per request, mounted by a CDI spec whose id
  // each device of the request carries; the attributes go no further.
  if (options_.device_metadata) {
    if (Status written = WriteMetadata(*claim, &*devices); !written.ok()) {
      const Status undone =
          Guarded([&] { return handler_->Unprepare(ref, *devices); });
      outcome.error =
          Describe(ref) + ": device metadata: " + written.message() +
          (undone.ok()
               ? ""
               : "; undoing the preparation failed: " + undone.message());
      return outcome;
    }
  }
  for (PreparedDevice& device : *devices) device.metadata_attributes.clear();
  // Durable before answered (and before another call can see it).
  if (Status saved =
          claims_.Commit(ref.uid, PreparedClaim{ref, *devices, false});
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
  const ClaimTable::Turn turn(claims_, ref.uid, deadline);
  if (!turn.held()) return Describe(ref) + ": " + turn.why();
  std::optional<PreparedClaim> known = claims_.Find(ref.uid);
  // Said durably before anything is undone: a process killed halfway finds
  // the claim "unpreparing", never "prepared" with its CDI spec gone.
  if (known && !known->unpreparing) {
    known->unpreparing = true;
    if (Status marked = claims_.Commit(ref.uid, *known); !marked.ok()) {
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
  if (options_.device_metadata) {
    const ClaimRef& claim = known ? known->ref : ref;
    if (Status removed = RemoveDeviceMetadata(
            options_.driver_name, options_.plugin_dir, MetadataCdiDir(),
            claim.ns, claim.name, claim.uid);
        !removed.ok()) {
      return Describe(ref) + ": " + removed.message();
    }
  }
  if (!known) return "";  // not prepared (any more): nothing to forget
  if (Status saved = claims_.Commit(ref.uid, std::nullopt); !saved.ok()) {
    return Describe(ref) + ": cannot checkpoint the unprepared claim (" +
           saved.message() + ")";
  }
  return "";
}

std::filesystem::path DriverRunner::Impl::MetadataCdiDir() const {
  return options_.cdi_dir.empty() ? std::filesystem::path("/var/run/cdi")
                                  : options_.cdi_dir;
}

Status DriverRunner::Impl::WriteMetadata(const Claim& claim,
                                         std::vector<PreparedDevice>* devices) {
  // One file per base request, its devices in the answer's order.
  std::map<std::string, RequestMetadata> by_request;
  for (const PreparedDevice& device : *devices) {
    for (const std::string& request : device.request_names) {
      RequestMetadata& metadata = by_request[request];
      if (metadata.request.empty()) {
        metadata.claim_namespace = claim.ref.ns;
        metadata.claim_name = claim.ref.name;
        metadata.claim_uid = claim.ref.uid;
        metadata.pod_claim_name = claim.pod_claim_name;
        metadata.request = request;
      }
      metadata.devices.push_back({.driver = options_.driver_name,
                                  .pool = device.pool,
                                  .name = device.device,
                                  .attributes = device.metadata_attributes});
    }
  }
  std::vector<RequestMetadata> requests;
  for (auto& [name, metadata] : by_request) {
    requests.push_back(std::move(metadata));
  }
  auto ids = WriteDeviceMetadata(options_.driver_name, options_.plugin_dir,
                                 MetadataCdiDir(), options_.metadata_versions,
                                 requests);
  if (!ids.ok()) return ids.status();
  for (PreparedDevice& device : *devices) {
    for (const std::string& request : device.request_names) {
      const auto id = ids->find(request);
      if (id != ids->end() &&
          std::find(device.cdi_device_ids.begin(), device.cdi_device_ids.end(),
                    id->second) == device.cdi_device_ids.end()) {
        device.cdi_device_ids.push_back(id->second);
      }
    }
  }
  return OkStatus();
}

}  // namespace topology::draplugin
