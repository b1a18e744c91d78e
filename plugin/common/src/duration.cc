#include "topology/common/duration.h"

#include <cmath>
#include <string>
#include <utility>

namespace topology::common {

StatusOr<std::chrono::nanoseconds> ParseDuration(std::string_view text) {
  const std::string quoted = "duration \"" + std::string(text) + "\"";
  if (text == "0") return std::chrono::nanoseconds(0);
  if (text.empty()) return InvalidArgumentError("empty duration");
  static constexpr std::pair<std::string_view, double> kUnits[] = {
      {"ns", 1.0}, {"us", 1e3}, {"\xC2\xB5s", 1e3}, {"ms", 1e6},
      {"s", 1e9},  {"m", 60e9}, {"h", 3600e9}};
  double total = 0;
  size_t i = 0;
  while (i < text.size()) {
    const size_t number_start = i;
    bool digits = false;
    bool dot = false;
    while (i < text.size() &&
           ((text[i] >= '0' && text[i] <= '9') || (text[i] == '.' && !dot))) {
      if (text[i] == '.') {
        dot = true;
      } else {
        digits = true;
      }
      ++i;
    }
    if (!digits) {
      return InvalidArgumentError(quoted + ": expected a number at offset " +
                                  std::to_string(number_start) +
                                  " (units: ns, us, ms, s, m, h)");
    }
    const double value =
        std::stod(std::string(text.substr(number_start, i - number_start)));
    double scale = 0;
    for (const auto& [unit, factor] : kUnits) {
      // Longest match first is guaranteed by "ms" preceding "m"/"s" checks
      // only when we compare whole units, so require the unit to end where
      // the next number (or the text) starts.
      if (text.substr(i).starts_with(unit)) {
        const size_t after = i + unit.size();
        if (after == text.size() ||
            (text[after] >= '0' && text[after] <= '9') || text[after] == '.') {
          scale = factor;
          i = after;
          break;
        }
      }
    }
    if (scale == 0) {
      return InvalidArgumentError(
          quoted + ": missing or unknown unit at offset " + std::to_string(i) +
          " (units: ns, us, ms, s, m, h)");
    }
    total += value * scale;
  }
  if (!std::isfinite(total) || total > 9.2e18) {
    return InvalidArgumentError(quoted + " is too long");
  }
  return std::chrono::nanoseconds(static_cast<int64_t>(std::llround(total)));
}

}  // namespace topology::common
