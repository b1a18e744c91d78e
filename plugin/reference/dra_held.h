// The devices the DRA driver's prepared claims hold, as the device plugin
// sees them: read from topology-dra-driver's claim checkpoint, never offered
// and never allocated by the device plugin too. One owner for that set,
// with its own lock (a leaf: taken under the plugin's, never around I/O).
#ifndef TOPOLOGY_REFERENCE_DRA_HELD_H_
#define TOPOLOGY_REFERENCE_DRA_HELD_H_

#include <filesystem>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "topology/pci_address.h"
#include "topology/status.h"
#include "topology/thread_annotations.h"

namespace topology::device_plugin {

// The devices prepared claims of topology-dra-driver hold, from its claim
// checkpoint (a device prepared for an adminAccess result is not held):
// empty when there is none; the reader's error otherwise.
StatusOr<std::set<PciAddress>> ReadDraClaimHeld(
    const std::filesystem::path& checkpoint);

class DraHeldDevices {
 public:
  // `checkpoint` empty: no DRA driver beside the plugin, nothing is held.
  explicit DraHeldDevices(std::filesystem::path checkpoint);

  // Reads the checkpoint again; true when the held devices changed (the
  // first whole read counts as a change). A file that cannot be read keeps
  // the last set, logged once per problem.
  bool Read() TOPOLOGY_EXCLUDES(mu_);
  // The devices not to offer: null while any device may be held (a
  // checkpoint is configured and was never read whole: corrupt, a link,
  // too large at start), else the held set (empty without a checkpoint).
  std::shared_ptr<const std::set<PciAddress>> Held() const
      TOPOLOGY_EXCLUDES(mu_);
  // For Allocate: the checkpoint read now; FAILED_PRECONDITION when a
  // device of `device_ids` is held by a prepared claim, or when the file
  // exists but cannot be read (fails closed).
  Status CheckNotHeld(const std::vector<std::string>& device_ids) const;

 private:
  const std::filesystem::path checkpoint_;
  mutable Mutex mu_;
  std::shared_ptr<const std::set<PciAddress>> held_ TOPOLOGY_GUARDED_BY(mu_);
  // The last read's problem, logged once while it lasts.
  std::string problem_ TOPOLOGY_GUARDED_BY(mu_);
};

}  // namespace topology::device_plugin

#endif  // TOPOLOGY_REFERENCE_DRA_HELD_H_
