#include "dra_held.h"

#include <optional>
#include <utility>

#include <glog/logging.h>

#include "topology/dra_attributes.h"
#include "topology/draplugin/claim_checkpoint.h"

#include "reference_views.h"

namespace topology::device_plugin {

StatusOr<std::set<PciAddress>> ReadDraClaimHeld(
    const std::filesystem::path& checkpoint) {
  auto claims = draplugin::LoadClaims(checkpoint);
  std::set<PciAddress> held;
  if (!claims.ok()) {
    if (claims.status().code() == StatusCode::kNotFound) return held;
    return claims.status();
  }
  for (const auto& [uid, claim] : *claims) {
    for (const draplugin::PreparedDevice& device : claim.devices) {
      // An adminAccess claim (monitoring) holds nothing exclusively.
      if (device.admin_access) continue;
      if (auto address = dra::AddressOfPciDeviceName(device.device)) {
        held.insert(*address);
      }
    }
  }
  return held;
}

DraHeldDevices::DraHeldDevices(std::filesystem::path checkpoint)
    : checkpoint_(std::move(checkpoint)) {
  if (checkpoint_.empty()) {
    held_ = std::make_shared<const std::set<PciAddress>>();
  }
}

bool DraHeldDevices::Read() {
  if (checkpoint_.empty()) return false;
  auto read = ReadDraClaimHeld(checkpoint_);  // outside the lock
  std::optional<std::string> problem;         // a new one, to log
  std::shared_ptr<const std::set<PciAddress>> before;
  std::shared_ptr<const std::set<PciAddress>> now;
  {
    MutexLock lock(mu_);
    if (!read.ok()) {
      if (read.status().message() == problem_) return false;
      problem = problem_ = read.status().message();
    } else {
      problem_.clear();
      if (held_ != nullptr && *held_ == *read) return false;
      before = held_;
      held_ = now =
          std::make_shared<const std::set<PciAddress>>(std::move(*read));
    }
  }
  // Logged outside the lock.
  if (problem) {
    LOG(WARNING) << *problem
                 << "; the devices DRA claims hold stay as last read (none "
                    "is offered if it was never read), and Allocate "
                    "refuses every device until it can be read";
    return false;
  }
  LogDraHeldChanges(before != nullptr ? *before : std::set<PciAddress>{}, *now);
  return true;
}

std::shared_ptr<const std::set<PciAddress>> DraHeldDevices::Held() const {
  MutexLock lock(mu_);
  return held_;
}

Status DraHeldDevices::CheckNotHeld(
    const std::vector<std::string>& device_ids) const {
  if (checkpoint_.empty()) return OkStatus();
  auto held = ReadDraClaimHeld(checkpoint_);
  if (!held.ok()) {
    return FailedPreconditionError(
        "cannot tell which devices prepared DRA claims hold (" +
        held.status().message() +
        "); nothing is allocated until it can be read");
  }
  for (const std::string& id : device_ids) {
    auto address = PciAddress::Parse(id);
    if (address.ok() && held->contains(*address)) {
      return FailedPreconditionError(
          "device " + id + " is held by a prepared DRA claim (" +
          checkpoint_.string() +
          "): it is not allocated through the device plugin too");
    }
  }
  return OkStatus();
}

}  // namespace topology::device_plugin
