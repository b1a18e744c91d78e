// PluginRunner: the resources of one plugin process, started and stopped
// together, with the directory watch they share; the handler defaults and
// the latency histogram. A resource's server is resource_server.h's.
#include "topology/plugin/plugin_runner.h"

#include "resource_server.h"

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

using internal::CallHandler;
using internal::IsSocket;
using internal::kMaxSocketPath;
using internal::Listening;
using internal::ResourceServer;

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
  std::unique_ptr<common::DirWatcher> watcher;
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
          common::IsSocket(entry.path()) && !Listening(entry.path())) {
        LOG(INFO) << "removing stale socket " << entry.path().string();
        std::filesystem::remove(entry.path(), error);
      }
    }
  }
  StatusOr<std::unique_ptr<common::DirWatcher>> watcher =
      common::DirWatcher::Start(
          options_.plugin_dir,
          [this](const common::DirEvent& event) {
            for (const auto& resource : impl_->resources) {
              resource->OnDirEvent(event);
            }
          },
          options_.poll_plugin_dir);
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

}  // namespace topology::plugin
