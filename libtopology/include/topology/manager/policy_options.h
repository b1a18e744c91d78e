// Topology Manager policy options, parsed with the kubelet's keys, value
// syntax and error wording.
//
// Thread safety: a value type.
#ifndef TOPOLOGY_MANAGER_POLICY_OPTIONS_H_
#define TOPOLOGY_MANAGER_POLICY_OPTIONS_H_

#include <map>
#include <optional>
#include <string>
#include <string_view>

#include "topology/export.h"
#include "topology/status.h"

namespace topology::manager {

inline constexpr char kPreferClosestNumaNodes[] = "prefer-closest-numa-nodes";
inline constexpr char kMaxAllowableNumaNodes[] = "max-allowable-numa-nodes";
inline constexpr int kDefaultMaxAllowableNumaNodes = 8;

// Go's strconv.ParseBool, as the kubelet reads every boolean option and
// feature gate: 1 t T TRUE true True, 0 f F FALSE false False.
TOPOLOGY_EXPORT std::optional<bool> ParseGoBool(std::string_view text);

struct PolicyOptions {
  bool prefer_closest_numa = false;
  int max_allowable_numa_nodes = kDefaultMaxAllowableNumaNodes;

  // Parses the option map as the newest kubelet does (both options are GA).
  // Errors (INVALID_ARGUMENT), with the kubelet's messages:
  //   unknown Topology Manager Policy option: "<key>"
  //   bad value for option "<key>": strconv.ParseBool: parsing "<v>": invalid
  //   syntax unable to convert policy option to integer "<key>" due to error:
  //   ... the minimum value of "max-allowable-numa-nodes" should not be less
  //   than 8
  TOPOLOGY_EXPORT static StatusOr<PolicyOptions> Parse(
      const std::map<std::string, std::string>& options);
};

}  // namespace topology::manager

#endif  // TOPOLOGY_MANAGER_POLICY_OPTIONS_H_
