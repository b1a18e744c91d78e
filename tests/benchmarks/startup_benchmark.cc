// Start-up of the commands a user types, against an empty C program, in the
// same run: posix_spawn, output to /dev/null, wait. The gap to the empty
// program is what the dynamic loader and static initialisers cost each
// command (the goal: within 2x for `topology-info --help` and
// `topology-manager merge`).
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <benchmark/benchmark.h>

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

BENCHMARK_CAPTURE(BM_Startup, empty_c_program, {EMPTY_PROGRAM})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK_CAPTURE(BM_Startup, topology_info_help,
                  {TOPOLOGY_INFO_BINARY, "--help"})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK_CAPTURE(BM_Startup, topology_manager_help,
                  {TOPOLOGY_MANAGER_BINARY, "--help"})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK_CAPTURE(BM_Startup, topology_manager_merge,
                  {TOPOLOGY_MANAGER_BINARY, "merge", MergeCaseFile()})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
