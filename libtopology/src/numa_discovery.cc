#include <algorithm>
#include <charconv>
#include <cstdint>
#include <map>
#include <string>

#include "kernel_text.h"
#include "sysfs_discovery.h"

namespace topology::internal {
namespace {

constexpr std::string_view kNodeDir = "devices/system/node";
constexpr std::string_view kCpuDir = "devices/system/cpu";

// "node12" -> 12, "cpu3" -> 3; nullopt for anything else ("online",
// "cpufreq", "node1x", and "node01": a twin of node1 the kernel never
// makes).
std::optional<int> NumberedEntry(std::string_view name,
                                 std::string_view prefix) {
  if (!name.starts_with(prefix) || name.size() == prefix.size()) {
    return std::nullopt;
  }
  const std::string_view digits = name.substr(prefix.size());
  if (!IsCanonicalDecimal(digits)) return std::nullopt;
  int value = 0;
  const auto [end, ec] =
      std::from_chars(digits.data(), digits.data() + digits.size(), value);
  if (ec != std::errc() || end != digits.data() + digits.size() || value < 0 ||
      value >= CpuSet::kMaxCpus) {
    return std::nullopt;
  }
  return value;
}

std::string NodeDir(int id) {
  return std::string(kNodeDir) + "/node" + std::to_string(id);
}

std::string IdList(const std::vector<int>& ids) {
  CpuSet set;
  for (int id : ids) {
    if (id >= 0 && id < CpuSet::kMaxCpus) set.Add(id);
  }
  return set.ToList();
}

// The node ids the kernel (and the kubelet, through cadvisor) numbers:
// node/online, else the nodeN directories (older kernels have no online
// file). nullopt when there is no node directory at all.
std::optional<std::vector<int>> ReadNodeIds(
    const SysfsReader& reader, std::vector<std::string>* warnings) {
  const std::string online_path = std::string(kNodeDir) + "/online";
  if (auto text = reader.ReadFile(online_path); text.ok()) {
    auto online = CpuSet::ParseList(*text);
    if (online.ok() && !online->empty()) return online->Ids();
    warnings->push_back(
        reader.Describe(online_path) + ": " +
        (online.ok() ? std::string("empty") : online.status().message()) +
        "; nodes taken from the nodeN directories instead");
  }
  auto entries = reader.ListDirectory(kNodeDir);
  if (!entries.ok()) return std::nullopt;
  std::vector<int> ids;
  for (const std::string& entry : *entries) {
    if (auto id = NumberedEntry(entry, "node")) ids.push_back(*id);
  }
  std::sort(ids.begin(), ids.end());
  if (ids.empty()) return std::nullopt;
  return ids;
}

// The CPUs the kernel runs: cpu/online, else every cpuN directory whose
// `online` file is absent (CPU 0 usually cannot be offlined) or reads 1.
std::optional<CpuSet> ReadOnlineCpus(const SysfsReader& reader,
                                     std::vector<std::string>* warnings) {
  const std::string online_path = std::string(kCpuDir) + "/online";
  if (auto text = reader.ReadFile(online_path); text.ok()) {
    auto set = CpuSet::ParseList(*text);
    if (set.ok()) return *set;
    warnings->push_back(reader.Describe(online_path) + ": " +
                        set.status().message() +
                        "; online CPUs taken from the cpuN directories");
  }
  auto entries = reader.ListDirectory(kCpuDir);
  if (!entries.ok()) return std::nullopt;
  CpuSet set;
  bool any = false;
  for (const std::string& entry : *entries) {
    const auto id = NumberedEntry(entry, "cpu");
    if (!id) continue;
    any = true;
    auto state =
        reader.ReadFile(std::string(kCpuDir) + "/" + entry + "/online");
    if (!state.ok() || TrimKernelText(*state) != "0") set.Add(*id);
  }
  if (!any) return std::nullopt;
  return set;
}

// Node ids named by nodeN/access0/initiators/nodeK entries (HMAT).
std::vector<int> ReadInitiators(const SysfsReader& reader, int id) {
  std::vector<int> out;
  auto entries = reader.ListDirectory(NodeDir(id) + "/access0/initiators");
  if (!entries.ok()) return out;
  for (const std::string& entry : *entries) {
    if (auto node = NumberedEntry(entry, "node")) out.push_back(*node);
  }
  return out;
}

// nodeN/hugepages/hugepages-<kB>kB/{nr,free}_hugepages, by page size; a
// malformed entry is skipped with a warning naming it.
std::vector<HugePages> ReadHugePages(const SysfsReader& reader, int id,
                                     std::vector<std::string>* warnings) {
  std::vector<HugePages> out;
  const std::string dir = NodeDir(id) + "/hugepages";
  auto entries = reader.ListDirectory(dir);
  if (!entries.ok()) return out;
  for (const std::string& entry : *entries) {
    const std::string path = dir + "/" + entry;
    auto size = ParseHugePagesDirName(entry);
    if (!size.ok()) {
      warnings->push_back(reader.Describe(path) + ": " +
                          size.status().message() + "; skipped");
      continue;
    }
    const auto count = [&](const char* file) -> StatusOr<uint64_t> {
      auto text = reader.ReadFile(path + "/" + file);
      if (!text.ok()) return text.status();
      auto value = ParseDecimal(*text);
      if (!value.ok()) return value.status();
      if (*value < 0) return InvalidArgumentError("negative page count");
      return static_cast<uint64_t>(*value);
    };
    HugePages pages;
    pages.page_size_bytes = *size;
    auto total = count("nr_hugepages");
    if (!total.ok()) {
      warnings->push_back(reader.Describe(path + "/nr_hugepages") + ": " +
                          total.status().message() + "; skipped");
      continue;
    }
    pages.total_pages = *total;
    if (pages.total_pages > UINT64_MAX / pages.page_size_bytes) {
      warnings->push_back(reader.Describe(path + "/nr_hugepages") +
                          ": more bytes of pages than 64 bits hold; skipped");
      continue;
    }
    if (auto free = count("free_hugepages"); free.ok()) {
      pages.free_pages = *free;
    }
    out.push_back(pages);
  }
  std::sort(out.begin(), out.end(), [](const HugePages& a, const HugePages& b) {
    return a.page_size_bytes < b.page_size_bytes;
  });
  return out;
}

}  // namespace

NumaFacts ReadNumaFacts(const SysfsReader& reader,
                        std::vector<std::string>* warnings) {
  NumaFacts facts;
  facts.online_cpus = ReadOnlineCpus(reader, warnings);
  const std::optional<std::vector<int>> node_ids =
      ReadNodeIds(reader, warnings);
  if (!node_ids) {
    // A kernel without NUMA support: one node 0 holding every CPU, as the
    // kernel itself behaves. Its memory is MemTotal of /proc/meminfo,
    // which hwloc reads.
    facts.has_node_directory = false;
    NumaNode node;
    if (facts.online_cpus) node.cpus = *facts.online_cpus;
    facts.nodes.push_back(std::move(node));
    facts.initiators.emplace_back();
    return facts;
  }
  const std::vector<int>& ids = *node_ids;
  bool distances_usable = !ids.empty();
  for (int id : ids) {
    NumaNode node;
    node.id = id;
    const std::string dir = NodeDir(id);
    if (auto text = reader.ReadFile(dir + "/cpulist"); text.ok()) {
      if (auto cpus = CpuSet::ParseList(*text); cpus.ok()) {
        node.cpus = *cpus;
      } else {
        warnings->push_back(reader.Describe(dir + "/cpulist") + ": " +
                            cpus.status().message() + "; node " +
                            std::to_string(id) + " taken as CPU-less");
      }
    } else if (auto mask = reader.ReadFile(dir + "/cpumap"); mask.ok()) {
      if (auto cpus = CpuSet::ParseMask(*mask); cpus.ok()) {
        node.cpus = *cpus;
      } else {
        warnings->push_back(reader.Describe(dir + "/cpumap") + ": " +
                            cpus.status().message() + "; node " +
                            std::to_string(id) + " taken as CPU-less");
      }
    } else {
      warnings->push_back("node " + std::to_string(id) + " is listed but " +
                          text.status().message() +
                          " (and no cpumap); taken as CPU-less");
    }
    if (auto meminfo = reader.ReadFile(dir + "/meminfo"); meminfo.ok()) {
      if (auto bytes = ParseNodeMemTotal(*meminfo); bytes.ok()) {
        node.memory_bytes = *bytes;
      } else {
        warnings->push_back(reader.Describe(dir + "/meminfo") + ": " +
                            bytes.status().message());
      }
    }
    node.hugepages = ReadHugePages(reader, id, warnings);
    // Column k of a distance row is the k-th listed node, not node k.
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
                            " nodes; distance matrix dropped");
        distances_usable = false;
      } else {
        facts.distances.push_back(std::move(*row));
      }
    }
    facts.initiators.push_back(ReadInitiators(reader, id));
    facts.nodes.push_back(std::move(node));
  }
  if (!distances_usable) facts.distances.clear();
  return facts;
}

void ReconcileNumaFacts(const SysfsReader& reader, const HwlocMachine* hwloc,
                        NumaFacts* facts, std::vector<std::string>* warnings) {
  std::vector<NumaNode>& nodes = facts->nodes;
  // The CPUs that exist and run: hwloc's PUs (it reads cpu/online, the
  // cpuN/online files and the cpuN directories), else our own reading.
  std::optional<CpuSet> online = facts->online_cpus;
  if (hwloc != nullptr && !hwloc->online.empty()) online = hwloc->online;

  if (!facts->has_node_directory) {
    warnings->push_back(reader.Describe(kNodeDir) +
                        " is absent (a kernel without NUMA); one node 0 "
                        "holds every online CPU");
    if (online) nodes.front().cpus = *online;
  }

  // A node's cpulist can name CPUs that are offline or do not exist (SMT
  // switched off by offlining siblings, GPU-memory nodes naming CPUs beyond
  // cpu/present): nothing can run there, so they are not the node's.
  if (online) {
    for (NumaNode& node : nodes) {
      const CpuSet usable = node.cpus.Intersection(*online);
      if (usable == node.cpus) continue;
      CpuSet dropped;
      for (int id : node.cpus.Ids()) {
        if (!online->Contains(id)) dropped.Add(id);
      }
      warnings->push_back(reader.Describe(NodeDir(node.id) + "/cpulist") +
                          " names CPUs " + dropped.ToList() +
                          " that are offline or absent (online CPUs: " +
                          (online->empty() ? "none" : online->ToList()) +
                          "); node " + std::to_string(node.id) + " keeps " +
                          (usable.empty() ? "none" : usable.ToList()));
      node.cpus = usable;
    }
  }

  // Memory: hwloc reads each node's meminfo, and /proc/meminfo on a kernel
  // without NUMA.
  if (hwloc != nullptr) {
    for (NumaNode& node : nodes) {
      const auto it = hwloc->nodes.find(node.id);
      if (node.memory_bytes == 0 && it != hwloc->nodes.end()) {
        node.memory_bytes = it->second.memory_bytes;
      }
    }
  }

  // Contradictory firmware: every node claims the same CPUs and the SLIT
  // (if any) makes no node closer to itself than to the others. Nothing
  // tells the nodes apart, so, as hwloc does, one node is kept.
  if (nodes.size() >= 2 && !nodes.front().cpus.empty()) {
    bool identical = true;
    for (const NumaNode& node : nodes) {
      identical = identical && node.cpus == nodes.front().cpus;
    }
    bool uniform = true;
    for (const auto& row : facts->distances) {
      for (int d : row) uniform = uniform && d == facts->distances[0][0];
    }
    if (identical && uniform) {
      std::vector<int> ids;
      ids.reserve(nodes.size());
      for (const NumaNode& node : nodes) ids.push_back(node.id);
      warnings->push_back(reader.Describe(kNodeDir) + ": nodes " + IdList(ids) +
                          " all claim CPUs " + nodes.front().cpus.ToList() +
                          (facts->distances.empty()
                               ? std::string(" and there is no distance matrix")
                               : " and every distance is " +
                                     std::to_string(facts->distances[0][0])) +
                          " (contradictory firmware data); only node " +
                          std::to_string(nodes.front().id) +
                          " is kept, as hwloc does");
      nodes.resize(1);
      facts->initiators.resize(1);
      facts->distances.clear();
    }
  }

  // Nodes sharing CPUs (Cluster-on-Die exports): both keep them, since the
  // kubelet numbers both; each CPU is counted on the first.
  for (size_t i = 0; i < nodes.size(); ++i) {
    for (size_t j = i + 1; j < nodes.size(); ++j) {
      if (!nodes[i].cpus.Intersects(nodes[j].cpus)) continue;
      warnings->push_back(
          reader.Describe(kNodeDir) + ": nodes " + std::to_string(nodes[i].id) +
          " and " + std::to_string(nodes[j].id) + " both list CPUs " +
          nodes[i].cpus.Intersection(nodes[j].cpus).ToList() +
          "; both keep them, devices near them are placed on both, and each "
          "such CPU is counted on node " +
          std::to_string(nodes[i].id));
    }
  }

  // CPU-less nodes (CXL, HBM, PMEM, GPU memory) stay CPU-less, as the
  // kubelet sees them, but say which CPUs are near: hwloc's locality for
  // them (HMAT initiators, else the SLIT, else the GPU's local CPUs), or
  // our own reading of the same facts for nodes hwloc does not keep.
  std::map<int, const NumaNode*> by_id;
  for (const NumaNode& node : nodes) by_id[node.id] = &node;
  for (size_t i = 0; i < nodes.size(); ++i) {
    NumaNode& node = nodes[i];
    if (node.has_cpus()) continue;
    if (hwloc != nullptr) {
      const auto it = hwloc->nodes.find(node.id);
      if (it != hwloc->nodes.end() && !it->second.cpus.empty()) {
        node.near_cpus = it->second.cpus;
        continue;
      }
    }
    CpuSet near;
    for (int initiator : facts->initiators[i]) {
      if (const auto it = by_id.find(initiator); it != by_id.end()) {
        near = near.Union(it->second->cpus);
      }
    }
    if (near.empty() && facts->distances.size() == nodes.size()) {
      int best = -1;
      for (size_t j = 0; j < nodes.size(); ++j) {
        if (!nodes[j].has_cpus()) continue;
        const int d = facts->distances[i][j];
        if (best < 0 || d < best) {
          best = d;
          near = nodes[j].cpus;
        } else if (d == best) {
          near = near.Union(nodes[j].cpus);
        }
      }
    }
    node.near_cpus = near;
  }
}

}  // namespace topology::internal
