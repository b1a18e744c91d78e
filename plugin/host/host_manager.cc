#include "host_manager.h"

#include <algorithm>

#include <glog/logging.h>
#include <malloc.h>

#include "topology/common/kubelet_names.h"
#include "topology/common/text_util.h"
#include "topology/manager/policy_options.h"

#include "checkpoint.h"
#include "host_server.h"
#include "plugin_endpoint.h"

namespace topology::host {

using text::Quoted;

using nlohmann::json;

// --- creation, start, stop -------------------------------------------------

StatusOr<std::unique_ptr<HostManager>> HostManager::Create(HostConfig config,
                                                           Topology topology) {
  auto managers = ResourceManagers::Create(config, std::move(topology));
  if (!managers.ok()) return managers.status();
  std::unique_ptr<HostManager> host(
      new HostManager(std::move(config), std::move(*managers)));
  PluginRegistry::Options registry;
  registry.plugin_dir = host->config_.plugin_dir;
  registry.dial_timeout = host->config_.dial_timeout;
  registry.rpc_timeout = host->config_.rpc_timeout;
  registry.grace_period = host->config_.grace_period;
  registry.clock = host->config_.clock;
  HostManager* owner = host.get();
  host->registry_ = std::make_unique<PluginRegistry>(
      registry, &host->managers_->devices(),
      [owner](const std::string& resource, PluginRegistry::Change change) {
        owner->OnResourceChange(resource, change);
      });
  host->journal_ = std::make_unique<HostJournal>(
      host->config_.plugin_dir, host->config_.max_checkpoint_bytes,
      host->managers_.get(), &host->ledger_, host->registry_.get());
  return host;
}

HostManager::HostManager(HostConfig config,
                         std::unique_ptr<ResourceManagers> managers)
    : config_(std::move(config)),
      managers_(std::move(managers)),
      journal_(nullptr) {}

HostManager::~HostManager() { Stop(); }

Status HostManager::Restore() {
  if (Status prepared = PreparePluginDirectory(config_.plugin_dir);
      !prepared.ok()) {
    return prepared;
  }
  std::vector<std::string> warnings;
  Status restored = journal_->Restore(&warnings, kMaxRestoreWarnings);
  MutexLock lock(mu_);
  restore_warnings_ = std::move(warnings);
  return restored;
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
  if (stopping_.exchange(true)) return;
  ledger_.Stop();
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
  if (journal_->restored()) (void)journal_->Compact();
  // The acceptors removed their sockets, each only while it was still
  // theirs: another instance's stays.
}

// --- plugin changes --------------------------------------------------------

void HostManager::OnResourceChange(const std::string& resource,
                                   PluginRegistry::Change change) {
  if (change == PluginRegistry::Change::kRemoved) {
    // A removed resource leaves the checkpoint's registered list.
    (void)journal_->Compact();
    return;
  }
  (void)journal_->RecordResource(resource);
}

// --- admission -------------------------------------------------------------

PodResult HostManager::Admit(const manager::Pod& pod, bool explain,
                             const std::function<bool()>& cancelled) {
  const uint64_t request = ledger_.NextRequest();
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
  const uint64_t request = ledger_.NextRequest();
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

void HostManager::Commit(uint64_t request, const std::string& records,
                         std::vector<PodResult>& results) {
  // The pods this request admitted: pending under it, each busy, none
  // visible yet. A pod pending under another request is that request's to
  // commit or undo, even when this one was answered with it.
  std::vector<std::string> admitted;
  for (const PodResult& result : results) {
    if (result.admitted) admitted.push_back(result.uid);
  }
  const std::vector<std::string> uids = ledger_.PendingOf(request, admitted);
  if (uids.empty()) return;
  // Durable, then visible: published under the store's lock, so a
  // compaction sees either neither the records nor the pods, or both.
  const Status appended =
      journal_->Append(records, [&] { ledger_.Publish(uids); });
  if (!appended.ok()) {
    // The kubelet fails an admission it cannot checkpoint: nothing of it
    // stays, in memory or on disk.
    LOG(ERROR) << appended.message() << "; " << uids.size()
               << " admission(s) undone";
    for (const std::string& uid : uids) managers_->Forget(uid);
    ledger_.Drop(uids);
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
  journal_->CompactIfNeeded();
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
    PodLedger* ledger;
    ~Slot() { ledger->UnlockAdmission(); }
  };
  // A pod another request admits or releases is waited for, then answered
  // from what that request left: an admission of a pod admitted meanwhile
  // gets the first answer, as the kubelet answers a pod it already holds.
  for (;;) {
    switch (ledger_.WaitUntilNotBusy(pod.uid, request, cancelled)) {
      case PodLedger::BusyWait::kFree:
        break;
      case PodLedger::BusyWait::kHeld:
        return refuse("UnexpectedAdmissionError",
                      "pod " + pod.uid +
                          " is being admitted or released by another "
                          "request while this one holds admissions not "
                          "yet committed; try again");
      case PodLedger::BusyWait::kCancelled:
        return cancelled_result();
    }
    if (!ledger_.LockAdmission(cancelled)) return cancelled_result();
    Slot slot{&ledger_};
    PodRecord held;
    switch (ledger_.ClaimForAdmission(pod.uid, request, &held)) {
      case PodLedger::Claim::kAnswered:
        return Answer(held);
      case PodLedger::Claim::kRetry:
        continue;  // another request took the pod between wait and slot
      case PodLedger::Claim::kClaimed:
        break;
    }
    PodResult result = AdmitInSlot(pod, explain, request, record);
    // An admitted pod stays busy (and pending) until Commit has made its
    // record durable.
    if (!result.admitted) ledger_.EndBusy(pod.uid);
    return result;
  }
}

PodResult HostManager::AdmitInSlot(const manager::Pod& pod, bool explain,
                                   uint64_t request, std::string* record) {
  std::vector<manager::MergeTrace> traces;
  const manager::AdmitResult admitted =
      managers_->Admit(pod, explain ? &traces : nullptr);
  PodRecord admission;
  admission.pod = pod;
  admission.request = request;
  PodResult& answer = admission.answer;
  answer.uid = pod.uid;
  answer.ns = pod.ns;
  answer.name = pod.name;
  answer.policy = managers_->topology_manager().Effective(pod);
  answer.admitted = admitted.admit;
  answer.reason = admitted.reason;
  answer.message = admitted.message;
  if (explain) answer.explanation = Explain(pod, traces);
  PodResult result = Answer(admission);
  if (result.admitted) {
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
    managers_->Forget(pod.uid);
    result.containers.clear();
    LOG(INFO) << "pod " << pod.ns << "/" << pod.name
              << " rejected: " << result.reason << ": " << result.message;
    return result;
  }
  LOG(INFO) << "pod " << pod.ns << "/" << pod.name << " admitted";
  record->append(HostJournal::AdmitRecord(pod, result.containers));
  ledger_.AddPending(std::move(admission));
  return result;
}

nlohmann::json HostManager::Explain(
    const manager::Pod& pod,
    const std::vector<manager::MergeTrace>& traces) const {
  json explanation = json::array();
  // Pod names for the memory explanation, copied first: the memory
  // manager's lock is never held while the ledger's is taken.
  std::map<std::string, std::string> names;
  if (managers_->memory().is_static() && pod.guaranteed) {
    names = ledger_.Names();
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
      if (const auto why = managers_->memory().Explain(pod, container)) {
        memory = MemoryExplanationLines(*why, name_of);
      }
    }
    explanation.push_back(MergeTraceJson(trace, memory));
  }
  return explanation;
}

PodResult HostManager::Answer(const PodRecord& record) const {
  PodResult result = record.answer;
  if (result.admitted) result.containers = managers_->Holdings(record.pod);
  return result;
}

Status HostManager::Release(const std::string& key) {
  // No admission slot: a release of a pod nobody else touches never waits
  // for a plugin. The pod is marked busy so that an admission of the same
  // uid cannot interleave.
  const StatusOr<std::string> claimed = ledger_.ClaimForRelease(key);
  if (!claimed.ok()) return claimed.status();
  const std::string& uid = *claimed;
  // Durable, then visible: the pod leaves the state only once its release
  // record is synced, and its devices are free only after that, so a pod
  // admitted onto them is always journaled after the release.
  const Status appended =
      journal_->Append(EncodeReleaseRecord(uid), [&] { ledger_.Erase(uid); });
  if (!appended.ok()) {
    ledger_.EndBusy(uid);
    journal_->CompactIfNeeded();
    return FailedPreconditionError("the release of pod " + Quoted(key, 256) +
                                   " could not be checkpointed (" +
                                   appended.message() +
                                   "); the pod keeps its devices");
  }
  managers_->Forget(uid);
  if (ledger_.EndRelease(uid)) malloc_trim(0);
  LOG(INFO) << "pod " << Quoted(key, 256) << " released";
  journal_->CompactIfNeeded();
  return OkStatus();
}

// --- views -----------------------------------------------------------------

HostSnapshot HostManager::Snapshot() const {
  const manager::CpuManager& cpus = managers_->cpus();
  const manager::MemoryManager& memory = managers_->memory();
  HostSnapshot snapshot;
  snapshot.topology = &managers_->topology();
  snapshot.node_name = config_.node_name;
  snapshot.policy = config_.topology.policy;
  snapshot.scope = config_.topology.scope;
  if (auto options =
          manager::PolicyOptions::Parse(config_.topology.policy_options);
      options.ok()) {
    snapshot.max_numa_nodes = options->max_allowable_numa_nodes;
  }
  snapshot.pod_policies = managers_->topology_manager().dynamic();
  snapshot.cpu_policy = config_.cpu_policy;
  snapshot.reserved_cpus =
      cpus.is_static() ? cpus.reserved() : config_.reserved_cpus;
  snapshot.shared_cpus = cpus.SharedPool();
  snapshot.memory_policy = memory.policy_name();
  if (memory.is_static()) snapshot.memory = memory.State();
  snapshot.resources =
      ResourceSnapshots(registry_->Snapshot(), managers_->devices().Snapshot());
  // What each pod holds, read from the managers under the ledger's lock: a
  // pod released meanwhile is either listed with its holdings or absent.
  ledger_.ForEach([&](const PodRecord& record) {
    snapshot.pods.push_back(Answer(record));
  });
  return snapshot;
}

}  // namespace topology::host
