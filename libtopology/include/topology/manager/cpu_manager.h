// CpuManager: the kubelet CPU manager's topology side as a HintProvider.
// With the static policy, a container of a Guaranteed pod with an integer
// CPU limit gets exclusive CPUs: hints come from the CPUs of each NUMA node
// (the kubelet's generateCPUTopologyHints), and Allocate takes them as the
// kubelet's static policy does (allocateCPUs): from the free CPUs and those
// the pod's finished init containers leave, first those of the stored
// affinity's NUMA nodes, then the rest, each time in the order of the
// kubelet's cpu_assignment.go (whole NUMA nodes and sockets, whole cores,
// then single CPUs, the most used first).
// Other containers share the pool and give no hint. Reserved CPUs are never
// handed out. With the none policy it gives no hints and allocates nothing.
//
// Thread safety: all methods lock an internal mutex.
#ifndef TOPOLOGY_MANAGER_CPU_MANAGER_H_
#define TOPOLOGY_MANAGER_CPU_MANAGER_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "topology/cpu_set.h"
#include "topology/export.h"
#include "topology/manager/hint_provider.h"
#include "topology/manager/store.h"
#include "topology/thread_annotations.h"
#include "topology/topology.h"

namespace topology::manager {

struct CpuTopologyView;

inline constexpr char kCpuPolicyNone[] = "none";
inline constexpr char kCpuPolicyStatic[] = "static";
// The kubelet's admission reason for a full-pcpus-only refusal.
inline constexpr char kSmtAlignmentError[] = "SMTAlignmentError";

// What the CPU manager is made from beyond the machine: the kubelet's
// --cpu-manager-policy, --reserved-cpus, --cpu-manager-policy-options,
// the feature gates its options need and the Topology Manager's policy
// (align-by-socket refuses single-numa-node).
struct CpuManagerConfig {
  std::string policy = "none";
  CpuSet reserved = {};
  std::map<std::string, std::string> options = {};
  // CPUManagerPolicyAlphaOptions (off by default) and
  // CPUManagerPolicyBetaOptions (on by default).
  bool alpha_options = false;
  bool beta_options = true;
  std::string topology_policy = "none";
  // The kubelet's numReservedCPUs: kubeReserved.cpu + systemReserved.cpu
  // in whole CPUs, rounded up (--reserved-cpus makes it that set's size);
  // -1 takes the size of `reserved`. With `reserved` empty, the static
  // policy reserves this many CPUs itself, taken as it takes a container's
  // (NewStaticPolicy); else the two must agree.
  int reserved_count = -1;
  // The kubelet's manager refuses a static policy that reserves no CPU;
  // its policy alone (NewStaticPolicy, as upstream's tables run it) takes
  // one. Only those tables clear this.
  bool require_reservation = true;
};

// The kubelet's cpu_manager_state as the static policy reads it at start:
// the default CPU set and each (pod UID, container)'s exclusive CPUs.
struct CpuManagerState {
  CpuSet default_set = {};
  std::map<std::pair<std::string, std::string>, CpuSet> assignments = {};
};

class TOPOLOGY_EXPORT CpuManager final : public HintProvider {
 public:
  // Fails with INVALID_ARGUMENT for an unknown policy, reserved CPUs that
  // are not CPUs of `topology`, or (static) no reserved CPUs, as the kubelet
  // requires a non-empty reservation for the static policy.
  //
  // The options are the kubelet's cpuManagerPolicyOptions, checked as
  // NewStaticPolicyOptions and ValidateStaticPolicyOptions check them, with
  // the kubelet's words: an unknown name, an alpha or beta option without
  // its gate, a value that is not a Go boolean, options that exclude each
  // other, align-by-socket beside single-numa-node or on a machine with
  // more sockets than NUMA nodes; the none policy takes none. Every option
  // of v1.37: full-pcpus-only (whole cores, else SMTAlignmentError),
  // strict-cpu-reservation (the reserved CPUs leave the shared pool),
  // distribute-cpus-across-numa, align-by-socket,
  // distribute-cpus-across-cores and prefer-align-cpus-by-uncorecache.
  //
  // `store` gives each container's affinity; null, none is stored (the
  // kubelet's topologymanager.NewFakeManager).
  static StatusOr<std::unique_ptr<CpuManager>> Create(
      const CpuManagerConfig& config, const Topology& topology,
      const Store* store);
  // The same, with the gates at their defaults and no Topology Manager
  // policy.
  static StatusOr<std::unique_ptr<CpuManager>> Create(
      const std::string& policy, const Topology& topology,
      const CpuSet& reserved, const Store* store,
      const std::map<std::string, std::string>& options = {});

  ~CpuManager() override;

  // Starts from the kubelet's state as its static policy starts
  // (validateState): an empty default set with no assignments is a fresh
  // start; else the reserved CPUs must all be in the default set (none of
  // them, with strict-cpu-reservation), no container's CPUs may be in it,
  // and the default set and the containers' CPUs together must be every
  // CPU of the machine (less the reserved ones, with
  // strict-cpu-reservation). Refused with the kubelet's words
  // (FAILED_PRECONDITION), keeping nothing; else the containers' CPUs are
  // theirs. The none policy starts from any state and keeps none of it.
  // Only before the first allocation or restore.
  Status Start(const CpuManagerState& state);

  ProviderHints GetTopologyHints(const Pod& pod,
                                 const Container& container) override;
  ProviderHints GetPodTopologyHints(const Pod& pod) override;
  Status Allocate(const Pod& pod, const Container& container) override;

  // The static policy: containers get exclusive CPUs.
  bool is_static() const { return static_; }

  void RemovePod(const std::string& pod_uid);
  // The kubelet's RemoveContainer: the container's exclusive CPUs go back
  // to the shared pool, save those another container of the pod still
  // holds (CPUs an init container left to an app container).
  void RemoveContainer(const std::string& pod_uid,
                       const std::string& container);
  // The reserved CPUs: those configured, or those the policy chose.
  const CpuSet& reserved() const { return reserved_; }
  // Puts back a container's exclusive CPUs from a checkpoint. Fails with
  // INVALID_ARGUMENT when they are not allocatable (reserved, unknown or
  // already assigned).
  Status Restore(const std::string& pod_uid, const std::string& container,
                 const CpuSet& cpus);
  // Exclusive CPUs of a container; empty when it shares the pool.
  CpuSet ContainerCpus(const std::string& pod_uid,
                       const std::string& container) const;
  // CPUs not reserved and not assigned exclusively.
  CpuSet SharedPool() const;
  // The kubelet's default CPU set, where containers without exclusive CPUs
  // run: the shared pool and, unless strict-cpu-reservation is set, the
  // reserved CPUs.
  CpuSet DefaultCpuSet() const;

  // Exclusive CPUs a container asks for: its CPU limit in whole CPUs if the
  // pod is Guaranteed and the limit is an integer, else 0.
  static int64_t GuaranteedCpus(const Pod& pod, const Container& container);

 private:
  struct CpuPlace {
    int numa_node = -1;
    int socket = 0;
  };
  // The static policy's options (the kubelet's StaticPolicyOptions).
  struct Options {
    bool full_pcpus_only = false;
    bool strict_cpu_reservation = false;
    bool distribute_across_numa = false;
    bool align_by_socket = false;
    bool distribute_across_cores = false;
    bool prefer_uncore = false;
  };
  static StatusOr<Options> ParseOptions(const CpuManagerConfig& config);
  CpuManager(bool is_static, Options options, std::vector<int> cpu_nodes,
             std::map<int, CpuPlace> cpus,
             std::unique_ptr<const CpuTopologyView> view, CpuSet reserved,
             CpuSet reserved_cores, const Store* store);
  // full-pcpus-only: the kubelet's enforceSMTAlignment.
  Status CheckSmtAlignment(int64_t requested) const TOPOLOGY_REQUIRES(mutex_);

  CpuSet Assigned() const TOPOLOGY_REQUIRES(mutex_);
  CpuSet Allocatable() const TOPOLOGY_REQUIRES(mutex_);
  HintList Generate(const CpuSet& available, const CpuSet& reusable,
                    int64_t request) const;
  // align-by-socket: the kubelet's isHintSocketAligned.
  bool SocketAligned(const NumaMask& mask, int min_affinity) const;
  // The CPUs of `from` aligned with `affinity`: on its NUMA nodes, or with
  // align-by-socket on their sockets (the kubelet's getAlignedCPUs).
  CpuSet Aligned(const NumaMask& affinity, const CpuSet& from) const;
  ProviderHints HintsFor(const Pod& pod, const std::string& container_key,
                         int64_t requested) const TOPOLOGY_REQUIRES(mutex_);
  // Takes `count` CPUs of `from` in the kubelet's order (takeByTopology,
  // with the options that change it).
  static StatusOr<CpuSet> TakeByTopology(const Options& options,
                                         const CpuTopologyView& view,
                                         const CpuSet& from, int count);
  StatusOr<CpuSet> TakeByTopology(const CpuSet& from, int count) const {
    return TakeByTopology(options_, *view_, from, count);
  }

  const bool static_;
  const Options options_;
  const std::vector<int> cpu_nodes_;  // NUMA nodes that have CPUs
  const std::map<int, CpuPlace> cpus_;
  // The machine as the kubelet's CPUTopology (cpu_assignment.h).
  const std::unique_ptr<const CpuTopologyView> view_;
  const CpuSet reserved_;
  // The reserved CPUs with their cores' other threads (the kubelet's
  // reservedPhysicalCPUs).
  const CpuSet reserved_cores_;
  const Store* const store_;
  mutable Mutex mutex_;
  std::map<std::pair<std::string, std::string>, CpuSet> assignments_
      TOPOLOGY_GUARDED_BY(mutex_);
  std::string reuse_pod_ TOPOLOGY_GUARDED_BY(mutex_);
  CpuSet reusable_ TOPOLOGY_GUARDED_BY(mutex_);
};

}  // namespace topology::manager

#endif  // TOPOLOGY_MANAGER_CPU_MANAGER_H_
