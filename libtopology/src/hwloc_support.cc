#include "hwloc_support.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <climits>
#include <csignal>
#include <cstdint>
#include <cstdlib>
#include <ctime>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <hwloc.h>
#include <pthread.h>
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

// hwloc opens and reads its files without O_NONBLOCK, so a FIFO in a
// recorded tree, in any file it reads (cpuN/cache/*, nodeN/*, proc/cpuinfo)
// or behind a link, would block its load for good: in open until a writer
// comes, or in read while a writer holds it open and writes nothing. While
// hwloc loads from a host root other than "/", a timer of the loading
// thread's own (timer_create with SIGEV_THREAD_ID) sends it Signal() once
// the load has run for a grace period no sound load takes, then every
// millisecond (hwloc may open one FIFO many times). The handler is installed
// without SA_RESTART, so the blocked call fails with EINTR and hwloc goes on
// as for a file it cannot read. No thread is started for it: a program's
// first thread costs each later allocation and unmapping for the rest of
// its life (malloc's and the kernel's single-thread paths), 4 % of a 16k-VF
// tree's discovery.
//
// For the load only, the signal is unblocked in this thread (a program may
// block signals in all its threads) and the handler installed; the mask and
// the handler it displaced are put back afterwards, and the signal from any
// other sender in the meantime is passed to that handler. Loads are
// serialized by HwlocEnvironmentMutex, so one interrupter exists at a time.
// If the timer fired, the tree is searched for the FIFOs that blocked the
// load; without a timer to be had (RLIMIT_SIGPENDING), the search runs
// before the load instead and a FIFO found keeps hwloc from loading.
class FifoInterrupter {
 public:
  explicit FifoInterrupter(std::filesystem::path root)
      : root_(std::move(root)) {
    fired_.store(0, std::memory_order_relaxed);
    const int signal = Signal();
    struct sigaction action {};
    action.sa_sigaction = OnSignal;
    action.sa_flags = SA_SIGINFO;  // not SA_RESTART: the call is to fail
    sigemptyset(&action.sa_mask);
    if (::sigaction(signal, &action, &displaced_) != 0) return;
    installed_ = true;
    sigset_t unblock;
    sigemptyset(&unblock);
    sigaddset(&unblock, signal);
    if (::pthread_sigmask(SIG_UNBLOCK, &unblock, &mask_) != 0) return;
    unblocked_ = true;
    struct sigevent event {};
    event.sigev_notify = SIGEV_THREAD_ID;
    event.sigev_signo = signal;
    event.sigev_value.sival_ptr = &fired_;  // tells its signals apart
    event._sigev_un._tid = ::gettid();
    if (::timer_create(CLOCK_MONOTONIC, &event, &timer_) != 0) return;
    timer_armed_ = true;
    struct itimerspec when {};
    when.it_value.tv_nsec = kGrace.count();  // both under a second
    when.it_interval.tv_nsec = kRepeat.count();
    if (::timer_settime(timer_, 0, &when, nullptr) != 0) Disarm();
  }
  FifoInterrupter(const FifoInterrupter&) = delete;
  FifoInterrupter& operator=(const FifoInterrupter&) = delete;
  ~FifoInterrupter() { Disarm(); }

  // Whether the load is guarded; if not, Unguarded() says what to do.
  bool armed() const { return timer_armed_; }

  // Without the timer: the FIFOs below the root, looked for before the
  // load (hwloc is not to load when there are any).
  std::vector<std::string> Unguarded() {
    Disarm();
    return FindFifos();
  }

  // The load has ended: disarms, and returns the FIFOs that blocked it
  // (none unless the timer fired).
  std::vector<std::string> Finish() {
    Disarm();
    if (fired_.load(std::memory_order_relaxed) == 0) return {};
    return FindFifos();
  }

 private:
  static constexpr std::chrono::nanoseconds kGrace =
      std::chrono::milliseconds(250);
  static constexpr std::chrono::nanoseconds kRepeat =
      std::chrono::milliseconds(1);
  static constexpr int kMaxDepth = 16;

  // A real-time signal (never queued over a standard one's meaning); not
  // SIGRTMAX, which debuggers and valgrind take.
  static int Signal() { return SIGRTMIN + 6; }

  static void OnSignal(int signal, siginfo_t* info, void* context) {
    if (info != nullptr && info->si_code == SI_TIMER &&
        info->si_value.sival_ptr == &fired_) {
      fired_.fetch_add(1, std::memory_order_relaxed);
      return;
    }
    // Another sender's: what the displaced handler would have done.
    if ((displaced_.sa_flags & SA_SIGINFO) != 0) {
      if (displaced_.sa_sigaction != nullptr) {
        displaced_.sa_sigaction(signal, info, context);
      }
    } else if (displaced_.sa_handler != SIG_DFL &&
               displaced_.sa_handler != SIG_IGN) {
      displaced_.sa_handler(signal);
    }
  }

  // Deleting the timer first: a signal it raised is delivered before
  // timer_delete returns (it is unblocked here), so none is left pending
  // for the handler put back.
  void Disarm() {
    if (timer_armed_) ::timer_delete(timer_);
    timer_armed_ = false;
    if (installed_) ::sigaction(Signal(), &displaced_, nullptr);
    installed_ = false;
    if (unblocked_) ::pthread_sigmask(SIG_SETMASK, &mask_, nullptr);
    unblocked_ = false;
  }

  std::vector<std::string> FindFifos() const {
    std::vector<std::string> fifos;
    for (const char* top : {"sys", "proc"}) Search(root_ / top, 0, &fifos);
    return fifos;
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

  // The handler's state: one interrupter at a time (see above).
  static std::atomic<int> fired_;
  static struct sigaction displaced_;

  const std::filesystem::path root_;
  sigset_t mask_{};
  timer_t timer_{};
  bool installed_ = false;
  bool unblocked_ = false;
  bool timer_armed_ = false;
};

std::atomic<int> FifoInterrupter::fired_{0};
struct sigaction FifoInterrupter::displaced_ {};

}  // namespace

std::vector<HugePages> HugePagesFromHwloc(hwloc_obj_t node) {
  std::vector<HugePages> out;
  const auto& attr = node->attr->numanode;
  for (unsigned i = 1; i < attr.page_types_len && attr.page_types != nullptr;
       ++i) {
    // A page count whose bytes overflow is not a machine: left out.
    if (attr.page_types[i].size == 0 ||
        attr.page_types[i].count > UINT64_MAX / attr.page_types[i].size) {
      continue;
    }
    out.push_back(HugePages{.page_size_bytes = attr.page_types[i].size,
                            .total_pages = attr.page_types[i].count});
  }
  std::sort(out.begin(), out.end(), [](const HugePages& a, const HugePages& b) {
    return a.page_size_bytes < b.page_size_bytes;
  });
  return out;
}

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
    // The L3 cache: hwloc's os_index is the id sysfs gives the cache
    // (cache/indexN/id), as cadvisor reads it.
    if (hwloc_obj_t l3 =
            hwloc_get_ancestor_obj_by_type(topology, HWLOC_OBJ_L3CACHE, pu)) {
      cpu.l3_cache_id = l3->os_index != HWLOC_UNKNOWN_INDEX &&
                                l3->os_index <= static_cast<unsigned>(INT_MAX)
                            ? static_cast<int>(l3->os_index)
                            : static_cast<int>(l3->logical_index);
      cpu.l3_shared = CpuSetFromHwloc(l3->cpuset);
    }
    cpus.push_back(std::move(cpu));
  }
  return cpus;
}

StatusOr<HwlocMachine> LoadMachineWithHwloc(
    const std::filesystem::path& host_root) {
  // The live root has no FIFOs.
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
  // The machine, not this process's share of it: hwloc neither parses the
  // mount table to find the cgroup file system nor reads this process's
  // cpuset (what it would mark disallowed is kept anyway, below).
  ScopedEnv whole_machine("HWLOC_ALLOW", "all");
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
  // PCI comes from libpci and sysfs; of the caches only L3, the kubelet's
  // uncore cache.
  hwloc_topology_set_io_types_filter(topology.get(),
                                     HWLOC_TYPE_FILTER_KEEP_NONE);
  hwloc_topology_set_cache_types_filter(topology.get(),
                                        HWLOC_TYPE_FILTER_KEEP_NONE);
  hwloc_topology_set_type_filter(topology.get(), HWLOC_OBJ_L3CACHE,
                                 HWLOC_TYPE_FILTER_KEEP_ALL);
  hwloc_topology_set_icache_types_filter(topology.get(),
                                         HWLOC_TYPE_FILTER_KEEP_NONE);
  int loaded = 0;
  std::vector<std::string> fifos;
  const char* what_hwloc_did = "";
  if (live) {
    loaded = hwloc_topology_load(topology.get());
  } else {
    FifoInterrupter interrupter(host_root);
    if (interrupter.armed()) {
      loaded = hwloc_topology_load(topology.get());
      fifos = interrupter.Finish();
      what_hwloc_did = "hwloc was blocked until interrupted";
    } else {
      fifos = interrupter.Unguarded();
      if (fifos.empty()) loaded = hwloc_topology_load(topology.get());
      what_hwloc_did = "hwloc would block on it: not loaded";
    }
  }
  if (!fifos.empty()) {
    // What hwloc made of a file it could not read is not the machine: not
    // used.
    return FailedPreconditionError("hwloc skipped: " + fifos.front() +
                                   " is not a regular file (a FIFO; " +
                                   what_hwloc_did + ")");
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
