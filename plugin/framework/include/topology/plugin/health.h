// Health checking with recovery for PCI devices: a device turns Unhealthy at
// once when its driver is unbound or its AER fatal error counter rises, and
// turns Healthy again only after a quiet period without faults (hysteresis),
// so a flapping device does not bounce in and out of the allocatable count.
//
//   HealthTracker tracker(std::chrono::minutes(1));
//   HealthVerdict verdict = tracker.Observe(
//       address, ReadPciHealth(sysfs, address), HealthTracker::Clock::now());
//
// Not thread-safe: one tracker per health loop.
#ifndef TOPOLOGY_PLUGIN_HEALTH_H_
#define TOPOLOGY_PLUGIN_HEALTH_H_

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>

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
  std::optional<std::string> driver;  // bound driver, nullopt if none
  std::optional<uint64_t> aer_fatal;  // nullopt when not readable
};

// Reads bus/pci/devices/<address>/driver (the link's last component) and
// aer_dev_fatal. Whatever cannot be read is nullopt, never an error.
HealthReading ReadPciHealth(const SysfsReader& sysfs,
                            const PciAddress& address);

struct HealthVerdict {
  Health health = Health::kHealthy;
  std::string reason;  // empty when healthy
};

class HealthTracker {
 public:
  using Clock = std::chrono::steady_clock;

  explicit HealthTracker(std::chrono::nanoseconds quiet_period)
      : quiet_period_(quiet_period) {}

  // Folds a fresh reading of `address` taken at `now` into its state.
  HealthVerdict Observe(const PciAddress& address, const HealthReading& reading,
                        Clock::time_point now);
  // The device is gone: drop its state.
  void Forget(const PciAddress& address) { states_.erase(address); }
  // Fault injection: force a health until cleared with nullopt.
  void SetOverride(const PciAddress& address, std::optional<Health> health);

 private:
  struct State {
    bool had_driver = false;
    std::optional<uint64_t> aer_fatal;
    std::optional<Clock::time_point> last_fault;
    std::string last_reason;
    std::optional<Health> override_health;
  };

  std::chrono::nanoseconds quiet_period_;
  std::map<PciAddress, State> states_;
};

}  // namespace topology::plugin

#endif  // TOPOLOGY_PLUGIN_HEALTH_H_
