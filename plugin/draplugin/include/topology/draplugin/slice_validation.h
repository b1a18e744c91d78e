// A resource.k8s.io/v1 ResourceSlice checked by the API server's rules
// (kubernetes pkg/apis/resource/validation/validation.go,
// validateResourceSliceSpec and what it calls), as the API server receives
// it: the JSON a driver sends. The slice publisher checks every slice with
// it before sending, and a vendor's test calls it on what its driver
// publishes (the testing component re-exports it). Thread-safe (pure).
#ifndef TOPOLOGY_DRAPLUGIN_SLICE_VALIDATION_H_
#define TOPOLOGY_DRAPLUGIN_SLICE_VALIDATION_H_

#include <cstddef>
#include <string>
#include <string_view>

#include "topology/status.h"

namespace topology::draplugin {

// The API's limits (k8s.io/api resource/v1 types.go).
inline constexpr size_t kDriverNameMaxLength = 63;  // ValidateCSIDriverName
inline constexpr size_t kPoolNameMaxLength = 253;
inline constexpr size_t kResourceSliceMaxDevices = 128;
// When any device of the slice has taints, consumes counters or has a list
// attribute.
inline constexpr size_t kResourceSliceMaxDevicesWithAdvancedFeatures = 64;
inline constexpr size_t kMaxAttributesAndCapacitiesPerDevice = 32;
inline constexpr size_t kMaxAttributeValuesPerDevice = 48;
inline constexpr size_t kDeviceTaintsMaxLength = 16;
inline constexpr size_t kDeviceAttributeMaxValueLength = 64;
inline constexpr size_t kDeviceMaxIdLength = 32;
// Partitionable devices: counter sets of a slice, counters of a set, a
// device's consumptions and the counters of one.
inline constexpr size_t kResourceSliceMaxCounterSets = 8;
inline constexpr size_t kMaxCountersPerCounterSet = 32;
inline constexpr size_t kMaxCounterConsumptionsPerDevice = 2;
inline constexpr size_t kMaxCountersPerCounterConsumption = 32;

// OK when `driver` is a valid driver name (ValidateCSIDriverName: at most
// 63 characters, a DNS-1123 subdomain once lower-cased); else
// INVALID_ARGUMENT saying why.
Status ValidateDriverName(std::string_view driver);

// OK when `slice_json` is a ResourceSlice the API server accepts as far as
// its spec goes: the driver name; the pool (name of '/'-separated DNS
// subdomains, at most 253 characters, generation >= 0, resourceSliceCount
// > 0); exactly one of nodeName, nodeSelector, allNodes,
// perDeviceNodeSelection; at most 128 devices (64 when one has taints, counters
// or a list attribute), names DNS labels and unique; per device at most 32
// attributes and capacities and 48 attribute values (list items counted),
// attribute and capacity names qualified (a C identifier of at most 32
// characters, with an optional domain that is a valid driver name), each
// attribute exactly one of int, bool, string, version, ints, bools, strings,
// versions (lists not empty, strings at most 64 characters, versions
// semver 2.0.0 of at most 64); at most 16 taints, keys label names, values
// label values, effects NoSchedule, NoExecute or None; counter sets and
// what a device consumes of them (DNS-label names, unique, at most 8 sets
// of 32 counters, 2 consumptions of 32), never beside devices; a request
// policy only on a device that allows multiple allocations, and then as
// validateRequestPolicy has it; a partitionTypeAttribute only on a slice
// whose devices consume counters, each carrying it as a string. Unknown fields
// are ignored, as the server prunes them, so a value under an unknown field
// counts as no value. INVALID_ARGUMENT "<field path>: <what>" for the first
// violation.
Status ValidateResourceSlice(std::string_view slice_json);

}  // namespace topology::draplugin

#endif  // TOPOLOGY_DRAPLUGIN_SLICE_VALIDATION_H_
