// Fuzzes the parser of the NVIDIA driver's /proc/driver/nvidia/gpus/<bdf>/
// information: never crashes; what it accepts is a minor a device node can
// have and a UUID that is safe in an environment variable and a CDI name,
// from a text that gives each of them once.
#include <cstdint>
#include <string_view>

#include "fuzz_check.h"
#include "nvidia.h"

namespace {

// Lines whose key (before the first ':', blanks trimmed) is `key`.
int LinesWithKey(std::string_view text, std::string_view key) {
  int count = 0;
  while (!text.empty()) {
    const size_t end = text.find('\n');
    std::string_view line = text.substr(0, end);
    text = end == std::string_view::npos ? std::string_view()
                                         : text.substr(end + 1);
    const size_t colon = line.find(':');
    if (colon == std::string_view::npos) continue;
    line = line.substr(0, colon);
    while (!line.empty() && (line.front() == ' ' || line.front() == '\t' ||
                             line.front() == '\r')) {
      line.remove_prefix(1);
    }
    while (!line.empty() &&
           (line.back() == ' ' || line.back() == '\t' || line.back() == '\r')) {
      line.remove_suffix(1);
    }
    if (line == key) ++count;
  }
  return count;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto info = topology::device_plugin::ParseNvidiaGpuInformation(text);
  if (!info.ok()) {
    FUZZ_CHECK(!info.status().message().empty());
    return 0;
  }
  FUZZ_CHECK(info->minor <= 255);
  FUZZ_CHECK(LinesWithKey(text, "Device Minor") == 1);
  FUZZ_CHECK(LinesWithKey(text, "GPU UUID") == 1);
  FUZZ_CHECK(info->uuid.starts_with("GPU-") || info->uuid.starts_with("MIG-"));
  FUZZ_CHECK(info->uuid.size() <= 64);
  for (char c : info->uuid) {
    FUZZ_CHECK(c != ',' && c != '=' && c != '/' && c != ' ' && c != '\n');
  }
  return 0;
}
