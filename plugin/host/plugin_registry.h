// The plugin registry: the kubelet's endpoints map (devicemanager's
// manager.go) and its plugin handler (plugin/v1beta1/handler.go) in one
// piece. It checks a Register request, dials the plugin, reads its options,
// keeps one endpoint per resource, retires a replaced endpoint until its
// reader has returned, and removes a resource whose plugin stayed away for
// the grace period. It alone owns endpoints.
//
// What a plugin lists goes straight to the device manager, the only holder
// of device lists; the registry keeps no copy. Changes are reported to its
// owner after the registry's lock is released (the owner journals them).
#ifndef TOPOLOGY_HOST_PLUGIN_REGISTRY_H_
#define TOPOLOGY_HOST_PLUGIN_REGISTRY_H_

#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "topology/clock.h"
#include "topology/manager/device_manager.h"
#include "topology/status.h"
#include "topology/thread_annotations.h"

#include "host_handlers.h"

namespace topology::host {

class PluginEndpoint;

class PluginRegistry final : public RegistrationHandler {
 public:
  struct Options {
    std::filesystem::path plugin_dir = {};
    std::chrono::milliseconds dial_timeout = std::chrono::seconds(10);
    std::chrono::milliseconds rpc_timeout = std::chrono::seconds(30);
    std::chrono::milliseconds grace_period = std::chrono::minutes(5);
    const Clock* clock = &Clock::Real();
  };
  enum class Change {
    kDevices,  // a new list, or every device unhealthy (plugin gone)
    kRemoved,  // the grace period ended: the resource is gone
  };
  // Called without the registry's lock, from the thread that made the
  // change (a plugin's reader, the collector).
  using ChangeCallback =
      std::function<void(const std::string& resource, Change change)>;

  // `devices` must outlive the registry.
  PluginRegistry(Options options, manager::DeviceManager* devices,
                 ChangeCallback on_change);
  ~PluginRegistry();
  PluginRegistry(const PluginRegistry&) = delete;
  PluginRegistry& operator=(const PluginRegistry&) = delete;

  // The kubelet's Register: checks version, resource name and endpoint,
  // dials the plugin (at most dial_timeout) and installs it; errors carry
  // the kubelet's wording, with its status (UNKNOWN for a refused request).
  Status Register(const std::string& version, const std::string& endpoint,
                  const std::string& resource) override TOPOLOGY_EXCLUDES(mu_);

  // A resource known from a checkpoint, whose plugin has not registered
  // yet: capacity 0 until it does, removed after the grace period.
  void AddRestored(const std::string& resource) TOPOLOGY_EXCLUDES(mu_);

  // Starts the collector of resources past their grace period.
  void StartCollector() TOPOLOGY_EXCLUDES(mu_);
  // Refuses further registrations, stops the collector and every endpoint
  // (their streams and calls in flight end), waits (bounded) for their
  // readers, and drops them. Idempotent.
  void Stop() TOPOLOGY_EXCLUDES(mu_);
  // Stops every endpoint without waiting (the first step of Stop(), for a
  // shutdown that must free handlers waiting on plugins first).
  void StopEndpoints() TOPOLOGY_EXCLUDES(mu_);

  // The current endpoint of `resource`, or null.
  std::shared_ptr<PluginEndpoint> Endpoint(const std::string& resource) const
      TOPOLOGY_EXCLUDES(mu_);

  // One resource as the registry sees it.
  struct PluginState {
    std::string resource = {};
    std::string socket = {};  // the plugin's socket; empty without one
    bool connected = false;   // a plugin serves it now
    // Why the last stream ended, or which devices of the last list were
    // refused; empty once a stream delivers a clean list.
    std::string problem = {};
  };
  // Every known resource, by name.
  std::vector<PluginState> Snapshot() const TOPOLOGY_EXCLUDES(mu_);
  std::vector<std::string> Resources() const TOPOLOGY_EXCLUDES(mu_);

 private:
  struct Entry {
    std::shared_ptr<PluginEndpoint> endpoint = {};  // null after a restore
    std::optional<Clock::TimePoint> stopped_since = {};
    std::string problem = {};
    // Registrations are numbered when they arrive; a slower, older one
    // never replaces a newer one that finished first.
    uint64_t installed_registration = 0;
  };

  void OnList(PluginEndpoint* endpoint, std::vector<manager::Device> devices)
      TOPOLOGY_EXCLUDES(mu_);
  void OnEnd(PluginEndpoint* endpoint, const Status& why)
      TOPOLOGY_EXCLUDES(mu_);
  void Collect() TOPOLOGY_EXCLUDES(mu_);
  std::vector<std::shared_ptr<PluginEndpoint>> AllEndpoints() const
      TOPOLOGY_REQUIRES(mu_);

  const Options options_;
  manager::DeviceManager* const devices_;
  const ChangeCallback on_change_;

  mutable Mutex mu_;
  std::map<std::string, Entry> entries_ TOPOLOGY_GUARDED_BY(mu_);
  // Replaced or removed endpoints, kept until their reader has returned.
  std::vector<std::shared_ptr<PluginEndpoint>> retired_
      TOPOLOGY_GUARDED_BY(mu_);
  uint64_t registrations_ TOPOLOGY_GUARDED_BY(mu_) = 0;
  bool stopping_ TOPOLOGY_GUARDED_BY(mu_) = false;
  std::condition_variable_any collector_wake_;
  std::thread collector_;
};

}  // namespace topology::host

#endif  // TOPOLOGY_HOST_PLUGIN_REGISTRY_H_
