#include "claim_table.h"

#include <utility>

namespace topology::draplugin {

Status ClaimTable::Reload() {
  auto loaded = LoadClaims(checkpoint_);
  if (!loaded.ok()) {
    if (loaded.status().code() != StatusCode::kNotFound) {
      return loaded.status();
    }
    loaded = PreparedClaims();
  }
  MutexLock write(write_mu_);
  durable_ = *loaded;
  MutexLock lock(mu_);
  claims_ = std::move(*loaded);
  return claims_.empty() && !std::filesystem::exists(checkpoint_)
             ? NotFoundError(checkpoint_.string() + " does not exist")
             : OkStatus();
}

Status ClaimTable::Save() {
  MutexLock write(write_mu_);
  return SaveClaims(checkpoint_, durable_);
}

Status ClaimTable::Commit(const std::string& uid,
                          std::optional<PreparedClaim> claim) {
  MutexLock write(write_mu_);
  PreparedClaims next = durable_;
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

std::optional<PreparedClaim> ClaimTable::Find(const std::string& uid) const {
  MutexLock lock(mu_);
  const auto it = claims_.find(uid);
  if (it == claims_.end()) return std::nullopt;
  return it->second;
}

std::vector<ClaimRef> ClaimTable::Refs() const {
  MutexLock lock(mu_);
  std::vector<ClaimRef> out;
  out.reserve(claims_.size());
  for (const auto& [uid, claim] : claims_) out.push_back(claim.ref);
  return out;
}

std::set<std::string> ClaimTable::Uids() const {
  MutexLock lock(mu_);
  std::set<std::string> out;
  for (const auto& [uid, claim] : claims_) out.insert(uid);
  return out;
}

size_t ClaimTable::size() const {
  MutexLock lock(mu_);
  return claims_.size();
}

bool ClaimTable::Acquire(const std::string& uid, Deadline deadline,
                         bool* expired) {
  MutexLock lock(mu_);
  if (stopping_) return false;
  std::unique_ptr<Turns>& slot = turns_[uid];
  if (slot == nullptr) slot = std::make_unique<Turns>();
  Turns& turns = *slot;
  ++turns.waiting;
  while (turns.busy && !stopping_ && clock_->Now() < deadline) {
    clock_->WaitUntil(turns.free, lock, deadline);
  }
  --turns.waiting;
  if (!turns.busy && !stopping_) {
    turns.busy = true;
    return true;
  }
  *expired = !stopping_;
  if (!turns.busy && turns.waiting == 0) turns_.erase(uid);
  return false;
}

void ClaimTable::Release(const std::string& uid) {
  MutexLock lock(mu_);
  const auto it = turns_.find(uid);
  if (it == turns_.end()) return;
  it->second->busy = false;
  if (it->second->waiting == 0) {
    turns_.erase(it);
  } else {
    it->second->free.notify_one();
  }
}

void ClaimTable::Stop() {
  MutexLock lock(mu_);
  stopping_ = true;
  for (auto& [uid, turns] : turns_) turns->free.notify_all();
}

}  // namespace topology::draplugin
