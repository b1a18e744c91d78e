// Fuzzes the topology-device-plugin configuration reader: never crashes;
// errors name the source; an accepted configuration has at least one
// resource, each with a valid name and at least one selector.
#include <cstdint>
#include <string_view>

#include "config.h"
#include "fuzz_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto config = topology::device_plugin::ParseConfig(text, "fuzz.yaml");
  if (!config.ok()) {
    FUZZ_CHECK(!config.status().message().empty());
    return 0;
  }
  FUZZ_CHECK(!config->resources.empty());
  for (const auto& resource : config->resources) {
    FUZZ_CHECK(!resource.name.empty());
    FUZZ_CHECK(!resource.selectors.empty());
  }
  return 0;
}
