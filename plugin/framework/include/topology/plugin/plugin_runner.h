// The device plugin framework: serve one or more extended resources to the
// kubelet over the v1beta1 device plugin API.
//
// A plugin implements ResourceHandler per resource, adds it to a
// PluginRunner and publishes device lists through the returned
// ResourcePublisher. The runner
//   - serves DevicePlugin on a unix socket of its own in the plugin directory
//     before registering, with GetDevicePluginOptions and ListAndWatch usable
//     while its Register call is pending;
//   - registers with kubelet.sock (the same options as GetDevicePluginOptions)
//     and retries with exponential back-off;
//   - watches the directory (inotify): kubelet.sock created or its own socket
//     deleted means a kubelet restart: it serves a fresh socket, re-registers,
//     then retires the old server; it also re-registers when no ListAndWatch
//     stream has been open for a while (the kubelet never reconnects itself);
//   - sends the full device list at once on every ListAndWatch stream and
//     again to every open stream on each change;
//   - checks requests (unknown, unhealthy, duplicate ids, sizes) before the
//     handler sees them, and maps statuses to gRPC in one place.
#ifndef TOPOLOGY_PLUGIN_PLUGIN_RUNNER_H_
#define TOPOLOGY_PLUGIN_PLUGIN_RUNNER_H_

#include <chrono>
#include <cstddef>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "topology/clock.h"
#include "topology/common/daemon.h"
#include "topology/plugin/metrics.h"
#include "topology/plugin/types.h"
#include "topology/status.h"

namespace topology::plugin {

// What a plugin implements for one resource. Calls arrive concurrently from
// gRPC threads; implementations must be thread-safe. An error status or an
// exception thrown by a handler is logged with the resource, the call and the
// device ids, and reaches the kubelet as that status (INTERNAL with the
// exception's what() for a throw).
class ResourceHandler {
 public:
  virtual ~ResourceHandler();

  // Fixed for the life of the handler: sent in RegisterRequest and returned
  // by GetDevicePluginOptions.
  virtual DevicePluginOptions Options() const = 0;

  // Called only when Options() advertises it. Returns exactly
  // `request.size` distinct ids from `available` including every
  // must-include id. Default: UNIMPLEMENTED.
  virtual StatusOr<std::vector<std::string>> GetPreferredAllocation(
      const PreferredAllocationRequest& request);

  // `device_ids` are distinct, known and healthy in the last published list.
  // Must not refuse an id for being in use: the API has no Deallocate.
  virtual StatusOr<ContainerAllocation> Allocate(
      const std::vector<std::string>& device_ids) = 0;

  // `device_ids` are known. Default: OK.
  virtual Status PreStartContainer(const std::vector<std::string>& device_ids);
};

// A valid answer without any preference: the must-include devices, then
// the available ones in order up to the size. For plugins without a cost
// model, and as a fallback when a smarter choice fails.
std::vector<std::string> MustIncludeThenInOrder(
    const PreferredAllocationRequest& request);

struct RunnerOptions {
  // Where kubelet.sock lives and the plugin sockets are created.
  std::filesystem::path plugin_dir = kDefaultPluginDir;
  // Endpoint names are "<prefix>-<resource>-<pid>-<token>-<n>.sock" with
  // '/' in the resource name replaced by '_', <token> 8 random hex digits
  // of this instance (two instances never share a name, even both as pid 1
  // in their containers), n counting the sockets of this instance. An
  // instance deletes no socket but its own and stale ones nobody serves.
  // When another instance creates a socket for the same resource after
  // this one registered (a rollout's new pod), this one stops counting as
  // registered and registers again once that socket is gone.
  std::string socket_prefix = "topology";
  // The <pid>-<token> part of the names; empty: this process's pid and 8
  // random hex digits (set it only to give sockets a known name in tests).
  std::string instance = {};
  // Back-off between failed Register attempts: doubles from initial to max.
  std::chrono::milliseconds initial_backoff{1000};
  std::chrono::milliseconds max_backoff{30000};
  // Deadline of one Register call (the kubelet dials back within it).
  std::chrono::milliseconds register_timeout{30000};
  // Re-register when registered but without an open ListAndWatch stream for
  // this long. Zero disables.
  std::chrono::milliseconds stream_gap{10000};
  // Largest device list message; the kubelet receives at most 4 MiB.
  size_t max_message_bytes = 4u << 20;
  // Time for the back-off, the stream gap and the liveness checks; not
  // owned. Tests give a FakeClock (topology/testing/fake_clock.h).
  const Clock* clock = &Clock::Real();
  // List plugin_dir every second instead of watching it with inotify
  // (kubelet restarts and other instances' sockets are then noticed within
  // a second). The runner does so by itself, with a warning, when no
  // inotify instance or watch can be had: a node whose other daemons used
  // up fs.inotify.max_user_instances starts its plugins all the same.
  bool poll_plugin_dir = false;
};

// The handle through which a plugin publishes one resource's devices.
class ResourcePublisher {
 public:
  virtual ~ResourcePublisher();

  virtual const std::string& resource_name() const = 0;

  // Replaces the device list and streams it in full to every open
  // ListAndWatch stream when it differs from the previous one. Fails with
  // INVALID_ARGUMENT (empty, duplicate or longer than 63 bytes id, negative
  // NUMA node) or RESOURCE_EXHAUSTED (message over max_message_bytes),
  // keeping the previous list.
  virtual Status SetDevices(std::vector<Device> devices) = 0;
  virtual std::vector<Device> devices() const = 0;

  // Whether the last Register call was accepted (and no restart since, and
  // no other instance took the resource over since).
  virtual bool registered() const = 0;
  // Whether another instance of the plugin serves this resource now (see
  // RunnerOptions::socket_prefix); this one registers again when it goes.
  virtual bool superseded() const { return false; }
  // The socket file name currently served ("" before Start).
  virtual std::string endpoint() const = 0;
  virtual ResourceStats stats() const = 0;
};

class PluginRunner {
 public:
  explicit PluginRunner(RunnerOptions options);
  ~PluginRunner();  // Stop()s.
  PluginRunner(const PluginRunner&) = delete;
  PluginRunner& operator=(const PluginRunner&) = delete;

  // Before Start only. Fails on an invalid or duplicate resource name, an
  // invalid initial list or a handler whose Options() throws; failures are
  // also logged.
  StatusOr<ResourcePublisher*> AddResource(
      const std::string& resource_name,
      std::shared_ptr<ResourceHandler> handler,
      std::vector<Device> initial_devices);

  // Checks the directory and socket path lengths, removes stale sockets of
  // earlier runs of the same resources, starts serving and registering.
  // Fails (and serves nothing) when a socket cannot be bound; failures are
  // also logged.
  Status Start();

  // Ends every stream, removes the sockets, joins all threads. Idempotent.
  void Stop();

  std::vector<ResourcePublisher*> resources() const;
  const RunnerOptions& options() const { return options_; }

 private:
  class Impl;
  StatusOr<ResourcePublisher*> AddResourceChecked(
      const std::string& resource_name,
      std::shared_ptr<ResourceHandler> handler,
      std::vector<Device> initial_devices);
  Status StartChecked();

  RunnerOptions options_;
  std::unique_ptr<Impl> impl_;
};

}  // namespace topology::plugin

#endif  // TOPOLOGY_PLUGIN_PLUGIN_RUNNER_H_
