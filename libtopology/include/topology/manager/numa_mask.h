// NumaMask: a set of NUMA node ids 0..63 as one 64-bit value, with the
// kubelet's bitmask semantics (pkg/kubelet/cm/topologymanager/bitmask):
// numeric ordering, "narrower" = fewer bits, then the smaller value.
//
// Thread safety: a value type.
#ifndef TOPOLOGY_MANAGER_NUMA_MASK_H_
#define TOPOLOGY_MANAGER_NUMA_MASK_H_

#include <bit>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "topology/export.h"
#include "topology/status.h"

namespace topology::manager {

class TOPOLOGY_EXPORT NumaMask {
 public:
  static constexpr int kMaxNodes = 64;

  constexpr NumaMask() = default;
  static constexpr NumaMask FromBits(uint64_t bits) { return NumaMask(bits); }

  // Fails with INVALID_ARGUMENT "bit number must be in range 0-63" (the
  // kubelet's wording) when an id is out of range; no partial mask.
  static StatusOr<NumaMask> FromIds(const std::vector<int>& ids);

  constexpr uint64_t bits() const { return bits_; }
  constexpr int Count() const { return std::popcount(bits_); }
  constexpr bool IsEmpty() const { return bits_ == 0; }
  // False for ids outside 0..63.
  constexpr bool IsSet(int id) const {
    return id >= 0 && id < kMaxNodes && ((bits_ >> id) & 1U) != 0;
  }
  bool AnySet(const std::vector<int>& ids) const;
  // Set ids in increasing order.
  std::vector<int> Ids() const;

  constexpr NumaMask And(NumaMask other) const {
    return NumaMask(bits_ & other.bits_);
  }
  constexpr NumaMask Or(NumaMask other) const {
    return NumaMask(bits_ | other.bits_);
  }
  constexpr bool IsSubsetOf(NumaMask other) const {
    return (bits_ & ~other.bits_) == 0;
  }

  // Plain unsigned comparison of the 64-bit values.
  constexpr bool IsLessThan(NumaMask other) const {
    return bits_ < other.bits_;
  }
  constexpr bool IsGreaterThan(NumaMask other) const {
    return bits_ > other.bits_;
  }
  // Fewer bits is narrower; with equal counts the smaller value is narrower
  // (so {1,2} is narrower than {0,3}). A mask is never narrower than itself.
  constexpr bool IsNarrowerThan(NumaMask other) const {
    if (Count() != other.Count()) return Count() < other.Count();
    return IsLessThan(other);
  }

  // "[0,2]".
  std::string ToString() const;

  friend constexpr bool operator==(NumaMask a, NumaMask b) = default;

 private:
  constexpr explicit NumaMask(uint64_t bits) : bits_(bits) {}
  uint64_t bits_ = 0;
};

// Calls `callback` for every non-empty subset of `ids`, by subset size 1, 2,
// ..., n and, within a size, in lexicographic order of positions in `ids`
// (the kubelet's IterateBitMasks order). REQUIRES: ids within 0..63.
TOPOLOGY_EXPORT void IterateMasks(
    const std::vector<int>& ids, const std::function<void(NumaMask)>& callback);

}  // namespace topology::manager

#endif  // TOPOLOGY_MANAGER_NUMA_MASK_H_
