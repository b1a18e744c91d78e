#include "kubelet_oracle.h"

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <map>

#include <sys/wait.h>
#include <unistd.h>

#include "topology/cpu_set.h"

namespace topology::manager::oracle {

using nlohmann::json;

namespace {

std::vector<std::string> ContainerNames(const Pod& pod) {
  std::vector<std::string> names;
  for (const Container& c : pod.init_containers) names.push_back(c.name);
  for (const Container& c : pod.containers) names.push_back(c.name);
  return names;
}

}  // namespace

Oracle::Oracle(const std::string& program)
    : Oracle(std::vector<std::string>{program}) {}

Oracle::Oracle(const std::vector<std::string>& argv) {
  std::vector<char*> args;
  for (const std::string& arg : argv) {
    args.push_back(const_cast<char*>(arg.c_str()));
  }
  args.push_back(nullptr);
  const std::string& program = argv.at(0);
  // An oracle that died must not take the test with it at the next write.
  std::signal(SIGPIPE, SIG_IGN);
  int to_child[2];
  int from_child[2];
  if (::pipe(to_child) != 0 || ::pipe(from_child) != 0) return;
  pid_ = ::fork();
  if (pid_ == 0) {
    ::dup2(to_child[0], 0);
    ::dup2(from_child[1], 1);
    ::close(to_child[0]);
    ::close(to_child[1]);
    ::close(from_child[0]);
    ::close(from_child[1]);
    ::execv(program.c_str(), args.data());
    std::fprintf(stderr, "cannot run %s: %s\n", program.c_str(),
                 std::strerror(errno));
    ::_exit(127);
  }
  ::close(to_child[0]);
  ::close(from_child[1]);
  to_ = ::fdopen(to_child[1], "w");
  from_ = ::fdopen(from_child[0], "r");
}

Oracle::~Oracle() {
  if (to_ != nullptr) std::fclose(to_);
  if (from_ != nullptr) std::fclose(from_);
  if (pid_ > 0) {
    int status = 0;
    ::waitpid(pid_, &status, 0);
  }
  std::free(line_);
}

json Oracle::Ask(const json& request) {
  const std::string text = request.dump() + "\n";
  if (std::fwrite(text.data(), 1, text.size(), to_) != text.size() ||
      std::fflush(to_) != 0) {
    return {{"ok", false}, {"error", "the oracle is gone (write)"}};
  }
  const ssize_t n = ::getline(&line_, &capacity_, from_);
  if (n <= 0) return {{"ok", false}, {"error", "the oracle is gone (read)"}};
  json answer = json::parse(line_, line_ + n, nullptr, false);
  if (answer.is_discarded()) {
    return {{"ok", false}, {"error", std::string("not JSON: ") + line_}};
  }
  return answer;
}

Topology MachineOf(const json& machine) {
  Topology::Parts parts;
  std::map<int, CpuSet> node_cpus;
  std::map<std::pair<int, int>, CpuSet> cores;
  std::map<int, CpuSet> l3;
  for (const json& c : machine.at("cpus")) {
    node_cpus[c.at("node").get<int>()].Add(c.at("id").get<int>());
    if (c.value("uncore", -1) >= 0) {
      l3[c.at("uncore").get<int>()].Add(c.at("id").get<int>());
    }
    cores[{c.at("socket").get<int>(), c.at("core").get<int>()}].Add(
        c.at("id").get<int>());
  }
  for (const json& n : machine.at("nodes")) {
    NumaNode node;
    node.id = n.at("id").get<int>();
    node.cpus = node_cpus[node.id];
    node.memory_bytes = n.at("memory").get<uint64_t>();
    for (const json& h : n.value("hugepages", json::array())) {
      node.hugepages.push_back(
          HugePages{.page_size_bytes = h.at("pageSize").get<uint64_t>(),
                    .total_pages = h.at("count").get<uint64_t>(),
                    .free_pages = std::nullopt});
    }
    parts.numa_nodes.push_back(node);
    std::vector<int> row;
    for (const json& d : n.at("distances")) row.push_back(d.get<int>());
    parts.distances.push_back(row);
  }
  for (const json& c : machine.at("cpus")) {
    CpuInfo cpu;
    cpu.id = c.at("id").get<int>();
    cpu.package_id = c.at("socket").get<int>();
    cpu.core_id = c.at("core").get<int>();
    cpu.numa_node = c.at("node").get<int>();
    cpu.thread_siblings = cores[{cpu.package_id, cpu.core_id}];
    // The uncore cache the case gives (cadvisor's Core.UncoreCaches) as
    // an L3 cache shared by every CPU of the same id.
    cpu.l3_cache_id = c.value("uncore", -1);
    if (cpu.l3_cache_id >= 0) cpu.l3_shared = l3[cpu.l3_cache_id];
    parts.cpus.push_back(cpu);
  }
  parts.source = "the case's machine";
  return Topology(std::move(parts));
}

Pod PodOf(const json& spec) {
  Pod pod;
  pod.uid = spec.at("uid").get<std::string>();
  pod.name = pod.uid;
  const std::string qos = spec.at("qos").get<std::string>();
  pod.guaranteed = qos == "guaranteed";
  const auto container = [&](const json& c) {
    Container out;
    out.name = c.at("name").get<std::string>();
    out.restartable = c.value("restartable", false);
    // Only a Guaranteed pod's limits are read for CPUs and memory; a
    // Burstable pod's request is not a limit, and a BestEffort pod states
    // none. The oracle gives a container 64 MiB when the case says nothing.
    if (qos == "guaranteed") {
      out.limits[kCpuResource] = c.at("cpuMilli");
      out.limits["memory"] = c.value("memory", int64_t{64} << 20);
    }
    if (qos != "besteffort" && c.value("hugepages2Mi", int64_t{0}) > 0) {
      out.limits["hugepages-2Mi"] = c.at("hugepages2Mi");
    }
    // Device plugin resources: requests equal limits in every QoS class.
    const json devices = c.value("devices", json::object());
    for (const auto& [resource, count] : devices.items()) {
      out.limits[resource] = count.get<int64_t>();
    }
    return out;
  };
  for (const json& c : spec.value("init", json::array())) {
    pod.init_containers.push_back(container(c));
  }
  for (const json& c : spec.at("containers")) {
    pod.containers.push_back(container(c));
  }
  return pod;
}

std::optional<std::string> OurNode::Start(const json& machine,
                                          const json& kubelet) {
  topology_ = std::make_unique<Topology>(MachineOf(machine));
  auto numa = NumaInfo::FromTopology(*topology_);
  if (!numa.ok()) return numa.status().message();
  ManagerConfig config;
  config.policy = kubelet.at("topologyManagerPolicy").get<std::string>();
  config.scope = kubelet.at("topologyManagerScope").get<std::string>();
  config.policy_options = kubelet.value("topologyManagerPolicyOptions",
                                        std::map<std::string, std::string>{});
  policy_ = config.policy;
  auto tm = TopologyManager::Create(config, *numa);
  if (!tm.ok()) return tm.status().message();
  tm_ = std::move(*tm);
  const CpuSet reserved =
      CpuSet::Of(kubelet.value("reservedCPUs", std::vector<int>{}));
  CpuManagerConfig cpu_config;
  cpu_config.policy = kubelet.at("cpuManagerPolicy").get<std::string>();
  cpu_config.reserved = reserved;
  if (reserved.empty()) {
    cpu_config.reserved_count = kubelet.value("reservedCPUCount", -1);
  }
  cpu_config.options = kubelet.value("cpuManagerPolicyOptions",
                                     std::map<std::string, std::string>{});
  const json gates = kubelet.value("featureGates", json::object());
  cpu_config.alpha_options = gates.value("CPUManagerPolicyAlphaOptions", false);
  cpu_config.beta_options = gates.value("CPUManagerPolicyBetaOptions", true);
  cpu_config.topology_policy = config.policy;
  auto cpu = CpuManager::Create(cpu_config, *topology_, tm_.get());
  if (!cpu.ok()) return cpu.status().message();
  cpu_ = std::move(*cpu);
  MemoryManager::Options memory;
  memory.policy = kubelet.value("memoryManagerPolicy", kMemoryPolicyNone);
  for (const json& r : kubelet.value("reservedMemory", json::array())) {
    memory.reserved_memory.push_back(MemoryReservation{
        .numa_node = r.at("numaNode").get<int>(),
        .limits = r.at("limits").get<std::map<std::string, uint64_t>>()});
  }
  memory.node_allocatable_reservation = kubelet.value(
      "nodeAllocatableReservation", std::map<std::string, uint64_t>{});
  auto memory_manager =
      MemoryManager::Create(memory, topology_->numa_nodes(), tm_.get());
  if (!memory_manager.ok()) return memory_manager.status().message();
  memory_ = std::move(*memory_manager);
  // The devices as the oracle's plugins offer them: each resource's list,
  // GetPreferredAllocation preferring the devices it must include, then
  // the lowest ids (tests/manager/oracle/main.go, devicePlugin).
  std::map<std::string, std::vector<Device>> resources;
  for (const json& d : machine.value("devices", json::array())) {
    resources[d.at("resource").get<std::string>()].push_back(
        Device{.id = d.at("id").get<std::string>(),
               .numa_nodes = d.value("nodes", std::vector<int>{}),
               .healthy = true});
  }
  if (!resources.empty()) {
    devices_ = std::make_unique<DeviceManager>(numa->node_ids(), tm_.get());
    for (auto& [resource, list] : resources) {
      devices_->UpdateResource(resource, std::move(list),
                               std::make_shared<LowestIdsPlugin>());
    }
    tm_->AddHintProvider(devices_.get());
  }
  // The kubelet's order of providers: devices, CPUs, then memory.
  tm_->AddHintProvider(cpu_.get());
  tm_->AddHintProvider(memory_.get());
  return std::nullopt;
}

bool OurNode::AdmitPod(const Pod& pod) { return tm_->Admit(pod).admit; }

StatusOr<std::vector<std::string>> LowestIdsPlugin::GetPreferredAllocation(
    const std::vector<std::string>& available,
    const std::vector<std::string>& must_include, int size) {
  std::vector<std::string> chosen = must_include;
  std::vector<std::string> rest;
  for (const std::string& id : available) {
    if (std::find(must_include.begin(), must_include.end(), id) ==
        must_include.end()) {
      rest.push_back(id);
    }
  }
  std::sort(rest.begin(), rest.end());
  for (const std::string& id : rest) {
    if (static_cast<int>(chosen.size()) >= size) break;
    chosen.push_back(id);
  }
  return chosen;
}

json OurNode::Admit(const json& spec) {
  const Pod pod = PodOf(spec);
  const AdmitResult result = tm_->Admit(pod);
  json out = {{"admit", result.admit},     {"reason", result.reason},
              {"message", result.message}, {"cpus", json::object()},
              {"memory", json::object()},  {"affinity", json::object()}};
  out["devices"] = json::object();
  if (result.admit && devices_ != nullptr) {
    for (const DeviceManager::Allocation& a : devices_->Allocations()) {
      if (a.pod_uid == pod.uid && !a.device_ids.empty()) {
        out["devices"][a.container][a.resource] = a.device_ids;
      }
    }
  }
  if (result.admit) {
    for (const std::string& name : ContainerNames(pod)) {
      const CpuSet cpus = cpu_->ContainerCpus(pod.uid, name);
      if (!cpus.empty()) out["cpus"][name] = cpus.ToList();
      std::vector<MemoryBlock> blocks = memory_->ContainerBlocks(pod.uid, name);
      std::sort(blocks.begin(), blocks.end(),
                [](const MemoryBlock& a, const MemoryBlock& b) {
                  return a.type < b.type;
                });
      for (const MemoryBlock& block : blocks) {
        std::vector<int> nodes = block.numa_affinity;
        std::sort(nodes.begin(), nodes.end());
        out["memory"][name].push_back(
            {{"type", block.type}, {"size", block.size}, {"nodes", nodes}});
      }
      if (policy_ != kPolicyNone) {
        const TopologyHint hint = tm_->GetAffinity(pod.uid, name);
        if (hint.affinity) {
          out["affinity"][name] = {{"nodes", hint.affinity->Ids()},
                                   {"preferred", hint.preferred}};
        }
      }
    }
  } else {
    // As the host does with a refused pod: what its containers were
    // given goes back.
    Release(pod.uid);
  }
  out["shared"] = cpu_->DefaultCpuSet().ToList();
  return out;
}

void OurNode::Release(const std::string& uid) {
  tm_->RemovePod(uid);
  cpu_->RemovePod(uid);
  memory_->RemovePod(uid);
  if (devices_ != nullptr) devices_->RemovePod(uid);
}

}  // namespace topology::manager::oracle
