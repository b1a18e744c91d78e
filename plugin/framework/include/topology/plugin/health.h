// Health checking with recovery for PCI devices: a device turns Unhealthy at
// once when its driver is unbound or its AER fatal error counter rises, and
// turns Healthy again only after a quiet period without faults (hysteresis),
// so a flapping device does not bounce in and out of the allocatable count.
//
//   HealthTracker tracker(std::chrono::minutes(1));
//   HealthVerdict verdict = tracker.Observe(
//       address, ReadPciHealth(sysfs, address), clock.Now());
//
// Time is the caller's, from the Clock seam (topology/clock.h): tests pass
// a FakeClock's.
//
// Not thread-safe: one tracker per health loop.
#ifndef TOPOLOGY_PLUGIN_HEALTH_H_
#define TOPOLOGY_PLUGIN_HEALTH_H_

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "topology/clock.h"
#include "topology/pci_address.h"
#include "topology/plugin/types.h"
#include "topology/status.h"
#include "topology/sysfs_reader.h"

namespace topology::plugin {

// Parses sysfs aer_dev_fatal ("<Name> <count>" per line) and returns
// TOTAL_ERR_FATAL, or the sum of the counters when that line is absent.
// DATA_LOSS naming the line on anything else.
StatusOr<uint64_t> ParseAerCounters(std::string_view text);

struct HealthReading {
  std::optional<std::string> driver = {};  // bound driver, nullopt if none
  std::optional<uint64_t> aer_fatal = {};  // nullopt when not readable
};

// Reads bus/pci/devices/<address>/driver (the link's last component) and
// aer_dev_fatal. Whatever cannot be read is nullopt, never an error.
HealthReading ReadPciHealth(const SysfsReader& sysfs,
                            const PciAddress& address);
// Only bus/pci/devices/<address>/aer_dev_fatal: the one health input that
// changes without a uevent (binding and unbinding a driver send one).
std::optional<uint64_t> ReadPciAerFatal(const SysfsReader& sysfs,
                                        const PciAddress& address);

struct HealthVerdict {
  Health health = Health::kHealthy;
  std::string reason = {};  // empty when healthy
};

class HealthTracker {
 public:
  using TimePoint = Clock::TimePoint;

  explicit HealthTracker(std::chrono::nanoseconds quiet_period)
      : quiet_period_(quiet_period) {}

  // Folds a fresh reading of `address` taken at `now` into its state.
  HealthVerdict Observe(const PciAddress& address, const HealthReading& reading,
                        TimePoint now);
  // Observe with the driver as last read and a fresh AER counter (nullopt:
  // not readable).
  HealthVerdict Recheck(const PciAddress& address,
                        std::optional<uint64_t> aer_fatal, TimePoint now);
  // The verdict of the last Observe or Recheck (an override applies at
  // once); nullopt for a device never observed.
  std::optional<HealthVerdict> Last(const PciAddress& address) const;
  // The devices whose verdict can change without an event: those with an
  // AER counter, and those not healthy now (a quiet period may end).
  // Devices without either keep their verdict until the next Observe.
  std::vector<PciAddress> NeedRecheck() const;
  // The device is gone: drop its state.
  void Forget(const PciAddress& address);
  // Drops the state of every device `gone` says is gone, in one pass (for
  // many devices at once, e.g. a PF's VFs disabled).
  void ForgetIf(const std::function<bool(const PciAddress&)>& gone);
  // Fault injection: force a health until cleared with nullopt.
  void SetOverride(const PciAddress& address, std::optional<Health> health);

 private:
  // Kept for every device a plugin serves (10,000 and more), so small: 24
  // bytes; what only a device that faulted has (the reason) is apart.
  enum class Verdict : uint8_t {
    kHealthy,
    kFaulted,     // the last reading found a fault
    kRecovering,  // an earlier fault, within the quiet period
  };
  struct State {
    uint64_t aer_fatal = 0;               // valid when has_aer
    Clock::Duration::rep last_fault = 0;  // valid when has_fault
    bool had_driver : 1 = false;
    bool driver_bound : 1 = false;  // in the last reading
    bool has_aer : 1 = false;
    bool has_fault : 1 = false;
    bool has_override : 1 = false;
    bool override_healthy : 1 = false;
    Verdict verdict = Verdict::kHealthy;  // of the last Observe
  };
  HealthVerdict VerdictOf(const PciAddress& address, const State& state) const;
  const State* Find(const PciAddress& address) const;
  // The state of `address`, inserted (zeroed) when new; `inserted` says so.
  State& FindOrInsert(const PciAddress& address, bool* inserted);

  std::chrono::nanoseconds quiet_period_;
  // Sorted by address; devices are observed in address order, so new ones
  // are appended (32 bytes per device; a map node took 80).
  std::vector<std::pair<PciAddress, State>> states_;
  std::map<PciAddress, std::string> reasons_;  // the last fault's
  std::set<PciAddress> recheck_;               // what NeedRecheck returns
};

}  // namespace topology::plugin

#endif  // TOPOLOGY_PLUGIN_HEALTH_H_
