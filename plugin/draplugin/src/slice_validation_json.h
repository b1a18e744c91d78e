// The slice validator on parsed JSON, for the publisher (which holds the
// devices as JSON already). Private to the DRA framework.
#ifndef TOPOLOGY_DRAPLUGIN_SLICE_VALIDATION_JSON_H_
#define TOPOLOGY_DRAPLUGIN_SLICE_VALIDATION_JSON_H_

#include <nlohmann/json.hpp>

#include "topology/draplugin/slice_validation.h"

namespace topology::draplugin {

// ValidateResourceSlice on a parsed slice.
Status ValidateResourceSliceJson(const nlohmann::json& slice);
// The per-device rules alone (errors name "device" and the field).
Status ValidateDeviceJson(const nlohmann::json& device);
// The device has taints, consumes counters or has a list attribute: its
// slice holds at most kResourceSliceMaxDevicesWithAdvancedFeatures.
bool HasAdvancedFeatures(const nlohmann::json& device);

}  // namespace topology::draplugin

#endif  // TOPOLOGY_DRAPLUGIN_SLICE_VALIDATION_JSON_H_
