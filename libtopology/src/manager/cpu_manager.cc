#include "topology/manager/cpu_manager.h"

#include <algorithm>
#include <climits>
#include <memory>
#include <set>
#include <vector>

#include "topology/manager/numa_hints.h"

#include "cpu_assignment.h"

namespace topology::manager {
namespace {

constexpr char kPodKey[] = "";  // pod-scope hints are keyed by no container

// The static policy's options of v1.37 (cpumanager/policy_options.go) by
// maturity; alpha ones need the CPUManagerPolicyAlphaOptions gate, off by
// default.
constexpr char kFullPcpusOnly[] = "full-pcpus-only";
constexpr char kStrictCpuReservation[] = "strict-cpu-reservation";
const std::set<std::string, std::less<>>& AlphaOptions() {
  static const std::set<std::string, std::less<>> options = {
      "align-by-socket", "distribute-cpus-across-cores"};
  return options;
}
const std::set<std::string, std::less<>>& KnownOptions() {
  static const std::set<std::string, std::less<>> options = {
      kFullPcpusOnly,
      kStrictCpuReservation,
      "prefer-align-cpus-by-uncorecache",
      "distribute-cpus-across-numa",
      "align-by-socket",
      "distribute-cpus-across-cores"};
  return options;
}

// Go's strconv.ParseBool.
std::optional<bool> ParseGoBool(std::string_view text) {
  for (std::string_view yes : {"1", "t", "T", "TRUE", "true", "True"}) {
    if (text == yes) return true;
  }
  for (std::string_view no : {"0", "f", "F", "FALSE", "false", "False"}) {
    if (text == no) return false;
  }
  return std::nullopt;
}

}  // namespace

StatusOr<CpuManager::Options> CpuManager::ParseOptions(
    const std::string& policy,
    const std::map<std::string, std::string>& options) {
  Options out;
  if (options.empty()) return out;
  if (policy == kCpuPolicyNone) {
    // As Go prints the map: "map[a:b c:d]", keys in order.
    std::string printed;
    for (const auto& [name, value] : options) {
      printed += (printed.empty() ? "" : " ") + name + ":" + value;
    }
    return InvalidArgumentError(
        "None policy: received unsupported options=map[" + printed + "]");
  }
  for (const auto& [name, value] : options) {
    if (!KnownOptions().count(name)) {
      return InvalidArgumentError("unknown CPU Manager Policy option: \"" +
                                  name + "\"");
    }
    if (AlphaOptions().count(name)) {
      return InvalidArgumentError(
          "CPU Manager Policy Alpha-level Options not enabled, but option \"" +
          name + "\" provided");
    }
    const std::optional<bool> on = ParseGoBool(value);
    if (!on) {
      return InvalidArgumentError("bad value for option \"" + name +
                                  "\": strconv.ParseBool: parsing \"" + value +
                                  "\": invalid syntax");
    }
    if (name == kFullPcpusOnly) {
      out.full_pcpus_only = *on;
    } else if (name == kStrictCpuReservation) {
      out.strict_cpu_reservation = *on;
    } else if (*on) {
      return Status(StatusCode::kUnimplemented,
                    "CPU Manager Policy option \"" + name +
                        "\" is not implemented by libtopology");
    }
  }
  return out;
}

StatusOr<std::unique_ptr<CpuManager>> CpuManager::Create(
    const std::string& policy, const Topology& topology, const CpuSet& reserved,
    const Store* store, const std::map<std::string, std::string>& options) {
  if (policy != kCpuPolicyNone && policy != kCpuPolicyStatic) {
    return InvalidArgumentError("unknown policy: \"" + policy + "\"");
  }
  auto parsed = ParseOptions(policy, options);
  if (!parsed.ok()) return parsed.status();
  // The kubelet's CPUTopology (cpumanager/topology.Discover): a core is
  // named by its lowest thread, the socket is the package, a CPU outside
  // every NUMA node is on node 0 as cadvisor puts it.
  std::map<int, CpuPlace> cpus;
  auto view = std::make_unique<CpuTopologyView>();
  std::set<int> cores, sockets, nodes_with_cpus;
  for (const CpuInfo& cpu : topology.cpus()) {
    cpus[cpu.id] = CpuPlace{cpu.numa_node.value_or(-1)};
    CpuDetail detail;
    const std::vector<int> siblings = cpu.thread_siblings.Ids();
    detail.core = siblings.empty()
                      ? cpu.id
                      : std::min(cpu.id, *std::min_element(siblings.begin(),
                                                           siblings.end()));
    detail.socket = std::max(cpu.package_id, 0);
    detail.numa_node = std::max(cpu.numa_node.value_or(0), 0);
    view->cpus[cpu.id] = detail;
    cores.insert(detail.core);
    sockets.insert(detail.socket);
    nodes_with_cpus.insert(detail.numa_node);
  }
  view->num_cpus = static_cast<int>(view->cpus.size());
  view->num_cores = static_cast<int>(cores.size());
  view->num_sockets = static_cast<int>(sockets.size());
  view->num_numa_nodes = static_cast<int>(nodes_with_cpus.size());
  for (int id : reserved.Ids()) {
    if (!cpus.count(id)) {
      return InvalidArgumentError("reserved CPU " + std::to_string(id) +
                                  " is not a CPU of " + topology.source());
    }
  }
  if (policy == kCpuPolicyStatic && reserved.empty()) {
    return InvalidArgumentError(
        "the static policy requires systemreserved.cpu + kubereserved.cpu to "
        "be greater than zero (set --reserved-cpus)");
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
  return GenerateHintList(hint_request, HintForm::kAuto);
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

StatusOr<CpuSet> CpuManager::TakeByTopology(const CpuSet& from,
                                            int count) const {
  return TakeByTopologyNumaPacked(*view_, from, count, CpuSorting::kPacked);
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
  const TopologyHint hint = store_->GetAffinity(pod.uid, container.name);
  if (hint.affinity.has_value()) {
    CpuSet aligned;
    for (int id : allocatable.Ids()) {
      if (hint.affinity->IsSet(cpus_.at(id).numa_node)) aligned.Add(id);
    }
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
