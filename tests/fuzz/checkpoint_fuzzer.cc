// Fuzzes the checkpoint reader of topology-manager: never crashes or
// throws; errors say what is wrong; what it accepts encodes again to a
// document that decodes to the same pods (a fixed point after one round).
#include <cstdint>
#include <string_view>

#include "checkpoint.h"
#include "fuzz_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto decoded = topology::host::DecodeCheckpoint(text);
  if (!decoded.ok()) {
    FUZZ_CHECK(decoded.status().code() == topology::StatusCode::kDataLoss);
    FUZZ_CHECK(!decoded.status().message().empty());
    return 0;
  }
  const std::string once = topology::host::EncodeCheckpoint(*decoded);
  auto again = topology::host::DecodeCheckpoint(once);
  FUZZ_CHECK(again.ok());
  FUZZ_CHECK(again->pods.size() == decoded->pods.size());
  FUZZ_CHECK(topology::host::EncodeCheckpoint(*again) == once);
  return 0;
}
