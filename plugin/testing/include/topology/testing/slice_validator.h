// ResourceSlices judged as the API server judges them, for a DRA driver's
// own tests (libtopology::dra_testing). The rules are those of the API
// server's validation.go (validateResourceSliceSpec and what it calls), the
// same the framework's publisher applies before it sends anything
// (draplugin::ValidateResourceSlice, topology/draplugin/slice_validation.h).
#ifndef TOPOLOGY_TESTING_SLICE_VALIDATOR_H_
#define TOPOLOGY_TESTING_SLICE_VALIDATOR_H_

#include <string>
#include <string_view>
#include <vector>

#include "topology/draplugin/resource_slices.h"
#include "topology/status.h"

namespace topology::testing {

// The ResourceSlices a driver's SlicePublisher sends for `devices` as the
// pool `node` of `node` (the bodies the API server receives, built by the
// publisher's own plan: draplugin::NewPoolSliceBodies), each judged by the
// API server's rules. OK, or INVALID_ARGUMENT naming the slice (which of
// how many, and its first device) and the field the server would name, for
// the first refusal.
Status ValidatePublishedSlices(
    const std::string& driver, const std::string& node,
    const std::vector<draplugin::SliceDevice>& devices);

// One ResourceSlice as the API server receives it (JSON text): OK, or
// INVALID_ARGUMENT "<field path>: <what>" as the server would refuse it.
Status ValidateResourceSlice(std::string_view slice_json);

}  // namespace topology::testing

#endif  // TOPOLOGY_TESTING_SLICE_VALIDATOR_H_
