#include "memory_flags.h"

#include <algorithm>
#include <charconv>
#include <climits>
#include <cmath>

#include "topology/common/text_util.h"

#include "pod_manifest.h"

namespace topology::host {

using text::Quoted;

namespace {

std::vector<std::string> Split(const std::string& text, char separator) {
  std::vector<std::string> out;
  size_t start = 0;
  while (true) {
    const size_t end = text.find(separator, start);
    out.push_back(text.substr(start, end - start));
    if (end == std::string::npos) break;
    start = end + 1;
  }
  return out;
}

}  // namespace

StatusOr<std::vector<manager::MemoryReservation>> ParseReservedMemory(
    const std::vector<std::string>& values) {
  std::vector<manager::MemoryReservation> out;
  for (const std::string& value : values) {
    for (const std::string& reservation : Split(value, ';')) {
      const std::vector<std::string> parts = Split(reservation, ':');
      if (parts.size() != 2) {
        return InvalidArgumentError(
            "--reserved-memory: the reserved memory has incorrect format, "
            "expected numaNodeID:type=quantity[,type=quantity...], got " +
            Quoted(reservation));
      }
      manager::MemoryReservation entry;
      auto [ptr, error] = std::from_chars(
          parts[0].data(), parts[0].data() + parts[0].size(), entry.numa_node);
      if (error != std::errc() || ptr != parts[0].data() + parts[0].size() ||
          entry.numa_node < 0) {
        return InvalidArgumentError(
            "--reserved-memory: failed to convert the NUMA node ID, expected "
            "integer, got " +
            Quoted(parts[0]));
      }
      for (const std::string& limit : Split(parts[1], ',')) {
        const std::vector<std::string> pair = Split(limit, '=');
        if (pair.size() != 2) {
          return InvalidArgumentError(
              "--reserved-memory: the reserved limit has incorrect value, "
              "expected type=quantity, got " +
              Quoted(limit));
        }
        if (!manager::IsMemoryResource(pair[0])) {
          return InvalidArgumentError(
              "--reserved-memory: memory type conversion error, unknown "
              "type: " +
              Quoted(pair[0]));
        }
        auto bytes = ParseByteQuantity(pair[1]);
        if (!bytes.ok()) {
          return InvalidArgumentError(
              "--reserved-memory: failed to parse the quantity, error: " +
              bytes.status().message());
        }
        entry.limits[pair[0]] = static_cast<uint64_t>(*bytes);
      }
      out.push_back(std::move(entry));
    }
  }
  return out;
}

StatusOr<uint64_t> ReservedMemoryOf(const std::string& flag,
                                    const std::string& value) {
  uint64_t memory = 0;
  if (value.empty()) return memory;
  for (const std::string& item : Split(value, ',')) {
    const size_t equals = item.find('=');
    if (equals == std::string::npos || equals == 0) {
      return InvalidArgumentError(flag + ": " + Quoted(item) +
                                  " is not resource=quantity");
    }
    const std::string name = item.substr(0, equals);
    const std::string quantity = item.substr(equals + 1);
    if (name == manager::kMemoryResource) {
      auto bytes = ParseByteQuantity(quantity);
      if (!bytes.ok())
        return Status(bytes.status().code(),
                      flag + ": " + bytes.status().message());
      memory = static_cast<uint64_t>(*bytes);
    } else if (name != "cpu" && name != "ephemeral-storage" && name != "pid") {
      return InvalidArgumentError(
          flag + ": unsupported resource name " + Quoted(name) +
          " (cpu, memory, ephemeral-storage and pid are)");
    }
  }
  return memory;
}

StatusOr<int64_t> ReservedCpuMilliOf(const std::string& flag,
                                     const std::string& value) {
  // The names and the form are checked by ReservedMemoryOf.
  if (auto checked = ReservedMemoryOf(flag, value); !checked.ok()) {
    return checked.status();
  }
  int64_t milli = 0;
  if (value.empty()) return milli;
  for (const std::string& item : Split(value, ',')) {
    const size_t equals = item.find('=');
    if (item.substr(0, equals) != "cpu") continue;
    auto cpu = ParseCpuQuantity(item.substr(equals + 1));
    if (!cpu.ok()) {
      return Status(cpu.status().code(), flag + ": " + cpu.status().message());
    }
    milli = *cpu;
  }
  return milli;
}

StatusOr<int> ReservedCpuCount(const std::string& kube_reserved,
                               const std::string& system_reserved) {
  auto kube = ReservedCpuMilliOf("--kube-reserved", kube_reserved);
  if (!kube.ok()) return kube.status();
  auto system = ReservedCpuMilliOf("--system-reserved", system_reserved);
  if (!system.ok()) return system.status();
  // Each is at most INT64_MAX / 1000 whole CPUs' worth: no machine has
  // that many, and the sum in whole CPUs is clamped below INT_MAX.
  const int64_t whole = (*kube / 1000 + *system / 1000) +
                        (*kube % 1000 + *system % 1000 + 999) / 1000;
  return static_cast<int>(std::min<int64_t>(whole, INT_MAX));
}

StatusOr<uint64_t> HardEvictionMemory(const std::string& value,
                                      uint64_t memory_capacity) {
  uint64_t memory = 0;
  if (value.empty()) return memory;
  for (const std::string& item : Split(value, ',')) {
    const size_t less = item.find('<');
    if (less == std::string::npos || less == 0) {
      return InvalidArgumentError("--eviction-hard: " + Quoted(item) +
                                  " is not signal<quantity");
    }
    if (item.substr(0, less) != "memory.available") continue;
    const std::string threshold = item.substr(less + 1);
    if (threshold.ends_with('%')) {
      double percent = 0;
      const std::string digits = threshold.substr(0, threshold.size() - 1);
      auto [ptr, error] = std::from_chars(
          digits.data(), digits.data() + digits.size(), percent);
      // NaN passes no comparison: refused by name (cast to an integer it
      // would be undefined).
      if (error != std::errc() || ptr != digits.data() + digits.size() ||
          !std::isfinite(percent) || percent < 0 || percent > 100) {
        return InvalidArgumentError(
            "--eviction-hard: memory.available: " + Quoted(threshold) +
            " is not a percentage from 0% to 100%");
      }
      // As the kubelet: a float32 fraction times the capacity, truncated.
      const auto fraction = static_cast<float>(percent / 100.0);
      const double bytes =
          static_cast<double>(memory_capacity) * static_cast<double>(fraction);
      // 100% of a capacity near 2^64 rounds up to 2^64 as a double.
      memory = bytes >= 0x1p64 ? memory_capacity : static_cast<uint64_t>(bytes);
    } else {
      auto bytes = ParseByteQuantity(threshold);
      if (!bytes.ok()) {
        return Status(
            bytes.status().code(),
            "--eviction-hard: memory.available: " + bytes.status().message());
      }
      memory = static_cast<uint64_t>(*bytes);
    }
  }
  return memory;
}

StatusOr<manager::MemoryManager::Options> MemoryOptions(
    const MemoryFlags& flags, uint64_t memory_capacity) {
  manager::MemoryManager::Options options;
  options.policy = flags.policy;
  auto reserved = ParseReservedMemory(flags.reserved_memory);
  if (!reserved.ok()) return reserved.status();
  options.reserved_memory = std::move(*reserved);
  auto kube = ReservedMemoryOf("--kube-reserved", flags.kube_reserved);
  if (!kube.ok()) return kube.status();
  auto system = ReservedMemoryOf("--system-reserved", flags.system_reserved);
  if (!system.ok()) return system.status();
  auto eviction = HardEvictionMemory(
      flags.eviction_hard.value_or(kDefaultEvictionHard), memory_capacity);
  if (!eviction.ok()) return eviction.status();
  uint64_t total = 0;
  if (__builtin_add_overflow(*kube, *system, &total) ||
      __builtin_add_overflow(total, *eviction, &total)) {
    return InvalidArgumentError(
        "--kube-reserved, --system-reserved and --eviction-hard reserve more "
        "than 2^64 bytes of memory together");
  }
  if (total != 0) {
    options.node_allocatable_reservation[manager::kMemoryResource] = total;
  }
  return options;
}

}  // namespace topology::host
