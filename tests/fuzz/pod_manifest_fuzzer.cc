// Fuzzes the Pod manifest reader of topology-manager: never crashes; every
// error names the source; every pod it accepts has valid UTF-8 names of
// bounded size, non-negative 64-bit limits, and survives a JSON dump (the
// control socket's replies are JSON).
#include <cstdint>
#include <string_view>

#include <nlohmann/json.hpp>

#include "topology/common/text_util.h"

#include "fuzz_check.h"
#include "pod_manifest.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto pods = topology::host::ParsePodManifests(text, "fuzz.yaml");
  if (!pods.ok()) {
    FUZZ_CHECK(pods.status().message().starts_with("fuzz.yaml"));
    // A bounded message, whatever the input size.
    FUZZ_CHECK(pods.status().message().size() < 2048);
    return 0;
  }
  for (const auto& pod : *pods) {
    FUZZ_CHECK(topology::text::IsValidUtf8(pod.name) && !pod.name.empty());
    FUZZ_CHECK(pod.name.size() <= 253);
    FUZZ_CHECK(topology::text::IsValidUtf8(pod.uid));
    for (const auto* list : {&pod.init_containers, &pod.containers}) {
      for (const auto& container : *list) {
        FUZZ_CHECK(topology::text::IsValidUtf8(container.name));
        for (const auto& [resource, quantity] : container.limits) {
          FUZZ_CHECK(quantity >= 0);
          FUZZ_CHECK(topology::text::IsValidUtf8(resource));
        }
      }
    }
    const nlohmann::json out = {{"name", pod.name}, {"uid", pod.uid}};
    FUZZ_CHECK(!out.dump().empty());
  }
  return 0;
}
