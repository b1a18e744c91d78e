#include "host_manager.h"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <set>
#include <sstream>
#include <stdexcept>

#include <glog/logging.h>
#include <grpcpp/grpcpp.h>
#include <malloc.h>
#include <sys/stat.h>
#include <unistd.h>

#include "topology/cost_graph.h"
#include "topology/plugin/resource_name.h"

#include "checkpoint.h"
#include "checkpoint_store.h"
#include "deviceplugin/v1beta1/api.grpc.pb.h"
#include "plugin_endpoint.h"
#include "pod_manifest.h"
#include "safe_file.h"
#include "text_util.h"
#include "topologymanager/v1alpha1/control.grpc.pb.h"
#include "unix_acceptor.h"

namespace topology::host {

using Clock = std::chrono::steady_clock;
using nlohmann::json;

namespace {

bool IsSocket(const std::filesystem::path& path) {
  struct stat info {};
  return lstat(path.c_str(), &info) == 0 && S_ISSOCK(info.st_mode);
}

// Server limits for sockets that other local processes reach: a connection
// that never completes its HTTP/2 handshake, or stays idle, is closed, so
// idle connections cannot pile up until descriptors run out.
// Connections open at once on kubelet.sock and on the control socket.
constexpr size_t kMaxConnections = 256;

void ConfigureServer(grpc::ServerBuilder& builder) {
  builder.AddChannelArgument(GRPC_ARG_SERVER_HANDSHAKE_TIMEOUT_MS, 10'000);
  builder.AddChannelArgument(GRPC_ARG_MAX_CONNECTION_IDLE_MS, 300'000);
  builder.SetMaxReceiveMessageSize(16 << 20);
}

bool IsExtendedResource(const std::string& name) {
  return name.find('/') != std::string::npos;
}

json HintListJson(const manager::HintList& list) {
  if (!list.has_value()) return nullptr;
  json out = json::array();
  std::vector<manager::TopologyHint> hints = list.Expand();
  for (size_t i = 0; i < hints.size() && i < 64; ++i) {
    const auto& hint = hints[i];
    out.push_back(
        {{"mask", hint.affinity ? json(hint.affinity->Ids()) : json(nullptr)},
         {"preferred", hint.preferred}});
  }
  return out;
}

// A ContainerAllocateResponse as JSON; null when absent or unreadable.
json AllocateResponseJson(const std::string& bytes) {
  v1beta1::ContainerAllocateResponse response;
  if (bytes.empty() || !response.ParseFromString(bytes)) return nullptr;
  json envs = json::object();
  for (const auto& [key, value] : response.envs()) envs[key] = value;
  json annotations = json::object();
  for (const auto& [key, value] : response.annotations()) {
    annotations[key] = value;
  }
  json mounts = json::array();
  for (const auto& mount : response.mounts()) {
    mounts.push_back({{"container_path", mount.container_path()},
                      {"host_path", mount.host_path()},
                      {"read_only", mount.read_only()}});
  }
  json devices = json::array();
  for (const auto& device : response.devices()) {
    devices.push_back({{"container_path", device.container_path()},
                       {"host_path", device.host_path()},
                       {"permissions", device.permissions()}});
  }
  json cdi = json::array();
  for (const auto& device : response.cdi_devices())
    cdi.push_back(device.name());
  return {{"envs", envs},
          {"mounts", mounts},
          {"devices", devices},
          {"annotations", annotations},
          {"cdi_devices", cdi}};
}

}  // namespace

json ToJson(const ContainerResult& c) {
  json devices = json::object();
  for (const auto& [resource, ids] : c.devices) devices[resource] = ids;
  return {{"name", c.name},
          {"devices", devices},
          {"cpus", c.cpus.ToList()},
          {"numa_nodes", c.numa_nodes ? json(*c.numa_nodes) : json(nullptr)}};
}

json ToJson(const PodResult& result, bool explain) {
  json containers = json::array();
  for (const ContainerResult& c : result.containers) {
    json container = ToJson(c);
    if (!c.allocate_responses.empty()) {
      container["allocate_responses"] = c.allocate_responses;
    }
    containers.push_back(std::move(container));
  }
  json policy = nullptr;
  if (!result.policy.policy.empty()) {
    policy = {{"policy", result.policy.policy},
              {"scope", result.policy.scope},
              {"source", result.policy.source},
              {"requested", result.policy.requested.empty()
                                ? json(nullptr)
                                : json(result.policy.requested)}};
  }
  json out = {
      {"topology_policy", policy},
      {"pod", result.name},
      {"namespace", result.ns},
      {"uid", result.uid},
      {"admitted", result.admitted},
      {"reason", result.reason.empty() ? json(nullptr) : json(result.reason)},
      {"message",
       result.message.empty() ? json(nullptr) : json(result.message)},
      {"containers", containers}};
  if (explain) out["explanation"] = result.explanation;
  return out;
}

// --- gRPC services ---------------------------------------------------------

class HostManager::RegistrationService final
    : public v1beta1::Registration::Service {
 public:
  explicit RegistrationService(HostManager* owner) : owner_(owner) {}
  grpc::Status Register(grpc::ServerContext* context,
                        const v1beta1::RegisterRequest* request,
                        v1beta1::Empty* /*response*/) override {
    const ConnectionCalls::Call call(owner_->kubelet_calls_.get(),
                                     context->peer());
    const Status status = owner_->Register(
        request->version(), request->endpoint(), request->resource_name());
    // The kubelet answers with plain Go errors: status UNKNOWN.
    if (status.ok()) return grpc::Status::OK;
    return grpc::Status(grpc::StatusCode::UNKNOWN, status.message());
  }

 private:
  HostManager* owner_;
};

class HostManager::ControlService final
    : public topologymanager::v1alpha1::Control::Service {
 public:
  explicit ControlService(HostManager* owner) : owner_(owner) {}

  grpc::Status Admit(grpc::ServerContext* context,
                     const topologymanager::v1alpha1::AdmitRequest* request,
                     topologymanager::v1alpha1::JsonReply* reply) override {
    const ConnectionCalls::Call call(owner_->control_calls_.get(),
                                     context->peer());
    std::vector<manager::Pod> pods;
    for (const auto& manifest : request->manifests()) {
      auto parsed = ParsePodManifests(manifest.yaml(), manifest.source());
      if (!parsed.ok()) {
        return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                            parsed.status().message());
      }
      // Names were checked field by field; anything else (a comment) is
      // still text the replies may quote.
      if (const size_t line = InvalidUtf8Line(manifest.yaml()); line != 0) {
        return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                            manifest.source() + " line " +
                                std::to_string(line) + ": not valid UTF-8");
      }
      pods.insert(pods.end(), parsed->begin(), parsed->end());
    }
    // A client that gave up (deadline, Ctrl-C) stops the batch: pods not
    // yet admitted are not admitted.
    const auto cancelled = [context] {
      return context->IsCancelled() ||
             std::chrono::system_clock::now() > context->deadline();
    };
    json results = json::array();
    for (const PodResult& result :
         owner_->AdmitAll(pods, request->explain(), cancelled)) {
      results.push_back(ToJson(result, request->explain()));
    }
    if (cancelled()) {
      return grpc::Status(grpc::StatusCode::CANCELLED,
                          "the client cancelled the admission");
    }
    reply->set_json(
        results.dump(-1, ' ', false, json::error_handler_t::replace));
    return grpc::Status::OK;
  }

  grpc::Status Release(grpc::ServerContext* context,
                       const topologymanager::v1alpha1::ReleaseRequest* request,
                       topologymanager::v1alpha1::JsonReply* reply) override {
    const ConnectionCalls::Call call(owner_->control_calls_.get(),
                                     context->peer());
    const topology::Status status = owner_->Release(request->pod());
    if (!status.ok()) {
      return grpc::Status(static_cast<grpc::StatusCode>(status.code()),
                          status.message());
    }
    reply->set_json(json({{"released", request->pod()}}).dump());
    return grpc::Status::OK;
  }

  grpc::Status Status(grpc::ServerContext* context,
                      const topologymanager::v1alpha1::StatusRequest* request,
                      topologymanager::v1alpha1::JsonReply* reply) override {
    const ConnectionCalls::Call call(owner_->control_calls_.get(),
                                     context->peer());
    if (request->format() == "nrt") {
      reply->set_json(owner_->NodeResourceTopology().dump(
          -1, ' ', false, json::error_handler_t::replace));
    } else if (request->format().empty() || request->format() == "json" ||
               request->format() == "text") {
      reply->set_json(owner_->StatusJson().dump(
          -1, ' ', false, json::error_handler_t::replace));
    } else {
      return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                          "unknown status format " + Quoted(request->format()) +
                              " (text, json or nrt)");
    }
    return grpc::Status::OK;
  }

 private:
  HostManager* owner_;
};

// --- creation, start, stop -------------------------------------------------

StatusOr<std::unique_ptr<HostManager>> HostManager::Create(HostConfig config,
                                                           Topology topology) {
  auto numa = manager::NumaInfo::FromTopology(topology);
  if (!numa.ok()) return numa.status();
  std::unique_ptr<HostManager> host(
      new HostManager(std::move(config), std::move(topology), *numa));
  auto tm =
      manager::TopologyManager::Create(host->config_.topology, host->numa_);
  if (!tm.ok()) return tm.status();
  host->topology_manager_ = std::move(*tm);
  auto cpu = manager::CpuManager::Create(
      host->config_.cpu_policy, host->topology_, host->config_.reserved_cpus,
      host->topology_manager_.get());
  if (!cpu.ok()) return cpu.status();
  host->cpu_manager_ = std::move(*cpu);
  host->device_manager_ = std::make_unique<manager::DeviceManager>(
      host->numa_.node_ids(), host->topology_manager_.get());
  if (host->config_.cost_based_selection) {
    host->cost_model_ = std::make_unique<CostModel>(host->topology_);
    const CostModel* model = host->cost_model_.get();
    host->device_manager_->SetJointSelector(
        [model](const std::map<std::string, manager::DeviceManager::JointPool>&
                    pools)
            -> StatusOr<std::map<std::string, std::vector<std::string>>> {
          GraphRequest request;
          for (const auto& [resource, pool] : pools) {
            ResourceRequest r;
            r.name = resource;
            r.count = pool.count;
            for (const std::string& id : pool.candidates) {
              auto address = PciAddress::Parse(id);
              if (!address.ok() ||
                  model->topology().FindDevice(*address) == nullptr) {
                return InvalidArgumentError(id + " is not a PCI device here");
              }
              r.pool.push_back(GraphInstance{.device = *address});
            }
            request.resources.push_back(std::move(r));
          }
          auto selection = CostGraphSelector(*model).Select(request);
          if (!selection.ok()) return selection.status();
          std::map<std::string, std::vector<std::string>> out;
          for (const auto& [resource, instances] : selection->selection) {
            for (const GraphInstance& instance : instances) {
              out[resource].push_back(instance.device->ToString());
            }
          }
          VLOG(1) << "cost-based selection: " << selection->explanation;
          return out;
        });
  }
  // The kubelet's order: CPU manager, then device manager.
  host->topology_manager_->AddHintProvider(host->cpu_manager_.get());
  host->topology_manager_->AddHintProvider(host->device_manager_.get());
  return host;
}

HostManager::HostManager(HostConfig config, Topology topology,
                         manager::NumaInfo numa)
    : config_(std::move(config)),
      topology_(std::move(topology)),
      numa_(std::move(numa)),
      store_(std::make_unique<CheckpointStore>(
          config_.plugin_dir / kCheckpointFile, config_.max_checkpoint_bytes)),
      kubelet_calls_(std::make_shared<ConnectionCalls>()),
      control_calls_(std::make_shared<ConnectionCalls>()) {}

HostManager::~HostManager() { Stop(); }

Status HostManager::Start() {
  std::error_code error;
  std::filesystem::create_directories(config_.plugin_dir, error);
  if (error || !std::filesystem::is_directory(config_.plugin_dir)) {
    return FailedPreconditionError(
        "cannot create the device plugin directory " +
        config_.plugin_dir.string() + (error ? ": " + error.message() : ""));
  }
  if (chmod(config_.plugin_dir.c_str(), 0750) != 0) {
    return FailedPreconditionError("cannot set the mode of " +
                                   config_.plugin_dir.string());
  }
  // Like the kubelet: every socket goes (plugins see their socket vanish and
  // re-register); files, directories and checkpoints stay, but for our own
  // temporary files left by an interrupted write.
  const std::string temporary_prefix = std::string(".") + kCheckpointFile + ".";
  for (const auto& entry :
       std::filesystem::directory_iterator(config_.plugin_dir, error)) {
    const std::string name = entry.path().filename().string();
    const bool leftover =
        name.starts_with(temporary_prefix) && name.ends_with(".tmp") &&
        entry.is_regular_file(error) && !entry.is_symlink(error);
    if (IsSocket(entry.path()) || leftover) {
      VLOG(1) << "removing " << entry.path().string();
      std::filesystem::remove(entry.path(), error);
    }
  }
  if (Status restored = RestoreCheckpoint(); !restored.ok()) {
    LOG(WARNING) << restored.message();
  }
  registration_ = std::make_unique<RegistrationService>(this);
  const std::filesystem::path kubelet_socket =
      config_.plugin_dir / plugin::kKubeletSocket;
  grpc::ServerBuilder builder;
  ConfigureServer(builder);
  builder.RegisterService(registration_.get());
  kubelet_server_ = builder.BuildAndStart();
  if (!kubelet_server_) {
    return FailedPreconditionError("cannot serve " + kubelet_socket.string());
  }
  // Our own listener (recovers from running out of descriptors, bounds
  // connections); plugins run as root, nobody else registers: 0600.
  auto kubelet_acceptor =
      UnixAcceptor::Start(kubelet_socket, kubelet_server_.get(), 0600,
                          kMaxConnections, kubelet_calls_);
  if (!kubelet_acceptor.ok()) {
    Stop();
    return kubelet_acceptor.status();
  }
  kubelet_acceptor_ = std::move(*kubelet_acceptor);
  if (!config_.control_socket.empty()) {
    control_ = std::make_unique<ControlService>(this);
    grpc::ServerBuilder control;
    ConfigureServer(control);
    control.RegisterService(control_.get());
    control_server_ = control.BuildAndStart();
    // Root only, or root and an opt-in group: admitting and releasing pods
    // is not for every local user.
    const bool group = config_.control_group >= 0;
    auto control_acceptor =
        control_server_
            ? UnixAcceptor::Start(config_.control_socket, control_server_.get(),
                                  group ? 0660 : 0600, kMaxConnections,
                                  control_calls_)
            : StatusOr<std::unique_ptr<UnixAcceptor>>(
                  FailedPreconditionError("cannot build"));
    if (!control_acceptor.ok()) {
      Stop();
      return FailedPreconditionError("cannot serve the control socket " +
                                     config_.control_socket.string() + ": " +
                                     control_acceptor.status().message());
    }
    control_acceptor_ = std::move(*control_acceptor);
    if (group && lchown(config_.control_socket.c_str(), static_cast<uid_t>(-1),
                        static_cast<gid_t>(config_.control_group)) != 0) {
      Stop();
      return FailedPreconditionError(
          "cannot give the control socket " + config_.control_socket.string() +
          " to group " + std::to_string(config_.control_group));
    }
  }
  gc_ = std::thread([this] { CollectGarbage(); });
  LOG(INFO) << "serving "
            << (config_.plugin_dir / plugin::kKubeletSocket).string()
            << " (policy " << config_.topology.policy << ", scope "
            << config_.topology.scope << ", CPU policy " << config_.cpu_policy
            << ")";
  return OkStatus();
}

void HostManager::Stop() {
  {
    MutexLock lock(mu_);
    if (stopping_) return;
    stopping_ = true;
  }
  gc_wake_.notify_all();
  if (gc_.joinable()) gc_.join();
  // Every endpoint, current and retired, stopped (cancels its stream and
  // calls in flight).
  const auto stop_endpoints = [this] {
    std::vector<std::shared_ptr<PluginEndpoint>> endpoints;
    {
      MutexLock lock(mu_);
      for (auto& [name, state] : resources_) {
        if (state.endpoint) endpoints.push_back(state.endpoint);
      }
      endpoints.insert(endpoints.end(), retired_.begin(), retired_.end());
    }
    for (auto& endpoint : endpoints) endpoint->Stop();
    return endpoints;
  };
  // Plugins first: every handler waiting on a plugin returns, so the
  // servers shut down at once.
  stop_endpoints();
  // No new connections; then the servers.
  control_acceptor_.reset();
  kubelet_acceptor_.reset();
  const auto deadline =
      std::chrono::system_clock::now() + std::chrono::seconds(1);
  if (control_server_) control_server_->Shutdown(deadline);
  if (kubelet_server_) kubelet_server_->Shutdown(deadline);
  // No Register can add an endpoint now (one may have raced the first
  // pass); wait (bounded) for the readers.
  std::vector<std::shared_ptr<PluginEndpoint>> endpoints = stop_endpoints();
  const auto give_up = Clock::now() + std::chrono::seconds(2);
  for (auto& endpoint : endpoints) {
    while (!endpoint->finished() && Clock::now() < give_up) {
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
  }
  {
    MutexLock lock(mu_);
    for (auto& [name, state] : resources_) state.endpoint.reset();
    retired_.clear();
  }
  device_manager_->ForgetEndpoints();
  endpoints.clear();
  // A clean stop leaves the whole state in the snapshot.
  bool restored = false;
  {
    MutexLock lock(mu_);
    restored = restored_;
  }
  if (restored) (void)Compact();
  std::error_code ignored;
  if (!config_.control_socket.empty() && IsSocket(config_.control_socket)) {
    std::filesystem::remove(config_.control_socket, ignored);
  }
}

// --- registration and ListAndWatch ----------------------------------------

Status HostManager::Register(const std::string& version,
                             const std::string& endpoint,
                             const std::string& resource) {
  if (version != plugin::kApiVersion) {
    return Status(StatusCode::kUnknown,
                  "requested API version \"" + version +
                      "\" is not supported by kubelet. Supported version is "
                      "[\"v1beta1\"]");
  }
  if (!plugin::ValidateResourceName(resource).ok()) {
    return Status(StatusCode::kUnknown,
                  "the ResourceName \"" + resource + "\" is invalid");
  }
  if (Status valid = plugin::ValidateEndpointName(endpoint); !valid.ok()) {
    return Status(StatusCode::kUnknown, "invalid endpoint: " + valid.message());
  }
  uint64_t number = 0;
  {
    MutexLock lock(mu_);
    if (stopping_) return UnavailableError("shutting down");
    number = ++registrations_;
  }
  auto connected =
      PluginEndpoint::Connect(resource, config_.plugin_dir / endpoint,
                              config_.dial_timeout, config_.rpc_timeout);
  if (!connected.ok()) {
    LOG(WARNING) << resource << ": " << connected.status().message();
    return connected.status();
  }
  std::shared_ptr<PluginEndpoint> fresh = *connected;
  {
    MutexLock lock(mu_);
    if (stopping_) return UnavailableError("shutting down");
    ResourceState& state = resources_[resource];
    if (state.installed_registration > number) {
      // A newer registration of this resource finished first (a plugin
      // that registered twice, or a slow dial): it stays, this one is
      // dropped. The plugin is told OK, as its newer socket is served.
      LOG(INFO) << resource << ": registration of " << endpoint
                << " is older than the current one; ignored";
      return OkStatus();
    }
    if (state.endpoint) {
      // The newest registration wins; the old connection is closed and its
      // late messages are ignored. It stays referenced (retired_) until
      // its reader has returned.
      LOG(INFO) << resource << ": " << endpoint << " replaces "
                << state.endpoint->socket().filename().string();
      state.endpoint->Stop();
      retired_.push_back(state.endpoint);
    }
    state.endpoint = fresh;
    state.installed_registration = number;
    state.stopped_since.reset();
    // Calls go to the new connection at once, as in the kubelet, even
    // before its first list (the old one is stopped).
    device_manager_->SetEndpoint(resource, fresh);
    // Started under the lock, so that Stop() always sees every reader.
    fresh->Start(
        [this](PluginEndpoint* e, std::vector<manager::Device> d) {
          OnList(e, std::move(d));
        },
        [this](PluginEndpoint* e, const Status& why) { OnEnd(e, why); });
  }
  LOG(INFO) << "registered " << resource << " at " << endpoint
            << (fresh->options().get_preferred_allocation_available
                    ? " (GetPreferredAllocation)"
                    : "")
            << (fresh->options().pre_start_required ? " (PreStartContainer)"
                                                    : "");
  return OkStatus();
}

void HostManager::OnList(PluginEndpoint* endpoint,
                         std::vector<manager::Device> devices) {
  std::string record;
  {
    MutexLock lock(mu_);
    auto it = resources_.find(endpoint->resource());
    if (it == resources_.end() || it->second.endpoint.get() != endpoint) return;
    // Ids no later step can carry are refused, each named: empty (the
    // kubelet's maps and the checkpoint would hold a nameless device), not
    // UTF-8 (a protobuf string and the JSON views must be), or with control
    // characters (they would break the log and the journal's lines).
    std::string refused;
    size_t refused_count = 0;
    std::erase_if(devices, [&](const manager::Device& device) {
      const char* why = nullptr;
      if (device.id.empty()) {
        why = "is empty";
      } else if (!IsValidUtf8(device.id)) {
        why = "is not UTF-8";
      } else if (std::any_of(device.id.begin(), device.id.end(), [](char c) {
                   return static_cast<unsigned char>(c) < 0x20 || c == 0x7f;
                 })) {
        why = "has control characters";
      }
      if (why == nullptr) return false;
      if (++refused_count <= 4) {
        refused += std::string(refused.empty() ? "" : ", ") + "id " +
                   Quoted(device.id) + " " + why;
      }
      return true;
    });
    if (refused_count > 0) {
      it->second.problem = std::to_string(refused_count) +
                           " device(s) of the last list refused: " + refused;
      LOG(WARNING) << endpoint->resource() << ": " << it->second.problem;
    } else {
      it->second.problem.clear();
    }
    // Duplicate ids: the last entry wins, as in a Go map, but say so.
    std::map<std::string, manager::Device> unique;
    for (manager::Device& device : devices) {
      if (unique.contains(device.id)) {
        LOG(WARNING) << endpoint->resource() << ": device " << device.id
                     << " listed twice; the last entry counts";
      }
      unique[device.id] = std::move(device);
    }
    std::vector<manager::Device> list;
    list.reserve(unique.size());
    for (auto& [id, device] : unique) list.push_back(std::move(device));
    it->second.devices = list;
    device_manager_->UpdateResource(endpoint->resource(), std::move(list),
                                    it->second.endpoint);
    VLOG(1) << endpoint->resource() << ": " << it->second.devices.size()
            << " devices";
    record = ResourceRecord(it->first);
  }
  (void)Persist(record);
}

void HostManager::OnEnd(PluginEndpoint* endpoint, const Status& why) {
  std::string record;
  {
    MutexLock lock(mu_);
    auto it = resources_.find(endpoint->resource());
    if (it == resources_.end() || it->second.endpoint.get() != endpoint) return;
    if (stopping_) return;
    it->second.problem =
        why.ok() ? "the plugin ended its ListAndWatch stream" : why.ToString();
    LOG(WARNING) << endpoint->resource() << ": plugin at "
                 << endpoint->socket().string() << " disconnected ("
                 << it->second.problem
                 << "); allocatable is 0 until it registers again";
    it->second.stopped_since = Clock::now();
    // As the kubelet: every device moves to the unhealthy set (capacity stays,
    // allocatable is 0) until a new registration sends a list.
    for (manager::Device& device : it->second.devices) device.healthy = false;
    device_manager_->UpdateResource(endpoint->resource(), it->second.devices,
                                    it->second.endpoint);
    record = ResourceRecord(it->first);
  }
  (void)Persist(record);
}

void HostManager::CollectGarbage() {
  const auto tick =
      std::clamp(config_.grace_period / 4, std::chrono::milliseconds(10),
                 std::chrono::milliseconds(1000));
  MutexLock lock(mu_);
  while (!stopping_) {
    gc_wake_.wait_for(lock, tick);
    if (stopping_) break;
    const auto now = Clock::now();
    bool changed = false;
    for (auto it = resources_.begin(); it != resources_.end();) {
      const auto& since = it->second.stopped_since;
      if (since && now - *since >= config_.grace_period) {
        LOG(INFO) << it->first << ": no plugin for "
                  << config_.grace_period.count() << " ms; resource removed";
        device_manager_->RemoveResource(it->first);
        if (it->second.endpoint) retired_.push_back(it->second.endpoint);
        it = resources_.erase(it);
        changed = true;
      } else {
        ++it;
      }
    }
    // Connections whose reader has returned can go (outside the lock).
    std::vector<std::shared_ptr<PluginEndpoint>> done;
    for (auto it = retired_.begin(); it != retired_.end();) {
      if ((*it)->finished()) {
        done.push_back(std::move(*it));
        it = retired_.erase(it);
      } else {
        ++it;
      }
    }
    lock.unlock();
    done.clear();
    // A removed resource leaves the checkpoint's registered list.
    if (changed) (void)Compact();
    lock.lock();
  }
}

// --- admission -------------------------------------------------------------

bool HostManager::LockAdmission(const std::function<bool()>& cancelled) {
  // A slot rather than a timed mutex: the wait polls for cancellation and
  // for Stop() (and ThreadSanitizer sees every step of it).
  MutexLock slot(admission_mu_);
  while (admitting_) {
    admission_free_.wait_for(slot, std::chrono::milliseconds(50));
    if (cancelled && cancelled()) return false;
    MutexLock lock(mu_);
    if (stopping_) return false;
  }
  {
    MutexLock lock(mu_);
    if (stopping_) return false;
  }
  if (cancelled && cancelled()) return false;
  admitting_ = true;
  return true;
}

void HostManager::UnlockAdmission() {
  {
    MutexLock slot(admission_mu_);
    admitting_ = false;
  }
  admission_free_.notify_one();
}

PodResult HostManager::Admit(const manager::Pod& pod, bool explain,
                             const std::function<bool()>& cancelled) {
  std::string record;
  std::vector<PodResult> results;
  results.push_back(AdmitOne(pod, explain, cancelled, &record));
  Commit(record, results);
  return std::move(results.front());
}

std::vector<PodResult> HostManager::AdmitAll(
    const std::vector<manager::Pod>& pods, bool explain,
    const std::function<bool()>& cancelled) {
  std::vector<PodResult> results;
  results.reserve(pods.size());
  // One append and one sync for the whole request.
  std::string records;
  for (const manager::Pod& pod : pods) {
    results.push_back(AdmitOne(pod, explain, cancelled, &records));
  }
  Commit(records, results);
  return results;
}

void HostManager::Commit(const std::string& records,
                         std::vector<PodResult>& results) {
  // The pods this request admitted: pending, each busy, none visible yet.
  std::vector<std::string> uids;
  {
    MutexLock lock(mu_);
    for (const PodResult& result : results) {
      if (result.admitted && pending_.contains(result.uid) &&
          std::find(uids.begin(), uids.end(), result.uid) == uids.end()) {
        uids.push_back(result.uid);
      }
    }
  }
  if (uids.empty()) return;
  // Durable, then visible: published under the store's lock, so a
  // compaction sees either neither the records nor the pods, or both.
  const Status appended = store_->Append(records, [&] {
    MutexLock lock(mu_);
    for (const std::string& uid : uids) {
      auto node = pending_.extract(uid);
      pods_.insert_or_assign(uid, std::move(node.mapped()));
      busy_.erase(uid);
    }
    pods_high_water_ = std::max(pods_high_water_, pods_.size());
  });
  if (!appended.ok()) {
    // The kubelet fails an admission it cannot checkpoint: nothing of it
    // stays, in memory or on disk.
    LOG(ERROR) << appended.message() << "; " << uids.size()
               << " admission(s) undone";
    for (const std::string& uid : uids) {
      device_manager_->RemovePod(uid);
      cpu_manager_->RemovePod(uid);
      topology_manager_->RemovePod(uid);
    }
    {
      MutexLock lock(mu_);
      for (const std::string& uid : uids) {
        pending_.erase(uid);
        busy_.erase(uid);
      }
    }
    for (PodResult& result : results) {
      if (!result.admitted ||
          std::find(uids.begin(), uids.end(), result.uid) == uids.end()) {
        continue;
      }
      result.admitted = false;
      result.reason = "UnexpectedAdmissionError";
      result.message = "the admission could not be checkpointed (" +
                       appended.message() + "); nothing was allocated";
      result.containers.clear();
    }
  }
  CompactIfNeeded();
}

PodResult HostManager::AdmitOne(const manager::Pod& pod, bool explain,
                                const std::function<bool()>& cancelled,
                                std::string* record) {
  const auto refuse = [&](std::string reason, std::string message) {
    PodResult result;
    result.uid = pod.uid;
    result.ns = pod.ns;
    result.name = pod.name;
    result.reason = std::move(reason);
    result.message = std::move(message);
    return result;
  };
  if (!LockAdmission(cancelled)) {
    return refuse("Cancelled",
                  "the admission was cancelled or the manager is stopping");
  }
  struct Slot {
    HostManager* host;
    ~Slot() { host->UnlockAdmission(); }
  } slot{this};
  {
    MutexLock lock(mu_);
    if (auto it = pods_.find(pod.uid); it != pods_.end()) {
      return it->second.result;
    }
    // Admitted earlier in the same request: the same answer, committed
    // with it.
    if (auto it = pending_.find(pod.uid); it != pending_.end()) {
      return it->second.result;
    }
    if (!busy_.insert(pod.uid).second) {
      return refuse("UnexpectedAdmissionError",
                    "pod " + pod.uid +
                        " is being admitted or released; try "
                        "again");
    }
  }
  PodResult result = AdmitInSlot(pod, explain, record);
  // An admitted pod stays busy (and pending) until Commit has made its
  // record durable.
  if (!result.admitted) {
    MutexLock lock(mu_);
    busy_.erase(pod.uid);
  }
  return result;
}

PodResult HostManager::AdmitInSlot(const manager::Pod& pod, bool explain,
                                   std::string* record) {
  std::vector<manager::MergeTrace> traces;
  const manager::AdmitResult admitted =
      topology_manager_->Admit(pod, explain ? &traces : nullptr);
  PodResult result;
  result.uid = pod.uid;
  result.ns = pod.ns;
  result.name = pod.name;
  result.policy = topology_manager_->Effective(pod);
  result.admitted = admitted.admit;
  result.reason = admitted.reason;
  result.message = admitted.message;
  // The generic resource fit (the kubelet's predicate admission, which runs
  // after the Topology Manager's): an extended resource no plugin ever
  // offered and no pod holds cannot fit.
  if (result.admitted) {
    for (const auto* list : {&pod.init_containers, &pod.containers}) {
      for (const manager::Container& container : *list) {
        for (const auto& [resource, quantity] : container.limits) {
          if (!result.admitted) break;
          if (!IsExtendedResource(resource) || quantity <= 0) continue;
          if (device_manager_->IsDevicePluginResource(resource)) continue;
          result.admitted = false;
          result.reason = "OutOf" + resource;
          result.message = "Node didn't have enough resource: " + resource +
                           ", requested: " +
                           std::to_string(manager::DeviceManager::PodRequest(
                               pod, resource)) +
                           ", used: 0, capacity: 0";
        }
      }
    }
  }
  if (explain) {
    result.explanation = json::array();
    for (const manager::MergeTrace& trace : traces) {
      json providers = json::array();
      for (const manager::ProviderHints& hints : trace.provider_hints) {
        json provider = json::object();
        for (const auto& [resource, list] : hints) {
          provider[resource] = HintListJson(list);
        }
        providers.push_back(provider);
      }
      result.explanation.push_back(
          {{"container",
            trace.container.empty() ? json(nullptr) : json(trace.container)},
           {"providers", providers},
           {"merged",
            {{"mask", trace.result.hint.affinity
                          ? json(trace.result.hint.affinity->Ids())
                          : json(nullptr)},
             {"preferred", trace.result.hint.preferred}}},
           {"admit", trace.result.admit},
           {"reason", trace.explanation.reason},
           {"permutations", trace.explanation.permutations}});
    }
  }
  std::vector<const manager::Container*> all;
  for (const auto& c : pod.init_containers) all.push_back(&c);
  for (const auto& c : pod.containers) all.push_back(&c);
  if (result.admitted) {
    // Allocate answers by sorted device ids: an init container's devices
    // reused by an app container share one answer.
    std::map<std::vector<std::string>, json> answers;
    for (const manager::Container* container : all) {
      ContainerResult out;
      out.name = container->name;
      for (const auto& [resource, quantity] : container->limits) {
        if (!IsExtendedResource(resource)) continue;
        auto ids = device_manager_->ContainerDevices(pod.uid, container->name,
                                                     resource);
        if (ids.empty()) continue;
        out.devices[resource] = ids;
        std::vector<std::string> key = ids;
        std::sort(key.begin(), key.end());
        auto answer = answers.find(key);
        if (answer == answers.end()) {
          std::shared_ptr<PluginEndpoint> endpoint;
          {
            MutexLock lock(mu_);
            if (auto it = resources_.find(resource); it != resources_.end()) {
              endpoint = it->second.endpoint;
            }
          }
          answer =
              answers
                  .emplace(key, endpoint
                                    ? AllocateResponseJson(
                                          endpoint->TakeAllocateResponse(ids))
                                    : json(nullptr))
                  .first;
        }
        if (!answer->second.is_null()) {
          out.allocate_responses[resource] = answer->second;
        }
      }
      out.cpus = cpu_manager_->ContainerCpus(pod.uid, container->name);
      const manager::TopologyHint hint =
          topology_manager_->GetAffinity(pod.uid, container->name);
      if (hint.affinity) out.numa_nodes = hint.affinity->Ids();
      result.containers.push_back(std::move(out));
    }
    // Container start: PreStartContainer where a plugin requires it.
    for (const ContainerResult& container : result.containers) {
      for (const auto& [resource, ids] : container.devices) {
        std::shared_ptr<PluginEndpoint> endpoint;
        {
          MutexLock lock(mu_);
          if (auto it = resources_.find(resource); it != resources_.end()) {
            endpoint = it->second.endpoint;
          }
        }
        if (!endpoint) continue;  // restored, plugin not back: skipped
        if (Status started = endpoint->PreStartContainer(ids); !started.ok()) {
          result.admitted = false;
          result.reason = "PreStartContainerError";
          result.message = started.message();
        }
      }
    }
  }
  if (!result.admitted) {
    device_manager_->RemovePod(pod.uid);
    cpu_manager_->RemovePod(pod.uid);
    topology_manager_->RemovePod(pod.uid);
    result.containers.clear();
    LOG(INFO) << "pod " << pod.ns << "/" << pod.name
              << " rejected: " << result.reason << ": " << result.message;
    return result;
  }
  LOG(INFO) << "pod " << pod.ns << "/" << pod.name << " admitted";
  record->append(EncodeAdmitRecord({pod, result.containers}));
  MutexLock lock(mu_);
  pending_[pod.uid] = {pod, result};
  return result;
}

const HostManager::PodRecord* HostManager::FindPod(
    const std::map<std::string, PodRecord>& pods, const std::string& key) {
  if (auto it = pods.find(key); it != pods.end()) return &it->second;
  const PodRecord* found = nullptr;
  for (const auto& [uid, record] : pods) {
    if (record.pod.ns + "/" + record.pod.name == key ||
        record.pod.name == key) {
      if (found != nullptr) return nullptr;  // ambiguous name
      found = &record;
    }
  }
  return found;
}

Status HostManager::Release(const std::string& key) {
  // No admission lock: a release never waits for a plugin. The pod is
  // marked busy so that an admission of the same uid cannot interleave.
  std::string uid;
  {
    MutexLock lock(mu_);
    const PodRecord* record = FindPod(pods_, key);
    if (record == nullptr) {
      if (FindPod(pending_, key) != nullptr) {
        return UnavailableError("pod " + Quoted(key) +
                                " is being admitted; try again");
      }
      return NotFoundError("no admitted pod " + Quoted(key) +
                           " (by uid, namespace/name or unique name)");
    }
    uid = record->pod.uid;
    if (!busy_.insert(uid).second) {
      return UnavailableError("pod " + Quoted(key) +
                              " is being admitted or released; try again");
    }
  }
  // Durable, then visible: the pod leaves the state only once its release
  // record is synced, and its devices are free only after that, so a pod
  // admitted onto them is always journaled after the release.
  const Status appended = store_->Append(EncodeReleaseRecord(uid), [&] {
    MutexLock lock(mu_);
    pods_.erase(uid);
  });
  if (!appended.ok()) {
    {
      MutexLock lock(mu_);
      busy_.erase(uid);
    }
    CompactIfNeeded();
    return FailedPreconditionError("the release of pod " + Quoted(key, 256) +
                                   " could not be checkpointed (" +
                                   appended.message() +
                                   "); the pod keeps its devices");
  }
  device_manager_->RemovePod(uid);
  cpu_manager_->RemovePod(uid);
  topology_manager_->RemovePod(uid);
  bool trim = false;
  {
    MutexLock lock(mu_);
    busy_.erase(uid);
    // Once the pods held have halved since the most held, the heap they
    // used goes back to the system (amortised: at most one trim per halving).
    pods_high_water_ = std::max(pods_high_water_, pods_.size() + 1);
    if (pods_high_water_ >= kTrimAfterPods &&
        pods_.size() <= pods_high_water_ / 2) {
      pods_high_water_ = pods_.size();
      trim = true;
    }
  }
  if (trim) malloc_trim(0);
  LOG(INFO) << "pod " << Quoted(key, 256) << " released";
  CompactIfNeeded();
  return OkStatus();
}

// --- views -----------------------------------------------------------------

std::map<std::string, HostManager::ResourceView> HostManager::Resources()
    const {
  MutexLock lock(mu_);
  std::map<std::string, ResourceView> out;
  for (const auto& [name, state] : resources_) {
    ResourceView view;
    view.capacity = state.devices.size();
    view.stopped = state.stopped_since.has_value() || !state.endpoint;
    if (!view.stopped) {
      view.allocatable = static_cast<size_t>(
          std::count_if(state.devices.begin(), state.devices.end(),
                        [](const manager::Device& d) { return d.healthy; }));
    }
    if (state.endpoint) view.endpoint = state.endpoint->socket().string();
    out[name] = view;
  }
  return out;
}

json HostManager::StatusJson() const {
  json resources = json::array();
  MutexLock lock(mu_);
  for (const auto& [name, state] : resources_) {
    const bool stopped = state.stopped_since.has_value() || !state.endpoint;
    const std::vector<std::string> in_use = device_manager_->InUse(name);
    const std::set<std::string> used(in_use.begin(), in_use.end());
    json per_node = json::object();
    size_t allocatable = 0;
    for (const manager::Device& device : state.devices) {
      const bool healthy = device.healthy && !stopped;
      allocatable += healthy ? 1 : 0;
      std::vector<std::string> keys;
      for (int node : device.numa_nodes) keys.push_back(std::to_string(node));
      if (keys.empty()) keys.emplace_back("none");
      for (const std::string& key : keys) {
        json& entry = per_node[key];
        if (entry.is_null())
          entry = {{"capacity", 0}, {"allocatable", 0}, {"available", 0}};
        entry["capacity"] = entry["capacity"].get<int>() + 1;
        if (healthy) {
          entry["allocatable"] = entry["allocatable"].get<int>() + 1;
          if (!used.contains(device.id)) {
            entry["available"] = entry["available"].get<int>() + 1;
          }
        }
      }
    }
    resources.push_back(
        {{"name", name},
         {"capacity", state.devices.size()},
         {"allocatable", allocatable},
         {"in_use", in_use.size()},
         {"plugin", state.endpoint
                        ? json(state.endpoint->socket().filename().string())
                        : json(nullptr)},
         {"connected", !stopped},
         {"problem",
          state.problem.empty() ? json(nullptr) : json(state.problem)},
         {"numa_nodes", per_node}});
  }
  json pods = json::array();
  for (const auto& [uid, record] : pods_)
    pods.push_back(ToJson(record.result, false));
  json nodes = json::array();
  for (const NumaNode& node : topology_.numa_nodes()) {
    nodes.push_back({{"id", node.id}, {"cpus", node.cpus.ToList()}});
  }
  return {{"node", config_.node_name},
          {"policy", config_.topology.policy},
          {"pod_policies", topology_manager_->dynamic()
                               ? json("each pod's own (spec.topology.policy "
                                      "or annotation " +
                                      std::string(kTopologyPolicyAnnotation) +
                                      "), none by default")
                               : json(nullptr)},
          {"scope", config_.topology.scope},
          {"cpu_policy", config_.cpu_policy},
          {"numa_nodes", nodes},
          {"cpus",
           {{"reserved", config_.reserved_cpus.ToList()},
            {"shared", cpu_manager_->SharedPool().ToList()}}},
          {"resources", resources},
          {"pods", pods}};
}

json HostManager::NodeResourceTopology() const {
  const json status = StatusJson();
  const CpuSet shared = cpu_manager_->SharedPool();
  json zones = json::array();
  for (const NumaNode& node : topology_.numa_nodes()) {
    json costs = json::array();
    for (const NumaNode& other : topology_.numa_nodes()) {
      if (auto d = topology_.Distance(node.id, other.id)) {
        costs.push_back(
            {{"name", "node-" + std::to_string(other.id)}, {"value", *d}});
      }
    }
    const int capacity = node.cpus.Count();
    const int allocatable =
        capacity - node.cpus.Intersection(config_.reserved_cpus).Count();
    // Available: allocatable CPUs nobody holds exclusively.
    const int available = node.cpus.Intersection(shared).Count() -
                          node.cpus.Intersection(shared)
                              .Intersection(config_.reserved_cpus)
                              .Count();
    json resources = json::array();
    resources.push_back({{"name", "cpu"},
                         {"capacity", std::to_string(capacity)},
                         {"allocatable", std::to_string(allocatable)},
                         {"available", std::to_string(available)}});
    for (const json& resource : status["resources"]) {
      const std::string key = std::to_string(node.id);
      if (!resource["numa_nodes"].contains(key)) continue;
      const json& counts = resource["numa_nodes"][key];
      resources.push_back(
          {{"name", resource["name"]},
           {"capacity", std::to_string(counts["capacity"].get<int>())},
           {"allocatable", std::to_string(counts["allocatable"].get<int>())},
           {"available", std::to_string(counts["available"].get<int>())}});
    }
    zones.push_back({{"name", "node-" + std::to_string(node.id)},
                     {"type", "Node"},
                     {"costs", costs},
                     {"resources", resources}});
  }
  return {
      {"apiVersion", "topology.node.k8s.io/v1alpha2"},
      {"kind", "NodeResourceTopology"},
      {"metadata", {{"name", config_.node_name}}},
      {"attributes",
       {{{"name", "topologyManagerPolicy"}, {"value", config_.topology.policy}},
        {{"name", "topologyManagerScope"}, {"value", config_.topology.scope}}}},
      {"zones", zones}};
}

// --- checkpoint ------------------------------------------------------------

std::string HostManager::EncodeSnapshot() const {
  Checkpoint checkpoint;
  checkpoint.pods.reserve(pods_.size());
  for (const auto& [uid, record] : pods_) {
    checkpoint.pods.push_back({record.pod, record.result.containers});
  }
  for (const auto& [name, state] : resources_) {
    std::vector<std::string>& healthy = checkpoint.registered[name];
    for (const auto& device : state.devices) {
      if (device.healthy) healthy.push_back(device.id);
    }
  }
  return EncodeCheckpoint(checkpoint);
}

std::string HostManager::ResourceRecord(const std::string& name) const {
  std::vector<std::string> healthy;
  if (auto it = resources_.find(name); it != resources_.end()) {
    for (const auto& device : it->second.devices) {
      if (device.healthy) healthy.push_back(device.id);
    }
  }
  return EncodeResourceRecord(name, healthy);
}

Status HostManager::Persist(std::string_view records) {
  Status appended = store_->Append(records);
  if (!appended.ok()) LOG(ERROR) << appended.message();
  // After a failed append the state in memory (a device list) is newer
  // than the journal: a new snapshot holds it.
  if (CompactIfNeeded() && !appended.ok()) return OkStatus();
  return appended;
}

bool HostManager::CompactIfNeeded() {
  // Either the journal outgrew the snapshot or an append failed.
  if (!store_->NeedsCompaction()) return false;
  return Compact().ok();
}

Status HostManager::Compact() {
  // The store's lock first, then mu_ (inside encode): records are encoded
  // under mu_ and appended after it is released, so none is lost between
  // the snapshot's encoding and the new journal.
  Status compacted = store_->Compact([this] {
    MutexLock lock(mu_);
    return EncodeSnapshot();
  });
  if (!compacted.ok()) LOG(ERROR) << compacted.message();
  return compacted;
}

Status HostManager::RestoreCheckpoint() {
  const auto path = store_->snapshot_path();
  std::string warning;
  // Never follows a link, never blocks on a FIFO, never reads unbounded.
  auto checkpoint = store_->Load(&warning);
  if (!warning.empty()) LOG(WARNING) << warning;
  // Appends go to a fresh journal from here on. Entries dropped as
  // conflicting are dropped on disk too, by a new snapshot; otherwise the
  // files read are the state in force and are not encoded again.
  const auto restored = [this](bool rewrite) {
    {
      MutexLock lock(mu_);
      restored_ = true;
    }
    if (rewrite) return Compact();
    Status resumed = store_->Resume([this] {
      MutexLock lock(mu_);
      return EncodeSnapshot();
    });
    if (!resumed.ok()) LOG(ERROR) << resumed.message();
    return resumed;
  };
  if (!checkpoint.ok()) {
    if (checkpoint.status().code() == StatusCode::kNotFound) {
      LOG(INFO) << "no checkpoint at " << path.string() << ": starting empty";
    } else if (checkpoint.status().code() == StatusCode::kDataLoss) {
      LOG(WARNING) << checkpoint.status().message();
    } else {
      // Unreadable (not corrupt): left alone, nothing written over it.
      return checkpoint.status();
    }
    return restored(false);
  }

  // Checked against itself and the machine: a device claimed by a second
  // pod is dropped from that pod, CPUs that cannot be restored are dropped;
  // nothing is ever double-booked.
  size_t dropped = 0;
  size_t unknown = 0;
  {
    MutexLock lock(mu_);
    std::map<std::pair<std::string, std::string>, std::string> owner;
    // The resources the checkpoint has a plugin record of.
    std::set<std::string> offered;
    for (const auto& [name, ids] : checkpoint->registered) {
      offered.insert(name);
    }
    for (CheckpointPod& entry : checkpoint->pods) {
      const manager::Pod& pod = entry.pod;
      const std::string who = "checkpoint " + path.string() + ": pod " +
                              pod.ns + "/" + pod.name + " (" + pod.uid + ")";
      if (pods_.contains(pod.uid)) {
        LOG(WARNING) << who << " listed twice; the second entry is dropped";
        ++dropped;
        continue;
      }
      PodRecord record;
      record.pod = pod;
      record.result.uid = pod.uid;
      record.result.ns = pod.ns;
      record.result.name = pod.name;
      record.result.admitted = true;
      if (!pod.topology_policy.empty() &&
          !manager::IsPodTopologyPolicy(pod.topology_policy)) {
        LOG(WARNING) << who << ": unknown topology policy "
                     << Quoted(pod.topology_policy) << "; none assumed";
        record.pod.topology_policy.clear();
      }
      record.result.policy = topology_manager_->Effective(record.pod);
      for (ContainerResult& listed : entry.containers) {
        ContainerResult container;
        container.name = listed.name;
        container.numa_nodes = listed.numa_nodes;
        for (const auto& [resource, ids] : listed.devices) {
          std::vector<std::string> kept;
          std::set<std::string> seen;
          const auto listed_by = offered.find(resource);
          for (const std::string& id : ids) {
            // One device twice in one container's list: a container holds
            // a device once (init and app containers of one pod may share
            // it; that is reuse, not a duplicate).
            if (!seen.insert(id).second) {
              LOG(WARNING) << who << " container " << Quoted(listed.name)
                           << ": " << resource << " device " << Quoted(id)
                           << " listed twice; the second is dropped";
              ++dropped;
              continue;
            }
            // A resource the checkpoint never had a plugin for: kept (its
            // plugin may come back), but said, at most 16 lines (the count
            // is in the summary). A device merely absent from the healthy
            // list is not suspect: it may have turned unhealthy.
            if (listed_by == offered.end() && ++unknown <= 16) {
              LOG(WARNING) << who << " container " << Quoted(listed.name)
                           << " holds " << resource << " device " << Quoted(id)
                           << ", but no plugin of " << resource
                           << " is recorded in the checkpoint";
            }
            auto [it, fresh] = owner.emplace(std::pair{resource, id}, pod.uid);
            if (!fresh && it->second != pod.uid) {
              LOG(WARNING) << who << " container " << Quoted(container.name)
                           << ": " << resource << " device " << Quoted(id)
                           << " is already held by pod " << it->second
                           << "; dropped from this pod";
              ++dropped;
              continue;
            }
            kept.push_back(id);
          }
          if (kept.empty()) continue;
          device_manager_->Restore(pod.uid, container.name, resource, kept);
          container.devices[resource] = std::move(kept);
        }
        if (Status cpus_restored =
                cpu_manager_->Restore(pod.uid, container.name, listed.cpus);
            !cpus_restored.ok()) {
          LOG(WARNING) << who << ": " << cpus_restored.message()
                       << "; its exclusive CPUs are dropped";
          ++dropped;
        } else {
          container.cpus = listed.cpus;
        }
        record.result.containers.push_back(std::move(container));
      }
      pods_[pod.uid] = std::move(record);
    }
    for (const auto& [name, ids] : checkpoint->registered) {
      // Known from before the restart, but without a plugin: capacity 0
      // until it registers again, removed after the grace period.
      ResourceState& state = resources_[name];
      state.stopped_since = Clock::now();
      device_manager_->UpdateResource(name, {}, nullptr);
    }
    LOG(INFO) << "restored " << pods_.size() << " pod(s) and "
              << resources_.size() << " resource(s) from " << path.string()
              << (dropped > 0 ? "; " + std::to_string(dropped) +
                                    " conflicting entries dropped"
                              : "")
              << (unknown > 0 ? "; " + std::to_string(unknown) +
                                    " device(s) held of resources no plugin "
                                    "is recorded for"
                              : "");
  }
  return restored(dropped > 0);
}

}  // namespace topology::host
