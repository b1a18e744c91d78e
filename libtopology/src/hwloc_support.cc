#include "hwloc_support.h"

#include <cstdlib>
#include <mutex>
#include <optional>
#include <set>
#include <string>

#include <hwloc.h>

namespace topology::internal {
namespace {

std::mutex& HwlocEnvironmentMutex() {
  static std::mutex mutex;
  return mutex;
}

// Sets an environment variable for the lifetime of the object and restores
// the previous value (or absence) afterwards.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const std::string& value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = std::string(old);
    ::setenv(name, value.c_str(), 1);
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;
  ~ScopedEnv() {
    if (old_) {
      ::setenv(name_, old_->c_str(), 1);
    } else {
      ::unsetenv(name_);
    }
  }

 private:
  const char* name_;
  std::optional<std::string> old_;
};

// Looks for entries hwloc would open and block on. The scan is shallow: the
// files hwloc reads live directly in cpuN/, cpuN/topology/ and nodeN/.
Status CheckNoSpecialFiles(const SysfsReader& reader) {
  // One listing per directory, with the types it gives (no stat per entry:
  // on a machine with hundreds of CPUs and memory blocks they were most of
  // the check's system calls).
  auto check = [&](const std::string& dir) -> Status {
    auto special = reader.ListSpecialFiles(dir);
    if (!special.ok() || special->empty()) return OkStatus();
    return FailedPreconditionError(
        reader.Describe(dir + "/" + special->front()) +
        " is not a regular file");
  };
  for (const char* base : {"devices/system/cpu", "devices/system/node"}) {
    if (Status status = check(base); !status.ok()) return status;
    auto entries = reader.ListDirectory(base);
    if (!entries.ok()) continue;
    for (const std::string& entry : *entries) {
      const std::string path = std::string(base) + "/" + entry;
      for (const char* sub : {"", "/topology"}) {
        if (Status status = check(path + sub); !status.ok()) return status;
      }
    }
  }
  return OkStatus();
}

}  // namespace

CpuSet CpuSetFromHwloc(hwloc_const_bitmap_t bitmap) {
  CpuSet set;
  if (bitmap == nullptr || hwloc_bitmap_weight(bitmap) < 0) return set;
  for (int id = hwloc_bitmap_first(bitmap); id >= 0;
       id = hwloc_bitmap_next(bitmap, id)) {
    if (id >= CpuSet::kMaxCpus) break;
    set.Add(id);
  }
  return set;
}

std::vector<CpuInfo> CpusFromHwloc(hwloc_topology_t topology) {
  // Package ids: the OS index when it tells every package apart.
  bool os_ids_distinct = true;
  {
    std::set<unsigned> seen;
    hwloc_obj_t package = nullptr;
    while ((package = hwloc_get_next_obj_by_type(topology, HWLOC_OBJ_PACKAGE,
                                                 package)) != nullptr) {
      if (package->os_index == HWLOC_UNKNOWN_INDEX ||
          !seen.insert(package->os_index).second) {
        os_ids_distinct = false;
      }
    }
  }
  std::vector<CpuInfo> cpus;
  hwloc_obj_t pu = nullptr;
  while ((pu = hwloc_get_next_obj_by_type(topology, HWLOC_OBJ_PU, pu)) !=
         nullptr) {
    CpuInfo cpu;
    cpu.id = static_cast<int>(pu->os_index);
    if (hwloc_obj_t core =
            hwloc_get_ancestor_obj_by_type(topology, HWLOC_OBJ_CORE, pu)) {
      if (core->os_index != HWLOC_UNKNOWN_INDEX) {
        cpu.core_id = static_cast<int>(core->os_index);
      }
      cpu.thread_siblings = CpuSetFromHwloc(core->cpuset);
    } else {
      cpu.thread_siblings.Add(cpu.id);
    }
    if (hwloc_obj_t package =
            hwloc_get_ancestor_obj_by_type(topology, HWLOC_OBJ_PACKAGE, pu)) {
      cpu.package_id = os_ids_distinct
                           ? static_cast<int>(package->os_index)
                           : static_cast<int>(package->logical_index);
    }
    cpus.push_back(std::move(cpu));
  }
  return cpus;
}

StatusOr<HwlocMachine> LoadMachineWithHwloc(
    const SysfsReader& reader, const std::filesystem::path& host_root) {
  if (Status s = CheckNoSpecialFiles(reader); !s.ok()) {
    return s.WithContext("hwloc skipped");
  }
  const bool live = host_root.lexically_normal() == "/";
  std::lock_guard<std::mutex> lock(HwlocEnvironmentMutex());
  std::optional<ScopedEnv> fsroot;
  std::optional<ScopedEnv> components;
  if (!live) {
    fsroot.emplace("HWLOC_FSROOT", host_root.string());
    components.emplace("HWLOC_COMPONENTS", "linux,stop");
  }
  // The kernel (and the kubelet) list GPU-memory nodes; hwloc hides them
  // unless asked, and then places them at the GPU's local CPUs.
  ScopedEnv keep_gpu_nodes("HWLOC_KEEP_NVIDIA_GPU_NUMA_NODES", "1");
  // A library does not print: what hwloc would complain about on stderr
  // (overlapping or contradictory node sets) becomes our own warnings.
  ScopedEnv quiet("HWLOC_HIDE_ERRORS", "2");
  HwlocTopology topology;
  // All CPUs of the node, not only those of this process's cgroup: the kubelet
  // reasons about the machine.
  hwloc_topology_set_flags(topology.get(),
                           HWLOC_TOPOLOGY_FLAG_INCLUDE_DISALLOWED);
  // PCI comes from libpci and sysfs; caches are not needed.
  hwloc_topology_set_io_types_filter(topology.get(),
                                     HWLOC_TYPE_FILTER_KEEP_NONE);
  hwloc_topology_set_cache_types_filter(topology.get(),
                                        HWLOC_TYPE_FILTER_KEEP_NONE);
  hwloc_topology_set_icache_types_filter(topology.get(),
                                         HWLOC_TYPE_FILTER_KEEP_NONE);
  // Distances and memory attributes come from our own reading.
  if (hwloc_topology_load(topology.get()) != 0) {
    return UnavailableError("hwloc could not load the CPU topology below " +
                            host_root.string());
  }
  HwlocMachine machine;
  machine.cpus = CpusFromHwloc(topology.get());
  machine.online =
      CpuSetFromHwloc(hwloc_topology_get_topology_cpuset(topology.get()));
  hwloc_obj_t node = nullptr;
  while ((node = hwloc_get_next_obj_by_type(topology.get(), HWLOC_OBJ_NUMANODE,
                                            node)) != nullptr) {
    if (node->os_index == HWLOC_UNKNOWN_INDEX ||
        node->os_index >= static_cast<unsigned>(CpuSet::kMaxCpus)) {
      continue;
    }
    HwlocMachine::Node& out = machine.nodes[static_cast<int>(node->os_index)];
    out.cpus = CpuSetFromHwloc(node->cpuset);
    out.memory_bytes = node->attr->numanode.local_memory;
  }
  return machine;
}

}  // namespace topology::internal
