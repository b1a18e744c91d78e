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
  auto aer = sysfs.ReadFile(dir + "/aer_dev_fatal");
  if (aer.ok()) {
    auto total = ParseAerCounters(*aer);
    if (total.ok()) reading.aer_fatal = *total;
  }
  return reading;
}

HealthVerdict HealthTracker::Observe(const PciAddress& address,
                                     const HealthReading& reading,
                                     Clock::time_point now) {
  auto [it, inserted] = states_.try_emplace(address);
  State& state = it->second;
  if (inserted) state.had_driver = reading.driver.has_value();
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
  if (state.override_health) {
    return {*state.override_health,
            *state.override_health == Health::kHealthy
                ? ""
                : "marked unhealthy by fault injection"};
  }
  if (!fault.empty()) return {Health::kUnhealthy, fault};
  if (state.last_fault && now - *state.last_fault < quiet_period_) {
    return {Health::kUnhealthy,
            state.last_reason + " (recovering: waiting for a quiet period)"};
  }
  return {};
}

void HealthTracker::SetOverride(const PciAddress& address,
                                std::optional<Health> health) {
  states_[address].override_health = health;
}

}  // namespace topology::plugin
