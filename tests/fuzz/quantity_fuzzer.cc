// Fuzzes k8s::Quantity::Parse (capacities, counters and a claim's consumed
// capacity as the API server sends them): never crashes or hangs; a parsed
// quantity prints as plain decimal text that parses back to the same value.
#include <cstdint>
#include <string_view>

#include "topology/common/quantity.h"

#include "fuzz_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const auto quantity = topology::k8s::Quantity::Parse(text);
  if (quantity) {
    const auto again = topology::k8s::Quantity::Parse(quantity->ToString());
    FUZZ_CHECK(again.has_value());
    FUZZ_CHECK(*again == *quantity);
    const auto sum = quantity->Plus(*quantity);
    if (sum && !quantity->negative()) FUZZ_CHECK(*sum >= *quantity);
  }
  return 0;
}
