// The device plugin framework's private half: one resource's server
// (ResourceServer: its sockets, registration, supervision and calls), the
// gRPC service over it, and the helpers they share. plugin_runner.cc runs
// them; resource_server.cc answers the calls; resource_serving.cc serves
// the sockets and registers them with the kubelet.
#ifndef TOPOLOGY_PLUGIN_SRC_RESOURCE_SERVER_H_
#define TOPOLOGY_PLUGIN_SRC_RESOURCE_SERVER_H_

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <exception>
#include <functional>
#include <map>
#include <mutex>
#include <numeric>
#include <optional>
#include <random>
#include <set>
#include <string_view>
#include <system_error>
#include <thread>
#include <unordered_set>
#include <utility>

#include <glog/logging.h>
#include <grpcpp/grpcpp.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

#include "topology/common/dir_watcher.h"
#include "topology/common/guarded.h"
#include "topology/common/served_socket.h"
#include "topology/common/text_util.h"
#include "topology/common/unix_socket.h"
#include "topology/plugin/plugin_runner.h"
#include "topology/plugin/resource_name.h"
#include "topology/sorted_search.h"
#include "topology/thread_annotations.h"

#include "deviceplugin/v1beta1/api.grpc.pb.h"
#include "grpc_status.h"
#include "list_and_watch.h"
#include "proto_conversion.h"

namespace topology::plugin::internal {

constexpr size_t kMaxIdBytes = 63;
// sun_path holds 108 bytes including the terminating NUL.
constexpr size_t kMaxSocketPath = sizeof(sockaddr_un{}.sun_path) - 1;

inline std::string Slug(std::string_view resource) {
  std::string slug(resource);
  std::replace(slug.begin(), slug.end(), '/', '_');
  return slug;
}

// While another instance serves the resource, how often its socket is
// checked for a server (an instance killed with -9 leaves its file).
constexpr auto kSupersededCheck = std::chrono::seconds(5);

// How long after our socket's deletion a kubelet.sock creation still
// counts as the same kubelet restart.
constexpr std::chrono::seconds kRestartCoalescing(30);

// How long a server being shut down waits for its clients (calls to end,
// the goodbye to be read) before it cancels what is left. A client that
// never reads again costs at most this, once, however many resources and
// sockets the plugin has.
constexpr std::chrono::seconds kShutdownGrace(2);

inline std::chrono::system_clock::time_point GraceEnd() {
  return std::chrono::system_clock::now() + kShutdownGrace;
}

inline std::chrono::milliseconds Remaining(
    std::chrono::system_clock::time_point end) {
  return std::max(std::chrono::milliseconds(0),
                  std::chrono::duration_cast<std::chrono::milliseconds>(
                      end - std::chrono::system_clock::now()));
}

using common::ConnectionCalls;
using common::IsSocket;
using common::Listening;
using common::UnixAcceptor;

// Connections open at once on one socket (the kubelet holds one); a new one
// beyond it closes another (unix_socket.h: idle first, of the peer holding
// the most, its newest), never the newcomer.
constexpr size_t kMaxConnections = 64;

// Runs a vendor's handler: an exception it throws becomes an INTERNAL
// status naming the resource and the call ("<resource>: the Allocate
// handler threw: ..."), through the project's one guard.
template <typename Call>
auto CallHandler(const std::string& resource, const char* rpc, Call&& call)
    -> decltype(call()) {
  return common::CallGuarded(resource + ": the " + rpc + " handler",
                             std::forward<Call>(call));
}

// "a, b, c" for logs, at most a handful of ids.
inline std::string JoinIds(const std::vector<std::string>& ids) {
  constexpr size_t kShown = 8;
  std::string out;
  for (size_t i = 0; i < ids.size() && i < kShown; ++i) {
    out += (i == 0 ? "" : ",") + ids[i];
  }
  if (ids.size() > kShown) {
    out += ",... (" + std::to_string(ids.size()) + " in all)";
  }
  return out;
}

// De-duplicates keeping the first occurrence. Linear when the ids come
// sorted and unique (as the kubelet's and our host's lists usually do).
inline std::vector<std::string> Unique(
    const google::protobuf::RepeatedPtrField<std::string>& ids) {
  std::vector<std::string> out;
  out.reserve(static_cast<size_t>(ids.size()));
  if (std::adjacent_find(ids.begin(), ids.end(), std::greater_equal<>()) ==
      ids.end()) {
    out.assign(ids.begin(), ids.end());
    return out;
  }
  std::unordered_set<std::string_view> seen;
  seen.reserve(static_cast<size_t>(ids.size()));
  for (const std::string& id : ids) {
    if (seen.insert(id).second) out.push_back(id);
  }
  return out;
}

// The ids as sorted views, for binary searches.
inline std::vector<std::string_view> SortedViews(
    const std::vector<std::string>& ids) {
  std::vector<std::string_view> views(ids.begin(), ids.end());
  if (!std::is_sorted(views.begin(), views.end())) {
    std::sort(views.begin(), views.end());
  }
  return views;
}

inline bool Contains(const std::vector<std::string_view>& sorted,
                     std::string_view id) {
  return std::binary_search(sorted.begin(), sorted.end(), id);
}

// Ids in messages: quoted, cut, control characters and bytes that are not
// UTF-8 shown as \xNN (a request's id never forges a log line).
using text::Quoted;

class ResourceServer;

// ListAndWatch is served on the instance's ListAndWatchQueue (raw: the
// lists are sent as kept, encoded), the other methods on the sync server.
// GetPreferredAllocation is served as a streamed unary call: the same wire
// call, but the handler reads the request itself, into an arena. A request
// lists every available device (thousands of ids on an SR-IOV node): gRPC's
// own unary handler would allocate each id on the heap and free each again
// before answering.
class DevicePluginService final
    : public v1beta1::DevicePlugin::
          WithStreamedUnaryMethod_GetPreferredAllocation<
              ListAndWatchQueue::Service> {
 public:
  explicit DevicePluginService(ResourceServer* owner) : owner_(owner) {}

  grpc::Status GetDevicePluginOptions(
      grpc::ServerContext* context, const v1beta1::Empty* request,
      v1beta1::DevicePluginOptions* response) override;
  grpc::Status StreamedGetPreferredAllocation(
      grpc::ServerContext* context,
      grpc::ServerUnaryStreamer<v1beta1::PreferredAllocationRequest,
                                v1beta1::PreferredAllocationResponse>* streamer)
      override;
  grpc::Status Allocate(grpc::ServerContext* context,
                        const v1beta1::AllocateRequest* request,
                        v1beta1::AllocateResponse* response) override;
  grpc::Status PreStartContainer(
      grpc::ServerContext* context,
      const v1beta1::PreStartContainerRequest* request,
      v1beta1::PreStartContainerResponse* response) override;

 private:
  ResourceServer* const owner_;
};

// One socket with its gRPC server.
struct ServingInstance {
  ServingInstance() = default;
  ServingInstance(const ServingInstance&) = delete;
  ServingInstance& operator=(const ServingInstance&) = delete;
  // No new connection, then the server, then its ListAndWatch queue
  // (gRPC's order).
  ~ServingInstance() {
    served.reset();
    if (list_and_watch) list_and_watch->Stop();
  }

  uint64_t id = 0;
  std::string endpoint;
  std::filesystem::path path;
  std::unique_ptr<DevicePluginService> service;
  std::unique_ptr<ListAndWatchQueue> list_and_watch;
  // The server at `path` (served_socket.h).
  std::unique_ptr<common::ServedSocket> served;
};

// One resource's sockets and its registration with the kubelet: an instance
// served per socket (ServedSocket), registration with back-off, serving a
// new socket when ours is removed or the kubelet restarts, standing aside
// while a newer instance of the plugin serves the resource, retirement of
// old sockets, and the stop (resource_serving.cc).
class ResourceRegistrar {
 public:
  // `owner` answers the sockets' calls and keeps the streams; neither it
  // nor `options` is owned.
  ResourceRegistrar(const RunnerOptions& options, ResourceServer* owner,
                    std::string name, std::string instance)
      : options_(options),
        owner_(owner),
        name_(std::move(name)),
        slug_(Slug(name_)),
        instance_(std::move(instance)) {}
  ~ResourceRegistrar() { Stop(); }

  bool registered() const {
    MutexLock lock(state_mu_);
    return registered_;
  }
  std::string endpoint() const {
    MutexLock lock(state_mu_);
    return current_ ? current_->endpoint : std::string();
  }
  // Whether another instance serves this resource now (a newer one
  // registered after us).
  bool superseded() const {
    MutexLock lock(state_mu_);
    return !superseding_.empty();
  }
  // The longest socket path this resource can use.
  std::filesystem::path LongestSocketPath() const {
    return options_.plugin_dir /
           (EndpointPrefix() + instance_ + "-18446744073709551615.sock");
  }
  // What every instance's sockets of this resource start with.
  std::string EndpointPrefix() const {
    return options_.socket_prefix + "-" + slug_ + "-";
  }
  // What this instance's sockets start with.
  std::string OwnPrefix() const { return EndpointPrefix() + instance_ + "-"; }

  Status StartServing();
  void StartSupervisor() {
    supervisor_ = std::thread([this] { Supervise(); });
  }
  void OnDirEvent(const common::DirEvent& event);
  void Stop();
  // Something happened (a stream opened or closed): the supervisor looks.
  void Wake() {
    {
      MutexLock lock(state_mu_);
      ++wakes_;
    }
    wake_.notify_all();
  }

  uint64_t registrations() const { return registrations_.load(); }
  uint64_t registration_failures() const {
    return registration_failures_.load();
  }
  uint64_t server_restarts() const { return server_restarts_.load(); }

 private:
  StatusOr<std::unique_ptr<ServingInstance>> NewInstance();
  // Shuts the instances' servers down, one after the other but under one
  // grace: whatever a client has not finished (or acknowledged) by
  // `grace_end` is cancelled.
  void Retire(std::vector<std::unique_ptr<ServingInstance>> instances,
              std::chrono::system_clock::time_point grace_end);
  Status Register(const std::string& endpoint);
  void Supervise();

  const RunnerOptions& options_;
  ResourceServer* const owner_;
  const std::string name_;
  const std::string slug_;
  // This process's instance of the plugin: "<pid>-<random>", unique per
  // instance even where every instance is pid 1 (containers).
  const std::string instance_;

  mutable Mutex state_mu_;
  std::condition_variable_any wake_;
  std::unique_ptr<ServingInstance> current_ TOPOLOGY_GUARDED_BY(state_mu_);
  std::vector<std::unique_ptr<ServingInstance>> retiring_
      TOPOLOGY_GUARDED_BY(state_mu_);
  uint64_t next_instance_ TOPOLOGY_GUARDED_BY(state_mu_) = 0;
  bool registered_ TOPOLOGY_GUARDED_BY(state_mu_) = false;
  bool restart_requested_ TOPOLOGY_GUARDED_BY(state_mu_) = false;
  // The supervisor is serving a new socket in place of current_ (outside
  // the lock). The deletion of current_'s socket seen meanwhile is the one
  // this replacement answers: it asks for no second one.
  bool replacing_ TOPOLOGY_GUARDED_BY(state_mu_) = false;
  // kubelet.sock was (re)created. A starting kubelet first deletes every
  // socket (ours too) and then creates kubelet.sock: when our socket's
  // deletion already made us serve a new socket shortly before, the
  // creation is the same restart, not another one. One kubelet restart,
  // one new socket, one registration.
  bool kubelet_created_ TOPOLOGY_GUARDED_BY(state_mu_) = false;
  // Sockets of this resource that other instances created after we
  // registered: while any is there, the kubelet uses that instance and this
  // one neither registers again nor counts as registered. When the last
  // goes (the newer instance exited), this one registers again.
  std::set<std::string> superseding_ TOPOLOGY_GUARDED_BY(state_mu_);
  Clock::TimePoint next_liveness_check_ TOPOLOGY_GUARDED_BY(state_mu_);
  std::optional<Clock::TimePoint> deletion_restart_at_
      TOPOLOGY_GUARDED_BY(state_mu_);
  bool stopping_ TOPOLOGY_GUARDED_BY(state_mu_) = false;
  // Counts Wake() calls: a back-off ends early when something happened.
  uint64_t wakes_ TOPOLOGY_GUARDED_BY(state_mu_) = 0;
  Clock::TimePoint registered_at_ TOPOLOGY_GUARDED_BY(state_mu_);
  Clock::TimePoint next_attempt_ TOPOLOGY_GUARDED_BY(state_mu_);
  std::chrono::milliseconds backoff_ TOPOLOGY_GUARDED_BY(state_mu_){0};
  uint64_t failures_in_a_row_ TOPOLOGY_GUARDED_BY(state_mu_) = 0;
  grpc::ClientContext* pending_register_ TOPOLOGY_GUARDED_BY(state_mu_) =
      nullptr;
  std::thread supervisor_;

  std::atomic<uint64_t> registrations_{0};
  std::atomic<uint64_t> registration_failures_{0};
  std::atomic<uint64_t> server_restarts_{0};
};

// One resource: its devices and the kubelet's calls on them (Allocate,
// GetPreferredAllocation, PreStartContainer, ListAndWatch's streams), over
// its registrar's sockets.
class ResourceServer final : public ResourcePublisher {
 public:
  ResourceServer(const RunnerOptions& options, std::string name,
                 std::shared_ptr<ResourceHandler> handler,
                 DevicePluginOptions plugin_options, std::string instance)
      : options_(options),
        name_(std::move(name)),
        handler_(std::move(handler)),
        plugin_options_(plugin_options),
        streams_([this] { registrar_.Wake(); }, options.clock),
        registrar_(options, this, name_, std::move(instance)) {}

  ~ResourceServer() override { Stop(); }

  // ResourcePublisher.
  const std::string& resource_name() const override { return name_; }
  Status SetDevices(std::vector<Device> devices) override;
  std::vector<Device> devices() const override {
    MutexLock lock(devices_mu_);
    return devices_;
  }
  bool registered() const override { return registrar_.registered(); }
  std::string endpoint() const override { return registrar_.endpoint(); }
  ResourceStats stats() const override;
  bool superseded() const override { return registrar_.superseded(); }

  // The registrar's (see above).
  ResourceRegistrar& registrar() { return registrar_; }
  std::filesystem::path LongestSocketPath() const {
    return registrar_.LongestSocketPath();
  }
  std::string EndpointPrefix() const { return registrar_.EndpointPrefix(); }
  Status StartServing() { return registrar_.StartServing(); }
  void StartSupervisor() { registrar_.StartSupervisor(); }
  void OnDirEvent(const common::DirEvent& event) {
    registrar_.OnDirEvent(event);
  }
  // The sockets first, then the streams they served.
  void Stop() { registrar_.Stop(); }

  // Called by the service and the registrar.
  const DevicePluginOptions& plugin_options() const { return plugin_options_; }
  StreamSet& streams() { return streams_; }
  void MarkListed() { listed_.store(true); }
  grpc::Status Allocate(const v1beta1::AllocateRequest& request,
                        v1beta1::AllocateResponse* response);
  grpc::Status GetPreferredAllocation(
      const v1beta1::PreferredAllocationRequest& request,
      v1beta1::PreferredAllocationResponse* response);
  grpc::Status PreStartContainer(
      const v1beta1::PreStartContainerRequest& request);

 private:
  // Fails when an id is unknown (or, with `healthy`, unhealthy).
  Status CheckIds(const std::vector<std::string>& ids, bool healthy) const;

  const RunnerOptions& options_;
  const std::string name_;
  const std::shared_ptr<ResourceHandler> handler_;
  const DevicePluginOptions plugin_options_;

  mutable Mutex devices_mu_;
  std::vector<Device> devices_ TOPOLOGY_GUARDED_BY(devices_mu_);
  // Indexes into devices_ in the order of their ids, for CheckIds.
  std::vector<uint32_t> by_id_ TOPOLOGY_GUARDED_BY(devices_mu_);

  StreamSet streams_;

  std::atomic<bool> listed_{false};  // a ListAndWatch stream was opened
  std::atomic<uint64_t> allocate_calls_{0};
  std::atomic<uint64_t> allocate_errors_{0};
  std::atomic<uint64_t> preferred_calls_{0};
  std::atomic<uint64_t> preferred_errors_{0};
  std::atomic<uint64_t> list_updates_{0};
  LatencyHistogram preferred_latency_;
  // Declared last: its supervisor calls into the members above.
  ResourceRegistrar registrar_;
};

}  // namespace topology::plugin::internal

#endif  // TOPOLOGY_PLUGIN_SRC_RESOURCE_SERVER_H_
