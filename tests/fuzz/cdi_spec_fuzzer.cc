// Fuzzes the reader of the CDI specs found on a node (YAML or JSON, what
// nvidia-ctk and other plugins write) and, through it, the writer: a device
// name the writer accepts comes back from the reader as written.
#include <cstdint>
#include <string>
#include <string_view>

#include "topology/common/cdi.h"

#include "fuzz_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto names = topology::common::CdiNamesOf(text);
  if (names.ok()) {
    for (const std::string& name : *names) {
      FUZZ_CHECK(name.find('=') != std::string::npos);
    }
  }
  const std::string_view first_line = text.substr(0, text.find('\n'));
  if (topology::common::ValidateCdiDeviceName(first_line).ok()) {
    topology::common::CdiSpec spec;
    spec.kind = "example.com/fuzz";
    spec.devices.push_back({.name = std::string(first_line),
                            .device_nodes = {{"/dev/x", "/dev/x", "rw"}}});
    auto json = topology::common::CdiSpecJson(spec);
    FUZZ_CHECK(json.ok());
    auto back = topology::common::CdiNamesOf(*json);
    FUZZ_CHECK(back.ok());
    FUZZ_CHECK(back->contains("example.com/fuzz=" + std::string(first_line)));
  }
  return 0;
}
