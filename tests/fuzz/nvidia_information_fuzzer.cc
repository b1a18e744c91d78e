// Fuzzes the parser of the NVIDIA driver's /proc/driver/nvidia/gpus/<bdf>/
// information: never crashes; what it accepts is a minor a device node can
// have and a UUID that is safe in an environment variable and a CDI name.
#include <cstdint>
#include <string_view>

#include "fuzz_check.h"
#include "nvidia.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto info = topology::device_plugin::ParseNvidiaGpuInformation(text);
  if (!info.ok()) {
    FUZZ_CHECK(!info.status().message().empty());
    return 0;
  }
  FUZZ_CHECK(info->minor <= 255);
  FUZZ_CHECK(info->uuid.starts_with("GPU-") || info->uuid.starts_with("MIG-"));
  FUZZ_CHECK(info->uuid.size() <= 64);
  for (char c : info->uuid) {
    FUZZ_CHECK(c != ',' && c != '=' && c != '/' && c != ' ' && c != '\n');
  }
  return 0;
}
