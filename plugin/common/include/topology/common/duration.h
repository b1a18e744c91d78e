// Go-style durations for flags: "1s", "500ms", "1m30s", "2h", "250us".
#ifndef TOPOLOGY_COMMON_DURATION_H_
#define TOPOLOGY_COMMON_DURATION_H_

#include <chrono>
#include <string_view>

#include "topology/status.h"

namespace topology::common {

// Accepts one or more <decimal number><unit> terms with units ns, us (or
// µs), ms, s, m, h, and a bare "0". Fails with INVALID_ARGUMENT naming the
// text on anything else, on negative values and on overflow.
StatusOr<std::chrono::nanoseconds> ParseDuration(std::string_view text);

}  // namespace topology::common

#endif  // TOPOLOGY_COMMON_DURATION_H_
