#include "host_manager.h"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <set>
#include <sstream>
#include <stdexcept>

#include <glog/logging.h>
#include <malloc.h>
#include <sys/stat.h>
#include <unistd.h>

#include "topology/plugin/unix_socket.h"

#include "checkpoint.h"
#include "checkpoint_store.h"
#include "cost_selector.h"
#include "host_server.h"
#include "kubelet_names.h"
#include "plugin_endpoint.h"
#include "text_util.h"

namespace topology::host {

using nlohmann::json;

namespace {

// What the containers hold, as the checkpoint keeps it.
std::vector<CheckpointContainer> Holdings(
    const std::vector<ContainerResult>& containers) {
  std::vector<CheckpointContainer> out;
  out.reserve(containers.size());
  for (const ContainerResult& c : containers) {
    out.push_back({c.name, c.devices, c.cpus, c.numa_nodes, c.memory});
  }
  return out;
}

}  // namespace

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
  manager::CpuManagerConfig cpu_config;
  cpu_config.policy = host->config_.cpu_policy;
  cpu_config.reserved = host->config_.reserved_cpus;
  if (host->config_.reserved_cpus.empty()) {
    cpu_config.reserved_count = host->config_.reserved_cpu_count;
  }
  cpu_config.options = host->config_.cpu_policy_options;
  const auto gate = [&](const char* name, bool by_default) {
    const auto it = host->config_.feature_gates.find(name);
    return it == host->config_.feature_gates.end() ? by_default : it->second;
  };
  if (gate("PodLevelResourceManagers", false)) {
    return Status(
        StatusCode::kUnimplemented,
        "feature gate PodLevelResourceManagers: pod-level resources in the "
        "Topology, CPU and Memory Managers are not modelled; run without it "
        "(it is off by default)");
  }
  cpu_config.alpha_options = gate("CPUManagerPolicyAlphaOptions", false);
  cpu_config.beta_options = gate("CPUManagerPolicyBetaOptions", true);
  cpu_config.topology_policy = host->config_.topology.policy;
  auto cpu = manager::CpuManager::Create(cpu_config, host->topology_,
                                         host->topology_manager_.get());
  if (!cpu.ok()) {
    return Status(cpu.status().code(),
                  "cpu manager: " + cpu.status().message());
  }
  host->cpu_manager_ = std::move(*cpu);
  auto memory = manager::MemoryManager::Create(host->config_.memory,
                                               host->topology_.numa_nodes(),
                                               host->topology_manager_.get());
  if (!memory.ok()) {
    return Status(memory.status().code(),
                  "memory manager: " + memory.status().message());
  }
  host->memory_manager_ = std::move(*memory);
  host->device_manager_ = std::make_unique<manager::DeviceManager>(
      host->numa_.node_ids(), host->topology_manager_.get());
  if (host->config_.cost_based_selection) {
    host->cost_model_ = std::make_unique<CostModel>(host->topology_);
    host->device_manager_->SetJointSelector(
        CostBasedSelector(host->cost_model_.get()));
  }
  // The kubelet's order (container_manager_linux.go): device manager, CPU
  // manager, memory manager; Allocate runs in the same order.
  host->topology_manager_->AddHintProvider(host->device_manager_.get());
  host->topology_manager_->AddHintProvider(host->cpu_manager_.get());
  host->topology_manager_->AddHintProvider(host->memory_manager_.get());
  PluginRegistry::Options registry;
  registry.plugin_dir = host->config_.plugin_dir;
  registry.dial_timeout = host->config_.dial_timeout;
  registry.rpc_timeout = host->config_.rpc_timeout;
  registry.grace_period = host->config_.grace_period;
  registry.clock = host->config_.clock;
  HostManager* owner = host.get();
  host->registry_ = std::make_unique<PluginRegistry>(
      registry, host->device_manager_.get(),
      [owner](const std::string& resource, PluginRegistry::Change change) {
        owner->OnResourceChange(resource, change);
      });
  return host;
}

HostManager::HostManager(HostConfig config, Topology topology,
                         manager::NumaInfo numa)
    : config_(std::move(config)),
      topology_(std::move(topology)),
      numa_(std::move(numa)),
      store_(std::make_unique<CheckpointStore>(
          config_.plugin_dir / kCheckpointFile, config_.max_checkpoint_bytes)) {
}

HostManager::~HostManager() { Stop(); }

Status HostManager::Restore() {
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
    if (plugin::IsSocket(entry.path()) || leftover) {
      VLOG(1) << "removing " << entry.path().string();
      std::filesystem::remove(entry.path(), error);
    }
  }
  Status refusal;
  if (Status restored = RestoreCheckpoint(&refusal); !restored.ok()) {
    LOG(WARNING) << restored.message();
  }
  if (!refusal.ok()) return refusal;
  return OkStatus();
}

HostServer::Options HostManager::ServerOptions() const {
  return {.plugin_dir = config_.plugin_dir,
          .control_socket = config_.control_socket,
          .control_group = config_.control_group};
}

void HostManager::Serve(std::unique_ptr<HostServer> server) {
  server_ = std::move(server);
  registry_->StartCollector();
  LOG(INFO) << "serving "
            << (config_.plugin_dir / kubelet::kKubeletSocket).string()
            << " (policy " << config_.topology.policy << ", scope "
            << config_.topology.scope << ", CPU policy " << config_.cpu_policy
            << ")";
}

HostManager::ConnectionCounters HostManager::ControlConnections() const {
  return server_ ? server_->ControlConnections() : ConnectionCounters{};
}

void HostManager::Stop() {
  {
    MutexLock lock(mu_);
    if (stopping_) return;
    stopping_ = true;
  }
  // A manager whose Create failed half-way has no registry: nothing runs.
  if (!registry_) return;
  // Plugins first: every handler waiting on a plugin returns, so the
  // servers shut down at once.
  registry_->StopEndpoints();
  // No new connections; then the servers.
  if (server_) {
    server_->StopAccepting();
    server_->Shutdown(std::chrono::system_clock::now() +
                      std::chrono::seconds(1));
  }
  // No Register can add an endpoint now; the readers end (bounded).
  registry_->Stop();
  // A clean stop leaves the whole state in the snapshot.
  bool restored = false;
  {
    MutexLock lock(mu_);
    restored = restored_;
  }
  if (restored) (void)Compact();
  // The acceptors removed their sockets, each only while it was still
  // theirs: another instance's stays.
}

// --- plugin changes --------------------------------------------------------

void HostManager::OnResourceChange(const std::string& resource,
                                   PluginRegistry::Change change) {
  if (change == PluginRegistry::Change::kRemoved) {
    // A removed resource leaves the checkpoint's registered list.
    (void)Compact();
    return;
  }
  // Read when written: of two lists journaled by two threads, the later
  // record holds the newer list.
  (void)Persist(ResourceRecord(resource));
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
  const uint64_t request = NextRequest();
  std::string record;
  std::vector<PodResult> results;
  results.push_back(AdmitOne(pod, explain, cancelled, request, &record));
  Commit(request, record, results);
  return std::move(results.front());
}

std::vector<PodResult> HostManager::AdmitAll(
    const std::vector<manager::Pod>& pods, bool explain,
    const std::function<bool()>& cancelled) {
  std::vector<PodResult> results;
  results.reserve(pods.size());
  // One append and one sync for the whole request.
  const uint64_t request = NextRequest();
  std::string records;
  for (const manager::Pod& pod : pods) {
    results.push_back(AdmitOne(pod, explain, cancelled, request, &records));
  }
  Commit(request, records, results);
  return results;
}

std::vector<std::string> HostManager::RestoreWarnings() const {
  MutexLock lock(mu_);
  return restore_warnings_;
}

uint64_t HostManager::NextRequest() {
  MutexLock lock(mu_);
  return ++last_request_;
}

void HostManager::Commit(uint64_t request, const std::string& records,
                         std::vector<PodResult>& results) {
  // The pods this request admitted: pending under it, each busy, none
  // visible yet. A pod pending under another request is that request's to
  // commit or undo, even when this one was answered with it.
  std::vector<std::string> uids;
  {
    MutexLock lock(mu_);
    for (const PodResult& result : results) {
      const auto it = pending_.find(result.uid);
      if (result.admitted && it != pending_.end() &&
          it->second.request == request &&
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
      if (node.empty()) continue;  // owned by this request: cannot happen
      node.mapped().request = 0;
      pods_.insert_or_assign(uid, std::move(node.mapped()));
      EndBusy(uid);
    }
    pods_high_water_ = std::max(pods_high_water_, pods_.size());
  });
  if (!appended.ok()) {
    // The kubelet fails an admission it cannot checkpoint: nothing of it
    // stays, in memory or on disk.
    LOG(ERROR) << appended.message() << "; " << uids.size()
               << " admission(s) undone";
    for (const std::string& uid : uids) ForgetAllocations(uid);
    {
      MutexLock lock(mu_);
      for (const std::string& uid : uids) {
        pending_.erase(uid);
        EndBusy(uid);
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
                                uint64_t request, std::string* record) {
  const auto refuse = [&](std::string reason, std::string message) {
    PodResult result;
    result.uid = pod.uid;
    result.ns = pod.ns;
    result.name = pod.name;
    result.reason = std::move(reason);
    result.message = std::move(message);
    return result;
  };
  const auto cancelled_result = [&] {
    return refuse("Cancelled",
                  "the admission was cancelled or the manager is stopping");
  };
  struct Slot {
    HostManager* host;
    ~Slot() { host->UnlockAdmission(); }
  };
  // A pod another request admits or releases is waited for, then answered
  // from what that request left: an admission of a pod admitted meanwhile
  // gets the first answer, as the kubelet answers a pod it already holds.
  for (;;) {
    switch (WaitUntilNotBusy(pod.uid, request, cancelled)) {
      case BusyWait::kFree:
        break;
      case BusyWait::kHeld:
        return refuse("UnexpectedAdmissionError",
                      "pod " + pod.uid +
                          " is being admitted or released by another "
                          "request while this one holds admissions not "
                          "yet committed; try again");
      case BusyWait::kCancelled:
        return cancelled_result();
    }
    if (!LockAdmission(cancelled)) return cancelled_result();
    Slot slot{this};
    {
      MutexLock lock(mu_);
      if (auto it = pods_.find(pod.uid); it != pods_.end()) {
        return it->second.result;
      }
      // Admitted earlier in the same request: the same answer, committed
      // with it.
      if (auto it = pending_.find(pod.uid);
          it != pending_.end() && it->second.request == request) {
        return it->second.result;
      }
      // Another request took the pod between the wait and the slot.
      if (!busy_.insert(pod.uid).second) continue;
    }
    PodResult result = AdmitInSlot(pod, explain, request, record);
    // An admitted pod stays busy (and pending) until Commit has made its
    // record durable.
    if (!result.admitted) {
      MutexLock lock(mu_);
      EndBusy(pod.uid);
    }
    return result;
  }
}

HostManager::BusyWait HostManager::WaitUntilNotBusy(
    const std::string& uid, uint64_t request,
    const std::function<bool()>& cancelled) {
  MutexLock lock(mu_);
  for (;;) {
    if (stopping_) return BusyWait::kCancelled;
    const auto pending = pending_.find(uid);
    const bool own =
        pending != pending_.end() && pending->second.request == request;
    if (own || !busy_.contains(uid)) return BusyWait::kFree;
    if (request != 0 &&
        std::any_of(pending_.begin(), pending_.end(), [&](const auto& entry) {
          return entry.second.request == request;
        })) {
      return BusyWait::kHeld;
    }
    // Bounded waits: a cancelled caller (the client went away) is noticed
    // without a notification of its own.
    busy_done_.wait_for(lock, std::chrono::milliseconds(50));
    if (cancelled && cancelled()) return BusyWait::kCancelled;
  }
}

void HostManager::EndBusy(const std::string& uid) {
  busy_.erase(uid);
  busy_done_.notify_all();
}

PodResult HostManager::AdmitInSlot(const manager::Pod& pod, bool explain,
                                   uint64_t request, std::string* record) {
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
          if (!kubelet::IsExtendedResourceName(resource) || quantity <= 0)
            continue;
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
    // Pod names for the memory explanation, copied first: the memory
    // manager's lock is never held while mu_ is taken.
    std::map<std::string, std::string> names;
    if (memory_manager_->is_static() && pod.guaranteed) {
      MutexLock lock(mu_);
      for (const auto* map : {&pods_, &pending_}) {
        for (const auto& [uid, held] : *map) {
          names[uid] = held.pod.ns + "/" + held.pod.name;
        }
      }
    }
    names[pod.uid] = pod.ns + "/" + pod.name;
    const auto name_of = [&names](const std::string& uid) {
      const auto it = names.find(uid);
      return it == names.end() ? uid : it->second;
    };
    for (const manager::MergeTrace& trace : traces) {
      const manager::Container* container = nullptr;
      for (const auto* list : {&pod.init_containers, &pod.containers}) {
        for (const manager::Container& c : *list) {
          if (c.name == trace.container) container = &c;
        }
      }
      std::vector<std::string> memory;
      if (trace.container.empty() || container != nullptr) {
        memory = memory_manager_->Explain(pod, container, name_of);
      }
      result.explanation.push_back(MergeTraceJson(trace, memory));
    }
  }
  std::vector<const manager::Container*> all;
  for (const auto& c : pod.init_containers) all.push_back(&c);
  for (const auto& c : pod.containers) all.push_back(&c);
  if (result.admitted) {
    for (const manager::Container* container : all) {
      ContainerResult out;
      out.name = container->name;
      for (const auto& [resource, quantity] : container->limits) {
        if (!kubelet::IsExtendedResourceName(resource)) continue;
        auto ids = device_manager_->ContainerDevices(pod.uid, container->name,
                                                     resource);
        if (ids.empty()) continue;
        out.devices[resource] = ids;
        // The device manager keeps the plugin's answer with the allocation.
        const std::string response = device_manager_->AllocateResponse(
            pod.uid, container->name, resource);
        if (!response.empty()) {
          out.allocate_responses[resource] = AllocateResponseJson(response);
        }
      }
      out.cpus = cpu_manager_->ContainerCpus(pod.uid, container->name);
      out.memory = memory_manager_->ContainerBlocks(pod.uid, container->name);
      const manager::TopologyHint hint =
          topology_manager_->GetAffinity(pod.uid, container->name);
      if (hint.affinity) out.numa_nodes = hint.affinity->Ids();
      result.containers.push_back(std::move(out));
    }
    // Container start: PreStartContainer where a plugin requires it.
    for (const ContainerResult& container : result.containers) {
      for (const auto& [resource, ids] : container.devices) {
        const std::shared_ptr<PluginEndpoint> endpoint =
            registry_->Endpoint(resource);
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
    ForgetAllocations(pod.uid);
    result.containers.clear();
    LOG(INFO) << "pod " << pod.ns << "/" << pod.name
              << " rejected: " << result.reason << ": " << result.message;
    return result;
  }
  LOG(INFO) << "pod " << pod.ns << "/" << pod.name << " admitted";
  record->append(EncodeAdmitRecord({pod, Holdings(result.containers)}));
  MutexLock lock(mu_);
  pending_[pod.uid] = {pod, result, request};
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
  // No admission lock: a release of a pod nobody else touches never waits
  // for a plugin. The pod is marked busy so that an admission of the same
  // uid cannot interleave. A pod being admitted or released by another
  // request is waited for (as long as that request, whose plugin calls
  // have deadlines): the release then acts on what it left (a pod released
  // meanwhile is not found), never answers "busy".
  std::string uid;
  for (;;) {
    std::string waiting;
    {
      MutexLock lock(mu_);
      const PodRecord* record = FindPod(pods_, key);
      if (record == nullptr) record = FindPod(pending_, key);
      if (record == nullptr) {
        return NotFoundError("no admitted pod " + Quoted(key) +
                             " (by uid, namespace/name or unique name)");
      }
      if (pods_.contains(record->pod.uid) &&
          busy_.insert(record->pod.uid).second) {
        uid = record->pod.uid;
        break;
      }
      waiting = record->pod.uid;
    }
    if (WaitUntilNotBusy(waiting, 0, nullptr) != BusyWait::kFree) {
      return UnavailableError("the manager is stopping; pod " + Quoted(key) +
                              " is not released");
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
      EndBusy(uid);
    }
    CompactIfNeeded();
    return FailedPreconditionError("the release of pod " + Quoted(key, 256) +
                                   " could not be checkpointed (" +
                                   appended.message() +
                                   "); the pod keeps its devices");
  }
  ForgetAllocations(uid);
  bool trim = false;
  {
    MutexLock lock(mu_);
    EndBusy(uid);
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
  const auto devices = device_manager_->Snapshot();
  std::map<std::string, ResourceView> out;
  for (const PluginRegistry::PluginState& state : registry_->Snapshot()) {
    ResourceView view;
    const auto it = devices.find(state.resource);
    if (it != devices.end()) {
      view.capacity = it->second.devices.size();
      if (state.connected) {
        view.allocatable = static_cast<size_t>(
            std::count_if(it->second.devices.begin(), it->second.devices.end(),
                          [](const manager::Device& d) { return d.healthy; }));
      }
    }
    view.stopped = !state.connected;
    view.endpoint = state.socket;
    out[state.resource] = view;
  }
  return out;
}

HostSnapshot HostManager::Snapshot() const {
  HostSnapshot snapshot;
  snapshot.topology = &topology_;
  snapshot.node_name = config_.node_name;
  snapshot.policy = config_.topology.policy;
  snapshot.scope = config_.topology.scope;
  snapshot.pod_policies = topology_manager_->dynamic();
  snapshot.cpu_policy = config_.cpu_policy;
  snapshot.reserved_cpus = cpu_manager_->is_static() ? cpu_manager_->reserved()
                                                     : config_.reserved_cpus;
  snapshot.shared_cpus = cpu_manager_->SharedPool();
  snapshot.memory_policy = memory_manager_->policy_name();
  if (memory_manager_->is_static()) snapshot.memory = memory_manager_->State();
  auto devices = device_manager_->Snapshot();
  for (PluginRegistry::PluginState& state : registry_->Snapshot()) {
    ResourceSnapshot resource;
    resource.name = state.resource;
    if (auto it = devices.find(state.resource); it != devices.end()) {
      resource.devices = std::move(it->second.devices);
      resource.in_use = std::move(it->second.in_use);
    }
    resource.connected = state.connected;
    if (!state.socket.empty()) {
      resource.plugin = std::filesystem::path(state.socket).filename().string();
    }
    resource.problem = std::move(state.problem);
    snapshot.resources.push_back(std::move(resource));
  }
  MutexLock lock(mu_);
  snapshot.pods.reserve(pods_.size());
  for (const auto& [uid, record] : pods_)
    snapshot.pods.push_back(record.result);
  return snapshot;
}

void HostManager::ForgetAllocations(const std::string& uid) {
  device_manager_->RemovePod(uid);
  cpu_manager_->RemovePod(uid);
  memory_manager_->RemovePod(uid);
  topology_manager_->RemovePod(uid);
}

// --- checkpoint ------------------------------------------------------------

std::string HostManager::EncodeSnapshot() const {
  Checkpoint checkpoint;
  checkpoint.pods.reserve(pods_.size());
  for (const auto& [uid, record] : pods_) {
    checkpoint.pods.push_back({record.pod, Holdings(record.result.containers)});
  }
  for (const std::string& name : registry_->Resources()) {
    std::vector<std::string>& healthy = checkpoint.registered[name];
    for (const auto& device : device_manager_->Devices(name)) {
      if (device.healthy) healthy.push_back(device.id);
    }
  }
  checkpoint.memory = MemoryRecord();
  return EncodeCheckpoint(checkpoint);
}

std::string HostManager::ResourceRecord(const std::string& name) const {
  std::vector<std::string> healthy;
  for (const auto& device : device_manager_->Devices(name)) {
    if (device.healthy) healthy.push_back(device.id);
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

}  // namespace topology::host
