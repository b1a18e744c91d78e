// Byte counts that saturate instead of wrapping: no machine has 2^64 bytes,
// a hostile tree or caller may claim it. The memory manager's one copy.
#ifndef TOPOLOGY_SRC_MANAGER_SATURATING_H_
#define TOPOLOGY_SRC_MANAGER_SATURATING_H_

#include <cstdint>

namespace topology::manager::internal {

inline uint64_t SaturatingAdd(uint64_t a, uint64_t b) {
  uint64_t out = 0;
  return __builtin_add_overflow(a, b, &out) ? UINT64_MAX : out;
}

inline uint64_t SaturatingMultiply(uint64_t a, uint64_t b) {
  uint64_t out = 0;
  return __builtin_mul_overflow(a, b, &out) ? UINT64_MAX : out;
}

}  // namespace topology::manager::internal

#endif  // TOPOLOGY_SRC_MANAGER_SATURATING_H_
