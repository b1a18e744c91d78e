#include "topology/plugin/plugin_runner.h"

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

#include "topology/plugin/resource_name.h"
#include "topology/sorted_search.h"
#include "topology/thread_annotations.h"

#include "deviceplugin/v1beta1/api.grpc.pb.h"
#include "dir_watcher.h"
#include "grpc_status.h"
#include "list_and_watch.h"
#include "proto_conversion.h"

namespace topology::plugin {

ResourceHandler::~ResourceHandler() = default;
ResourcePublisher::~ResourcePublisher() = default;

StatusOr<std::vector<std::string>> ResourceHandler::GetPreferredAllocation(
    const PreferredAllocationRequest& /*request*/) {
  return Status(StatusCode::kUnimplemented,
                "GetPreferredAllocation is not implemented by this plugin");
}

std::vector<std::string> MustIncludeThenInOrder(
    const PreferredAllocationRequest& request) {
  std::vector<std::string> ids = request.must_include;
  for (const std::string& id : request.available) {
    if (ids.size() >= static_cast<size_t>(request.size)) break;
    if (std::find(ids.begin(), ids.end(), id) == ids.end()) ids.push_back(id);
  }
  return ids;
}

Status ResourceHandler::PreStartContainer(
    const std::vector<std::string>& /*device_ids*/) {
  return OkStatus();
}

void LatencyHistogram::Observe(std::chrono::nanoseconds latency) {
  const double seconds = std::chrono::duration<double>(latency).count();
  size_t bucket = 0;
  while (bucket < kBounds.size() && seconds > kBounds[bucket]) ++bucket;
  buckets_[bucket].fetch_add(1, std::memory_order_relaxed);
  count_.fetch_add(1, std::memory_order_relaxed);
  sum_nanos_.fetch_add(static_cast<uint64_t>(latency.count()),
                       std::memory_order_relaxed);
}

LatencyHistogram::Snapshot LatencyHistogram::Read() const {
  Snapshot snapshot;
  uint64_t running = 0;
  for (size_t i = 0; i < buckets_.size(); ++i) {
    running += buckets_[i].load(std::memory_order_relaxed);
    snapshot.cumulative[i] = running;
  }
  snapshot.count = running;
  snapshot.sum_seconds =
      static_cast<double>(sum_nanos_.load(std::memory_order_relaxed)) / 1e9;
  return snapshot;
}

namespace {

constexpr size_t kMaxIdBytes = 63;
// sun_path holds 108 bytes including the terminating NUL.
constexpr size_t kMaxSocketPath = sizeof(sockaddr_un{}.sun_path) - 1;

std::string Slug(std::string_view resource) {
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

std::chrono::system_clock::time_point GraceEnd() {
  return std::chrono::system_clock::now() + kShutdownGrace;
}

std::chrono::milliseconds Remaining(std::chrono::system_clock::time_point end) {
  return std::max(std::chrono::milliseconds(0),
                  std::chrono::duration_cast<std::chrono::milliseconds>(
                      end - std::chrono::system_clock::now()));
}

bool IsSocket(const std::filesystem::path& path) {
  struct stat info {};
  return lstat(path.c_str(), &info) == 0 && S_ISSOCK(info.st_mode);
}

// True when something accepts connections on the unix socket at `path`.
bool SocketIsLive(const std::filesystem::path& path) {
  const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  const std::string text = path.string();
  if (text.size() > kMaxSocketPath) {
    close(fd);
    return false;
  }
  std::memcpy(address.sun_path, text.c_str(), text.size() + 1);
  const bool live =
      connect(fd, reinterpret_cast<const sockaddr*>(&address),  // NOLINT
              sizeof(address)) == 0;
  close(fd);
  return live;
}

// Runs a vendor's handler: an exception it throws becomes an INTERNAL
// status naming the resource and the call (gRPC would otherwise answer the
// kubelet with a bare "Unexpected error in RPC handling" and log nothing).
template <typename Call>
auto CallHandler(const std::string& resource, const char* rpc, Call&& call)
    -> decltype(call()) {
  try {
    return call();
  } catch (const std::exception& e) {
    return InternalError(resource + ": the " + rpc +
                         " handler threw: " + e.what());
  } catch (...) {
    return InternalError(resource + ": the " + rpc +
                         " handler threw a non-standard exception");
  }
}

// "a, b, c" for logs, at most a handful of ids.
std::string JoinIds(const std::vector<std::string>& ids) {
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
std::vector<std::string> Unique(
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
std::vector<std::string_view> SortedViews(const std::vector<std::string>& ids) {
  std::vector<std::string_view> views(ids.begin(), ids.end());
  if (!std::is_sorted(views.begin(), views.end())) {
    std::sort(views.begin(), views.end());
  }
  return views;
}

bool Contains(const std::vector<std::string_view>& sorted,
              std::string_view id) {
  return std::binary_search(sorted.begin(), sorted.end(), id);
}

std::string Quoted(std::string_view id) {
  constexpr size_t kShown = 80;
  std::string out = "\"";
  out += id.substr(0, kShown);
  if (id.size() > kShown) out += "...";
  out += "\"";
  return out;
}

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
  // The server first, then its ListAndWatch queue (gRPC's order).
  ~ServingInstance() {
    if (server) server->Shutdown();
    if (list_and_watch) list_and_watch->Stop();
  }

  uint64_t id = 0;
  std::string endpoint;
  std::filesystem::path path;
  std::unique_ptr<DevicePluginService> service;
  std::unique_ptr<ListAndWatchQueue> list_and_watch;
  std::unique_ptr<grpc::Server> server;
};

class ResourceServer final : public ResourcePublisher {
 public:
  ResourceServer(const RunnerOptions& options, std::string name,
                 std::shared_ptr<ResourceHandler> handler,
                 DevicePluginOptions plugin_options, std::string instance)
      : options_(options),
        name_(std::move(name)),
        slug_(Slug(name_)),
        instance_(std::move(instance)),
        handler_(std::move(handler)),
        plugin_options_(plugin_options),
        streams_([this] { Wake(); }, options.clock) {}

  ~ResourceServer() override { Stop(); }

  // ResourcePublisher.
  const std::string& resource_name() const override { return name_; }
  Status SetDevices(std::vector<Device> devices) override;
  std::vector<Device> devices() const override {
    MutexLock lock(devices_mu_);
    return devices_;
  }
  bool registered() const override {
    MutexLock lock(state_mu_);
    return registered_;
  }
  std::string endpoint() const override {
    MutexLock lock(state_mu_);
    return current_ ? current_->endpoint : std::string();
  }
  ResourceStats stats() const override;

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
  // Whether another instance serves this resource now (a newer one
  // registered after us).
  bool superseded() const override {
    MutexLock lock(state_mu_);
    return !superseding_.empty();
  }

  Status StartServing();
  void StartSupervisor() {
    supervisor_ = std::thread([this] { Supervise(); });
  }
  void OnDirEvent(const DirEvent& event);
  void Stop();

  // Called by the service.
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
  StatusOr<std::unique_ptr<ServingInstance>> NewInstance();
  // Shuts the instances' servers down, one after the other but under one
  // grace: whatever a client has not finished (or acknowledged) by
  // `grace_end` is cancelled.
  void Retire(std::vector<std::unique_ptr<ServingInstance>> instances,
              std::chrono::system_clock::time_point grace_end);
  Status Register(const std::string& endpoint);
  void Supervise();
  void Wake() {
    {
      MutexLock lock(state_mu_);
      ++wakes_;
    }
    wake_.notify_all();
  }
  // Fails when an id is unknown (or, with `healthy`, unhealthy).
  Status CheckIds(const std::vector<std::string>& ids, bool healthy) const;

  const RunnerOptions& options_;
  const std::string name_;
  const std::string slug_;
  // This process's instance of the plugin: "<pid>-<random>", unique per
  // instance even where every instance is pid 1 (containers).
  const std::string instance_;
  const std::shared_ptr<ResourceHandler> handler_;
  const DevicePluginOptions plugin_options_;

  mutable Mutex devices_mu_;
  std::vector<Device> devices_ TOPOLOGY_GUARDED_BY(devices_mu_);
  // Indexes into devices_ in the order of their ids, for CheckIds.
  std::vector<uint32_t> by_id_ TOPOLOGY_GUARDED_BY(devices_mu_);

  StreamSet streams_;

  mutable Mutex state_mu_;
  std::condition_variable_any wake_;
  std::unique_ptr<ServingInstance> current_ TOPOLOGY_GUARDED_BY(state_mu_);
  std::vector<std::unique_ptr<ServingInstance>> retiring_
      TOPOLOGY_GUARDED_BY(state_mu_);
  uint64_t next_instance_ TOPOLOGY_GUARDED_BY(state_mu_) = 0;
  bool registered_ TOPOLOGY_GUARDED_BY(state_mu_) = false;
  bool restart_requested_ TOPOLOGY_GUARDED_BY(state_mu_) = false;
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

  std::atomic<bool> listed_{false};  // a ListAndWatch stream was opened
  std::atomic<uint64_t> registrations_{0};
  std::atomic<uint64_t> registration_failures_{0};
  std::atomic<uint64_t> server_restarts_{0};
  std::atomic<uint64_t> allocate_calls_{0};
  std::atomic<uint64_t> allocate_errors_{0};
  std::atomic<uint64_t> preferred_calls_{0};
  std::atomic<uint64_t> preferred_errors_{0};
  std::atomic<uint64_t> list_updates_{0};
  LatencyHistogram preferred_latency_;
};

Status ValidateDevices(const std::vector<Device>& devices) {
  std::set<std::string_view> seen;
  for (size_t i = 0; i < devices.size(); ++i) {
    const Device& device = devices[i];
    const std::string where = "device " + std::to_string(i);
    if (device.id.empty()) return InvalidArgumentError(where + ": empty id");
    if (device.id.size() > kMaxIdBytes) {
      return InvalidArgumentError(where + ": id " + Quoted(device.id) +
                                  " is longer than 63 bytes");
    }
    if (!seen.insert(device.id).second) {
      return InvalidArgumentError(where + ": id " + Quoted(device.id) +
                                  " appears twice");
    }
    for (int64_t node : device.numa_nodes) {
      if (node < 0) {
        return InvalidArgumentError(where + " (" + device.id +
                                    "): negative NUMA node " +
                                    std::to_string(node));
      }
    }
  }
  return OkStatus();
}

Status ResourceServer::SetDevices(std::vector<Device> devices) {
  Status valid = ValidateDevices(devices);
  if (!valid.ok()) return valid.WithContext(name_);
  ListMessage message;
  {
    // The message lives only to be encoded: on an arena, in a few blocks
    // instead of four allocations per device.
    google::protobuf::Arena arena;
    auto* response =
        google::protobuf::Arena::CreateMessage<v1beta1::ListAndWatchResponse>(
            &arena);
    ToProto(devices, response);
    const size_t bytes = response->ByteSizeLong();
    if (bytes > options_.max_message_bytes) {
      return ResourceExhaustedError(
          name_ + ": the list of " + std::to_string(devices.size()) +
          " devices encodes to " + std::to_string(bytes) +
          " bytes, more than the kubelet receives (" +
          std::to_string(options_.max_message_bytes) + ")");
    }
    message = EncodeList(*response);
    if (!message) {
      return InternalError(name_ + ": cannot encode the list of " +
                           std::to_string(devices.size()) + " devices");
    }
  }
  MutexLock lock(devices_mu_);
  const bool first = !streams_.latest();
  if (!first && devices == devices_) return OkStatus();
  devices_ = std::move(devices);
  devices_.shrink_to_fit();
  by_id_.resize(devices_.size());
  std::iota(by_id_.begin(), by_id_.end(), 0);
  // (The lambdas see the list through a pointer taken under the lock.)
  const Device* const listed = devices_.data();
  std::sort(by_id_.begin(), by_id_.end(), [listed](uint32_t a, uint32_t b) {
    return listed[a].id < listed[b].id;
  });
  if (!first) {
    list_updates_.fetch_add(1);
    VLOG(1) << name_ << ": streaming " << devices_.size() << " devices to "
            << streams_.size() << " ListAndWatch stream(s)";
  }
  streams_.Publish(message);
  return OkStatus();
}

ResourceStats ResourceServer::stats() const {
  ResourceStats stats;
  stats.registrations = registrations_.load();
  stats.registration_failures = registration_failures_.load();
  stats.server_restarts = server_restarts_.load();
  stats.allocate_calls = allocate_calls_.load();
  stats.allocate_errors = allocate_errors_.load();
  stats.preferred_calls = preferred_calls_.load();
  stats.preferred_errors = preferred_errors_.load();
  stats.list_updates = list_updates_.load();
  stats.open_streams = streams_.size();
  stats.preferred_latency = preferred_latency_.Read();
  return stats;
}

Status ResourceServer::CheckIds(const std::vector<std::string>& ids,
                                bool healthy) const {
  MutexLock lock(devices_mu_);
  // Ids in ascending order (what this project's host sends) are found in
  // one walk along the index; others by binary search each (the kubelet
  // sends a Go set's order).
  const bool ascending = std::is_sorted(ids.begin(), ids.end());
  const Device* const listed = devices_.data();
  const auto before = [listed](uint32_t index, const std::string& wanted) {
    return listed[index].id < wanted;
  };
  auto from = by_id_.begin();
  for (const std::string& id : ids) {
    const auto it =
        ascending ? GallopLowerBound(from, by_id_.end(), id, before)
                  : std::lower_bound(by_id_.begin(), by_id_.end(), id, before);
    from = it;
    if (it == by_id_.end() || devices_[*it].id != id) {
      return InvalidArgumentError("unknown device " + Quoted(id) + " for " +
                                  name_);
    }
    if (healthy && devices_[*it].health != Health::kHealthy) {
      return InvalidArgumentError("device " + Quoted(id) + " of " + name_ +
                                  " is unhealthy");
    }
  }
  return OkStatus();
}

Status CheckAllocation(const ContainerAllocation& allocation) {
  for (const auto& [key, value] : allocation.envs) {
    if (key.empty())
      return InternalError("the plugin returned an empty env name");
  }
  for (const auto& [key, value] : allocation.annotations) {
    if (key.empty()) {
      return InternalError("the plugin returned an empty annotation key");
    }
  }
  for (const DeviceNode& node : allocation.devices) {
    if (node.permissions.find_first_not_of("rwm") != std::string::npos) {
      return InternalError("device node " + node.host_path +
                           " has permissions \"" + node.permissions +
                           "\" outside r, w, m");
    }
  }
  return OkStatus();
}

grpc::Status ResourceServer::Allocate(const v1beta1::AllocateRequest& request,
                                      v1beta1::AllocateResponse* response) {
  for (const auto& container : request.container_requests()) {
    allocate_calls_.fetch_add(1);
    std::vector<std::string> ids = Unique(container.devices_ids());
    if (ids.empty()) {
      // Nothing to set up: a well-formed, empty answer (no handler call,
      // so no environment variable with an empty list).
      response->add_container_responses();
      continue;
    }
    Status status =
        listed_.load()
            ? CheckIds(ids, /*healthy=*/true)
            : FailedPreconditionError(
                  "Allocate of " + name_ +
                  " before any ListAndWatch: no device has been offered yet");
    StatusOr<ContainerAllocation> allocation =
        status.ok() ? CallHandler(name_, "Allocate",
                                  [&] { return handler_->Allocate(ids); })
                    : StatusOr<ContainerAllocation>(status);
    if (allocation.ok()) {
      status = CheckAllocation(*allocation);
    } else {
      status = allocation.status();
    }
    if (!status.ok()) {
      allocate_errors_.fetch_add(1);
      LOG(WARNING) << name_ << ": Allocate of " << JoinIds(ids)
                   << " refused: " << status.ToString();
      response->Clear();
      return ToGrpcStatus(status);
    }
    ToProto(*allocation, response->add_container_responses());
    VLOG(2) << name_ << ": allocated " << ids.size() << " device(s)";
  }
  if (const size_t bytes = response->ByteSizeLong();
      bytes > options_.max_message_bytes) {
    allocate_errors_.fetch_add(1);
    response->Clear();
    const Status status = ResourceExhaustedError(
        name_ + ": the Allocate response encodes to " + std::to_string(bytes) +
        " bytes, more than the kubelet receives (" +
        std::to_string(options_.max_message_bytes) + ")");
    LOG(WARNING) << status.message();
    return ToGrpcStatus(status);
  }
  return grpc::Status::OK;
}

// `available` is request.available as SortedViews.
Status CheckPreferredRequest(PreferredAllocationRequest& request,
                             const std::vector<std::string_view>& available) {
  if (request.size <= 0) {
    return InvalidArgumentError(
        "allocation_size " + std::to_string(request.size) + " is not positive");
  }
  const auto size = static_cast<size_t>(request.size);
  if (size > request.available.size()) {
    return InvalidArgumentError(
        "allocation_size " + std::to_string(size) + " exceeds the " +
        std::to_string(request.available.size()) + " available devices");
  }
  if (size < request.must_include.size()) {
    return InvalidArgumentError(
        "allocation_size " + std::to_string(size) + " is smaller than the " +
        std::to_string(request.must_include.size()) + " must-include devices");
  }
  for (const std::string& id : request.must_include) {
    if (!Contains(available, id)) {
      return InvalidArgumentError("must-include device " + Quoted(id) +
                                  " is not available");
    }
  }
  return OkStatus();
}

Status CheckPreferredAnswer(const PreferredAllocationRequest& request,
                            const std::vector<std::string_view>& available,
                            const std::vector<std::string>& answer) {
  if (answer.size() != static_cast<size_t>(request.size)) {
    return InternalError("the plugin chose " + std::to_string(answer.size()) +
                         " devices instead of " + std::to_string(request.size));
  }
  const std::vector<std::string_view> chosen = SortedViews(answer);
  for (const std::string& id : answer) {
    if (!Contains(available, id)) {
      return InternalError("the plugin chose " + Quoted(id) +
                           ", which is not available or chosen twice");
    }
  }
  if (auto twice = std::adjacent_find(chosen.begin(), chosen.end());
      twice != chosen.end()) {
    return InternalError("the plugin chose " + Quoted(*twice) +
                         ", which is not available or chosen twice");
  }
  for (const std::string& id : request.must_include) {
    if (!Contains(chosen, id)) {
      return InternalError("the plugin left out must-include " + Quoted(id));
    }
  }
  return OkStatus();
}

grpc::Status ResourceServer::GetPreferredAllocation(
    const v1beta1::PreferredAllocationRequest& request,
    v1beta1::PreferredAllocationResponse* response) {
  if (!plugin_options_.get_preferred_allocation_available) {
    return grpc::Status(
        grpc::StatusCode::UNIMPLEMENTED,
        "GetPreferredAllocation is not advertised by the " + name_ + " plugin");
  }
  const auto start = std::chrono::steady_clock::now();
  for (const auto& container : request.container_requests()) {
    preferred_calls_.fetch_add(1);
    PreferredAllocationRequest plain{
        .available = Unique(container.available_deviceids()),
        .must_include = Unique(container.must_include_deviceids()),
        .size = container.allocation_size()};
    const std::vector<std::string_view> available =
        SortedViews(plain.available);
    Status status = CheckIds(plain.available, /*healthy=*/false);
    if (status.ok()) status = CheckPreferredRequest(plain, available);
    StatusOr<std::vector<std::string>> answer =
        status.ok()
            ? CallHandler(
                  name_, "GetPreferredAllocation",
                  [&] { return handler_->GetPreferredAllocation(plain); })
            : StatusOr<std::vector<std::string>>(status);
    if (answer.ok()) {
      status = CheckPreferredAnswer(plain, available, *answer);
    } else {
      status = answer.status();
    }
    if (!status.ok()) {
      preferred_errors_.fetch_add(1);
      LOG(WARNING) << name_
                   << ": GetPreferredAllocation refused: " << status.ToString();
      response->Clear();
      return ToGrpcStatus(status);
    }
    auto* out = response->add_container_responses();
    for (std::string& id : *answer) out->add_deviceids(std::move(id));
  }
  preferred_latency_.Observe(std::chrono::steady_clock::now() - start);
  return grpc::Status::OK;
}

grpc::Status ResourceServer::PreStartContainer(
    const v1beta1::PreStartContainerRequest& request) {
  std::vector<std::string> ids = Unique(request.devices_ids());
  Status status = CheckIds(ids, /*healthy=*/false);
  if (status.ok()) {
    status = CallHandler(name_, "PreStartContainer",
                         [&] { return handler_->PreStartContainer(ids); });
  }
  if (!status.ok()) {
    LOG(WARNING) << name_ << ": PreStartContainer of " << JoinIds(ids)
                 << " failed: " << status.ToString();
  }
  return ToGrpcStatus(status);
}

StatusOr<std::unique_ptr<ServingInstance>> ResourceServer::NewInstance() {
  auto instance = std::make_unique<ServingInstance>();
  {
    MutexLock lock(state_mu_);
    instance->id = next_instance_++;
  }
  instance->endpoint = OwnPrefix() + std::to_string(instance->id) + ".sock";
  instance->path = options_.plugin_dir / instance->endpoint;
  // Never another instance's: the name holds this instance's random token,
  // so a file already there is not ours to delete.
  std::error_code ignored;
  if (std::filesystem::symlink_status(instance->path, ignored).type() !=
      std::filesystem::file_type::not_found) {
    return FailedPreconditionError(instance->path.string() +
                                   " exists and is not this instance's");
  }

  instance->service = std::make_unique<DevicePluginService>(this);
  grpc::ServerBuilder builder;
  int bound = 0;
  builder.AddListeningPort("unix:" + instance->path.string(),
                           grpc::InsecureServerCredentials(), &bound);
  builder.RegisterService(instance->service.get());
  builder.SetSyncServerOption(grpc::ServerBuilder::SyncServerOption::NUM_CQS,
                              1);
  builder.SetSyncServerOption(
      grpc::ServerBuilder::SyncServerOption::MIN_POLLERS, 1);
  builder.SetSyncServerOption(
      grpc::ServerBuilder::SyncServerOption::MAX_POLLERS, 2);
  std::unique_ptr<grpc::ServerCompletionQueue> cq =
      builder.AddCompletionQueue();
  instance->server = builder.BuildAndStart();
  instance->list_and_watch = std::make_unique<ListAndWatchQueue>(
      instance->service.get(), std::move(cq), &streams_, instance->id,
      [this] { MarkListed(); });
  if (!instance->server || bound == 0) {
    if (instance->server) instance->server->Shutdown();
    return FailedPreconditionError("cannot serve " + name_ + " on " +
                                   instance->path.string() +
                                   " (is the directory writable?)");
  }
  // Only the kubelet (root) connects; whatever the umask.
  if (chmod(instance->path.c_str(), 0600) != 0 && IsSocket(instance->path)) {
    instance->server->Shutdown();
    return FailedPreconditionError("cannot set the mode of " +
                                   instance->path.string());
  }
  instance->list_and_watch->Start();
  return instance;
}

Status ResourceServer::StartServing() {
  StatusOr<std::unique_ptr<ServingInstance>> instance = NewInstance();
  if (!instance.ok()) return instance.status();
  // A socket removed right after binding (a kubelet or topology-manager
  // starting at the same moment deletes every socket in the directory) is
  // not a reason to exit: the supervisor serves a new one before it
  // registers.
  LOG(INFO) << name_ << ": serving on " << (*instance)->path.string();
  MutexLock lock(state_mu_);
  current_ = std::move(*instance);
  backoff_ = options_.initial_backoff;
  next_attempt_ = options_.clock->Now();
  return OkStatus();
}

void ResourceServer::Retire(
    std::vector<std::unique_ptr<ServingInstance>> instances,
    std::chrono::system_clock::time_point grace_end) {
  const grpc::Status superseded(grpc::StatusCode::UNAVAILABLE,
                                "the device plugin moved to a new socket");
  for (auto& instance : instances) {
    streams_.Close(instance->id, superseded);
    instance->server->Shutdown(grace_end);
    instance->server->Wait();
    instance->list_and_watch->Stop();
    streams_.WaitClosed(instance->id, Remaining(grace_end));
    std::error_code ignored;
    if (IsSocket(instance->path))
      std::filesystem::remove(instance->path, ignored);
    VLOG(1) << name_ << ": retired " << instance->endpoint;
  }
}

Status ResourceServer::Register(const std::string& endpoint) {
  const std::filesystem::path kubelet = options_.plugin_dir / kKubeletSocket;
  auto channel = grpc::CreateChannel("unix:" + kubelet.string(),
                                     grpc::InsecureChannelCredentials());
  auto stub = v1beta1::Registration::NewStub(channel);
  v1beta1::RegisterRequest request;
  request.set_version(kApiVersion);
  request.set_endpoint(endpoint);
  request.set_resource_name(name_);
  *request.mutable_options() = ToProto(plugin_options_);
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() +
                       options_.register_timeout);
  {
    MutexLock lock(state_mu_);
    if (stopping_) return Status(StatusCode::kCancelled, "stopping");
    // Our socket was deleted since the supervisor picked this endpoint.
    if (restart_requested_) {
      return Status(StatusCode::kCancelled, "socket replaced");
    }
    pending_register_ = &context;
  }
  v1beta1::Empty reply;
  const grpc::Status status = stub->Register(&context, request, &reply);
  {
    MutexLock lock(state_mu_);
    pending_register_ = nullptr;
  }
  return FromGrpcStatus(status);
}

void ResourceServer::OnDirEvent(const DirEvent& event) {
  MutexLock lock(state_mu_);
  if (stopping_) return;
  if (event.kind == DirEvent::Kind::kCreated && event.name == kKubeletSocket) {
    kubelet_created_ = true;
  } else if (event.name.starts_with(EndpointPrefix()) &&
             !event.name.starts_with(OwnPrefix()) &&
             event.name.ends_with(".sock")) {
    // Another instance's socket for this resource (a rollout's new pod, a
    // second DaemonSet, a manual run).
    if (event.kind == DirEvent::Kind::kCreated) {
      if (!registered_ && superseding_.empty()) return;  // it is the older
      if (superseding_.empty()) {
        next_liveness_check_ = options_.clock->Now() + kSupersededCheck;
      }
      if (superseding_.insert(event.name).second) {
        LOG(INFO) << name_ << ": another instance serves " << event.name
                  << "; the kubelet uses it once it registers, and this "
                     "instance registers again when it is gone";
      }
      registered_ = false;
      ++wakes_;
      wake_.notify_all();  // the supervisor now checks that socket
      return;
    }
    // Gone: if it was what the kubelet used (the newer instance, or the
    // last to register after a kubelet restart), nothing serves the
    // resource any more. Registering again costs one call when it was not.
    superseding_.erase(event.name);
    if (!superseding_.empty() || restart_requested_) return;
    LOG(INFO) << name_ << ": another instance's socket " << event.name
              << " is gone; registering again";
    registered_ = false;
    next_attempt_ = options_.clock->Now();
    backoff_ = options_.initial_backoff;
  } else if (event.kind == DirEvent::Kind::kDeleted && current_ &&
             event.name == current_->endpoint && !IsSocket(current_->path)) {
    // (A delete of a leftover file at our path before binding is not ours:
    // our socket still exists then.)
    LOG(INFO) << name_ << ": socket " << event.name
              << " was deleted (kubelet restart); serving a new socket";
    restart_requested_ = true;
    deletion_restart_at_ = options_.clock->Now();
    // A Register of the deleted socket in flight would only make the
    // kubelet wait for its dial timeout: give it up now.
    if (pending_register_ != nullptr) pending_register_->TryCancel();
  } else {
    return;
  }
  ++wakes_;
  wake_.notify_all();
}

void ResourceServer::Supervise() {
  MutexLock lock(state_mu_);
  while (!stopping_) {
    if (kubelet_created_) {
      kubelet_created_ = false;
      const bool same_restart =
          deletion_restart_at_ &&
          options_.clock->Now() - *deletion_restart_at_ < kRestartCoalescing;
      if (same_restart && restart_requested_) {
        // The pending restart covers it.
      } else if (same_restart && current_ && IsSocket(current_->path)) {
        if (!registered_) {
          VLOG(1) << name_ << ": kubelet.sock is back; registering now";
          next_attempt_ = options_.clock->Now();
          backoff_ = options_.initial_backoff;
        }
      } else {
        LOG(INFO) << name_ << ": kubelet.sock was created (kubelet restart); "
                  << "serving a new socket and registering again";
        restart_requested_ = true;
      }
    }
    if (!restart_requested_ && current_ && !IsSocket(current_->path)) {
      // Our socket is gone (a kubelet's start-up cleanup, perhaps before
      // the watch saw it): registering it would only fail.
      LOG(INFO) << name_ << ": socket " << current_->endpoint
                << " is gone; serving a new socket";
      restart_requested_ = true;
      deletion_restart_at_ = options_.clock->Now();
    }
    if (restart_requested_) {
      restart_requested_ = false;
      lock.unlock();
      StatusOr<std::unique_ptr<ServingInstance>> instance = NewInstance();
      lock.lock();
      if (stopping_) {
        if (instance.ok()) {
          lock.unlock();
          std::vector<std::unique_ptr<ServingInstance>> one;
          one.push_back(std::move(*instance));
          Retire(std::move(one), GraceEnd());
          lock.lock();
        }
        break;
      }
      if (!instance.ok()) {
        LOG(ERROR) << name_ << ": " << instance.status().message()
                   << "; trying again in " << backoff_.count() << " ms";
        restart_requested_ = true;
        // Until the back-off ends, or something happens (a Wake()).
        const auto retry_at = options_.clock->Now() + backoff_;
        const uint64_t wakes = wakes_;
        while (!stopping_ && wakes_ == wakes &&
               options_.clock->Now() < retry_at) {
          options_.clock->WaitUntil(wake_, lock, retry_at);
        }
        backoff_ = std::min(backoff_ * 2, options_.max_backoff);
        continue;
      }
      server_restarts_.fetch_add(1);
      LOG(INFO) << name_ << ": serving on " << (*instance)->path.string();
      if (current_) retiring_.push_back(std::move(current_));
      current_ = std::move(*instance);
      registered_ = false;
      backoff_ = options_.initial_backoff;
      next_attempt_ = options_.clock->Now();
      continue;
    }

    if (!superseding_.empty() &&
        options_.clock->Now() >= next_liveness_check_) {
      // A newer instance that died without removing its socket would keep
      // this one silent for good: drop what nobody serves (outside the lock:
      // it connects).
      const std::vector<std::string> others(superseding_.begin(),
                                            superseding_.end());
      lock.unlock();
      std::vector<std::string> dead;
      for (const std::string& other : others) {
        if (!SocketIsLive(options_.plugin_dir / other)) dead.push_back(other);
      }
      lock.lock();
      if (stopping_) break;
      next_liveness_check_ = options_.clock->Now() + kSupersededCheck;
      for (const std::string& other : dead) superseding_.erase(other);
      if (superseding_.empty() && !dead.empty()) {
        LOG(INFO) << name_ << ": the other instance's socket " << dead.front()
                  << " is served by nobody; registering again";
        next_attempt_ = options_.clock->Now();
      }
      continue;
    }

    const auto now = options_.clock->Now();
    if (!registered_ && superseding_.empty() && now >= next_attempt_) {
      const std::string endpoint = current_->endpoint;
      lock.unlock();
      const Status status = Register(endpoint);
      lock.lock();
      if (stopping_) break;
      if (restart_requested_) continue;
      if (status.ok()) {
        failures_in_a_row_ = 0;
        registered_ = true;
        registered_at_ = options_.clock->Now();
        backoff_ = options_.initial_backoff;
        // Counted once dated: whoever sees the count sees the stream gap
        // measured from this registration.
        registrations_.fetch_add(1);
        LOG(INFO) << name_ << ": registered endpoint " << endpoint
                  << " with the kubelet";
        if (!retiring_.empty()) {
          auto old = std::move(retiring_);
          retiring_.clear();
          lock.unlock();
          Retire(std::move(old), GraceEnd());
          lock.lock();
        }
      } else {
        // The next attempt is set before the failure is counted: whoever
        // sees the count sees the back-off in force.
        next_attempt_ = options_.clock->Now() + backoff_;
        const uint64_t failures = registration_failures_.fetch_add(1) + 1;
        ++failures_in_a_row_;
        // The kubelet is often just restarting: warn on the 1st, 2nd, 4th,
        // 8th... failure in a row, keep the rest for -v=1.
        const bool warn = (failures_in_a_row_ & (failures_in_a_row_ - 1)) == 0;
        LOG_IF(WARNING, warn || VLOG_IS_ON(1))
            << name_ << ": Register with "
            << (options_.plugin_dir / kKubeletSocket).string() << " failed ("
            << failures_in_a_row_ << " in a row, " << failures
            << " in all): " << status.ToString() << "; retrying in "
            << backoff_.count() << " ms";
        backoff_ = std::min(backoff_ * 2, options_.max_backoff);
      }
      continue;
    }

    std::optional<Clock::TimePoint> wake_at;
    if (!superseding_.empty()) {
      // Another instance serves: wait for its socket to go.
      wake_at = next_liveness_check_;
    } else if (!registered_) {
      wake_at = next_attempt_;
    } else if (options_.stream_gap.count() > 0) {
      if (auto empty_since = streams_.empty_since()) {
        const auto gap_start = std::max(*empty_since, registered_at_);
        if (now - gap_start >= options_.stream_gap) {
          LOG(WARNING) << name_ << ": no ListAndWatch stream for "
                       << options_.stream_gap.count()
                       << " ms; registering again on a new socket";
          restart_requested_ = true;
          continue;
        }
        wake_at = gap_start + options_.stream_gap;
      }
    }
    if (wake_at) {
      // (A fake clock returns early: the loop looks again.)
      options_.clock->WaitUntil(wake_, lock, *wake_at);
    } else {
      wake_.wait(lock);
    }
  }
}

void ResourceServer::Stop() {
  {
    MutexLock lock(state_mu_);
    if (stopping_ && !supervisor_.joinable() && !current_ &&
        retiring_.empty()) {
      return;
    }
    stopping_ = true;
    if (pending_register_ != nullptr) pending_register_->TryCancel();
  }
  wake_.notify_all();
  if (supervisor_.joinable()) supervisor_.join();
  std::vector<std::unique_ptr<ServingInstance>> all;
  {
    MutexLock lock(state_mu_);
    all = std::move(retiring_);
    retiring_.clear();
    if (current_) all.push_back(std::move(current_));
    registered_ = false;
  }
  const grpc::Status closing(grpc::StatusCode::UNAVAILABLE,
                             "the device plugin is shutting down");
  streams_.Close(std::nullopt, closing);
  const auto grace_end = GraceEnd();
  Retire(std::move(all), grace_end);
  streams_.WaitClosed(std::nullopt, Remaining(grace_end));
}

grpc::Status DevicePluginService::GetDevicePluginOptions(
    grpc::ServerContext* /*context*/, const v1beta1::Empty* /*request*/,
    v1beta1::DevicePluginOptions* response) {
  *response = ToProto(owner_->plugin_options());
  return grpc::Status::OK;
}

grpc::Status DevicePluginService::StreamedGetPreferredAllocation(
    grpc::ServerContext* /*context*/,
    grpc::ServerUnaryStreamer<v1beta1::PreferredAllocationRequest,
                              v1beta1::PreferredAllocationResponse>* streamer) {
  google::protobuf::Arena arena;
  auto* request = google::protobuf::Arena::CreateMessage<
      v1beta1::PreferredAllocationRequest>(&arena);
  if (!streamer->Read(request)) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        "GetPreferredAllocation: the request could not be "
                        "read (not a PreferredAllocationRequest, or the "
                        "caller went away)");
  }
  auto* response = google::protobuf::Arena::CreateMessage<
      v1beta1::PreferredAllocationResponse>(&arena);
  grpc::Status status = owner_->GetPreferredAllocation(*request, response);
  // Exactly one write for a streamed unary call, and only with an answer;
  // as the last message it goes out with the status, and the handler does
  // not wait for it on its own (one hand-off fewer per call).
  if (status.ok() &&
      !streamer->Write(*response, grpc::WriteOptions().set_last_message())) {
    return grpc::Status(grpc::StatusCode::CANCELLED,
                        "GetPreferredAllocation: the caller went away");
  }
  return status;
}

grpc::Status DevicePluginService::Allocate(
    grpc::ServerContext* /*context*/, const v1beta1::AllocateRequest* request,
    v1beta1::AllocateResponse* response) {
  return owner_->Allocate(*request, response);
}

grpc::Status DevicePluginService::PreStartContainer(
    grpc::ServerContext* /*context*/,
    const v1beta1::PreStartContainerRequest* request,
    v1beta1::PreStartContainerResponse* /*response*/) {
  return owner_->PreStartContainer(*request);
}

}  // namespace

class PluginRunner::Impl {
 public:
  // "<pid>-<8 random hex digits>": the sockets of two instances never share
  // a name, even both as pid 1 in their containers.
  explicit Impl(const std::string& chosen)
      : instance(chosen.empty() ? NewInstanceToken() : chosen) {}
  static std::string NewInstanceToken() {
    std::random_device random;
    char token[16];
    std::snprintf(token, sizeof(token), "%08x", random());
    return std::to_string(getpid()) + "-" + token;
  }
  const std::string instance;
  std::vector<std::unique_ptr<ResourceServer>> resources;
  std::unique_ptr<DirWatcher> watcher;
  bool started = false;
};

PluginRunner::PluginRunner(RunnerOptions options)
    : options_(std::move(options)),
      impl_(std::make_unique<Impl>(options_.instance)) {}

PluginRunner::~PluginRunner() { Stop(); }

StatusOr<ResourcePublisher*> PluginRunner::AddResource(
    const std::string& resource_name, std::shared_ptr<ResourceHandler> handler,
    std::vector<Device> initial_devices) {
  StatusOr<ResourcePublisher*> added = AddResourceChecked(
      resource_name, std::move(handler), std::move(initial_devices));
  if (!added.ok()) {
    LOG(ERROR) << "cannot add resource " << resource_name << ": "
               << added.status().ToString();
  }
  return added;
}

StatusOr<ResourcePublisher*> PluginRunner::AddResourceChecked(
    const std::string& resource_name, std::shared_ptr<ResourceHandler> handler,
    std::vector<Device> initial_devices) {
  if (impl_->started) {
    return FailedPreconditionError("resources must be added before Start");
  }
  Status valid = ValidateResourceName(resource_name);
  if (!valid.ok()) return valid;
  for (const auto& resource : impl_->resources) {
    if (resource->resource_name() == resource_name) {
      return InvalidArgumentError("resource " + resource_name +
                                  " is served twice");
    }
  }
  if (!handler) return InvalidArgumentError("no handler for " + resource_name);
  StatusOr<DevicePluginOptions> plugin_options = CallHandler(
      resource_name, "Options",
      [&]() -> StatusOr<DevicePluginOptions> { return handler->Options(); });
  if (!plugin_options.ok()) return plugin_options.status();
  auto server = std::make_unique<ResourceServer>(
      options_, resource_name, std::move(handler), *plugin_options,
      impl_->instance);
  Status set = server->SetDevices(std::move(initial_devices));
  if (!set.ok()) return set;
  impl_->resources.push_back(std::move(server));
  return impl_->resources.back().get();
}

Status PluginRunner::Start() {
  Status status = StartChecked();
  if (!status.ok()) {
    LOG(ERROR) << "cannot start the device plugin in "
               << options_.plugin_dir.string() << ": " << status.ToString();
  }
  return status;
}

Status PluginRunner::StartChecked() {
  if (impl_->started) return FailedPreconditionError("already started");
  std::error_code error;
  if (!std::filesystem::is_directory(options_.plugin_dir, error)) {
    return FailedPreconditionError("the device plugin directory " +
                                   options_.plugin_dir.string() +
                                   " does not exist");
  }
  for (const auto& resource : impl_->resources) {
    const std::string longest = resource->LongestSocketPath().string();
    if (longest.size() > kMaxSocketPath) {
      return InvalidArgumentError(
          "socket paths of " + resource->resource_name() + " reach " +
          std::to_string(longest.size()) + " bytes (" + longest +
          "); unix sockets allow " + std::to_string(kMaxSocketPath) +
          ": use a shorter plugin directory or socket prefix");
    }
  }
  // Sockets of earlier runs that nobody serves any more (a crash, kill -9).
  for (const auto& entry :
       std::filesystem::directory_iterator(options_.plugin_dir, error)) {
    const std::string name = entry.path().filename().string();
    for (const auto& resource : impl_->resources) {
      if (name.starts_with(resource->EndpointPrefix()) &&
          IsSocket(entry.path()) && !SocketIsLive(entry.path())) {
        LOG(INFO) << "removing stale socket " << entry.path().string();
        std::filesystem::remove(entry.path(), error);
      }
    }
  }
  StatusOr<std::unique_ptr<DirWatcher>> watcher =
      DirWatcher::Start(options_.plugin_dir, [this](const DirEvent& event) {
        for (const auto& resource : impl_->resources) {
          resource->OnDirEvent(event);
        }
      });
  if (!watcher.ok()) return watcher.status();
  impl_->started = true;
  for (const auto& resource : impl_->resources) {
    Status status = resource->StartServing();
    if (!status.ok()) {
      Stop();
      return status;
    }
  }
  impl_->watcher = std::move(*watcher);
  for (const auto& resource : impl_->resources) resource->StartSupervisor();
  return OkStatus();
}

void PluginRunner::Stop() {
  if (!impl_ || !impl_->started) return;
  impl_->watcher.reset();
  // Every resource at once: each waits up to its grace for clients that
  // are slow to let go, and one after the other those waits would add up.
  std::vector<std::thread> others;
  for (size_t i = 1; i < impl_->resources.size(); ++i) {
    ResourceServer* resource = impl_->resources[i].get();
    try {
      others.emplace_back([resource] { resource->Stop(); });
    } catch (const std::system_error&) {
      resource->Stop();  // no thread to be had: this one in turn
    }
  }
  if (!impl_->resources.empty()) impl_->resources.front()->Stop();
  for (auto& other : others) other.join();
  impl_->started = false;
}

std::vector<ResourcePublisher*> PluginRunner::resources() const {
  std::vector<ResourcePublisher*> out;
  for (const auto& resource : impl_->resources) out.push_back(resource.get());
  return out;
}

void BlockShutdownSignals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
}

uint64_t RaiseOpenFileLimit() {
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) != 0) return 0;
  if (limit.rlim_cur < limit.rlim_max) {
    rlimit raised = limit;
    raised.rlim_cur = limit.rlim_max;
    if (setrlimit(RLIMIT_NOFILE, &raised) == 0) limit = raised;
  }
  VLOG(1) << "open file limit " << limit.rlim_cur;
  return static_cast<uint64_t>(limit.rlim_cur);
}

std::string ChooseGrpcPollEngine(const std::string& engine) {
  constexpr char kVariable[] = "GRPC_POLL_STRATEGY";
  // An engine named by the operator stays; an empty value names none.
  const char* chosen = std::getenv(kVariable);
  if (chosen == nullptr || *chosen == '\0') {
    setenv(kVariable, engine.c_str(), 1);
    chosen = std::getenv(kVariable);
  }
  return chosen != nullptr ? chosen : "";
}

void ExitIfStillRunningAfter(std::chrono::milliseconds limit, int exit_code) {
  std::thread([limit, exit_code] {
    std::this_thread::sleep_for(limit);
    // Written directly, not through the log: main() may be returning and
    // the logging library tearing itself down at this very moment. The
    // line keeps the log's ERROR format.
    timeval now{};
    gettimeofday(&now, nullptr);
    tm local{};
    localtime_r(&now.tv_sec, &local);
    char line[160];
    const int size = std::snprintf(
        line, sizeof(line),
        "E%02d%02d %02d:%02d:%02d.%06ld %7ld plugin_runner.cc] shutdown did "
        "not finish within %lld ms; exiting now\n",
        local.tm_mon + 1, local.tm_mday, local.tm_hour, local.tm_min,
        local.tm_sec, static_cast<long>(now.tv_usec),
        static_cast<long>(gettid()), static_cast<long long>(limit.count()));
    if (size > 0) {
      (void)!write(STDERR_FILENO, line,
                   std::min(static_cast<size_t>(size), sizeof(line) - 1));
    }
    _exit(exit_code);
  }).detach();
}

int WaitForShutdownSignal() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  int signal = 0;
  while (sigwait(&set, &signal) != 0) {
  }
  return signal;
}

}  // namespace topology::plugin
