// Kubernetes Pod manifests (YAML, one or more documents) as the topology
// manager sees them: containers with their resources.limits, QoS class.
#ifndef TOPOLOGY_HOST_POD_MANIFEST_H_
#define TOPOLOGY_HOST_POD_MANIFEST_H_

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "topology/manager/pod.h"
#include "topology/status.h"

namespace topology::host {

// The annotation that states a pod's own topology policy (beyond the
// kubelet: the Node Topology Manager design's spec.topology.policy, which
// the real Pod API lacks). Honoured by serve under the node policy
// "dynamic".
inline constexpr char kTopologyPolicyAnnotation[] =
    "topology.libtopology.dev/policy";

// A manifest file larger than this is refused, by the command before it is
// sent and by the server (the API server takes at most 3 MiB a request; a
// Pod manifest is a few KiB).
inline constexpr size_t kMaxManifestBytes = size_t{4} << 20;
// All the manifests of one admit call together: below the control socket's
// 16 MiB message limit, with room for the request's framing.
inline constexpr size_t kMaxAdmitRequestBytes = size_t{12} << 20;

// Parses every "kind: Pod" document of `text` (at most kMaxManifestBytes;
// a mapping that gives a key twice is an error, as for the API server). uid is
// metadata.uid when given, else "<namespace>/<name>". Limits: "cpu" in
// millicores ("2", "1500m", "0.5"), "memory" and "hugepages-<size>" in bytes,
// extended resources ("example.com/gpu": 2) as counts; requests default to
// limits. Guaranteed when every container has
// cpu and memory limits and its requests equal them. Errors name `source`, the
// document and the field path. The pod's own topology policy comes from
// spec.topology.policy or the annotation above (unknown values and
// contradicting values are errors naming the pod).
StatusOr<std::vector<manager::Pod>> ParsePodManifests(std::string_view text,
                                                      std::string_view source);

// Kubernetes quantity to millicores ("2" -> 2000, "250m" -> 250).
StatusOr<int64_t> ParseCpuQuantity(std::string_view text);

// A Kubernetes quantity of bytes, exactly ("1Gi", "1.5Gi", "129e6", "100M"),
// as the kubelet's Quantity.AsInt64: INVALID_ARGUMENT naming the text when it
// is not a quantity, negative, not a whole number of bytes ("0.5") or beyond
// int64.
StatusOr<int64_t> ParseByteQuantity(std::string_view text);

}  // namespace topology::host

#endif  // TOPOLOGY_HOST_POD_MANIFEST_H_
