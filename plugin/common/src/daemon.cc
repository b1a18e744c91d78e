// The daemon helpers of plugin_runner.h: shutdown signals, the open-file
// limit, gRPC's polling engine, the exit deadline.
#include "topology/common/daemon.h"

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <ctime>
#include <thread>

#include <elf.h>
#include <glog/logging.h>
#include <link.h>
#include <malloc.h>
#include <sys/auxv.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "topology/common/logging.h"

namespace topology::common {

void BlockShutdownSignals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
}

uint64_t RaiseOpenFileLimit() {
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) != 0) return 0;
  if (limit.rlim_cur < limit.rlim_max) {
    rlimit raised = limit;
    raised.rlim_cur = limit.rlim_max;
    if (setrlimit(RLIMIT_NOFILE, &raised) == 0) limit = raised;
  }
  VLOG(1) << "open file limit " << limit.rlim_cur;
  return static_cast<uint64_t>(limit.rlim_cur);
}

std::string ChooseGrpcPollEngine(const std::string& engine) {
  constexpr char kVariable[] = "GRPC_POLL_STRATEGY";
  // An engine named by the operator stays; an empty value names none.
  const char* chosen = std::getenv(kVariable);
  if (chosen == nullptr || *chosen == '\0') {
    setenv(kVariable, engine.c_str(), 1);
    chosen = std::getenv(kVariable);
  }
  return chosen != nullptr ? chosen : "";
}

void ExitIfStillRunningAfter(std::chrono::milliseconds limit, int exit_code) {
  std::thread([limit, exit_code] {
    std::this_thread::sleep_for(limit);
    // Written directly, not through the log: main() may be returning and
    // the logging library tearing itself down at this very moment. The
    // line keeps the log's ERROR format.
    timeval now{};
    gettimeofday(&now, nullptr);
    tm local{};
    localtime_r(&now.tv_sec, &local);
    char line[160];
    const int size = std::snprintf(
        line, sizeof(line),
        "E%02d%02d %02d:%02d:%02d.%06ld %7ld plugin_runner.cc] shutdown did "
        "not finish within %lld ms; exiting now\n",
        local.tm_mon + 1, local.tm_mday, local.tm_hour, local.tm_min,
        local.tm_sec, static_cast<long>(now.tv_usec),
        static_cast<long>(gettid()), static_cast<long long>(limit.count()));
    if (size > 0) {
      (void)!write(STDERR_FILENO, line,
                   std::min(static_cast<size_t>(size), sizeof(line) - 1));
    }
    _exit(exit_code);
  }).detach();
}

namespace {

// Whether a loaded object's code is written at relocation (DT_TEXTREL or
// DF_TEXTREL): its pages then differ from the file's.
bool HasTextRelocations(const dl_phdr_info& object) {
  for (ElfW(Half) i = 0; i < object.dlpi_phnum; ++i) {
    const ElfW(Phdr)& header = object.dlpi_phdr[i];
    if (header.p_type != PT_DYNAMIC) continue;
    const auto* entry =
        reinterpret_cast<const ElfW(Dyn)*>(object.dlpi_addr + header.p_vaddr);
    for (; entry->d_tag != DT_NULL; ++entry) {
      if (entry->d_tag == DT_TEXTREL) return true;
      if (entry->d_tag == DT_FLAGS && (entry->d_un.d_val & DF_TEXTREL) != 0) {
        return true;
      }
    }
  }
  return false;
}

// Whether the object is the kernel's vDSO (its ELF header where the
// auxiliary vector says): a mapping of the kernel's, not of a file.
bool IsVdso(const dl_phdr_info& object) {
  const uintptr_t vdso = getauxval(AT_SYSINFO_EHDR);
  if (vdso == 0) return false;
  for (ElfW(Half) i = 0; i < object.dlpi_phnum; ++i) {
    const ElfW(Phdr)& header = object.dlpi_phdr[i];
    const uintptr_t start = object.dlpi_addr + header.p_vaddr;
    if (header.p_type == PT_LOAD && vdso >= start &&
        vdso < start + header.p_memsz) {
      return true;
    }
  }
  return false;
}

int ReleaseReadOnlySegments(dl_phdr_info* object, size_t, void* data) {
  auto* released = static_cast<size_t*>(data);
  if (IsVdso(*object) || HasTextRelocations(*object)) return 0;
  const auto page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  for (ElfW(Half) i = 0; i < object->dlpi_phnum; ++i) {
    const ElfW(Phdr)& header = object->dlpi_phdr[i];
    if (header.p_type != PT_LOAD || (header.p_flags & PF_W) != 0) continue;
    // Whole pages of the segment only: a page it shares with a neighbour
    // (never so with today's linkers) stays.
    const uintptr_t start =
        (object->dlpi_addr + header.p_vaddr + page - 1) & ~(page - 1);
    const uintptr_t end =
        (object->dlpi_addr + header.p_vaddr + header.p_filesz) & ~(page - 1);
    if (end <= start) continue;
    if (madvise(reinterpret_cast<void*>(start), end - start, MADV_DONTNEED) ==
        0) {
      *released += end - start;
    }
  }
  return 0;
}

}  // namespace

size_t ReleaseStartupCode() {
  size_t released = 0;
  dl_iterate_phdr(ReleaseReadOnlySegments, &released);
  VLOG(1) << "start-up code released: " << released << " bytes unmapped";
  return released;
}

int WaitForShutdownSignal() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  int signal = 0;
  while (sigwait(&set, &signal) != 0) {
  }
  return signal;
}

void SetUpDaemon(const char* argv0, const DaemonProcess& process) {
  umask(077);
  if (process.malloc_release_threshold > 0) {
    const int threshold = static_cast<int>(
        std::min<size_t>(process.malloc_release_threshold, 32u << 20));
    mallopt(M_MMAP_THRESHOLD, threshold);
    mallopt(M_TRIM_THRESHOLD, threshold);
  }
  const std::string engine = ChooseGrpcPollEngine(process.grpc_engine);
  InitLogging(argv0, process.verbosity);
  BlockShutdownSignals();
  RaiseOpenFileLimit();
  VLOG(1) << "gRPC polling engine: " << engine;
}

void AwaitShutdown(const DaemonProcess& process) {
  const int signal = WaitForShutdownSignal();
  LOG(INFO) << "received signal " << signal << "; shutting down";
  ExitIfStillRunningAfter(process.stop_limit, process.stuck_exit_code);
}

}  // namespace topology::common
