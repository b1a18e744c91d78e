// Start-up of the commands a user types, against an empty C program, in the
// same run: posix_spawn, output to /dev/null, wait. The gap to the empty
// program is what the dynamic loader and static initialisers cost each
// command (the goal: within 2x for `topology-info --help` and
// `topology-manager merge`). Then `topology-manager admit` and `release`
// against a running serve (the goal: admit < 5 ms per call).
#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include <fcntl.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <benchmark/benchmark.h>

#include "build_paths.h"
#include "synthetic_machines.h"
#include "wait_for.h"

namespace {

constexpr char kMergeCase[] =
    R"({"policy":"best-effort","numa_nodes":[0,1],)"
    R"("providers":[{"gpu":[{"mask":[0],"preferred":true},)"
    R"({"mask":[0,1],"preferred":false}]}]})";

// A fresh file (mkstemp: never an existing name or link) holding the case,
// removed at exit.
class CaseFile {
 public:
  CaseFile() {
    const int fd = mkstemp(path_.data());
    if (fd < 0) return;
    const std::string text = kMergeCase;
    ok_ = write(fd, text.data(), text.size()) ==
          static_cast<ssize_t>(text.size());
    close(fd);
  }
  ~CaseFile() { unlink(path_.c_str()); }
  CaseFile(const CaseFile&) = delete;
  CaseFile& operator=(const CaseFile&) = delete;
  std::string path() const { return ok_ ? path_ : "/nonexistent"; }

 private:
  std::string path_ = "/tmp/topology-startup-XXXXXX";
  bool ok_ = false;
};

std::string MergeCaseFile() {
  static const CaseFile kFile;
  return kFile.path();
}

// Runs argv to completion; false when it could not be spawned or failed.
bool RunOnce(const std::vector<std::string>& args) {
  std::vector<char*> argv;
  argv.reserve(args.size() + 1);
  std::vector<std::string> copy = args;
  for (std::string& arg : copy) argv.push_back(arg.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, "/dev/null",
                                   O_WRONLY, 0);
  posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, "/dev/null",
                                   O_WRONLY, 0);
  pid_t pid = 0;
  const int spawned =
      posix_spawn(&pid, argv[0], &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (spawned != 0) return false;
  int status = 0;
  if (waitpid(pid, &status, 0) != pid) return false;
  return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

void BM_Startup(benchmark::State& state, std::vector<std::string> args) {
  for (auto _ : state) {
    if (!RunOnce(args)) {
      state.SkipWithError(("cannot run " + args[0]).c_str());
      return;
    }
  }
}

BENCHMARK_CAPTURE(BM_Startup, empty_c_program,
                  {topology::testing::ProgramPath("empty_program")})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK_CAPTURE(BM_Startup, topology_info_help,
                  {topology::testing::ProgramPath("topology-info"), "--help"})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK_CAPTURE(BM_Startup, topology_manager_help,
                  {topology::testing::ProgramPath("topology-manager"),
                   "--help"})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK_CAPTURE(BM_Startup, topology_manager_merge,
                  {topology::testing::ProgramPath("topology-manager"), "merge",
                   MergeCaseFile()})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

// `topology-manager admit` and `release` as a user types them, against a
// running `topology-manager serve` (single-numa-node, static CPU manager
// with CPU 0 reserved) on the dual-socket fixture: a Guaranteed pod of one
// container with 2 CPUs and no devices. Each iteration is one admit command
// and one release command, each a process start, a connection to the
// control socket, the request and the answer; their p50s are reported.
class Server {
 public:
  Server() {
    if (mkdtemp(dir_.data()) == nullptr) return;
    const std::string root = dir_ + "/root";
    if (!topology::testing::WriteMachine("dual-socket-8gpu", root)) return;
    mkdir((dir_ + "/plugins").c_str(), 0700);
    socket_ = dir_ + "/control.sock";
    pod_ = dir_ + "/pod.yaml";
    FILE* pod = std::fopen(pod_.c_str(), "w");
    if (pod == nullptr) return;
    std::fputs(
        "apiVersion: v1\nkind: Pod\n"
        "metadata: {name: bench, namespace: default, uid: bench-uid}\n"
        "spec:\n  containers:\n    - name: main\n      resources:\n"
        "        limits: {cpu: 2, memory: 1Gi}\n",
        pod);
    std::fclose(pod);
    std::vector<std::string> args = {
        topology::testing::ProgramPath("topology-manager"),
        "serve",
        "--plugin-dir",
        dir_ + "/plugins",
        "--host-root",
        root,
        "--control-socket",
        socket_,
        "--topology-manager-policy",
        "single-numa-node",
        "--cpu-manager-policy",
        "static",
        "--reserved-cpus",
        "0"};
    std::vector<char*> argv;
    argv.reserve(args.size() + 1);
    for (std::string& arg : args) argv.push_back(arg.data());
    argv.push_back(nullptr);
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, "/dev/null",
                                     O_WRONLY, 0);
    const int spawned =
        posix_spawn(&pid_, argv[0], &actions, nullptr, argv.data(), environ);
    posix_spawn_file_actions_destroy(&actions);
    if (spawned != 0) pid_ = 0;
    ready_ =
        pid_ != 0 && topology::testing::WaitFor(
                         [&] { return access(socket_.c_str(), F_OK) == 0; },
                         std::chrono::seconds(5));
  }
  ~Server() {
    if (pid_ != 0) {
      kill(pid_, SIGTERM);
      waitpid(pid_, nullptr, 0);
    }
    std::filesystem::remove_all(dir_);
  }
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;
  bool ready() const { return ready_; }
  const std::string& socket() const { return socket_; }
  const std::string& pod() const { return pod_; }

 private:
  std::string dir_ = "/tmp/topology-admit-XXXXXX";
  std::string socket_;
  std::string pod_;
  pid_t pid_ = 0;
  bool ready_ = false;
};

double Median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  return values.empty() ? 0 : values[values.size() / 2];
}

void BM_AdmitCommand(benchmark::State& state) {
  static Server server;
  if (!server.ready()) {
    state.SkipWithError("topology-manager serve did not start");
    return;
  }
  std::vector<double> admit_ms;
  std::vector<double> release_ms;
  for (auto _ : state) {
    const auto start = std::chrono::steady_clock::now();
    const bool admitted =
        RunOnce({topology::testing::ProgramPath("topology-manager"), "admit",
                 "--control-socket", server.socket(), server.pod()});
    const auto middle = std::chrono::steady_clock::now();
    const bool released =
        RunOnce({topology::testing::ProgramPath("topology-manager"), "release",
                 "--control-socket", server.socket(), "bench-uid"});
    const auto end = std::chrono::steady_clock::now();
    if (!admitted || !released) {
      state.SkipWithError("admit or release failed");
      return;
    }
    admit_ms.push_back(
        std::chrono::duration<double, std::milli>(middle - start).count());
    release_ms.push_back(
        std::chrono::duration<double, std::milli>(end - middle).count());
  }
  state.counters["admit_p50_ms"] = Median(admit_ms);
  state.counters["release_p50_ms"] = Median(release_ms);
}
BENCHMARK(BM_AdmitCommand)
    ->Iterations(200)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
