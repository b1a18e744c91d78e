#include "topology/common/pod_fingerprint.h"

#include <algorithm>
#include <cstdio>

// libxxhash, header-only: nothing to link, for the tree or a consumer.
#define XXH_INLINE_ALL
#include <xxhash.h>

namespace topology::common {
namespace {

constexpr std::string_view kPrefix = "pfp0";
constexpr std::string_view kVersion = "v001";
constexpr size_t kMinimumSumLength = 8;

}  // namespace

void PodFingerprint::Add(std::string_view pod_namespace,
                         std::string_view name) {
  const XXH64_hash_t seed =
      XXH64(pod_namespace.data(), pod_namespace.size(), 0);
  hashes_.push_back(XXH64(name.data(), name.size(), seed));
}

uint64_t PodFingerprint::Sum() const {
  std::vector<uint64_t> sorted = hashes_;
  std::sort(sorted.begin(), sorted.end());
  // Each hash as 8 little-endian bytes, hashed as one input (what feeding
  // them one by one into a streaming xxHash64 gives).
  std::vector<unsigned char> bytes;
  bytes.reserve(sorted.size() * 8);
  for (uint64_t hash : sorted) {
    for (int i = 0; i < 8; ++i) {
      bytes.push_back(static_cast<unsigned char>(hash >> (8 * i)));
    }
  }
  return XXH64(bytes.data(), bytes.size(), 0);
}

std::string PodFingerprint::Sign() const {
  char sum[17];
  std::snprintf(sum, sizeof(sum), "%016llx",
                static_cast<unsigned long long>(Sum()));
  return std::string(kPrefix) + std::string(kVersion) + sum;
}

Status PodFingerprint::Check(std::string_view signature) const {
  const size_t header = kPrefix.size() + kVersion.size();
  if (signature.size() < header + kMinimumSumLength ||
      signature.substr(0, kPrefix.size()) != kPrefix) {
    return InvalidArgumentError("malformed pod fingerprint \"" +
                                std::string(signature.substr(0, 64)) + "\"");
  }
  if (signature.substr(kPrefix.size(), kVersion.size()) != kVersion) {
    return FailedPreconditionError(
        "pod fingerprint version \"" +
        std::string(signature.substr(kPrefix.size(), kVersion.size())) +
        "\" is not " + std::string(kVersion));
  }
  const std::string ours = Sign();
  if (signature.substr(header) != std::string_view(ours).substr(header)) {
    return Status(StatusCode::kAborted,
                  "pod fingerprint mismatch: got " + ours + ", expected " +
                      std::string(signature.substr(0, 64)));
  }
  return OkStatus();
}

}  // namespace topology::common
