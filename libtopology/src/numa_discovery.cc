#include <string>

#include "kernel_text.h"
#include "sysfs_discovery.h"

namespace topology::internal {
namespace {

constexpr std::string_view kNodeDir = "devices/system/node";

}  // namespace

NumaFacts ReadNumaFacts(const SysfsReader& reader,
                        std::vector<std::string>* warnings) {
  NumaFacts facts;
  const std::string online_path = std::string(kNodeDir) + "/online";
  auto online_text = reader.ReadFile(online_path);
  if (!online_text.ok()) {
    // No NUMA support compiled in, or a recording without node data: one
    // node holding every online CPU, as the kernel itself behaves.
    NumaNode node;
    if (auto cpus = reader.ReadFile("devices/system/cpu/online"); cpus.ok()) {
      if (auto set = CpuSet::ParseList(*cpus); set.ok()) node.cpus = *set;
    }
    warnings->push_back("no NUMA information (" +
                        online_text.status().message() +
                        "); assuming one node 0");
    facts.nodes.push_back(std::move(node));
    return facts;
  }
  // Node lists have the cpulist format.
  auto online = CpuSet::ParseList(*online_text);
  if (!online.ok()) {
    warnings->push_back(reader.Describe(online_path) + ": " +
                        online.status().message() + "; assuming one node 0");
    facts.nodes.emplace_back();
    return facts;
  }
  const std::vector<int> ids = online->Ids();
  bool distances_usable = ids.size() > 0;
  for (int id : ids) {
    NumaNode node;
    node.id = id;
    const std::string dir =
        std::string(kNodeDir) + "/node" + std::to_string(id);
    if (auto text = reader.ReadFile(dir + "/cpulist"); text.ok()) {
      if (auto cpus = CpuSet::ParseList(*text); cpus.ok()) {
        node.cpus = *cpus;
      } else {
        warnings->push_back(reader.Describe(dir + "/cpulist") + ": " +
                            cpus.status().message());
      }
    } else if (auto mask = reader.ReadFile(dir + "/cpumap"); mask.ok()) {
      if (auto cpus = CpuSet::ParseMask(*mask); cpus.ok()) node.cpus = *cpus;
    } else {
      warnings->push_back("node " + std::to_string(id) + " is online but " +
                          text.status().message());
    }
    if (auto meminfo = reader.ReadFile(dir + "/meminfo"); meminfo.ok()) {
      if (auto bytes = ParseNodeMemTotal(*meminfo); bytes.ok()) {
        node.memory_bytes = *bytes;
      } else {
        warnings->push_back(reader.Describe(dir + "/meminfo") + ": " +
                            bytes.status().message());
      }
    }
    // Column k of a distance row is the k-th online node, not node k.
    if (distances_usable) {
      auto text = reader.ReadFile(dir + "/distance");
      StatusOr<std::vector<int>> row =
          text.ok() ? ParseDistanceRow(*text)
                    : StatusOr<std::vector<int>>(text.status());
      if (!row.ok()) {
        warnings->push_back(reader.Describe(dir + "/distance") + ": " +
                            row.status().message() +
                            "; distance matrix dropped");
        distances_usable = false;
      } else if (row->size() != ids.size()) {
        warnings->push_back(reader.Describe(dir + "/distance") + " has " +
                            std::to_string(row->size()) + " values for " +
                            std::to_string(ids.size()) +
                            " online nodes; distance matrix dropped");
        distances_usable = false;
      } else {
        facts.distances.push_back(std::move(*row));
      }
    }
    facts.nodes.push_back(std::move(node));
  }
  if (!distances_usable) facts.distances.clear();
  return facts;
}

}  // namespace topology::internal
