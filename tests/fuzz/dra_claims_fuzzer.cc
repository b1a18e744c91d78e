// Fuzzes the DRA framework's reader of its checkpoint of prepared claims:
// never crashes or throws; errors are DATA_LOSS and say what is wrong; what
// it accepts encodes to a document that decodes to the same claims.
#include <cstdint>
#include <string_view>

#include "topology/draplugin/claim_checkpoint.h"

#include "fuzz_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto decoded = topology::draplugin::DecodeClaims(text);
  if (!decoded.ok()) {
    FUZZ_CHECK(decoded.status().code() == topology::StatusCode::kDataLoss);
    FUZZ_CHECK(!decoded.status().message().empty());
    return 0;
  }
  const std::string once = topology::draplugin::EncodeClaims(*decoded);
  auto again = topology::draplugin::DecodeClaims(once);
  FUZZ_CHECK(again.ok());
  FUZZ_CHECK(again->size() == decoded->size());
  FUZZ_CHECK(topology::draplugin::EncodeClaims(*again) == once);
  return 0;
}
