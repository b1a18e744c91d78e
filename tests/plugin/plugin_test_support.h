// Shared pieces of the device plugin tests: a scriptable ResourceHandler and
// helpers to build device lists.
#ifndef TOPOLOGY_TESTS_PLUGIN_PLUGIN_TEST_SUPPORT_H_
#define TOPOLOGY_TESTS_PLUGIN_PLUGIN_TEST_SUPPORT_H_

#include <atomic>
#include <mutex>
#include <string>
#include <vector>

#include "topology/plugin/plugin_runner.h"

namespace topology::testing {

// Answers Allocate with one env var and one mount per device, and
// GetPreferredAllocation with the must-include devices then the first
// available ones; options and failures are settable.
class ScriptedHandler : public plugin::ResourceHandler {
 public:
  explicit ScriptedHandler(plugin::DevicePluginOptions options =
                               {.pre_start_required = true,
                                .get_preferred_allocation_available = true})
      : options_(options) {}

  plugin::DevicePluginOptions Options() const override { return options_; }

  StatusOr<std::vector<std::string>> GetPreferredAllocation(
      const plugin::PreferredAllocationRequest& request) override {
    return plugin::MustIncludeThenInOrder(request);
  }

  StatusOr<plugin::ContainerAllocation> Allocate(
      const std::vector<std::string>& ids) override {
    allocate_calls.fetch_add(1);
    plugin::ContainerAllocation allocation;
    std::string joined;
    for (const std::string& id : ids) {
      joined += (joined.empty() ? "" : ",") + id;
      allocation.mounts.push_back(
          {"/run/devices/" + id, "/var/run/" + id, true});
      allocation.devices.push_back({"/dev/" + id, "/dev/" + id, "rw"});
    }
    allocation.envs["DEVICES"] = joined;
    allocation.annotations["example.com/devices"] = joined;
    return allocation;
  }

  Status PreStartContainer(const std::vector<std::string>& ids) override {
    std::lock_guard lock(mu_);
    pre_start_calls.push_back(ids);
    return OkStatus();
  }

  std::atomic<int> allocate_calls{0};
  std::mutex mu_;
  std::vector<std::vector<std::string>> pre_start_calls;

 private:
  plugin::DevicePluginOptions options_;
};

// `count` devices "dev-0".. alternating NUMA nodes 0 and 1.
inline std::vector<plugin::Device> MakeDevices(int count) {
  std::vector<plugin::Device> devices;
  devices.reserve(static_cast<size_t>(count));
  for (int i = 0; i < count; ++i) {
    devices.push_back({.id = "dev-" + std::to_string(i),
                       .health = plugin::Health::kHealthy,
                       .numa_nodes = {i % 2}});
  }
  return devices;
}

}  // namespace topology::testing

#endif  // TOPOLOGY_TESTS_PLUGIN_PLUGIN_TEST_SUPPORT_H_
