#include "topology/plugin/health.h"

#include <charconv>
#include <filesystem>

namespace topology::plugin {

StatusOr<uint64_t> ParseAerCounters(std::string_view text) {
  uint64_t sum = 0;
  std::optional<uint64_t> total;
  size_t line_number = 0;
  while (!text.empty()) {
    ++line_number;
    const size_t end = text.find('\n');
    std::string_view line = text.substr(0, end);
    text = end == std::string_view::npos ? std::string_view()
                                         : text.substr(end + 1);
    if (line.empty()) continue;
    const size_t space = line.rfind(' ');
    if (space == std::string_view::npos || space == 0) {
      return DataLossError("aer_dev_fatal line " + std::to_string(line_number) +
                           ": expected \"<name> <count>\"");
    }
    const std::string_view name = line.substr(0, space);
    const std::string_view digits = line.substr(space + 1);
    uint64_t value = 0;
    const auto [ptr, error] =
        std::from_chars(digits.data(), digits.data() + digits.size(), value);
    if (error != std::errc() || ptr != digits.data() + digits.size() ||
        digits.empty()) {
      return DataLossError("aer_dev_fatal line " + std::to_string(line_number) +
                           ": count is not an unsigned number");
    }
    if (name == "TOTAL_ERR_FATAL") {
      total = value;
    } else if (__builtin_add_overflow(sum, value, &sum)) {
      return DataLossError("aer_dev_fatal: counters overflow");
    }
  }
  if (line_number == 0) return DataLossError("aer_dev_fatal is empty");
  return total.value_or(sum);
}

HealthReading ReadPciHealth(const SysfsReader& sysfs,
                            const PciAddress& address) {
  const std::string dir = "bus/pci/devices/" + address.ToString();
  HealthReading reading;
  auto driver = sysfs.ReadLink(dir + "/driver");
  if (driver.ok()) {
    const std::string name = std::filesystem::path(*driver).filename().string();
    if (!name.empty()) reading.driver = name;
  }
  reading.aer_fatal = ReadPciAerFatal(sysfs, address);
  return reading;
}

std::optional<uint64_t> ReadPciAerFatal(const SysfsReader& sysfs,
                                        const PciAddress& address) {
  auto aer = sysfs.ReadFile("bus/pci/devices/" + address.ToString() +
                            "/aer_dev_fatal");
  if (!aer.ok()) return std::nullopt;
  auto total = ParseAerCounters(*aer);
  if (!total.ok()) return std::nullopt;
  return *total;
}

HealthVerdict HealthTracker::Observe(const PciAddress& address,
                                     const HealthReading& reading,
                                     Clock::time_point now) {
  auto [it, inserted] = states_.try_emplace(address);
  State& state = it->second;
  if (inserted) state.had_driver = reading.driver.has_value();
  state.driver_bound = reading.driver.has_value();
  std::string fault;
  if (state.had_driver && !reading.driver) fault = "driver unbound";
  if (reading.driver) state.had_driver = true;
  if (reading.aer_fatal) {
    if (state.aer_fatal && *reading.aer_fatal > *state.aer_fatal) {
      fault = "AER fatal errors rose from " + std::to_string(*state.aer_fatal) +
              " to " + std::to_string(*reading.aer_fatal);
    }
    state.aer_fatal = reading.aer_fatal;
  }
  if (!fault.empty()) {
    state.last_fault = now;
    state.last_reason = fault;
  }
  if (!fault.empty()) {
    state.verdict = {Health::kUnhealthy, fault};
  } else if (state.last_fault && now - *state.last_fault < quiet_period_) {
    state.verdict = {
        Health::kUnhealthy,
        state.last_reason + " (recovering: waiting for a quiet period)"};
  } else {
    state.verdict = {};
  }
  if (state.aer_fatal || state.verdict.health != Health::kHealthy) {
    recheck_.insert(address);
  } else {
    recheck_.erase(address);
  }
  return *Last(address);
}

HealthVerdict HealthTracker::Recheck(const PciAddress& address,
                                     std::optional<uint64_t> aer_fatal,
                                     Clock::time_point now) {
  HealthReading reading;
  reading.aer_fatal = aer_fatal;
  auto it = states_.find(address);
  if (it != states_.end() && it->second.driver_bound) reading.driver = "";
  return Observe(address, reading, now);
}

std::optional<HealthVerdict> HealthTracker::Last(
    const PciAddress& address) const {
  auto it = states_.find(address);
  if (it == states_.end()) return std::nullopt;
  const State& state = it->second;
  if (state.override_health) {
    return HealthVerdict{*state.override_health,
                         *state.override_health == Health::kHealthy
                             ? ""
                             : "marked unhealthy by fault injection"};
  }
  return state.verdict;
}

std::vector<PciAddress> HealthTracker::NeedRecheck() const {
  return {recheck_.begin(), recheck_.end()};
}

void HealthTracker::SetOverride(const PciAddress& address,
                                std::optional<Health> health) {
  states_[address].override_health = health;
}

}  // namespace topology::plugin
