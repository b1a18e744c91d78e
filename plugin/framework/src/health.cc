#include "topology/plugin/health.h"

#include <algorithm>
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
                                     TimePoint now) {
  bool inserted = false;
  State& state = FindOrInsert(address, &inserted);
  if (inserted) state.had_driver = reading.driver.has_value();
  state.driver_bound = reading.driver.has_value();
  std::string fault;
  if (state.had_driver && !reading.driver) fault = "driver unbound";
  if (reading.driver) state.had_driver = true;
  if (reading.aer_fatal) {
    if (state.has_aer && *reading.aer_fatal > state.aer_fatal) {
      fault = "AER fatal errors rose from " + std::to_string(state.aer_fatal) +
              " to " + std::to_string(*reading.aer_fatal);
    }
    state.has_aer = true;
    state.aer_fatal = *reading.aer_fatal;
  }
  if (!fault.empty()) {
    state.has_fault = true;
    state.last_fault = now.time_since_epoch().count();
    reasons_[address] = std::move(fault);
    state.verdict = Verdict::kFaulted;
  } else if (state.has_fault &&
             now - TimePoint(Clock::Duration(state.last_fault)) <
                 quiet_period_) {
    state.verdict = Verdict::kRecovering;
  } else {
    state.verdict = Verdict::kHealthy;
  }
  if (state.has_aer || state.verdict != Verdict::kHealthy) {
    recheck_.insert(address);
  } else {
    recheck_.erase(address);
  }
  return VerdictOf(address, state);
}

HealthVerdict HealthTracker::Recheck(const PciAddress& address,
                                     std::optional<uint64_t> aer_fatal,
                                     TimePoint now) {
  HealthReading reading;
  reading.aer_fatal = aer_fatal;
  const State* state = Find(address);
  if (state != nullptr && state->driver_bound) reading.driver = "";
  return Observe(address, reading, now);
}

HealthVerdict HealthTracker::VerdictOf(const PciAddress& address,
                                       const State& state) const {
  if (state.has_override) {
    if (state.override_healthy) return {};
    return {Health::kUnhealthy, "marked unhealthy by fault injection"};
  }
  if (state.verdict == Verdict::kHealthy) return {};
  auto reason = reasons_.find(address);
  std::string text = reason == reasons_.end() ? "fault" : reason->second;
  if (state.verdict == Verdict::kRecovering) {
    text += " (recovering: waiting for a quiet period)";
  }
  return {Health::kUnhealthy, std::move(text)};
}

std::optional<HealthVerdict> HealthTracker::Last(
    const PciAddress& address) const {
  const State* state = Find(address);
  if (state == nullptr) return std::nullopt;
  return VerdictOf(address, *state);
}

const HealthTracker::State* HealthTracker::Find(
    const PciAddress& address) const {
  auto it = std::lower_bound(
      states_.begin(), states_.end(), address,
      [](const auto& entry, const PciAddress& a) { return entry.first < a; });
  if (it == states_.end() || it->first != address) return nullptr;
  return &it->second;
}

HealthTracker::State& HealthTracker::FindOrInsert(const PciAddress& address,
                                                  bool* inserted) {
  *inserted = false;
  if (states_.empty() || states_.back().first < address) {
    *inserted = true;
    return states_.emplace_back(address, State{}).second;
  }
  auto it = std::lower_bound(
      states_.begin(), states_.end(), address,
      [](const auto& entry, const PciAddress& a) { return entry.first < a; });
  if (it != states_.end() && it->first == address) return it->second;
  *inserted = true;
  return states_.emplace(it, address, State{})->second;
}

void HealthTracker::Forget(const PciAddress& address) {
  ForgetIf([&](const PciAddress& a) { return a == address; });
}

void HealthTracker::ForgetIf(
    const std::function<bool(const PciAddress&)>& gone) {
  std::erase_if(states_, [&](const auto& entry) { return gone(entry.first); });
  std::erase_if(reasons_, [&](const auto& entry) { return gone(entry.first); });
  std::erase_if(recheck_, gone);
  // After a rescan the devices are known: no room kept for more (a vector
  // grown one device at a time holds up to twice what it needs).
  states_.shrink_to_fit();
}

std::vector<PciAddress> HealthTracker::NeedRecheck() const {
  return {recheck_.begin(), recheck_.end()};
}

void HealthTracker::SetOverride(const PciAddress& address,
                                std::optional<Health> health) {
  bool inserted = false;
  State& state = FindOrInsert(address, &inserted);
  state.has_override = health.has_value();
  state.override_healthy = health == Health::kHealthy;
}

}  // namespace topology::plugin
