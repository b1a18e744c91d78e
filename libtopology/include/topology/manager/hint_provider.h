// HintProvider: a source of topology hints per resource (the kubelet's CPU,
// memory and device managers), and the shapes its answers take.
//
// The three "no information" shapes are distinct, as in the kubelet:
//  * an empty ProviderHints map: the provider does not care;
//  * a resource mapped to std::nullopt (a nil list): no NUMA preference;
//  * a resource mapped to an empty vector: the request cannot be satisfied.
// A list may also be a HintFamily: the same hints in compact form.
//
// Thread safety: implementations are called from one admission at a time.
#ifndef TOPOLOGY_MANAGER_HINT_PROVIDER_H_
#define TOPOLOGY_MANAGER_HINT_PROVIDER_H_

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "topology/export.h"
#include "topology/manager/hint_family.h"
#include "topology/manager/pod.h"
#include "topology/manager/topology_hint.h"
#include "topology/status.h"

namespace topology::manager {

// One resource's hints: nil, an explicit list, or a compact HintFamily.
class TOPOLOGY_EXPORT HintList {
 public:
  HintList() = default;        // nil
  HintList(std::nullopt_t) {}  // NOLINT: nil, as optional's nullopt
  HintList(std::vector<TopologyHint> hints)  // NOLINT: an explicit list
      : nil_(false), hints_(std::move(hints)) {}
  static HintList Family(HintFamily family);

  // False for a nil list.
  bool has_value() const { return !nil_; }
  explicit operator bool() const { return !nil_; }
  bool is_family() const { return family_ != nullptr; }

  // The explicit hints. REQUIRES: has_value() && !is_family().
  const std::vector<TopologyHint>& operator*() const { return hints_; }
  const std::vector<TopologyHint>* operator->() const { return &hints_; }
  // REQUIRES: is_family().
  const HintFamily& family() const { return *family_; }
  // The explicit hints, a family expanded (exponential in its universe).
  // REQUIRES: has_value().
  std::vector<TopologyHint> Expand() const;

 private:
  bool nil_ = true;
  std::vector<TopologyHint> hints_;
  std::shared_ptr<const HintFamily> family_;
};
// Resource name -> hints; iterated in name order (the merge result does not
// depend on the order).
using ProviderHints = std::map<std::string, HintList>;

class HintProvider {
 public:
  virtual ~HintProvider() = default;
  // Hints for one container (container scope).
  virtual ProviderHints GetTopologyHints(const Pod& pod,
                                         const Container& container) = 0;
  // Hints for the whole pod (pod scope), from its effective requests.
  virtual ProviderHints GetPodTopologyHints(const Pod& pod) = 0;
  // Allocates for `container` after a successful merge, reading the stored
  // affinity from the Store it was given. A failure rejects the pod with
  // reason UnexpectedAdmissionError.
  virtual Status Allocate(const Pod& pod, const Container& container) = 0;
};

}  // namespace topology::manager

#endif  // TOPOLOGY_MANAGER_HINT_PROVIDER_H_
