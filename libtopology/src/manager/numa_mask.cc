#include "topology/manager/numa_mask.h"

#include <string>

namespace topology::manager {

StatusOr<NumaMask> NumaMask::FromIds(const std::vector<int>& ids) {
  uint64_t bits = 0;
  for (int id : ids) {
    if (id < 0 || id >= kMaxNodes) {
      return InvalidArgumentError("bit number must be in range 0-63");
    }
    bits |= uint64_t{1} << id;
  }
  return NumaMask(bits);
}

bool NumaMask::AnySet(const std::vector<int>& ids) const {
  for (int id : ids) {
    if (IsSet(id)) return true;
  }
  return false;
}

std::vector<int> NumaMask::Ids() const {
  std::vector<int> ids;
  for (uint64_t b = bits_; b != 0; b &= b - 1) {
    ids.push_back(std::countr_zero(b));
  }
  return ids;
}

std::string NumaMask::ToString() const {
  std::string out = "[";
  for (int id : Ids()) {
    if (out.size() > 1) out += ',';
    out += std::to_string(id);
  }
  return out + "]";
}

void IterateMasks(const std::vector<int>& ids,
                  const std::function<void(NumaMask)>& callback) {
  const size_t n = ids.size();
  std::vector<size_t> pick;
  for (size_t size = 1; size <= n; ++size) {
    // Combinations of positions in lexicographic order.
    pick.resize(size);
    for (size_t i = 0; i < size; ++i) pick[i] = i;
    while (true) {
      uint64_t bits = 0;
      for (size_t p : pick) bits |= uint64_t{1} << ids[p];
      callback(NumaMask::FromBits(bits));
      size_t i = size;
      while (i > 0 && pick[i - 1] == n - size + (i - 1)) --i;
      if (i == 0) break;
      ++pick[i - 1];
      for (size_t j = i; j < size; ++j) pick[j] = pick[j - 1] + 1;
    }
  }
}

}  // namespace topology::manager
