#include "hwloc_support.h"

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <fcntl.h>
#include <hwloc.h>
#include <sys/stat.h>
#include <unistd.h>

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

// hwloc opens files without O_NONBLOCK, so a FIFO in a recorded tree, in
// any file it reads (cpuN/cache/*, nodeN/*, proc/cpuinfo) or behind a link,
// would block it for good. While hwloc loads from a host root, this watches:
// once the load has run for a grace period, it looks for FIFOs below the
// root's sys/ and proc/ and opens each for writing without blocking, which
// succeeds only when a reader waits on it and ends that reader's open (its
// read then sees end of file). Found FIFOs are released again every
// millisecond (hwloc may open one many times) until the load ends. It
// watches from discovery's helper thread (internal::HelperThread), which
// then goes on to libpci's run; the search only runs for a load that is
// stuck or slow.
class FifoWatchdog {
 public:
  // Watches on `helper`'s thread, or on a thread of its own without one.
  FifoWatchdog(std::filesystem::path root, HelperThread* helper)
      : state_(std::make_shared<State>()) {
    state_->root = std::move(root);
    if (helper == nullptr) helper = &own_.emplace();
    // The watch holds only the shared state: the load's end is never held
    // up waiting for the watching thread to be scheduled and notice it.
    helper->Post([state = state_] { Watch(*state); });
  }
  FifoWatchdog(const FifoWatchdog&) = delete;
  FifoWatchdog& operator=(const FifoWatchdog&) = delete;
  ~FifoWatchdog() { Finish(); }

  // Stops watching; returns the FIFOs that blocked hwloc.
  std::vector<std::string> Finish() {
    std::vector<std::string> released;
    {
      std::lock_guard<std::mutex> lock(state_->mutex);
      state_->done = true;
      released = state_->released;
    }
    state_->wake.notify_all();
    return released;
  }

 private:
  static constexpr auto kGrace = std::chrono::milliseconds(250);
  static constexpr auto kSearchEvery = std::chrono::milliseconds(250);
  static constexpr auto kReleaseEvery = std::chrono::milliseconds(1);
  static constexpr int kMaxDepth = 16;

  struct State {
    std::filesystem::path root;
    std::mutex mutex;
    std::condition_variable wake;
    bool done = false;  // the load has ended
    std::vector<std::string> released;
  };

  static void Watch(State& state) {
    std::unique_lock<std::mutex> lock(state.mutex);
    if (state.wake.wait_for(lock, kGrace, [&] { return state.done; })) return;
    std::vector<std::string> fifos;
    auto next_search = std::chrono::steady_clock::now();
    while (!state.done) {
      if (std::chrono::steady_clock::now() >= next_search) {
        lock.unlock();
        fifos.clear();
        for (const char* top : {"sys", "proc"}) {
          Search(state.root / top, 0, &fifos);
        }
        lock.lock();
        next_search = std::chrono::steady_clock::now() + kSearchEvery;
      }
      for (const std::string& fifo : fifos) {
        const int fd = ::open(fifo.c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC);
        if (fd < 0) continue;  // nobody reading it now
        ::close(fd);
        bool known = false;
        for (const std::string& seen : state.released) {
          known = known || seen == fifo;
        }
        if (!known) state.released.push_back(fifo);
      }
      state.wake.wait_for(lock, fifos.empty() ? kSearchEvery : kReleaseEvery,
                          [&] { return state.done; });
    }
  }

  // Collects the FIFOs below `dir`, and the links to FIFOs (hwloc follows
  // links), without following links to directories.
  static void Search(const std::filesystem::path& dir, int depth,
                     std::vector<std::string>* fifos) {
    if (depth > kMaxDepth) return;
    std::error_code error;
    for (std::filesystem::directory_iterator it(dir, error), end;
         !error && it != end; it.increment(error)) {
      const std::filesystem::path& path = it->path();
      struct stat st {};
      if (::lstat(path.c_str(), &st) != 0) continue;
      if (S_ISLNK(st.st_mode) && ::stat(path.c_str(), &st) != 0) continue;
      if (S_ISFIFO(st.st_mode)) {
        fifos->push_back(path.string());
      } else if (S_ISDIR(st.st_mode) && !it->is_symlink(error)) {
        Search(path, depth + 1, fifos);
      }
    }
  }

  std::shared_ptr<State> state_;
  std::optional<HelperThread> own_;
};

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

bool WatchesForFifos(const std::filesystem::path& host_root) {
  return host_root.lexically_normal() != "/";
}

StatusOr<HwlocMachine> LoadMachineWithHwloc(
    const std::filesystem::path& host_root, HelperThread* helper) {
  const bool live = !WatchesForFifos(host_root);
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
  // reasons about the machine. Distances come from our own reading of the
  // SLIT, and neither memory attributes (bandwidth and latency per
  // initiator) nor CPU kinds (three frequency and capacity files per CPU)
  // are used: hwloc does not read them (2.8 and later), a hundred files of
  // its 700 on a POWER9 with GPU nodes. It still lists each node's
  // initiators to place a CPU-less node.
  uint64_t flags = HWLOC_TOPOLOGY_FLAG_INCLUDE_DISALLOWED;
#if HWLOC_API_VERSION >= 0x00020800
  flags |= HWLOC_TOPOLOGY_FLAG_NO_DISTANCES | HWLOC_TOPOLOGY_FLAG_NO_MEMATTRS |
           HWLOC_TOPOLOGY_FLAG_NO_CPUKINDS;
#endif
  hwloc_topology_set_flags(topology.get(), flags);
  // PCI comes from libpci and sysfs; caches are not needed.
  hwloc_topology_set_io_types_filter(topology.get(),
                                     HWLOC_TYPE_FILTER_KEEP_NONE);
  hwloc_topology_set_cache_types_filter(topology.get(),
                                        HWLOC_TYPE_FILTER_KEEP_NONE);
  hwloc_topology_set_icache_types_filter(topology.get(),
                                         HWLOC_TYPE_FILTER_KEEP_NONE);
  int loaded = 0;
  std::vector<std::string> fifos;
  if (live) {
    loaded = hwloc_topology_load(topology.get());
  } else {
    FifoWatchdog watchdog(host_root, helper);
    loaded = hwloc_topology_load(topology.get());
    fifos = watchdog.Finish();
  }
  if (!fifos.empty()) {
    // What hwloc made of an empty file is not the machine: not used.
    return FailedPreconditionError(
        "hwloc skipped: " + fifos.front() +
        " is not a regular file (a FIFO; hwloc was blocked on it until "
        "released)");
  }
  if (loaded != 0) {
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
