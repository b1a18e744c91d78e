#include "topology/manager/policy_options.h"

#include <charconv>
#include <optional>
#include <string>

namespace topology::manager {

std::optional<bool> ParseGoBool(std::string_view text) {
  for (std::string_view yes : {"1", "t", "T", "TRUE", "true", "True"}) {
    if (text == yes) return true;
  }
  for (std::string_view no : {"0", "f", "F", "FALSE", "false", "False"}) {
    if (text == no) return false;
  }
  return std::nullopt;
}

namespace {

// Go's strconv.Atoi (optional sign, decimal, fits in int).
std::optional<int> ParseGoInt(const std::string& text) {
  std::string_view digits = text;
  if (!digits.empty() && digits.front() == '+') digits.remove_prefix(1);
  int value = 0;
  auto [ptr, ec] =
      std::from_chars(digits.data(), digits.data() + digits.size(), value);
  if (digits.empty() || ec != std::errc() ||
      ptr != digits.data() + digits.size()) {
    return std::nullopt;
  }
  return value;
}

}  // namespace

StatusOr<PolicyOptions> PolicyOptions::Parse(
    const std::map<std::string, std::string>& options) {
  PolicyOptions parsed;
  for (const auto& [key, value] : options) {
    if (key == kPreferClosestNumaNodes) {
      const auto flag = ParseGoBool(value);
      if (!flag) {
        return InvalidArgumentError("bad value for option \"" + key +
                                    "\": strconv.ParseBool: parsing \"" +
                                    value + "\": invalid syntax");
      }
      parsed.prefer_closest_numa = *flag;
    } else if (key == kMaxAllowableNumaNodes) {
      const auto number = ParseGoInt(value);
      if (!number) {
        return InvalidArgumentError(
            "unable to convert policy option to integer \"" + key +
            "\" due to error: strconv.Atoi: parsing \"" + value +
            "\": invalid syntax");
      }
      if (*number < kDefaultMaxAllowableNumaNodes) {
        return InvalidArgumentError(
            "the minimum value of \"max-allowable-numa-nodes\" should not be "
            "less than 8");
      }
      parsed.max_allowable_numa_nodes = *number;
    } else {
      return InvalidArgumentError("unknown Topology Manager Policy option: \"" +
                                  key + "\"");
    }
  }
  return parsed;
}

}  // namespace topology::manager
