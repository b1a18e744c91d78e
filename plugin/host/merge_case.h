// `topology-manager merge`: one JSON merge case in, one JSON result out.
#ifndef TOPOLOGY_HOST_MERGE_CASE_H_
#define TOPOLOGY_HOST_MERGE_CASE_H_

#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "topology/manager/numa_info.h"
#include "topology/manager/policy.h"
#include "topology/status.h"

namespace topology::host {

struct MergeCase {
  std::string policy;
  // Beyond the kubelet: the pod's own policy, applied when `policy` is
  // "dynamic" (none when empty) and ignored under a fixed policy.
  std::string pod_policy;
  std::map<std::string, std::string> options;
  std::vector<int> numa_nodes;
  std::optional<std::map<int, std::vector<int>>> distances;
  std::vector<manager::ProviderHints> providers;
};

// Parses a case. Fails with INVALID_ARGUMENT whose message starts with the
// offending field ("providers[3].gpu[0].mask: ...").
StatusOr<MergeCase> ParseMergeCase(const nlohmann::json& doc);

// Runs the case: {"mask":[...]|null,"preferred":b,"admit":b}, plus
// "explanation" when `explain`. Fails like ParseMergeCase for inputs the
// policy rejects (unknown policy, bad options, missing distances).
StatusOr<nlohmann::json> RunMergeCase(const MergeCase& merge_case,
                                      manager::MergeEngine engine,
                                      bool explain);

}  // namespace topology::host

#endif  // TOPOLOGY_HOST_MERGE_CASE_H_
