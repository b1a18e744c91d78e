// The kubelet side of one registered device plugin: a client on the
// plugin's socket that consumes ListAndWatch on a thread of its own and
// answers the device manager's GetPreferredAllocation and Allocate calls.
#ifndef TOPOLOGY_HOST_PLUGIN_ENDPOINT_H_
#define TOPOLOGY_HOST_PLUGIN_ENDPOINT_H_

#include <atomic>
#include <chrono>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "topology/clock.h"
#include "topology/manager/device_manager.h"
#include "topology/thread_annotations.h"

#include "deviceplugin/v1beta1/api.grpc.pb.h"

namespace topology::host {

// What the plugin said of itself in GetDevicePluginOptions.
struct PluginOptions {
  bool pre_start_required = false;
  bool get_preferred_allocation_available = false;
};

class PluginEndpoint final : public manager::DevicePluginEndpoint {
 public:
  using ListCallback =
      std::function<void(PluginEndpoint*, std::vector<manager::Device>)>;
  // `why` is the stream's end: its status, and for a list over the message
  // limit the limit named ("... a ListAndWatch message is at most 4 MiB").
  using EndCallback = std::function<void(PluginEndpoint*, const Status& why)>;

  // The largest ListAndWatch message accepted: grpc-go's default, which is
  // what the kubelet's client accepts.
  static constexpr int kMaxListBytes = 4 << 20;

  // Dials `socket` (10 s, like the kubelet) and reads the options. Errors
  // carry the kubelet's wording ("failed to dial device plugin: ...",
  // "failed to get device plugin options: ..."). Every later call
  // (GetPreferredAllocation, Allocate) gets `rpc_timeout` as its deadline;
  // PreStartContainer keeps the kubelet's 30 s.
  static StatusOr<std::shared_ptr<PluginEndpoint>> Connect(
      const std::string& resource, const std::filesystem::path& socket,
      std::chrono::milliseconds dial_timeout = std::chrono::seconds(10),
      std::chrono::milliseconds rpc_timeout = std::chrono::seconds(30),
      const Clock* clock = &Clock::Real());

  ~PluginEndpoint() override;

  // Opens the one ListAndWatch stream of this connection, read on a thread
  // of its own that calls `on_list` for every list and `on_end` once.
  // Ownership rule: whoever holds the endpoint keeps a reference until
  // finished(); the destructor then only joins a thread that has returned.
  void Start(ListCallback on_list, EndCallback on_end);
  // The reader has returned (or was never started).
  bool finished() const { return finished_.load(); }
  // Ends the stream, cancels every call in flight, refuses further calls
  // ("has been stopped") and lets the connection close once the last of
  // them has returned. Returns at once.
  void Stop();
  bool stopped() const { return stopped_.load(); }

  const std::string& resource() const { return resource_; }
  const std::filesystem::path& socket() const { return socket_; }
  const PluginOptions& options() const { return options_; }

  // manager::DevicePluginEndpoint.
  bool PreferredAllocationAvailable() const override {
    return options_.get_preferred_allocation_available;
  }
  StatusOr<std::vector<std::string>> GetPreferredAllocation(
      const std::vector<std::string>& available,
      const std::vector<std::string>& must_include, int size) override;
  // The answer is the container's AllocateResponse, serialized.
  StatusOr<std::string> Allocate(
      const std::vector<std::string>& device_ids) override;

  // PreStartContainer with the kubelet's 30 s deadline; OK when the plugin
  // does not require it.
  Status PreStartContainer(const std::vector<std::string>& device_ids);

 private:
  PluginEndpoint(std::string resource, std::filesystem::path socket,
                 std::shared_ptr<grpc::Channel> channel, PluginOptions options,
                 std::chrono::milliseconds rpc_timeout, const Clock* clock);
  Status Stopped() const;
  std::string Timeout(const std::string& call) const;
  using Stub = v1beta1::DevicePlugin::Stub;
  // A call's context, registered so that Stop can cancel it, and the stub
  // to make the call with. UNAVAILABLE when the endpoint is stopped;
  // DEADLINE_EXCEEDED at once while the plugin is unanswering (below).
  StatusOr<std::shared_ptr<Stub>> Track(grpc::ClientContext* context,
                                        std::chrono::milliseconds timeout,
                                        const std::string& call);
  // The call returned; `unanswered`: it ran out of its deadline.
  void Untrack(grpc::ClientContext* context, bool unanswered);
  // Drops this endpoint's hold on the connection, as the kubelet closes
  // its connection to a plugin whose stream ended: the plugin's server
  // then shuts down without waiting for an idle client to read its
  // goodbye (gRPC's poll engine reads a client connection only while a
  // call is on it). Calls in flight keep it until they return.
  void Disconnect() TOPOLOGY_EXCLUDES(mu_);

  const std::string resource_;
  const std::filesystem::path socket_;
  Mutex mu_;
  std::shared_ptr<Stub> stub_
      TOPOLOGY_GUARDED_BY(mu_);  // null once disconnected
  const PluginOptions options_;
  const std::chrono::milliseconds rpc_timeout_;
  const Clock* const clock_;  // for the unanswered pause; not owned
  std::atomic<bool> stopped_{false};
  std::atomic<bool> finished_{true};
  // The stream's context while the reader runs: it too holds the
  // connection.
  std::unique_ptr<grpc::ClientContext> stream_context_ TOPOLOGY_GUARDED_BY(mu_);
  std::thread reader_;
  std::set<grpc::ClientContext*> in_flight_ TOPOLOGY_GUARDED_BY(mu_);
  // Since when the plugin has left a call unanswered until its deadline.
  // Admissions are serial (the kubelet's order): without this, K pods
  // queued behind a hung plugin would hold every later pod, even one that
  // needs nothing from it, for K deadlines. While set, calls fail at once
  // for one `rpc_timeout_`; then one call at a time is tried, and any
  // answer (even an error) clears it.
  std::optional<Clock::TimePoint> unanswered_since_ TOPOLOGY_GUARDED_BY(mu_);
  bool trial_in_flight_ TOPOLOGY_GUARDED_BY(mu_) = false;
};

}  // namespace topology::host

#endif  // TOPOLOGY_HOST_PLUGIN_ENDPOINT_H_
