// The host-side topology manager: the kubelet's device manager, CPU manager
// and Topology Manager in one daemon. It accepts device plugin
// registrations on <plugin-dir>/kubelet.sock, consumes their device lists,
// admits pods with the kubelet's rules and keeps its allocations in a
// checkpoint.
//
// Its pieces, each the only owner of its state (docs/architecture.md):
//   PluginRegistry         plugin endpoints: registration, retirement,
//                          removal after the grace period
//   manager::DeviceManager device lists, allocations with their Allocate
//                          responses
//   manager::CpuManager, manager::MemoryManager, manager::TopologyManager
//                          exclusive CPUs, pinned memory, chosen affinities
//   ResourceManagers       the managers, built from the configuration: the
//                          only owners of what each pod holds
//   PodLedger              the pods admitted (spec and answer), pending
//                          and busy ones, the admission slot
//   HostManager (here)     admission and release in order, and the journal
//                          (CheckpointStore); restore in host_restore.cc
//   host_views.h           status and NodeResourceTopology, rendered from
//                          a typed snapshot
//   HostServer             kubelet.sock and the control socket: the
//                          servers and their acceptors (host_server.h)
//   host_services.h        the thin gRPC services, over host_handlers.h
#ifndef TOPOLOGY_HOST_HOST_MANAGER_H_
#define TOPOLOGY_HOST_HOST_MANAGER_H_

#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "topology/manager/pod.h"
#include "topology/status.h"
#include "topology/thread_annotations.h"
#include "topology/topology.h"

#include "host_config.h"
#include "host_handlers.h"
#include "host_journal.h"
#include "host_server.h"
#include "host_views.h"
#include "plugin_registry.h"
#include "pod_ledger.h"
#include "pod_result.h"
#include "resource_managers.h"

namespace topology::host {

class HostManager final : public AdmissionHandler {
 public:
  // Checks the configuration the way the kubelet does at start (CPU and
  // memory manager policies, reserved CPUs and memory).
  static StatusOr<std::unique_ptr<HostManager>> Create(HostConfig config,
                                                       Topology topology);
  ~HostManager();

  // Start, in two steps with the server built between them (serve_main.cc):
  //
  //   host->Restore();
  //   auto server = HostServer::Start(host->ServerOptions(),
  //                                   host->registry(), host.get());
  //   host->Serve(std::move(*server));
  //
  // Restore creates the directory (0750), removes stale sockets (only
  // sockets) and our own temporary files, and restores the checkpoint.
  // Refuses (FAILED_PRECONDITION) where the kubelet's memory manager refuses
  // to start: the checkpoint's memory policy or machine is not this one, or
  // a pinned assignment no longer fits.
  Status Restore();
  // Where HostServer serves: the plugin directory, control socket and group
  // of the configuration.
  HostServer::Options ServerOptions() const;
  // The registry HostServer serves kubelet.sock for; owned by the manager.
  PluginRegistry* registry() { return registry_.get(); }
  // Keeps `server` (serving for this manager, after Restore) until Stop,
  // which stops it in order: plugins first, then the server, then the
  // registry. Starts removing plugins gone past their grace period.
  void Serve(std::unique_ptr<HostServer> server);
  void Stop();

  // Admits one pod; an already admitted pod (same uid) gets its result
  // again without a new allocation. `cancelled`, when given, is polled while
  // waiting for the admission slot: a cancelled wait returns a result with
  // reason "Cancelled" and allocates nothing.
  PodResult Admit(const manager::Pod& pod, bool explain,
                  const std::function<bool()>& cancelled = nullptr);
  // The AdmissionHandler's three calls. Admits `pods` in order and writes the
  // checkpoint once at the end; stops early (the rest are not admitted, reason
  // "Cancelled") when `cancelled` returns true or the manager stops.
  std::vector<PodResult> AdmitAll(
      const std::vector<manager::Pod>& pods, bool explain,
      const std::function<bool()>& cancelled) override;
  // By uid, "namespace/name" or name. NOT_FOUND when unknown; UNAVAILABLE
  // while the same pod is being admitted. Never waits for an admission.
  Status Release(const std::string& pod) override;

  // The state at one instant, for the views.
  HostSnapshot Snapshot() const override;
  nlohmann::json StatusJson() const { return host::StatusJson(Snapshot()); }

  // The control socket's connections since Serve (UnixAcceptor's counters):
  // idle ones closed for the cap, new ones refused because every one had a
  // call in flight, accept() failures for want of descriptors. Zero without
  // a control socket; not while Serve or Stop runs.
  using ConnectionCounters = HostServer::ConnectionCounters;
  ConnectionCounters ControlConnections() const;
  // The NodeResourceTopology object (topology.node.k8s.io/v1alpha2).
  nlohmann::json NodeResourceTopology() const {
    return NodeResourceTopologyJson(Snapshot());
  }

  using ResourceView = host::ResourceView;
  // Each resource's counts (host_views.h), from a snapshot.
  std::map<std::string, ResourceView> Resources() const {
    return ResourceViews(Snapshot());
  }
  const HostConfig& config() const { return config_; }
  // What the last restore kept but found suspect (a held device that no
  // recorded plugin list offers), one line each naming pod, container,
  // resource and device; at most kMaxRestoreWarnings.
  std::vector<std::string> RestoreWarnings() const TOPOLOGY_EXCLUDES(mu_);
  static constexpr size_t kMaxRestoreWarnings = 16;

 private:
  HostManager(HostConfig config, std::unique_ptr<ResourceManagers> managers);
  // The registry changed a resource: its record is journaled, or (removed)
  // a new snapshot leaves it out.
  void OnResourceChange(const std::string& resource,
                        PluginRegistry::Change change);
  // An admitted pod's checkpoint record is appended to `*record` and the
  // pod is left pending (busy, not visible) under `request`; that request
  // commits it. A pod pending under another request is refused as busy:
  // its answer is not durable yet.
  PodResult AdmitOne(const manager::Pod& pod, bool explain,
                     const std::function<bool()>& cancelled, uint64_t request,
                     std::string* record);
  // REQUIRES: the admission slot held, the pod marked busy.
  PodResult AdmitInSlot(const manager::Pod& pod, bool explain, uint64_t request,
                        std::string* record);
  // The admission's explanation: each merge with the Memory Manager's lines.
  nlohmann::json Explain(const manager::Pod& pod,
                         const std::vector<manager::MergeTrace>& traces) const;
  // A pod's answer with what it holds now, read from the managers.
  PodResult Answer(const PodRecord& record) const;
  // Makes the admissions of `request` durable (one append and sync of
  // `records`), then visible; when they cannot be, undoes them and turns
  // their results into UnexpectedAdmissionError. Pods pending under other
  // requests are never touched.
  void Commit(uint64_t request, const std::string& records,
              std::vector<PodResult>& results);
  const HostConfig config_;
  // Lock order, each taken only after those above it (docs/architecture.md):
  //   admission slot (ledger_)  one admission at a time, no lock held
  //   journal_                  the checkpoint's store
  //   ledger_                   the pods admitted, pending, busy
  //   registry_                 plugin endpoints
  //   managers_                 each manager's own state
  const std::unique_ptr<ResourceManagers> managers_;
  mutable PodLedger ledger_;
  std::unique_ptr<PluginRegistry> registry_;
  std::unique_ptr<HostJournal> journal_;

  mutable Mutex mu_;  // a leaf: nothing is taken under it
  std::vector<std::string> restore_warnings_ TOPOLOGY_GUARDED_BY(mu_);

  // kubelet.sock and the control socket (host_server.h).
  std::unique_ptr<HostServer> server_;
  std::atomic<bool> stopping_ = false;
};

}  // namespace topology::host

#endif  // TOPOLOGY_HOST_HOST_MANAGER_H_
