// Fuzzes the DRA framework's reader of a ResourceClaim from the API server:
// never crashes or throws; refusals are INVALID_ARGUMENT (not a claim) or
// FAILED_PRECONDITION (another UID, not allocated, nothing for the driver);
// what it accepts has at least one result, all of the driver.
#include <cstdint>
#include <string_view>

#include "topology/draplugin/kube_client.h"

#include "fuzz_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const std::string driver = "pci.libtopology.dev";
  auto claim = topology::draplugin::ParseResourceClaim(
      text, {"ml", "u-1", "pair"}, driver);
  if (!claim.ok()) {
    FUZZ_CHECK(
        claim.status().code() == topology::StatusCode::kInvalidArgument ||
        claim.status().code() == topology::StatusCode::kFailedPrecondition);
    FUZZ_CHECK(!claim.status().message().empty());
    return 0;
  }
  FUZZ_CHECK(!claim->results.empty());
  for (const auto& result : claim->results) FUZZ_CHECK(result.driver == driver);
  return 0;
}
