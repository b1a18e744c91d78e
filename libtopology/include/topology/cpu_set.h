// CpuSet: a set of logical CPU ids (Linux CPU numbers), as read from sysfs
// cpulists ("0-3,8-11") and hex cpumasks ("ff,00000000").
//
// Thread safety: a value type; const methods may be called concurrently.
#ifndef TOPOLOGY_CPU_SET_H_
#define TOPOLOGY_CPU_SET_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "topology/export.h"
#include "topology/status.h"

namespace topology {

class TOPOLOGY_EXPORT CpuSet {
 public:
  // Largest CPU id accepted by the parsers (exclusive). Linux's NR_CPUS is at
  // most 8192 today; the margin keeps hostile input bounded in memory.
  static constexpr int kMaxCpus = 1 << 16;

  CpuSet() = default;

  // Parses a kernel cpulist: comma-separated ids and ranges ("0-3,8,10-11"),
  // optionally with the kernel's "range:used/group" form ("0-9:2/5" is
  // 0,1,5,6).
  // Surrounding whitespace and trailing NUL bytes are ignored; "" is empty.
  // Fails with INVALID_ARGUMENT naming the offending token.
  static StatusOr<CpuSet> ParseList(std::string_view text);

  // Parses a kernel hex cpumask: 32-bit words separated by commas, most
  // significant first ("00000000,0000ffff"); "0x" prefix optional.
  // Fails with INVALID_ARGUMENT naming the offending word.
  static StatusOr<CpuSet> ParseMask(std::string_view text);

  // Builds a set from ids. REQUIRES: 0 <= id < kMaxCpus.
  static CpuSet Of(const std::vector<int>& ids);

  // REQUIRES: 0 <= cpu < kMaxCpus.
  void Add(int cpu);
  bool Contains(int cpu) const;
  bool empty() const;
  int Count() const;

  bool Intersects(const CpuSet& other) const;
  bool IsSubsetOf(const CpuSet& other) const;
  CpuSet Union(const CpuSet& other) const;
  CpuSet Intersection(const CpuSet& other) const;

  // The ids in increasing order.
  std::vector<int> Ids() const;

  // The canonical cpulist ("0-3,8"); "" when empty.
  std::string ToList() const;

  friend bool operator==(const CpuSet& a, const CpuSet& b);

 private:
  void Trim();
  std::vector<uint64_t> words_;  // bit i of word w = CPU 64*w+i; no trailing 0.
};

}  // namespace topology

#endif  // TOPOLOGY_CPU_SET_H_
