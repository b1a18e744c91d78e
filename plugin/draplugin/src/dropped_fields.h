// Which feature gates the API server has off, read from what it dropped of
// a ResourceSlice the driver wrote. A server with a gate off drops that
// gate's fields silently (pkg/registry/resource/resourceslice/strategy.go,
// dropDisabledFields, v1.37: nine gates); read backwards, a gate is off when
// its fields are in what was sent and in none of what was stored. The Go
// helper's DroppedFieldsError.DisabledFeatures detects four of the nine.
#ifndef TOPOLOGY_DRAPLUGIN_DROPPED_FIELDS_H_
#define TOPOLOGY_DRAPLUGIN_DROPPED_FIELDS_H_

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace topology::draplugin {

struct DisabledFeature {
  std::string gate;    // "DRADeviceTaints"
  std::string fields;  // what the gate covers: "devices[].taints"
  friend bool operator==(const DisabledFeature&,
                         const DisabledFeature&) = default;
};

// The gates whose fields `sent` (a slice's spec as written) uses and
// `stored` (the spec as the server kept it) does not, in strategy.go's
// order. A spec that is not an object uses nothing.
std::vector<DisabledFeature> DisabledFeatures(const nlohmann::json& sent,
                                              const nlohmann::json& stored);

}  // namespace topology::draplugin

#endif  // TOPOLOGY_DRAPLUGIN_DROPPED_FIELDS_H_
