// Two of the API server's ResourceSlice rules that need more than the
// field's own shape, kept beside the slice validator that calls them
// (pkg/apis/resource/validation/validation.go, v1.37): a shareable
// device's capacity request policy (validateRequestPolicy, with the
// DRAFractionalCapacityRange gate off, as a 1.37 API server runs it: a
// range's amounts are stepped as whole numbers, rounded up), and
// the slice's partition type attribute (validatePartitionTypeAttribute).
// Private to the DRA framework.
#ifndef TOPOLOGY_DRAPLUGIN_SLICE_RULES_H_
#define TOPOLOGY_DRAPLUGIN_SLICE_RULES_H_

#include <string>

#include <nlohmann/json.hpp>

#include "topology/status.h"

namespace topology::draplugin {

// At most this many validValues (CapacityRequestPolicyDiscreteMaxOptions).
inline constexpr size_t kCapacityRequestPolicyMaxOptions = 10;

// `policy` (capacity[...].requestPolicy) of a capacity whose value is
// `capacity` (a valid quantity): at most one of validValues and
// validRange; with either, a default; values ascending, unique, at most
// 10, none above the capacity, the default among them; a range's min
// required and at most the capacity, the default within min and max, max
// at most the capacity, a step above zero with min + step within the
// capacity, the range's amounts in [0, 2^63) and, read as whole numbers
// rounded up, the default and max on a step from min. INVALID_ARGUMENT
// "<path>.<field>: <what>".
Status ValidateRequestPolicy(const std::string& capacity,
                             const nlohmann::json& policy,
                             const std::string& path);

// The slice's partitionTypeAttribute, when `spec` sets it: a slice with a
// device that consumes counters, and each such device carrying that
// attribute (by its qualified name, or bare in the driver's domain) as a
// string. INVALID_ARGUMENT "spec.<field>: <what>".
Status ValidatePartitionType(const nlohmann::json& spec);

}  // namespace topology::draplugin

#endif  // TOPOLOGY_DRAPLUGIN_SLICE_RULES_H_
