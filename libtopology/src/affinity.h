// Resolving a PCI device's NUMA affinity from what sysfs says about it and
// about the bridges above it. docs/sysfs.md states the rules.
#ifndef TOPOLOGY_SRC_AFFINITY_H_
#define TOPOLOGY_SRC_AFFINITY_H_

#include <optional>
#include <string>
#include <vector>

#include "topology/cpu_set.h"
#include "topology/numa_node.h"
#include "topology/pci_device.h"

namespace topology::internal {

// What sysfs says about one PCI function's locality.
struct LocalityFacts {
  std::optional<int> numa_node;      // raw numa_node file
  std::optional<CpuSet> local_cpus;  // local_cpulist, else local_cpus
};

struct Affinity {
  std::vector<int> nodes;  // sorted
  NumaSource source = NumaSource::kUnknown;
  std::vector<std::string> conflicts;
};

class AffinityResolver {
 public:
  // REQUIRES: `nodes` outlives the resolver.
  explicit AffinityResolver(const std::vector<NumaNode>& nodes);

  // Applies, in order: numa_node >= 0 naming an online node; local CPUs that
  // are a non-empty strict subset of all CPUs (the nodes whose CPUs they
  // meet); the first bridge in `bridges_nearest_first` for which one of those
  // two rules gives an answer; otherwise unknown.
  Affinity Resolve(
      const LocalityFacts& device,
      const std::vector<LocalityFacts>& bridges_nearest_first) const;

 private:
  // Rules 1 and 2 for one function; appends conflicts found on the way.
  std::optional<std::pair<std::vector<int>, NumaSource>> Direct(
      const LocalityFacts& facts, std::vector<std::string>* conflicts) const;
  std::vector<int> NodesMeeting(const CpuSet& cpus) const;

  const std::vector<NumaNode>& nodes_;
  CpuSet all_cpus_;
};

}  // namespace topology::internal

#endif  // TOPOLOGY_SRC_AFFINITY_H_
