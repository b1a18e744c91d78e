// Kubernetes Pod manifests (YAML, one or more documents) as the topology
// manager sees them: containers with their resources.limits, QoS class.
#ifndef TOPOLOGY_HOST_POD_MANIFEST_H_
#define TOPOLOGY_HOST_POD_MANIFEST_H_

#include <string>
#include <string_view>
#include <vector>

#include "topology/manager/pod.h"
#include "topology/status.h"

namespace topology::host {

// Parses every "kind: Pod" document of `text`. uid is metadata.uid when
// given, else "<namespace>/<name>". Limits: "cpu" in millicores ("2",
// "1500m", "0.5"), extended resources ("example.com/gpu": 2) as counts;
// requests default to limits. Guaranteed when every container has cpu and
// memory limits and its requests equal them. Errors name `source`, the
// document and the field path.
StatusOr<std::vector<manager::Pod>> ParsePodManifests(std::string_view text,
                                                      std::string_view source);

// Kubernetes quantity to millicores ("2" -> 2000, "250m" -> 250).
StatusOr<int64_t> ParseCpuQuantity(std::string_view text);

}  // namespace topology::host

#endif  // TOPOLOGY_HOST_POD_MANIFEST_H_
