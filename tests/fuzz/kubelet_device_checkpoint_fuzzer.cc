// Fuzzes the reader of the kubelet device manager's checkpoint (what the
// DRA driver reads to taint devices pods still hold through a device
// plugin): never crashes or throws; a refusal is INVALID_ARGUMENT with a
// message; what it accepts has sorted, distinct device ids per entry.
#include <algorithm>
#include <cstdint>
#include <string_view>

#include "topology/common/kubelet_checkpoint.h"

#include "fuzz_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto parsed = topology::kubelet::ParseDeviceCheckpoint(text);
  if (!parsed.ok()) {
    FUZZ_CHECK(parsed.status().code() ==
               topology::StatusCode::kInvalidArgument);
    FUZZ_CHECK(!parsed.status().message().empty());
    return 0;
  }
  for (const auto& entry : *parsed) {
    FUZZ_CHECK(
        std::is_sorted(entry.device_ids.begin(), entry.device_ids.end()));
    FUZZ_CHECK(
        std::adjacent_find(entry.device_ids.begin(), entry.device_ids.end()) ==
        entry.device_ids.end());
  }
  return 0;
}
