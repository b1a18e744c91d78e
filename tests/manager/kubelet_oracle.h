// The kubelet oracle (tests/manager/oracle, a Go program on the pinned
// k8s.io/kubernetes) as a child process, and libtopology's managers set up
// from the same case: the two sides of kubelet_oracle_test.cc and of the
// benchmarks that measure ours against the kubelet's code in one run.
//
// A case is JSON: "machine" (NUMA nodes with distances, memory and huge
// pages; CPUs with socket, core, node and uncore cache; devices with their
// resource and NUMA nodes), "kubelet" (the policies,
// options and reservations, under the KubeletConfiguration's field names)
// and "steps" (admit a pod, release a pod). oracle/main.go documents the
// protocol.
#ifndef TOPOLOGY_TESTS_MANAGER_KUBELET_ORACLE_H_
#define TOPOLOGY_TESTS_MANAGER_KUBELET_ORACLE_H_

#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <sys/types.h>

#include <nlohmann/json.hpp>

#include "topology/manager/cpu_manager.h"
#include "topology/manager/device_manager.h"
#include "topology/manager/memory_manager.h"
#include "topology/manager/pod.h"
#include "topology/manager/topology_manager.h"
#include "topology/topology.h"

namespace topology::manager::oracle {

// The oracle as a child process: one JSON request per line on its stdin,
// one answer per line on its stdout.
class Oracle {
 public:
  explicit Oracle(const std::string& program);
  // The oracle run by a command line of its own (argv[0] the program).
  explicit Oracle(const std::vector<std::string>& argv);
  Oracle(const Oracle&) = delete;
  Oracle& operator=(const Oracle&) = delete;
  ~Oracle();

  bool running() const { return pid_ > 0 && to_ != nullptr && from_; }

  // The answer, or an object {"ok":false,"error":...} when the oracle is
  // gone or answered something that is not JSON.
  nlohmann::json Ask(const nlohmann::json& request);

 private:
  pid_t pid_ = -1;
  FILE* to_ = nullptr;
  FILE* from_ = nullptr;
  char* line_ = nullptr;
  size_t capacity_ = 0;
};

// The case's machine as a Topology.
Topology MachineOf(const nlohmann::json& machine);

// The case's pod as the managers read it.
Pod PodOf(const nlohmann::json& spec);

// A device plugin that prefers the devices it must include, then the
// lowest ids; its Allocate answers nothing (the oracle's plugins do the
// same).
class LowestIdsPlugin final : public DevicePluginEndpoint {
 public:
  bool PreferredAllocationAvailable() const override { return true; }
  StatusOr<std::vector<std::string>> GetPreferredAllocation(
      const std::vector<std::string>& available,
      const std::vector<std::string>& must_include, int size) override;
  StatusOr<std::string> Allocate(const std::vector<std::string>&) override {
    return std::string();
  }
};

// Our managers on the case's machine and configuration, answering as the
// oracle answers.
class OurNode {
 public:
  // The kubelet's start: the error text when the configuration is refused.
  std::optional<std::string> Start(const nlohmann::json& machine,
                                   const nlohmann::json& kubelet);
  // The outcome in the oracle's form.
  nlohmann::json Admit(const nlohmann::json& spec);
  // Admits `pod` (already made by PodOf), true when admitted; for the
  // benchmarks.
  bool AdmitPod(const Pod& pod);
  void Release(const std::string& uid);

 private:
  std::string policy_;
  std::unique_ptr<Topology> topology_;
  std::unique_ptr<TopologyManager> tm_;
  std::unique_ptr<CpuManager> cpu_;
  std::unique_ptr<MemoryManager> memory_;
  // Null when the machine has no devices (the kubelet then has no device
  // plugin resources and gives no device hints).
  std::unique_ptr<DeviceManager> devices_;
};

}  // namespace topology::manager::oracle

#endif  // TOPOLOGY_TESTS_MANAGER_KUBELET_ORACLE_H_
