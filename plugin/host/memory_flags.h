// The kubelet's memory flags, with its spellings and messages:
// --reserved-memory (ReservedMemoryVar), --kube-reserved/--system-reserved
// (ConfigurationMap of quantities) and --eviction-hard (memory.available),
// turned into the Memory Manager's options (GetNodeAllocatableReservation).
#ifndef TOPOLOGY_HOST_MEMORY_FLAGS_H_
#define TOPOLOGY_HOST_MEMORY_FLAGS_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "topology/manager/memory_manager.h"
#include "topology/status.h"

namespace topology::host {

// The kubelet's --eviction-hard default's memory signal.
inline constexpr char kDefaultEvictionHard[] = "memory.available<100Mi";

// "0:memory=1Gi,hugepages-2Mi=2Gi" (several per value separated by ';'; the
// flag may repeat). INVALID_ARGUMENT with the kubelet's words.
StatusOr<std::vector<manager::MemoryReservation>> ParseReservedMemory(
    const std::vector<std::string>& values);

// "cpu=1,memory=2Gi,ephemeral-storage=1Gi,pid=100": the memory entry in
// bytes (0 when absent); other resource names than these four are refused.
StatusOr<uint64_t> ReservedMemoryOf(const std::string& flag,
                                    const std::string& value);

// The same flag's cpu entry in millicores (0 when absent).
StatusOr<int64_t> ReservedCpuMilliOf(const std::string& flag,
                                     const std::string& value);

// The kubelet's numReservedCPUs: --kube-reserved plus --system-reserved
// cpu in whole CPUs, rounded up.
StatusOr<int> ReservedCpuCount(const std::string& kube_reserved,
                               const std::string& system_reserved);

// memory.available of "memory.available<100Mi,nodefs.available<10%": bytes,
// a percentage taken of `memory_capacity` as the kubelet does; 0 when the
// signal is absent.
StatusOr<uint64_t> HardEvictionMemory(const std::string& value,
                                      uint64_t memory_capacity);

struct MemoryFlags {
  std::string policy = manager::kMemoryPolicyNone;
  std::vector<std::string> reserved_memory;
  std::string kube_reserved;
  std::string system_reserved;
  // nullopt: the kubelet's default (kDefaultEvictionHard).
  std::optional<std::string> eviction_hard;
};

// The Memory Manager's options from the flags: reservations parsed, the
// Node Allocatable reservation of "memory" = kube + system + eviction.
StatusOr<manager::MemoryManager::Options> MemoryOptions(
    const MemoryFlags& flags, uint64_t memory_capacity);

}  // namespace topology::host

#endif  // TOPOLOGY_HOST_MEMORY_FLAGS_H_
