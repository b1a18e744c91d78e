#include "topology/manager/cpu_manager.h"

#include <algorithm>
#include <climits>
#include <memory>
#include <optional>
#include <set>
#include <tuple>
#include <vector>

#include "topology/manager/numa_hints.h"
#include "topology/manager/policy_options.h"

#include "cpu_assignment.h"

namespace topology::manager {
namespace {

constexpr char kPodKey[] = "";  // pod-scope hints are keyed by no container

// The static policy's options of v1.37 (cpumanager/policy_options.go) by
// maturity: alpha ones need the CPUManagerPolicyAlphaOptions gate (off by
// default), beta ones CPUManagerPolicyBetaOptions (on by default).
constexpr char kFullPcpusOnly[] = "full-pcpus-only";
constexpr char kStrictCpuReservation[] = "strict-cpu-reservation";
constexpr char kDistributeAcrossNuma[] = "distribute-cpus-across-numa";
constexpr char kAlignBySocket[] = "align-by-socket";
constexpr char kDistributeAcrossCores[] = "distribute-cpus-across-cores";
constexpr char kPreferUncore[] = "prefer-align-cpus-by-uncorecache";
enum class Maturity { kAlpha, kBeta, kStable };
const std::map<std::string, Maturity, std::less<>>& KnownOptions() {
  static const std::map<std::string, Maturity, std::less<>> options = {
      {kFullPcpusOnly, Maturity::kStable},
      {kStrictCpuReservation, Maturity::kStable},
      {kPreferUncore, Maturity::kStable},
      {kDistributeAcrossNuma, Maturity::kBeta},
      {kAlignBySocket, Maturity::kAlpha},
      {kDistributeAcrossCores, Maturity::kAlpha}};
  return options;
}

}  // namespace

StatusOr<CpuManager::Options> CpuManager::ParseOptions(
    const CpuManagerConfig& config) {
  Options out;
  const auto& options = config.options;
  if (options.empty()) return out;
  if (config.policy == kCpuPolicyNone) {
    // As Go prints the map: "map[a:b c:d]", keys in order.
    std::string printed;
    for (const auto& [name, value] : options) {
      printed += (printed.empty() ? "" : " ") + name + ":" + value;
    }
    return InvalidArgumentError(
        "None policy: received unsupported options=map[" + printed + "]");
  }
  const std::map<std::string, bool*> fields = {
      {kFullPcpusOnly, &out.full_pcpus_only},
      {kStrictCpuReservation, &out.strict_cpu_reservation},
      {kDistributeAcrossNuma, &out.distribute_across_numa},
      {kAlignBySocket, &out.align_by_socket},
      {kDistributeAcrossCores, &out.distribute_across_cores},
      {kPreferUncore, &out.prefer_uncore}};
  for (const auto& [name, value] : options) {
    const auto known = KnownOptions().find(name);
    if (known == KnownOptions().end()) {
      return InvalidArgumentError("unknown CPU Manager Policy option: \"" +
                                  name + "\"");
    }
    if (known->second == Maturity::kAlpha && !config.alpha_options) {
      return InvalidArgumentError(
          "CPU Manager Policy Alpha-level Options not enabled, but option \"" +
          name + "\" provided");
    }
    if (known->second == Maturity::kBeta && !config.beta_options) {
      return InvalidArgumentError(
          "CPU Manager Policy Beta-level Options not enabled, but option \"" +
          name + "\" provided");
    }
    const std::optional<bool> on = ParseGoBool(value);
    if (!on) {
      return InvalidArgumentError("bad value for option \"" + name +
                                  "\": strconv.ParseBool: parsing \"" + value +
                                  "\": invalid syntax");
    }
    *fields.at(name) = *on;
  }
  // The pairs NewStaticPolicyOptions refuses, in its order.
  const std::vector<std::tuple<bool, bool, const char*, const char*>>
      exclusive = {{out.full_pcpus_only, out.distribute_across_cores,
                    kFullPcpusOnly, kDistributeAcrossCores},
                   {out.distribute_across_numa, out.distribute_across_cores,
                    kDistributeAcrossNuma, kDistributeAcrossCores},
                   {out.prefer_uncore, out.distribute_across_cores,
                    kPreferUncore, kDistributeAcrossCores},
                   {out.prefer_uncore, out.distribute_across_numa,
                    kPreferUncore, kDistributeAcrossNuma}};
  for (const auto& [a, b, name_a, name_b] : exclusive) {
    if (a && b) {
      return InvalidArgumentError(std::string("static policy options ") +
                                  name_a + " and " + name_b +
                                  " can not be used at the same time");
    }
  }
  return out;
}

StatusOr<std::unique_ptr<CpuManager>> CpuManager::Create(
    const std::string& policy, const Topology& topology, const CpuSet& reserved,
    const Store* store, const std::map<std::string, std::string>& options) {
  CpuManagerConfig config;
  config.policy = policy;
  config.reserved = reserved;
  config.options = options;
  return Create(config, topology, store);
}

StatusOr<std::unique_ptr<CpuManager>> CpuManager::Create(
    const CpuManagerConfig& config, const Topology& topology,
    const Store* store) {
  const std::string& policy = config.policy;
  CpuSet reserved = config.reserved;
  if (policy != kCpuPolicyNone && policy != kCpuPolicyStatic) {
    return InvalidArgumentError("unknown policy: \"" + policy + "\"");
  }
  auto parsed = ParseOptions(config);
  if (!parsed.ok()) return parsed.status();
  std::map<int, CpuPlace> cpus;
  for (const CpuInfo& cpu : topology.cpus()) {
    cpus[cpu.id] =
        CpuPlace{cpu.numa_node.value_or(-1), std::max(cpu.package_id, 0)};
  }
  auto view = std::make_unique<CpuTopologyView>(DiscoverCpuTopology(topology));
  // ValidateStaticPolicyOptions.
  if (parsed->align_by_socket) {
    if (config.topology_policy == "single-numa-node") {
      return InvalidArgumentError(
          "Topolgy manager single-numa-node policy is incompatible with "
          "CPUManager align-by-socket policy option");
    }
    if (view->num_sockets > view->num_numa_nodes) {
      return InvalidArgumentError(
          "Align by socket is not compatible with hardware where number of "
          "sockets are more than number of NUMA");
    }
  }
  for (int id : reserved.Ids()) {
    if (!cpus.count(id)) {
      return InvalidArgumentError("reserved CPU " + std::to_string(id) +
                                  " is not a CPU of " + topology.source());
    }
  }
  if (policy == kCpuPolicyStatic) {
    const int count =
        config.reserved_count < 0 ? reserved.Count() : config.reserved_count;
    // The kubelet's manager, then NewStaticPolicy.
    if (count == 0 && config.require_reservation) {
      return InvalidArgumentError(
          "[cpumanager] the static policy requires systemreserved.cpu + "
          "kubereserved.cpu to be greater than zero (--reserved-cpus, or cpu "
          "in --kube-reserved or --system-reserved)");
    }
    if (reserved.empty() && count > 0) {
      CpuSet all;
      for (const auto& [id, place] : cpus) all.Add(id);
      auto taken = TakeByTopology(*parsed, *view, all, count);
      if (taken.ok()) reserved = *taken;
    }
    if (reserved.Count() != count) {
      return InvalidArgumentError(
          "[cpumanager] unable to reserve the required amount of CPUs (size "
          "of " +
          reserved.ToList() + " did not equal " + std::to_string(count) + ")");
    }
  }
  std::vector<int> nodes;
  for (const NumaNode& node : topology.numa_nodes()) {
    if (node.has_cpus()) nodes.push_back(node.id);
  }
  CpuSet reserved_cores;
  for (int id : reserved.Ids()) {
    const int core = view->cpus.at(id).core;
    for (const auto& [cpu, detail] : view->cpus) {
      if (detail.core == core) reserved_cores.Add(cpu);
    }
  }
  return std::unique_ptr<CpuManager>(new CpuManager(
      policy == kCpuPolicyStatic, *parsed, std::move(nodes), std::move(cpus),
      std::move(view), reserved, std::move(reserved_cores), store));
}

CpuManager::CpuManager(bool is_static, Options options,
                       std::vector<int> cpu_nodes, std::map<int, CpuPlace> cpus,
                       std::unique_ptr<const CpuTopologyView> view,
                       CpuSet reserved, CpuSet reserved_cores,
                       const Store* store)
    : static_(is_static),
      options_(options),
      cpu_nodes_(std::move(cpu_nodes)),
      cpus_(std::move(cpus)),
      view_(std::move(view)),
      reserved_(std::move(reserved)),
      reserved_cores_(std::move(reserved_cores)),
      store_(store) {}

CpuManager::~CpuManager() = default;

int64_t CpuManager::GuaranteedCpus(const Pod& pod, const Container& container) {
  if (!pod.guaranteed) return 0;
  const auto it = container.limits.find(kCpuResource);
  if (it == container.limits.end() || it->second <= 0 ||
      it->second % 1000 != 0) {
    return 0;
  }
  return it->second / 1000;
}

CpuSet CpuManager::Assigned() const {
  CpuSet assigned;
  for (const auto& [key, set] : assignments_) assigned = assigned.Union(set);
  return assigned;
}

CpuSet CpuManager::Allocatable() const {
  CpuSet free;
  const CpuSet assigned = Assigned();
  for (const auto& [id, place] : cpus_) {
    if (!reserved_.Contains(id) && !assigned.Contains(id)) free.Add(id);
  }
  return free;
}

CpuSet CpuManager::SharedPool() const {
  MutexLock lock(mutex_);
  return Allocatable();
}

CpuSet CpuManager::DefaultCpuSet() const {
  MutexLock lock(mutex_);
  return options_.strict_cpu_reservation ? Allocatable()
                                         : Allocatable().Union(reserved_);
}

Status CpuManager::CheckSmtAlignment(int64_t requested) const {
  if (!options_.full_pcpus_only) return OkStatus();
  const int per_core =
      view_->num_cores == 0 ? 0 : view_->num_cpus / view_->num_cores;
  if (per_core > 0 && requested % per_core != 0) {
    return FailedPreconditionError(
               "SMT Alignment Error: requested " + std::to_string(requested) +
               " cpus not multiple cpus per core = " + std::to_string(per_core))
        .WithReason(kSmtAlignmentError);
  }
  // The free CPUs less every core a reserved CPU is on: a request that is
  // a multiple of the threads per core then always takes whole cores.
  int available = 0;
  for (int id : Allocatable().Ids()) {
    if (!reserved_cores_.Contains(id)) ++available;
  }
  if (requested > available) {
    return FailedPreconditionError(
               "SMT Alignment Error: not enough free physical CPUs: "
               "available physical CPUs = " +
               std::to_string(available) +
               ", requested CPUs = " + std::to_string(requested) +
               ", CPUs per core = " + std::to_string(per_core))
        .WithReason(kSmtAlignmentError);
  }
  return OkStatus();
}

HintList CpuManager::Generate(const CpuSet& available, const CpuSet& reusable,
                              int64_t request) const {
  const auto mask_of = [&](int cpu) {
    const int node = cpus_.at(cpu).numa_node;
    return node >= 0 && node < NumaMask::kMaxNodes
               ? NumaMask::FromBits(uint64_t{1} << node)
               : NumaMask();
  };
  HintRequest hint_request;
  hint_request.node_ids = cpu_nodes_;
  // Beyond INT_MAX no machine has enough CPUs: saturating keeps the answer.
  hint_request.request =
      static_cast<int>(std::clamp<int64_t>(request, 0, INT_MAX));
  for (const auto& [id, place] : cpus_)
    hint_request.all_items.push_back(mask_of(id));
  for (int id : available.Ids())
    hint_request.available_items.push_back(mask_of(id));
  for (int id : reusable.Ids())
    hint_request.reusable_items.push_back(mask_of(id));
  if (!options_.align_by_socket ||
      static_cast<int>(cpu_nodes_.size()) > kCompactHintsAboveNodes) {
    return GenerateHintList(hint_request, HintForm::kAuto);
  }
  // align-by-socket: a hint is also preferred when its nodes span as few
  // sockets as the smallest fitting set of nodes needs (the kubelet's
  // generateCPUTopologyHints). The smallest number of nodes whose CPUs
  // hold the request: the largest nodes first.
  std::vector<int> sizes;
  for (int node : cpu_nodes_) {
    int n = 0;
    for (const auto& [id, place] : cpus_) n += place.numa_node == node;
    sizes.push_back(n);
  }
  std::sort(sizes.rbegin(), sizes.rend());
  int min_affinity = static_cast<int>(cpu_nodes_.size());
  int sum = 0;
  for (size_t k = 0; k < sizes.size(); ++k) {
    sum += sizes[k];
    if (sum >= hint_request.request) {
      min_affinity = static_cast<int>(k) + 1;
      break;
    }
  }
  std::vector<TopologyHint> hints = GenerateNumaHints(hint_request);
  for (TopologyHint& hint : hints) {
    if (hint.affinity && SocketAligned(*hint.affinity, min_affinity)) {
      hint.preferred = true;
    }
  }
  return hints;
}

bool CpuManager::SocketAligned(const NumaMask& mask, int min_affinity) const {
  const int per_socket =
      view_->num_sockets == 0 ? 0 : view_->num_numa_nodes / view_->num_sockets;
  if (per_socket == 0) return false;
  const int min_sockets = (min_affinity + per_socket - 1) / per_socket;
  std::set<int> sockets;
  for (const auto& [id, detail] : view_->cpus) {
    if (mask.IsSet(detail.numa_node)) sockets.insert(detail.socket);
  }
  return static_cast<int>(sockets.size()) == min_sockets;
}

CpuSet CpuManager::Aligned(const NumaMask& affinity, const CpuSet& from) const {
  std::set<int> sockets;
  if (options_.align_by_socket) {
    for (const auto& [id, detail] : view_->cpus) {
      if (affinity.IsSet(detail.numa_node)) sockets.insert(detail.socket);
    }
  }
  CpuSet aligned;
  for (int id : from.Ids()) {
    const bool in = options_.align_by_socket
                        ? sockets.count(view_->cpus.at(id).socket) > 0
                        : affinity.IsSet(cpus_.at(id).numa_node);
    if (in) aligned.Add(id);
  }
  return aligned;
}

ProviderHints CpuManager::HintsFor(const Pod& pod,
                                   const std::string& container_key,
                                   int64_t requested) const {
  if (!static_ || requested == 0) return {};
  // Already assigned (a restart): regenerate from exactly those CPUs.
  if (auto it = assignments_.find({pod.uid, container_key});
      it != assignments_.end()) {
    if (it->second.Count() != requested) {
      return {{kCpuResource, std::vector<TopologyHint>{}}};
    }
    return {{kCpuResource, Generate(it->second, CpuSet(), requested)}};
  }
  const CpuSet reusable = reuse_pod_ == pod.uid ? reusable_ : CpuSet();
  return {{kCpuResource, Generate(Allocatable(), reusable, requested)}};
}

ProviderHints CpuManager::GetTopologyHints(const Pod& pod,
                                           const Container& container) {
  MutexLock lock(mutex_);
  return HintsFor(pod, container.name, GuaranteedCpus(pod, container));
}

ProviderHints CpuManager::GetPodTopologyHints(const Pod& pod) {
  MutexLock lock(mutex_);
  return HintsFor(pod, kPodKey, EffectiveRequest(pod, [&](const Container& c) {
                    return GuaranteedCpus(pod, c);
                  }));
}

StatusOr<CpuSet> CpuManager::TakeByTopology(const Options& options,
                                            const CpuTopologyView& view,
                                            const CpuSet& from, int count) {
  const CpuSorting sorting = options.distribute_across_cores
                                 ? CpuSorting::kSpread
                                 : CpuSorting::kPacked;
  if (options.distribute_across_numa) {
    const int group = options.full_pcpus_only ? view.CpusPerCore() : 1;
    return TakeByTopologyNumaDistributed(view, from, count, group, sorting,
                                         options.align_by_socket);
  }
  return TakeByTopologyNumaPacked(
      view, from, count,
      {.sorting = sorting, .prefer_uncore = options.prefer_uncore});
}

Status CpuManager::Allocate(const Pod& pod, const Container& container) {
  MutexLock lock(mutex_);
  if (reuse_pod_ != pod.uid) {
    reuse_pod_ = pod.uid;
    reusable_ = CpuSet();
  }
  const int64_t requested64 = GuaranteedCpus(pod, container);
  if (!static_ || requested64 == 0) return OkStatus();
  if (assignments_.count({pod.uid, container.name})) return OkStatus();
  if (Status smt = CheckSmtAlignment(requested64); !smt.ok()) return smt;
  if (requested64 > static_cast<int64_t>(cpus_.size())) {
    return ResourceExhaustedError(
        "not enough cpus available to satisfy request: requested=" +
        std::to_string(requested64) + ", available=" +
        std::to_string(Allocatable().Union(reusable_).Count()));
  }
  const int requested = static_cast<int>(requested64);
  const bool is_init =
      std::any_of(pod.init_containers.begin(), pod.init_containers.end(),
                  [&](const Container& c) {
                    return c.name == container.name && !c.restartable;
                  });
  // The kubelet's allocateCPUs: the CPUs of the affinity's NUMA nodes
  // first, as many as they give, then the rest; both from the free CPUs and
  // those the pod's finished init containers leave.
  const CpuSet allocatable = Allocatable().Union(reusable_);
  CpuSet result;
  const TopologyHint hint = store_ != nullptr
                                ? store_->GetAffinity(pod.uid, container.name)
                                : TopologyHint{};
  if (hint.affinity.has_value()) {
    const CpuSet aligned = Aligned(*hint.affinity, allocatable);
    auto taken = TakeByTopology(aligned, std::min(requested, aligned.Count()));
    if (!taken.ok()) return taken.status();
    result = *taken;
  }
  CpuSet rest;
  for (int id : allocatable.Ids()) {
    if (!result.Contains(id)) rest.Add(id);
  }
  auto taken = TakeByTopology(rest, requested - result.Count());
  if (!taken.ok()) return taken.status();
  result = result.Union(*taken);
  assignments_[{pod.uid, container.name}] = result;
  if (is_init) {
    reusable_ = reusable_.Union(result);
  } else {
    CpuSet left;
    for (int id : reusable_.Ids()) {
      if (!result.Contains(id)) left.Add(id);
    }
    reusable_ = left;
  }
  return OkStatus();
}

void CpuManager::RemovePod(const std::string& pod_uid) {
  MutexLock lock(mutex_);
  // Keyed by (pod, container): the pod's entries are one range.
  auto it = assignments_.lower_bound({pod_uid, std::string()});
  while (it != assignments_.end() && it->first.first == pod_uid)
    it = assignments_.erase(it);
  if (reuse_pod_ == pod_uid) {
    reuse_pod_.clear();
    reusable_ = CpuSet();
  }
}

void CpuManager::RemoveContainer(const std::string& pod_uid,
                                 const std::string& container) {
  MutexLock lock(mutex_);
  // CPUs a sibling shares stay assigned through the sibling's entry.
  assignments_.erase({pod_uid, container});
}

Status CpuManager::Start(const CpuManagerState& state) {
  MutexLock lock(mutex_);
  if (!assignments_.empty()) {
    return FailedPreconditionError(
        "the CPU manager starts from a state only before it assigns CPUs");
  }
  if (!static_) return OkStatus();
  CpuSet all;
  for (const auto& [id, place] : cpus_) {
    if (!options_.strict_cpu_reservation || !reserved_.Contains(id)) {
      all.Add(id);
    }
  }
  const CpuSet& shared = state.default_set;
  // Go's %q of a CPU list.
  const auto q = [](const CpuSet& set) { return "\"" + set.ToList() + "\""; };
  if (shared.empty()) {
    if (!state.assignments.empty()) {
      return FailedPreconditionError("default cpuset cannot be empty");
    }
    return OkStatus();
  }
  if (options_.strict_cpu_reservation) {
    if (reserved_.Intersects(shared)) {
      return FailedPreconditionError(
          "some of strictly reserved cpus: " +
          q(reserved_.Intersection(shared)) +
          " are present in defaultCpuSet: " + q(shared));
    }
  } else if (!reserved_.IsSubsetOf(shared)) {
    return FailedPreconditionError(
        "not all reserved cpus: " + q(reserved_) +
        " are present in defaultCpuSet: " + q(shared));
  }
  CpuSet known = shared;
  for (const auto& [key, set] : state.assignments) {
    if (set.Intersects(shared)) {
      return FailedPreconditionError(
          "pod: " + key.first + ", container: " + key.second +
          " cpuset: " + q(set) + " overlaps with default cpuset " + q(shared));
    }
    known = known.Union(set);
  }
  if (!(known == all)) {
    return FailedPreconditionError("current set of available CPUs " + q(all) +
                                   " doesn't match with CPUs in state " +
                                   q(known));
  }
  for (const auto& [key, set] : state.assignments) {
    if (!set.empty()) assignments_[key] = set;
  }
  return OkStatus();
}

Status CpuManager::Restore(const std::string& pod_uid,
                           const std::string& container, const CpuSet& cpus) {
  MutexLock lock(mutex_);
  if (cpus.empty()) return OkStatus();
  if (!static_) {
    return InvalidArgumentError("exclusive CPUs " + cpus.ToList() + " of " +
                                pod_uid + "/" + container +
                                " with the none CPU policy");
  }
  if (!cpus.IsSubsetOf(Allocatable())) {
    return InvalidArgumentError("CPUs " + cpus.ToList() + " of " + pod_uid +
                                "/" + container +
                                " are reserved, unknown or already assigned");
  }
  assignments_[{pod_uid, container}] = cpus;
  return OkStatus();
}

CpuSet CpuManager::ContainerCpus(const std::string& pod_uid,
                                 const std::string& container) const {
  MutexLock lock(mutex_);
  const auto it = assignments_.find({pod_uid, container});
  return it == assignments_.end() ? CpuSet() : it->second;
}

}  // namespace topology::manager
