// The pod set fingerprint a NodeResourceTopology carries for topology-aware
// schedulers (attribute nodeTopologyPodsFingerprint), exactly as
// github.com/k8stopologyawareschedwg/podfingerprint computes it (version
// "v001"): each pod's xxHash64 of its name seeded with the xxHash64 of its
// namespace, the hashes sorted as unsigned 64-bit numbers and fed as 8
// little-endian bytes each into one xxHash64, signed "pfp0" "v001" and the
// sum's 16 hex digits. The scheduler's overreserve cache compares it with
// its own over the same pods; a pod is its namespace and name only.
#ifndef TOPOLOGY_COMMON_POD_FINGERPRINT_H_
#define TOPOLOGY_COMMON_POD_FINGERPRINT_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "topology/status.h"

namespace topology::common {

// The NodeResourceTopology attributes that carry the fingerprint and the
// pods it was computed over.
inline constexpr char kPodFingerprintAttribute[] =
    "nodeTopologyPodsFingerprint";
inline constexpr char kPodFingerprintMethodAttribute[] =
    "nodeTopologyPodsFingerprintMethod";
// Every pod of the node, or only those with exclusive resources.
inline constexpr char kPodFingerprintMethodAll[] = "all";
inline constexpr char kPodFingerprintMethodExclusive[] =
    "with-exclusive-resources";

class PodFingerprint {
 public:
  explicit PodFingerprint(size_t expected_pods = 0) {
    hashes_.reserve(expected_pods);
  }

  void Add(std::string_view pod_namespace, std::string_view name);
  size_t size() const { return hashes_.size(); }

  // "pfp0v001" and the sum's 16 lowercase hex digits.
  std::string Sign() const;
  // OK when `signature` is this pod set's. INVALID_ARGUMENT for a
  // malformed one (shorter than 16 characters, another prefix, a version
  // not 4 characters), FAILED_PRECONDITION for another version, ABORTED
  // naming both when the sums differ: upstream's ErrMalformed,
  // ErrIncompatibleVersion and ErrSignatureMismatch.
  Status Check(std::string_view signature) const;

 private:
  uint64_t Sum() const;

  std::vector<uint64_t> hashes_;
};

}  // namespace topology::common

#endif  // TOPOLOGY_COMMON_POD_FINGERPRINT_H_
