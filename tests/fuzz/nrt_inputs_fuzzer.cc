// Fuzzes the exporter's readers of outside text (plugin/nrt/node_inputs.h):
// the kubelet's configuration, the Memory Manager's state file, a
// ResourceSlice list and a DeviceClass list (the first byte chooses). Never
// crashes or hangs; what a reader accepts is within its bounds, and a
// selector it accepts matches a device that has what it asks for.
#include <cstdint>
#include <string_view>

#include "fuzz_check.h"
#include "node_inputs.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string_view text(reinterpret_cast<const char*>(data) + 1,
                              size - 1);
  namespace nrt = topology::nrt;
  switch (data[0] % 4) {
    case 0: {
      const auto settings = nrt::ParseKubeletConfig(text, "fuzz");
      if (settings.ok()) FUZZ_CHECK(settings->max_numa_nodes >= 8);
      break;
    }
    case 1: {
      const auto state = nrt::ParseMemoryManagerState(text, "fuzz");
      if (state.ok()) {
        for (const auto& [id, node] : state->machine) FUZZ_CHECK(id >= 0);
      }
      break;
    }
    case 2: {
      const auto devices = nrt::ParseResourceSlices(text, "node-a");
      if (devices.ok()) {
        for (const auto& device : *devices) {
          FUZZ_CHECK(!device.numa_node || *device.numa_node >= 0);
        }
      }
      break;
    }
    default: {
      const auto classes = nrt::ParseDeviceClasses(text);
      if (classes.ok()) {
        for (const auto& selector : *classes) {
          if (!selector.unsupported.empty()) continue;
          nrt::DraDevice device;
          device.driver = selector.driver.value_or("any.example.com");
          device.attributes = selector.attributes;
          FUZZ_CHECK(nrt::Matches(selector, device));
        }
      }
      break;
    }
  }
  return 0;
}
