// The daemon helpers of plugin_runner.h: shutdown signals, the open-file
// limit, gRPC's polling engine, the exit deadline.
#include "topology/common/daemon.h"

#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <ctime>
#include <thread>

#include <glog/logging.h>
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
