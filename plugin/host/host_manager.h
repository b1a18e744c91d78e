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
//   HostManager (here)     admission and release: their order, the pods
//                          admitted, and the journal (CheckpointStore)
//   host_views.h           status and NodeResourceTopology, rendered from
//                          a typed snapshot
//   HostServer             kubelet.sock and the control socket: the
//                          servers and their acceptors (host_server.h)
//   host_services.h        the thin gRPC services
#ifndef TOPOLOGY_HOST_HOST_MANAGER_H_
#define TOPOLOGY_HOST_HOST_MANAGER_H_

#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "topology/clock.h"
#include "topology/cost_model.h"
#include "topology/cpu_set.h"
#include "topology/manager/cpu_manager.h"
#include "topology/manager/device_manager.h"
#include "topology/manager/memory_manager.h"
#include "topology/manager/numa_info.h"
#include "topology/manager/pod.h"
#include "topology/manager/topology_manager.h"
#include "topology/status.h"
#include "topology/thread_annotations.h"
#include "topology/topology.h"

#include "host_server.h"
#include "host_views.h"
#include "plugin_registry.h"
#include "pod_result.h"

namespace topology::host {

class CheckpointStore;
struct CheckpointMemory;

inline constexpr char kCheckpointFile[] = "topology_manager_checkpoint";

struct HostConfig {
  std::filesystem::path plugin_dir = "/var/lib/kubelet/device-plugins/";
  // Empty: no control socket (tests drive the manager directly).
  std::filesystem::path control_socket = "/run/topology-manager.sock";
  std::string node_name;
  manager::ManagerConfig topology;  // policy, scope, options
  std::string cpu_policy = manager::kCpuPolicyNone;
  // The static policy's options (--cpu-manager-policy-options).
  std::map<std::string, std::string> cpu_policy_options;
  CpuSet reserved_cpus;
  // Without reserved_cpus: the kubelet's numReservedCPUs (--kube-reserved
  // plus --system-reserved cpu, rounded up), which the static policy then
  // chooses itself; -1 when unset.
  int reserved_cpu_count = -1;
  // The kubelet's --feature-gates / featureGates: those that decide what
  // the managers accept (CPUManagerPolicyAlphaOptions,
  // CPUManagerPolicyBetaOptions) are read, PodLevelResourceManagers on is
  // refused (not modelled); others are kept but unused.
  std::map<std::string, bool> feature_gates;
  // The kubelet's Memory Manager: --memory-manager-policy, --reserved-memory
  // and the Node Allocatable reservation of memory types (kube-reserved +
  // system-reserved + hard eviction).
  manager::MemoryManager::Options memory;
  // Beyond the kubelet (KEP-6232, opt-in): on restart, a node's regular
  // memory total may differ from the checkpoint's by up to this many bytes
  // (a reboot moves the kernel image between nodes); 0 compares exactly,
  // as the kubelet does.
  uint64_t memory_drift_tolerance = 0;
  // A plugin that disconnected is removed after this long.
  std::chrono::milliseconds grace_period = std::chrono::minutes(5);
  // Opt-in, beyond the kubelet: choose the devices of a container that asks
  // for several PCI device resources together, by PCIe cost (the cost-graph
  // selector), instead of one resource at a time.
  bool cost_based_selection = false;
  // How long Register waits for the plugin's socket to accept (the
  // kubelet's 10 s).
  std::chrono::milliseconds dial_timeout = std::chrono::seconds(10);
  // Deadline of every GetPreferredAllocation and Allocate call. Beyond the
  // kubelet, which sets none: a hung plugin fails the admissions that need
  // it (UnexpectedAdmissionError) instead of stalling the node.
  std::chrono::milliseconds rpc_timeout = std::chrono::seconds(30);
  // Group allowed to use the control socket (mode 0660); -1: root only
  // (mode 0600).
  int control_group = -1;
  // A checkpoint larger than this is refused as corrupt.
  size_t max_checkpoint_bytes = size_t{256} << 20;
  // Time for the grace period and the plugin endpoints' pauses; not owned.
  const Clock* clock = &Clock::Real();
};

class HostManager {
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
  // Admits `pods` in order and writes the checkpoint once at the end;
  // stops early (the rest are not admitted, reason "Cancelled") when
  // `cancelled` returns true or the manager stops.
  std::vector<PodResult> AdmitAll(const std::vector<manager::Pod>& pods,
                                  bool explain,
                                  const std::function<bool()>& cancelled);
  // By uid, "namespace/name" or name. NOT_FOUND when unknown; UNAVAILABLE
  // while the same pod is being admitted. Never waits for an admission.
  Status Release(const std::string& pod);

  // The state at one instant, for the views.
  HostSnapshot Snapshot() const;
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

  struct ResourceView {
    size_t capacity = 0;
    size_t allocatable = 0;
    bool stopped = false;
    std::string endpoint;  // socket path of the current plugin
  };
  std::map<std::string, ResourceView> Resources() const;
  const HostConfig& config() const { return config_; }
  // What the last restore kept but found suspect (a held device that no
  // recorded plugin list offers), one line each naming pod, container,
  // resource and device; at most kMaxRestoreWarnings.
  std::vector<std::string> RestoreWarnings() const TOPOLOGY_EXCLUDES(mu_);
  static constexpr size_t kMaxRestoreWarnings = 16;

 private:
  struct PodRecord {
    manager::Pod pod;
    PodResult result;
    // The admission request that made a pending record; only that request
    // answers with it and commits it (0 once committed).
    uint64_t request = 0;
  };

  HostManager(HostConfig config, Topology topology, manager::NumaInfo numa);
  // The registry changed a resource: its record is journaled, or (removed)
  // a new snapshot leaves it out.
  void OnResourceChange(const std::string& resource,
                        PluginRegistry::Change change) TOPOLOGY_EXCLUDES(mu_);
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
  // Makes the admissions of `request` durable (one append and sync of
  // `records`), then visible; when they cannot be, undoes them and turns
  // their results into UnexpectedAdmissionError. Pods pending under other
  // requests are never touched.
  void Commit(uint64_t request, const std::string& records,
              std::vector<PodResult>& results);
  // A new admission request's identity (never 0).
  uint64_t NextRequest();
  // Waits for the admission slot; false when cancelled or stopping.
  bool LockAdmission(const std::function<bool()>& cancelled);
  void UnlockAdmission();
  // The whole state as a checkpoint snapshot.
  std::string EncodeSnapshot() const TOPOLOGY_REQUIRES(mu_);
  // A journal record of one resource's healthy devices.
  std::string ResourceRecord(const std::string& name) const;
  // Appends journal records (synced) and compacts when the journal has
  // outgrown the snapshot; errors are logged and returned. Must not be
  // called with mu_ held (a compaction takes it).
  Status Persist(std::string_view records) TOPOLOGY_EXCLUDES(mu_);
  // A new snapshot and an empty journal. Must not be called with mu_ held.
  Status Compact() TOPOLOGY_EXCLUDES(mu_);
  // Compacts when the journal has outgrown the snapshot or cannot be
  // appended to; true when it did. Must not be called with mu_ held.
  bool CompactIfNeeded() TOPOLOGY_EXCLUDES(mu_);
  // Reads the checkpoint; `*refusal` is set when the memory manager must
  // refuse to start (the returned status is only logged).
  Status RestoreCheckpoint(Status* refusal);
  // The memory manager's policy and machine as the checkpoint records them.
  CheckpointMemory MemoryRecord() const;
  // validateState's comparison of a recorded machine with this one, with
  // the configured drift tolerance; FAILED_PRECONDITION naming the first
  // difference.
  Status CheckMemoryRecord(const CheckpointMemory& recorded) const;
  // Every allocation of `uid` given back (devices, CPUs, memory, affinity).
  void ForgetAllocations(const std::string& uid);
  // Waits until no other request admits or releases `uid` (its admission
  // pending under `request` itself does not count), so that a second
  // caller for the same pod answers from what the first one left. kHeld,
  // without waiting, when `request` itself holds admissions not yet
  // committed (two such requests waiting on each other's pods would wait
  // forever); kCancelled when `cancelled` says so or the manager stops.
  enum class BusyWait { kFree, kHeld, kCancelled };
  BusyWait WaitUntilNotBusy(const std::string& uid, uint64_t request,
                            const std::function<bool()>& cancelled)
      TOPOLOGY_EXCLUDES(mu_);
  // Takes `uid` out of busy_ and wakes those waiting for it.
  void EndBusy(const std::string& uid) TOPOLOGY_REQUIRES(mu_);
  // By uid, "namespace/name" or unique name. REQUIRES: mu_ (for the map)
  static const PodRecord* FindPod(const std::map<std::string, PodRecord>& pods,
                                  const std::string& key);

  HostConfig config_;
  Topology topology_;
  manager::NumaInfo numa_;
  std::unique_ptr<manager::TopologyManager> topology_manager_;
  std::unique_ptr<manager::DeviceManager> device_manager_;
  std::unique_ptr<manager::CpuManager> cpu_manager_;
  std::unique_ptr<manager::MemoryManager> memory_manager_;
  std::unique_ptr<CostModel> cost_model_;   // with cost_based_selection
  std::unique_ptr<CheckpointStore> store_;  // its own lock, taken before mu_
  std::unique_ptr<PluginRegistry> registry_;

  mutable Mutex mu_;
  // By uid; durable.
  std::map<std::string, PodRecord> pods_ TOPOLOGY_GUARDED_BY(mu_);
  // Admitted, their records not yet durable: busy, in no view, released
  // by nobody; Commit moves them to pods_ or undoes them.
  std::map<std::string, PodRecord> pending_ TOPOLOGY_GUARDED_BY(mu_);
  // uids being admitted or released; busy_done_ is notified when one
  // leaves it.
  std::set<std::string> busy_ TOPOLOGY_GUARDED_BY(mu_);
  std::condition_variable_any busy_done_;
  uint64_t last_request_ TOPOLOGY_GUARDED_BY(mu_) = 0;
  std::vector<std::string> restore_warnings_ TOPOLOGY_GUARDED_BY(mu_);
  size_t pods_high_water_ = 0;  // most pods held since the last heap trim
  static constexpr size_t kTrimAfterPods = 64;
  // Pods are admitted one at a time: the admission slot.
  Mutex admission_mu_;
  std::condition_variable_any admission_free_;
  bool admitting_ TOPOLOGY_GUARDED_BY(admission_mu_) = false;

  // kubelet.sock and the control socket (host_server.h).
  std::unique_ptr<HostServer> server_;
  bool stopping_ TOPOLOGY_GUARDED_BY(mu_) = false;
  // The checkpoint was read: Stop compacts it.
  bool restored_ TOPOLOGY_GUARDED_BY(mu_) = false;
};

}  // namespace topology::host

#endif  // TOPOLOGY_HOST_HOST_MANAGER_H_
